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

    /// The passwords in `text`, read leniently, as a message quoting what was
    /// given may hold a URL the parser refused (`http://u:pa ss/x@h/`,
    /// `http:///u:pw@h/`) or a second URL joined to the first
    /// (`a.jpg,http://u:p/w@h/b.jpg`): after each `://` (and any `/` or `\`
    /// more), a user runs to the first `:` (with none of `/ ? # @ [ & = ; ,`
    /// or white space before it: then it is no user), and the password from
    /// there to the last `@` before the first `/` or white space after an
    /// `@`, not past the next `://`. Not one that is empty, nor a port or prose (`isPortOrProse`).
    public static func lenientRanges(in text: String) -> [Range<String.Index>] {
        guard text.utf8.contains(UInt8(ascii: "@")) else { return [] }
        var starts: [String.Index] = []
        var searchFrom = text.startIndex
        while let separator = text[searchFrom...].range(of: "://") {
            starts.append(separator.upperBound)
            searchFrom = separator.upperBound
        }
        var ranges: [Range<String.Index>] = []
        for (number, start) in starts.enumerated() {
            let end = number + 1 < starts.count ? text.index(starts[number + 1], offsetBy: -3) : text.endIndex
            guard start < end else { continue }
            let segment = text[start..<end].drop { $0 == "/" || $0 == "\\" }
            guard let colon = segment.firstIndex(of: ":"),
                  !segment[..<colon].contains(where: { "/?#@[&=;,".contains($0) || $0.isWhitespace }),
                  let firstAt = segment[colon...].firstIndex(of: "@") else { continue }
            // Past the first `@`, white space ends the host as a `/` does: a later `@` is other text's.
            let pathStart = segment[firstAt...].firstIndex { $0 == "/" || $0.isWhitespace } ?? segment.endIndex
            guard let lastAt = segment[firstAt..<pathStart].lastIndex(of: "@") else { continue }
            let secret = segment[segment.index(after: colon)..<lastAt]
            if secret.isEmpty || isPortOrProse(secret) { continue }
            ranges.append(secret.startIndex..<secret.endIndex)
        }
        return ranges
    }

    /// Whether what follows a `:` up to an `@` is no password: a port and
    /// what comes after it (digits, then `/ ? # & ; ,`: `host:8080/a@b.jpg`,
    /// `localhost:3000&hint=a@b.org`), or prose after a URL (it begins with
    /// white space: `http://example.com: write to admin@example.com`).
    public static func isPortOrProse(_ secret: Substring) -> Bool {
        if secret.first?.isWhitespace == true { return true }
        let digits = secret.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, let next = secret.dropFirst(digits.count).first else { return false }
        return "/?#&;,".contains(next)
    }

    /// `text`, given as a URL, with what reads as its password shown as
    /// `replacement` where its `://` is missing or mistyped (`u:pw@host`,
    /// `//u:pw@h/`, `http//u:pw@h/`, `http:/u:pw@h/`; the last hides `/u:pw`,
    /// a little too much, never too little), also before a proper URL in its
    /// query (`u:pw@h/a?r=http://x/`). Its user begins after the last `/` or
    /// `\` before its first `:`; the password runs to the last `@` before the
    /// first `/` or white space after an `@`. Not for text that opens with a
    /// scheme and `://` (`lenientRanges` reads that), a scheme without a host
    /// (`mailto:a@b.com`), or a port. Only for what was given as a URL: in
    /// other text such a shape is a name (`me:home@work/2024`).
    public static func hiddenInMistyped(_ text: String, with replacement: String) -> String {
        if let separator = text.range(of: "://"), !text[..<separator.lowerBound].contains(where: { $0 == ":" || $0 == "@" }) {
            return text
        }
        guard let colon = text.firstIndex(of: ":"),
              !["mailto", "sip", "sips", "tel", "xmpp", "news", "urn", "data"].contains(text[..<colon].lowercased()) else { return text }
        let userStart = text[..<colon].lastIndex(where: { $0 == "/" || $0 == "\\" }).map { text.index(after: $0) } ?? text.startIndex
        guard let firstAt = text[colon...].firstIndex(of: "@") else { return text }
        let hostEnd = text[firstAt...].firstIndex { $0 == "/" || $0.isWhitespace } ?? text.endIndex
        guard let lastAt = text[firstAt..<hostEnd].lastIndex(of: "@") else { return text }
        let secret = text[text.index(after: colon)..<lastAt]
        guard !secret.isEmpty, !secret.contains("://"), !isPortOrProse(secret),
              !text[userStart..<colon].contains(where: { "?#@[".contains($0) }) else { return text }
        return String(text[..<secret.startIndex]) + replacement + String(text[secret.endIndex...])
    }

    /// `hiddenInMistyped` for the whole of `text`, then for each of its words
    /// (`eachWord`): two URLs a line break or a space joins are two, and
    /// each one's password is hidden.
    public static func hiddenInMistypedWords(_ text: String, with replacement: String) -> String {
        eachWord(of: hiddenInMistyped(text, with: replacement)) { hiddenInMistyped($0, with: replacement) }
    }

    /// `text` with each of its words given by `transform`: words end at
    /// white space, line breaks and other controls, which are kept as they
    /// are (two URLs in one argument, a line break between them, are two words).
    public static func eachWord(of text: String, _ transform: (String) -> String) -> String {
        var result = ""
        var wordStart = text.startIndex
        for index in text.indices where text[index].isWhitespace
            || text[index].unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            result += transform(String(text[wordStart..<index]))
            result.append(text[index])
            wordStart = text.index(after: index)
        }
        return result + transform(String(text[wordStart...]))
    }

    /// `text` with each password `lenientRanges` finds shown as `replacement`.
    public static func hiddenLeniently(in text: String, with replacement: String) -> String {
        var hidden = ""
        var kept = text.startIndex
        for range in lenientRanges(in: text) {
            hidden += text[kept..<range.lowerBound] + replacement
            kept = range.upperBound
        }
        return hidden + text[kept...]
    }
}
