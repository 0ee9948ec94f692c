import Foundation
import URLText

/// URLs as output shows them: a password in the URL (`user:secret@host`)
/// becomes `***`, in tables, JSON and CSV listings, progress lines and
/// error lines alike. (The catalog never has it: see `URLPassword`.)
public enum RedactedURL {
    public static func of(_ url: String) -> String {
        URLPassword.replaced(in: url, with: "***")
    }

    /// `text`, given as a URL (or several, white space between them), with
    /// what reads as a password hidden where a `://` is missing or mistyped
    /// (`u:pw@host`, `http//u:pw@h/`; see `URLPassword.hiddenInMistypedWords`).
    public static func ofMistyped(_ text: String) -> String {
        URLPassword.hiddenInMistypedWords(text, with: "***")
    }

    /// `text` with every URL in it that carries a password redacted (an
    /// error message may quote the URL it is about). Such a URL may be one
    /// the parser refused because of that very password (`user:pa/ss@host`,
    /// `u:p@ss@host`, a `/`, `?`, `#` or `@` not percent-encoded), or one
    /// mistyped (`u:pw@host/a.jpg`, `http:/u:pw@host`), or a second URL
    /// joined to the first by what a URL may hold (`a.jpg,http://u:pw@h/b.jpg`):
    /// see `URLPassword.lenientRanges`, read across the whole text first (a
    /// password may hold a space: curl quotes a proxy's URL whole), then
    /// `maskingPasswords` word by word (`URLPassword.eachWord`: read as one,
    /// two URLs a line break joined showed the second one's password).
    public static func inText(_ text: String) -> String {
        // Byte-wise: Foundation's `contains` took a tenth of a run that printed 200,000 failures.
        guard text.utf8.contains(UInt8(ascii: "@")) else { return text }
        // First across words: a password may hold a space (curl quotes such a proxy URL whole).
        return URLPassword.eachWord(of: URLPassword.hiddenLeniently(in: text, with: "***")) { word in
            word.contains("@") ? maskingPasswords(in: word) : word
        }
    }

    /// `word` (one with an `@`) with the password hidden of each URL in it
    /// (`URLPassword.replaced`, then `URLPassword.lenientRanges`). A URL
    /// mistyped without its `://` (`u:pw@host/a.jpg`) is hidden where it is
    /// quoted as a URL (`RequestTarget`'s messages): in other text it reads
    /// as a name (`me:home@work/2024`).
    private static func maskingPasswords(in word: String) -> String {
        word.contains("://") ? URLPassword.hiddenLeniently(in: of(word), with: "***") : word
    }
}

extension RedactedURL {
    /// `url` as a person reads it in a table or a message on the terminal:
    /// `of(url)`, with the percent-encoded UTF-8 of letters, digits,
    /// punctuation and symbols beyond ASCII in its path written as those
    /// characters, as a browser's address bar shows them
    /// (`/%C5%A0trbsk%C3%A9-pleso.jpg` reads `/Štrbské-pleso.jpg`). Escapes
    /// of ASCII (`%20`, `%2F`, `%3F`) stay, as they change what the URL says;
    /// so does the query, which is kept as written, and so does each run of
    /// escapes that is no UTF-8 or that shows what is not there (see
    /// `readsAsWritten`). It still names the same resource: given back to
    /// `get`, it is spelt the same way. JSON and CSV keep the URL as recorded.
    public static func readable(_ url: String) -> String {
        let redacted = URLSpelling.withReadableHost(of(url))
        // Most URLs have no escape at all: nothing to take apart.
        guard redacted.utf8.contains(UInt8(ascii: "%")) else { return redacted }
        let path = URLPath.of(redacted).utf8
        // No scheme and authority before it: not a URL, the text stays as it is.
        guard path.startIndex != redacted.utf8.startIndex else { return redacted }
        let bytes = Array(path)
        var shown = Array(redacted.utf8[..<path.startIndex])
        shown.reserveCapacity(redacted.utf8.count)
        var index = 0
        while index < bytes.count {
            // A run of escaped bytes at or above 0x80.
            var run: [UInt8] = []
            var end = index
            while end + 2 < bytes.count, bytes[end] == UInt8(ascii: "%"),
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
            if let text = String(validating: run, as: UTF8.self), readsAsWritten(text) {
                shown += Array(text.utf8)
            } else {
                shown += bytes[index..<end]
            }
            index = end
        }
        shown += redacted.utf8[path.endIndex...]
        return String(decoding: shown, as: UTF8.self)
    }

    /// Whether a run of decoded characters shows what it is, and only that:
    /// letters, marks, digits, punctuation and symbols, but not
    /// - what takes no room or shows as a space (spaces and separators,
    ///   controls, format characters such as U+202E, every default-ignorable
    ///   character such as a Hangul filler or a variation selector, U+2800);
    /// - a run that opens with a mark, which would sit on the ASCII before it;
    /// - a run not in its composed form (`e` and U+0301, as a Mac names
    ///   files): it would read as `é`, another URL;
    /// - right-to-left letters, which a terminal may lay out in another order
    ///   with the segments around them;
    /// - characters that pass for a URL's own marks (`∕`, `⁄`, `／`, `？`,
    ///   `＃`, `％`, `․`, `꞉`, the full-width and small forms) or for the
    ///   tables' `…`.
    private static func readsAsWritten(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, !isMark(first),
              text.precomposedStringWithCanonicalMapping.unicodeScalars.elementsEqual(text.unicodeScalars) else { return false }
        return text.unicodeScalars.allSatisfy { scalar in
            guard !scalar.properties.isDefaultIgnorableCodePoint, !isRightToLeft(scalar), !passesForAMark(scalar) else { return false }
            // Letters, marks, numbers, punctuation and symbols: none of the rest.
            switch scalar.properties.generalCategory {
            case .spaceSeparator, .lineSeparator, .paragraphSeparator, .control, .format, .surrogate, .privateUse, .unassigned:
                return false
            default:
                return true
            }
        }
    }

    private static func isMark(_ scalar: Unicode.Scalar) -> Bool {
        [.nonspacingMark, .spacingMark, .enclosingMark].contains(scalar.properties.generalCategory)
    }

    /// Hebrew, Arabic, Syriac, Thaana, N'Ko and the other right-to-left
    /// blocks, their presentation forms, and those beyond the first plane.
    private static func isRightToLeft(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0590...0x08FF, 0xFB1D...0xFDFF, 0xFE70...0xFEFF, 0x10800...0x10FFF, 0x1E800...0x1EFFF: true
        default: false
        }
    }

    /// Characters that look like `/`, `?`, `#`, `%`, `.`, `:` or `…`, the
    /// full-width and small forms (U+FF01 to U+FF5E, U+FE50 to U+FE6F), and
    /// the blank Braille pattern (U+2800), which shows as a space.
    private static func passesForAMark(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0xFF01...0xFF5E, 0xFE50...0xFE6F, 0x2024...0x2026, 0x2044, 0x2215, 0x2236, 0x29F8, 0x29F9, 0x2E2E,
             0xA789, 0x0589, 0x1735, 0x2800: true
        default: false
        }
    }
}
