/// The path of a URL, or of a reference to one (a `Location` value): what
/// follows the scheme and the authority, without query and fragment. One
/// reading for every layer: the engine names the redirects a body came
/// through by their paths, and the job reads a media name from a URL's.
public enum URLPath {
    /// `https://h.test/a/b.jpg?x=1#y` and `//h.test/a/b.jpg` give
    /// `/a/b.jpg`; a reference without scheme or authority is a path already.
    public static func of(_ reference: String) -> Substring {
        var rest = Substring(reference)
        // The standard library's search, not Foundation's `range(of:)`: this
        // runs for every body stored, and Foundation's goes through NSString.
        if let scheme = rest.utf8.firstRange(of: "://".utf8) {
            rest = rest[scheme.upperBound...].drop { $0 != "/" }
        } else if rest.hasPrefix("//") {
            rest = rest.dropFirst(2).drop { $0 != "/" }
        }
        return rest.prefix { $0 != "?" && $0 != "#" }
    }
}
