import URLText

/// URLs as output shows them: a password in the URL (`user:secret@host`)
/// becomes `***`, in tables, JSON and CSV listings, progress lines and
/// error lines alike. (The catalog never has it: see `URLPassword`.)
public enum RedactedURL {
    public static func of(_ url: String) -> String {
        URLPassword.replaced(in: url, with: "***")
    }

    /// `text` with every URL in it that carries a password redacted (an
    /// error message may quote the URL it is about). Such a URL may be one
    /// the parser refused because of that very password (`user:pa/ss@host`,
    /// a `/`, `?` or `#` not percent-encoded), so here the password runs to
    /// the first `@` after the user's `:`, unless what follows the `:` is a
    /// port.
    public static func inText(_ text: String) -> String {
        // Byte-wise: Foundation's `contains` took a tenth of a run that printed 200,000 failures.
        guard text.utf8.contains(UInt8(ascii: "@")) else { return text }
        return text.split(separator: " ", omittingEmptySubsequences: false)
            .map { word in word.contains("://") && word.contains("@") ? leniently(String(word)) : String(word) }
            .joined(separator: " ")
    }

    private static func leniently(_ url: String) -> String {
        let strict = of(url)
        guard strict == url, let schemeEnd = url.range(of: "://") else { return strict }
        let rest = url[schemeEnd.upperBound...]
        guard let colon = rest.firstIndex(of: ":"),
              !rest[..<colon].contains(where: { "/?#@[".contains($0) }),
              let at = rest[colon...].firstIndex(of: "@") else { return url }
        let secret = rest[rest.index(after: colon)..<at]
        // host:8080/a@b.jpg is a port and a path, not a password.
        let digits = secret.prefix { $0.isASCII && $0.isNumber }
        if !digits.isEmpty, secret.dropFirst(digits.count).first.map({ "/?#".contains($0) }) ?? true { return url }
        return String(url[..<rest.index(after: colon)]) + "***" + String(url[at...])
    }
}

extension RedactedURL {
    /// `url` as a person reads it in a table or a message on the terminal:
    /// `of(url)`, with the percent-encoded UTF-8 of letters, marks, digits,
    /// punctuation and symbols beyond ASCII in its path written as those
    /// characters, as a browser's address bar shows them
    /// (`/%C5%A0trbsk%C3%A9-pleso.jpg` reads `/Štrbské-pleso.jpg`). Escapes
    /// of ASCII (`%20`, `%2F`, `%3F`) stay, as they change what the URL says;
    /// so do bytes that are not UTF-8, characters that could hide or disguise
    /// text (spaces and separators of every kind, controls, format characters
    /// such as U+202E), and the query, which is kept as written. It still
    /// names the same resource: given back to `get`, it is spelt the same
    /// way. JSON and CSV keep the URL as recorded.
    public static func readable(_ url: String) -> String {
        let redacted = of(url)
        // Most URLs have no escape at all: nothing to take apart.
        guard redacted.utf8.contains(UInt8(ascii: "%")) else { return redacted }
        let bytes = Array(redacted.utf8)
        // The path: after the authority, up to a query or fragment.
        guard let schemeEnd = redacted.utf8.firstRange(of: "://".utf8) else { return redacted }
        let authorityStart = redacted.utf8.distance(from: redacted.utf8.startIndex, to: schemeEnd.upperBound)
        guard let pathStart = bytes[authorityStart...].firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?")
                                                                          || $0 == UInt8(ascii: "#") }),
              bytes[pathStart] == UInt8(ascii: "/") else { return redacted }
        let pathEnd = bytes[pathStart...].firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? bytes.count
        // Fast path: nothing escaped beyond ASCII (an escape of 0x80 or more starts with %8 to %F).
        guard (pathStart..<pathEnd).contains(where: { bytes[$0] == UInt8(ascii: "%") && $0 + 1 < pathEnd
                                                        && (URLSpelling.hexValue(bytes[$0 + 1]) ?? 0) >= 8 }) else { return redacted }
        var shown = Array(bytes[..<pathStart])
        shown.reserveCapacity(bytes.count)
        var index = pathStart
        while index < pathEnd {
            // A run of escaped bytes at or above 0x80.
            var run: [UInt8] = []
            var end = index
            while end + 2 < pathEnd, bytes[end] == UInt8(ascii: "%"),
                  let high = URLSpelling.hexValue(bytes[end + 1]), let low = URLSpelling.hexValue(bytes[end + 2]),
                  high >= 8 {
                run.append(high << 4 | low)
                end += 3
            }
            guard !run.isEmpty else {
                shown.append(bytes[index])
                index += 1
                continue
            }
            if let text = String(validating: run, as: UTF8.self), text.unicodeScalars.allSatisfy(isReadable) {
                shown += Array(text.utf8)
            } else {
                shown += bytes[index..<end]
            }
            index = end
        }
        shown += bytes[pathEnd...]
        return String(decoding: shown, as: UTF8.self)
    }

    /// Whether `scalar` may be shown as itself in a readable URL (see `readable`).
    private static func isReadable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
             .nonspacingMark, .spacingMark, .enclosingMark,
             .decimalNumber, .letterNumber, .otherNumber,
             .connectorPunctuation, .dashPunctuation, .openPunctuation, .closePunctuation,
             .initialPunctuation, .finalPunctuation, .otherPunctuation,
             .mathSymbol, .currencySymbol, .modifierSymbol, .otherSymbol:
            return true
        default:
            return false
        }
    }
}
