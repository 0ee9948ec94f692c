/// URLs as output shows them: a password in the URL (`user:secret@host`)
/// becomes `***`, in tables, JSON and CSV listings, progress lines and
/// error lines alike. The catalog keeps the URL as given, since that is how
/// the next run recognises it as cached.
public enum RedactedURL {
    public static func of(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let authorityStart = schemeEnd.upperBound
        let authorityEnd = url[authorityStart...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? url.endIndex
        let authority = url[authorityStart..<authorityEnd]
        // The host follows the last '@'; a password is what follows the first ':' before it.
        guard let at = authority.lastIndex(of: "@"),
              let colon = authority[..<at].firstIndex(of: ":"), authority.index(after: colon) < at else { return url }
        return String(url[..<authority.index(after: colon)]) + "***" + String(url[at...])
    }

    /// `text` with every URL in it that carries a password redacted (an
    /// error message may quote the URL it is about).
    public static func inText(_ text: String) -> String {
        guard text.contains("@") else { return text }
        return text.split(separator: " ", omittingEmptySubsequences: false)
            .map { word in word.contains("://") && word.contains("@") ? of(String(word)) : String(word) }
            .joined(separator: " ")
    }
}
