/// The path of a URL, or of a reference to one (a `Location` value): what
/// follows the scheme and the authority, without query and fragment. One
/// reading for every layer: the engine names the redirects a body came
/// through by their paths, and the job reads a media name from a URL's.
public enum URLPath {
    /// `https://h.test/a/b.jpg?x=1#y` and `//h.test/a/b.jpg` give
    /// `/a/b.jpg`; a reference without scheme or authority is a path already.
    public static func of(_ reference: String) -> Substring {
        // On the UTF-8 bytes: this runs for every body stored, and every
        // mark it looks for is ASCII, so a byte's index is a scalar's.
        let bytes = reference.utf8
        var start = bytes.startIndex
        var hasAuthority = false
        // A `://` after something that is no scheme is in a path or a query
        // (`/login?next=https://h/p.jpg`).
        if let authority = authorityStart(in: reference), isScheme(bytes[..<bytes.index(authority, offsetBy: -3)]) {
            start = authority
            hasAuthority = true
        } else if bytes.starts(with: "//".utf8) {
            start = bytes.index(start, offsetBy: 2)
            hasAuthority = true
        }
        if hasAuthority {
            // The authority ends where the path, the query or the fragment begins.
            start = bytes[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
                ?? bytes.endIndex
        }
        let end = bytes[start...].firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? bytes.endIndex
        return reference[start..<end]
    }

    /// Whether `bytes` are a URL scheme (RFC 3986): a letter, then letters,
    /// digits, `+`, `-` and `.`.
    /// Inlinable: called across modules for every URL, and unspecialized
    /// (through witness tables) it was a third of the parsing of a URL.
    @inlinable
    public static func isScheme<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Bool {
        guard let first = bytes.first, isLetter(first) else { return false }
        return bytes.allSatisfy { isLetter($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
    }

    @usableFromInline
    static func isLetter(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    /// Where the authority begins: just after the first `://`.
    static func authorityStart(in url: String) -> String.Index? {
        let bytes = url.utf8
        var index = bytes.startIndex
        while let colon = bytes[index...].firstIndex(of: UInt8(ascii: ":")) {
            let rest = bytes[bytes.index(after: colon)...]
            if rest.starts(with: "//".utf8) { return bytes.index(colon, offsetBy: 3) }
            index = rest.startIndex
        }
        return nil
    }
}
