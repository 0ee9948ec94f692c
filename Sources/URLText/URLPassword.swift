/// The password a URL may carry in its user information
/// (`https://user:secret@host/…`).
///
/// Nothing mediafetch writes keeps it: the catalog, the partials' names and
/// their validator files hold the URL without it (the user stays, since
/// another account may see other files), and output shows it as `***`. Only
/// the request itself carries it. One module that every layer can see, so
/// that they all agree on where the password is.
public enum URLPassword {
    /// Where the password is in `url`: the text between the first `:` of the
    /// user information and the last `@` of the authority, maybe empty
    /// (`user:@host`). Nil when there is none (no `@`, or no `:` before it).
    public static func range(in url: String) -> Range<String.Index>? {
        // Cheap way out first: this runs for every URL of every list.
        guard url.utf8.contains(UInt8(ascii: "@")), let authorityStart = URLPath.authorityStart(in: url) else { return nil }
        let authorityEnd = url[authorityStart...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? url.endIndex
        let authority = url[authorityStart..<authorityEnd]
        // The host follows the last '@'; a password is what follows the first ':' before it.
        guard let at = authority.lastIndex(of: "@"),
              let colon = authority[..<at].firstIndex(of: ":") else { return nil }
        return authority.index(after: colon)..<at
    }

    /// `url` without its password and the `:` before it
    /// (`https://user@host/…`); `url` itself when it has none.
    public static func removed(from url: String) -> String {
        guard let password = range(in: url) else { return url }
        return String(url[..<url.index(before: password.lowerBound)]) + String(url[password.upperBound...])
    }

    /// Whether `url` gives a password that is not empty.
    public static func isGiven(in url: String) -> Bool {
        range(in: url).map { !$0.isEmpty } ?? false
    }

    /// `url` with its password shown as `replacement` (an empty one is left as it is).
    public static func replaced(in url: String, with replacement: String) -> String {
        guard let password = range(in: url), !password.isEmpty else { return url }
        return String(url[..<password.lowerBound]) + replacement + String(url[password.upperBound...])
    }
}
