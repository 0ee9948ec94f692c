/// Text as it shows in fixed-width output (the `list` table, messages, the
/// executable's status line): control characters (C0, DEL, C1; newlines and
/// tabs too), line and paragraph separators and the bidirectional controls
/// written as `\u{1B}` escapes, so a name or URL from a feed, a file or the
/// command line can neither clear the screen, nor break a row or a line, nor
/// turn the rest of a row around (U+202E), and the invisible spaces and
/// marks (U+200B, U+2060 to U+2064, a byte-order mark U+FEFF) that made a
/// URL or a name look like another (a second BOM before a URL read "not a
/// URL: http://…"); and the columns text takes. The joiners U+200C and
/// U+200D are not among them: emoji sequences and some scripts need them.
public enum DisplayText {
    public static func escapingControls(_ text: String) -> String {
        escaping(text, where: isControl)
    }

    /// `text` with each scalar that `shown` picks written as a `\u{…}` escape.
    static func escaping(_ text: String, where shown: (Unicode.Scalar) -> Bool) -> String {
        guard text.unicodeScalars.contains(where: shown) else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            if shown(scalar) {
                escaped += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// Columns `text` takes in fixed-width output: the sum of its
    /// characters' (`displayWidth(_: Character)`).
    public static func displayWidth(_ text: String) -> Int {
        // ASCII (most URLs), a column a byte: read by the character, 100,000
        // rows of long URLs took `list` 7.6 s where CSV took 2.2.
        if isASCII(text) { return text.utf8.count }
        return text.reduce(0) { $0 + displayWidth($1) }
    }

    private static func isASCII(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 < 0x80 }
    }

    /// `text` cut to at most `width` columns by leaving out its middle for
    /// "…": the start of a URL (its host) and its end (the file's name) are
    /// what tells it from the others. A URL keeps its scheme, host and port
    /// whole where its file's name fits beside them, and as much of its path
    /// before the name as is left (`http://127.0.0.1:34967/…otos/159.jpg`,
    /// `http://127.0.0.1:34967/…159.jpg`); narrower, it keeps three fifths
    /// from its start, but never a number of its host or port cut short
    /// (`http://127.0.0.1:473…` read as port 473: the port gives way whole,
    /// `http://127.0.0.1…`), and its tail never reaches back into them
    /// (`…80/a.jpg` read as port 80); a user name before the host gives way
    /// first, whole (`http://…@127.0.0.1:34567/…`); a URL with a query keeps its path
    /// before any of the query, which is cut at its end
    /// (`…/IMG_0097.jpg?X-Amz-Algorithm=…`: signed links' queries end alike,
    /// and every row read `…host&X-Amz-Expires=3600`). Other text, and any
    /// with `asURL` false, keeps three fifths from its start. Whole when it
    /// fits; cut at its end when `width` is under 8.
    public static func elidingMiddle(_ text: String, toWidth width: Int, asURL: Bool = true) -> String {
        guard displayWidth(text) > width else { return text }
        guard width >= 8 else { return elidingEnd(text, toWidth: width) }
        let characters = Array(text)
        let threeFifths = width - 1 - (width - 1) * 2 / 5
        guard asURL, let (site, hostStart) = site(of: text) else {
            let head = prefix(of: characters, width: threeFifths)
            return joining(head, characters, tailWidth: width - 1 - displayWidth(String(head)))
        }
        if let query = text.firstIndex(of: "?") {
            let address = String(text[..<query])
            // The address whole and a little of the query, or the address cut and a sign of the query.
            if displayWidth(address) + 4 <= width {
                return address + elidingEnd(String(text[query...]), toWidth: width - displayWidth(address))
            }
            return elidingMiddle(address, toWidth: width - 2) + "?…"
        }
        let path = text[site.endIndex...]
        let name = path.lastIndex(of: "/").map { path[path.index(after: $0)...] } ?? path
        let pathWidth = displayWidth(String(path))
        var head: [Character]
        if displayWidth(String(site)) + 1 + displayWidth(String(name)) <= width {
            head = Array(site)
        } else if let at = site.lastIndex(of: "@") {
            // A user gives way first, whole: cut, `http://www.bank.example@127.0.0.1/…` read as that host.
            let scheme = String(text.prefix(hostStart))
            let cut = width - 2 > hostStart + 1 ? elidingMiddle(scheme + text[text.index(after: at)...], toWidth: width - 2) : ""
            // Too narrow for any of the host beside the scheme (the cut took the scheme or the host's start): the scheme alone.
            guard cut.hasPrefix(scheme), cut.dropFirst(scheme.count).first.map({ $0 != "…" }) ?? false else {
                return String(scheme.prefix(width - 1)) + "…"
            }
            return scheme + "…@" + cut.dropFirst(scheme.count)
        } else {
            head = withNoNumberCutShort(prefix(of: characters, width: threeFifths), of: characters, hostStart: hostStart, siteLength: site.count)
            // A tail longer than the path would begin in the port or host: the head takes those columns.
            if width - 1 - displayWidth(String(head)) > pathWidth {
                head = withNoNumberCutShort(prefix(of: characters, width: width - 1 - pathWidth), of: characters,
                                            hostStart: hostStart, siteLength: site.count)
            }
        }
        return joining(head, characters, tailWidth: min(width - 1 - displayWidth(String(head)), pathWidth))
    }

    /// `head`, "…", and the end of `characters` that takes at most `tailWidth` columns.
    private static func joining(_ head: [Character], _ characters: [Character], tailWidth: Int) -> String {
        String(head) + "…" + String(prefix(of: characters.reversed(), width: tailWidth).reversed())
    }

    /// A URL's scheme, host and port (through the `/` that ends them, if one
    /// does), and the offset in characters where its host begins; nil for other text.
    private static func site(of text: String) -> (site: Substring, hostStart: Int)? {
        guard let scheme = text.range(of: "://") else { return nil }
        let rest = text[scheme.upperBound...]
        let hostStart = text.distance(from: text.startIndex, to: scheme.upperBound)
        guard let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) else { return (text[...], hostStart) }
        return (rest[end] == "/" ? text[...end] : text[..<end], hostStart)
    }

    /// `head`, the start of a URL's `characters`, without a number it cuts
    /// short in the host or port (from `hostStart`, within the first
    /// `siteLength` characters): a host's or port's digits, or an IPv6
    /// literal's hex group, are whole or left out, and so is the `:` before them.
    private static func withNoNumberCutShort(_ head: [Character], of characters: [Character],
                                             hostStart: Int, siteLength: Int) -> [Character] {
        guard head.count > hostStart, head.count < siteLength else { return head }
        var head = head
        let inBrackets = head[hostStart...].contains("[") && !head[hostStart...].contains("]")
        let isNumeral = { (character: Character) in character.isASCII && (inBrackets ? character.isHexDigit : character.isNumber) }
        while head.count > hostStart, let last = head.last, isNumeral(last), isNumeral(characters[head.count]) { head.removeLast() }
        while head.count > hostStart, head.last == ":" { head.removeLast() }
        return head
    }

    /// `text` cut to at most `width` columns (one at least) by leaving out its
    /// end for "…"; whole when it fits.
    public static func elidingEnd(_ text: String, toWidth width: Int) -> String {
        guard displayWidth(text) > width else { return text }
        return String(prefix(of: text, width: max(0, width - 1))) + "…"
    }

    /// `text` in lines of at most `width` columns (one at least), broken
    /// between words; a word wider than a line is broken where the line
    /// ends. Runs of spaces between words become one. No line for empty text.
    public static func wrapped(_ text: String, toWidth width: Int) -> [String] {
        let width = max(1, width)
        var lines: [String] = []
        var line = ""
        var used = 0
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            var rest = Substring(word)
            var wordWidth = displayWidth(String(rest))
            if !line.isEmpty, used + 1 + wordWidth <= width {
                line += " " + rest
                used += 1 + wordWidth
                continue
            }
            if !line.isEmpty { lines.append(line) }
            // A word longer than a line (a URL, a path) fills lines of its own.
            while wordWidth > width {
                // A character wider than the line (东 in one column) goes alone rather than never.
                let piece = rest.prefix(max(1, prefix(of: rest, width: width).count))
                lines.append(String(piece))
                rest = rest.dropFirst(piece.count)
                wordWidth -= displayWidth(String(piece))
            }
            line = String(rest)
            used = wordWidth
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    /// The first of `characters` that take at most `width` columns together.
    private static func prefix<Characters: Collection<Character>>(of characters: Characters, width: Int) -> [Character] {
        var taken: [Character] = []
        var used = 0
        for character in characters {
            let next = displayWidth(character)
            guard used + next <= width else { break }
            taken.append(character)
            used += next
        }
        return taken
    }

    /// Columns one character takes: two when wide (CJK, Hangul, full-width
    /// forms, most emoji, or one asked to be drawn as an emoji, U+FE0F),
    /// none for a zero-width one (U+200B, a joiner, U+FEFF), else one; and
    /// as a terminal counts, more for a later scalar that takes a column of
    /// its own (`takesAColumnAfterAnother`). A base letter and its
    /// combining marks take its one.
    public static func displayWidth(_ character: Character) -> Int {
        guard let first = character.unicodeScalars.first else { return 0 }
        if (0x200B...0x200D).contains(first.value) || (0x2060...0x2064).contains(first.value) || first.value == 0xFEFF {
            return 0
        }
        // U+FE0F widens only what it asks to draw as an emoji: after a letter terminals ignore it.
        let width = isWide(first) || first.properties.isEmoji && character.unicodeScalars.contains("\u{FE0F}") ? 2 : 1
        return width + character.unicodeScalars.dropFirst().reduce(0) { $0 + (takesAColumnAfterAnother($1) ? (isWide($1) ? 2 : 1) : 0) }
    }

    /// Whether a scalar after the first of a character takes columns of its
    /// own on a terminal (which counts by the scalar): a spacing vowel sign
    /// (Devanagari's ि in नि), halfwidth kana's voicing marks (ﾊﾟ), a letter
    /// of an Indic conjunct (the त of स्त) take one. Marks that do not
    /// space, joiners, selectors and tags take none; nor do an emoji
    /// sequence's later parts (a skin tone, a flag's second letter) and
    /// Hangul's medial and final jamo, drawn into the cell before them.
    private static func takesAColumnAfterAnother(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .spacingMark, .modifierLetter, .otherLetter, .lowercaseLetter, .uppercaseLetter, .titlecaseLetter,
             .decimalNumber, .letterNumber, .otherNumber:
            return !scalar.properties.isEmoji && !(0x1160...0x11FF).contains(scalar.value) && !(0xD7B0...0xD7FF).contains(scalar.value)
        default:
            return false
        }
    }

    /// East Asian Wide and Fullwidth ranges (Unicode's EastAsianWidth.txt, W and F),
    /// and the emoji blocks that terminals draw two columns wide.
    private static func isWide(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0, 0x23F3,
             0x25FD...0x25FE, 0x2614...0x2615, 0x2648...0x2653, 0x267F, 0x2693, 0x26A1, 0x26AA...0x26AB,
             0x26BD...0x26BE, 0x26C4...0x26C5, 0x26CE, 0x26D4, 0x26EA, 0x26F2...0x26F3, 0x26F5, 0x26FA,
             0x26FD, 0x2705, 0x270A...0x270B, 0x2728, 0x274C, 0x274E, 0x2753...0x2755, 0x2757,
             0x2795...0x2797, 0x27B0, 0x27BF, 0x2B1B...0x2B1C, 0x2B50, 0x2B55,
             0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xA960...0xA97F, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F,
             0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x16FE0...0x18AFF, 0x1B000...0x1B2FF, 0x1F004, 0x1F0CF,
             0x1F18E, 0x1F191...0x1F19A, 0x1F1E6...0x1F1FF, 0x1F200...0x1F2FF, 0x1F300...0x1F64F, 0x1F680...0x1F6FF,
             0x1F7E0...0x1F7EB, 0x1F90C...0x1F9FF, 0x1FA70...0x1FAFF, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return true
        default:
            return false
        }
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case ..<0x20, 0x7F...0x9F, 0x061C, 0x200B, 0x200E...0x200F, 0x2028...0x202E, 0x2060...0x2064, 0x2066...0x2069,
             0xFEFF: true
        default: false
        }
    }
}
