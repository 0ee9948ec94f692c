/// One spelling for the URLs that name the same resource (RFC 3986, 6.2.2
/// and 6.2.3), so that the catalog knows a URL whichever way it was
/// written: `http://H/a/./b.jpg`, `http://h:80/a/b.jpg` and
/// `http://h/a/%62.jpg` are `http://h/a/b.jpg`, which the request of each
/// asks for. One module every layer sees: the engine spells the URLs it is
/// given so, and the catalog's migration spells the URLs it holds so.
///
/// A change to the spelling changes the keys of URLs given from then on:
/// it needs a migration of its own that respells the catalog again (as v4
/// did), or URLs cached before are fetched again and listed twice.
public enum URLSpelling {
    /// `url`, an http or https URL with an authority (checked by the
    /// caller), in its one spelling:
    /// - the scheme and the host in small letters;
    /// - an IPv4 address written as other numbers (`127.1`, `0x7f.0.0.1`) in
    ///   dotted decimal, an IPv6 literal in RFC 5952's form, and an IDN in its
    ///   ASCII form (`HostSpelling`), as libcurl connects to and names them;
    /// - no default port (`:80` for http, `:443` for https), no leading zeros in another;
    /// - `/` for an empty path;
    /// - the path's `.` and `..` segments resolved, as libcurl resolves them before it sends the request;
    /// - in the path, a percent-encoded letter, digit, `-`, `_` or `~`
    ///   decoded, and other percent-encodings in capitals (`%2f` is `%2F`).
    ///   `%2E` stays as it is: decoded, `%2E%2E` would be a segment libcurl
    ///   resolves, and the request would ask for another path. In a path
    ///   with a `%` that begins no encoding, none is decoded: `%4%31` would
    ///   become `%41`, which spelt again is `A`;
    /// - in the path, a byte beyond ASCII (a character of an IRI), and an
    ///   ASCII one no URL may hold (`"`, `<`, `>`, `\`, `^`, `` ` ``, `{`,
    ///   `|`, `}`, `[`, `]`), percent-encoded, so that `a"b` is `a%22b`;
    /// - percent-encodings in the user information in capitals (none decoded);
    /// - the query as it is written: signed URLs sign its bytes, and curl sends them as written;
    /// - no fragment: it is never sent.
    ///
    /// Returns `url` itself when it is spelt so already (the common case, without a copy).
    public static func normalized(_ url: String) -> String {
        var url = url
        return url.withUTF8 { bytes in
            guard let parts = Parts(bytes), parts.needsSpelling(bytes) else { return nil }
            let spelled = parts.spelled(bytes)
            return spelled.elementsEqual(bytes) ? nil : String(decoding: spelled, as: UTF8.self)
        } ?? url
    }

    /// `url` with an IDN host shown as its letters (`HostSpelling.readable`:
    /// `http://xn--bcher-kva.example/a` reads `http://bücher.example/a`,
    /// which spells back to it); the rest as it is.
    public static func withReadableHost(_ url: String) -> String {
        guard url.utf8.firstRange(of: "xn--".utf8) != nil else { return url }
        var url = url
        return url.withUTF8 { bytes -> String? in
            guard let parts = Parts(bytes) else { return nil }
            let host = String(decoding: bytes[parts.host], as: UTF8.self)
            let shown = HostSpelling.readable(host[...])
            guard shown != host else { return nil }
            return String(decoding: bytes[..<parts.host.lowerBound], as: UTF8.self) + shown
                + String(decoding: bytes[parts.host.upperBound...], as: UTF8.self)
        } ?? url
    }

    /// Where the pieces of a URL are, as byte offsets.
    private struct Parts {
        /// The `:` after the scheme.
        let colon: Int
        /// The host (after the user information, if any), and the port's digits after it.
        let host: Range<Int>
        let port: Range<Int>?
        /// The path, from the end of the authority to the query, the fragment or the end.
        let path: Range<Int>
        /// The query with its `?`, if any.
        let query: Range<Int>?
        /// Where the fragment's `#` is, if there is one.
        let fragment: Int?

        init?(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 2 < bytes.count,
                  bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/") else { return nil }
            self.colon = colon
            let authorityStart = colon + 3
            let authorityEnd = (authorityStart..<bytes.count).first { Self.endsAuthority(bytes[$0]) } ?? bytes.count
            // The first '@' ends the user information, as libcurl reads it.
            let hostStart = (authorityStart..<authorityEnd).first { bytes[$0] == UInt8(ascii: "@") }.map { $0 + 1 } ?? authorityStart
            var hostEnd = authorityEnd
            var port: Range<Int>?
            if hostStart < authorityEnd, bytes[hostStart] == UInt8(ascii: "[") {
                // An IPv6 literal: the port follows the closing bracket.
                if let close = (hostStart..<authorityEnd).first(where: { bytes[$0] == UInt8(ascii: "]") }),
                   close + 1 < authorityEnd, bytes[close + 1] == UInt8(ascii: ":") {
                    hostEnd = close + 1
                    port = close + 2..<authorityEnd
                }
            } else if let portColon = (hostStart..<authorityEnd).last(where: { bytes[$0] == UInt8(ascii: ":") }) {
                hostEnd = portColon
                port = portColon + 1..<authorityEnd
            }
            host = hostStart..<hostEnd
            self.port = port
            fragment = (authorityEnd..<bytes.count).first { bytes[$0] == UInt8(ascii: "#") }
            let end = fragment ?? bytes.count
            let queryStart = (authorityEnd..<end).first { bytes[$0] == UInt8(ascii: "?") }
            path = authorityEnd..<(queryStart ?? end)
            query = queryStart.map { $0..<end }
        }

        /// Whether `digits` (no leading zero) are the scheme's default port.
        private func isDefault(port digits: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
            // The caller took only http (its `:` fifth) and https.
            digits.elementsEqual((colon == 5 ? "443" : "80").utf8)
        }

        private static func endsAuthority(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#")
        }

        /// Whether anything is to change: looked at first, since this runs
        /// for every URL of every list and most are spelt so already.
        func needsSpelling(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            if fragment != nil || path.isEmpty { return true }
            if let port, port.isEmpty || bytes[port.lowerBound] == UInt8(ascii: "0") || isDefault(port: bytes[port]) { return true }
            if bytes[..<colon].contains(where: isCapital) || bytes[host].contains(where: isCapital) { return true }
            if HostSpelling.spelled(bytes[host]) != nil { return true }
            // An escape in the user information may be in small letters (rare: spelt and compared).
            if bytes[colon..<host.lowerBound].contains(UInt8(ascii: "%")) { return true }
            var previous: UInt8 = 0
            for index in path {
                let byte = bytes[index]
                if byte == UInt8(ascii: "%") || byte >= 0x80 || Self.isForbidden(byte) { return true }
                // A segment that begins with a dot may be `.` or `..`.
                if byte == UInt8(ascii: "."), previous == UInt8(ascii: "/") { return true }
                previous = byte
            }
            return false
        }

        func spelled(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(bytes.count + 16)
            out.append(contentsOf: bytes[..<colon].map(lowered))
            out.append(contentsOf: Self.percentSpelled(bytes[colon..<host.lowerBound], inPath: false))
            out.append(contentsOf: HostSpelling.key(bytes[host]))
            if let port {
                let digits = bytes[port].drop { $0 == UInt8(ascii: "0") }
                // An empty port is the default, as libcurl reads it (`h:0` the caller refused).
                if !digits.isEmpty, !isDefault(port: digits) {
                    out.append(UInt8(ascii: ":"))
                    out.append(contentsOf: digits)
                }
            }
            var path = Self.percentSpelled(bytes[path], inPath: true)
            if path.isEmpty { path = [UInt8(ascii: "/")] }
            out.append(contentsOf: Self.withoutDotSegments(path))
            if let query { out.append(contentsOf: bytes[query]) }
            return out
        }

        /// `text` with the hex letters of its percent-encodings in capitals;
        /// `inPath`, also each valid percent-encoding of an unreserved
        /// character other than `.` decoded (unless a `%` in it begins no
        /// encoding), and each byte beyond ASCII or no URL may hold
        /// (`isForbidden`) percent-encoded. (The user information gets its
        /// capitals only.)
        private static func percentSpelled(_ text: Slice<UnsafeBufferPointer<UInt8>>, inPath: Bool) -> [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(text.count)
            let decodes = inPath && !hasStrayPercent(text)
            var index = text.startIndex
            while index < text.endIndex {
                let byte = text[index]
                if inPath, byte >= 0x80 || isForbidden(byte) {
                    appendEncoded(byte, to: &out)
                    index += 1
                } else if byte == UInt8(ascii: "%"), index + 2 < text.endIndex,
                          let high = URLSpelling.hexValue(text[index + 1]), let low = URLSpelling.hexValue(text[index + 2]) {
                    let decoded = high << 4 | low
                    if decodes, isUnreserved(decoded) { out.append(decoded) } else { appendEncoded(decoded, to: &out) }
                    index += 3
                } else {
                    out.append(byte)
                    index += 1
                }
            }
            return out
        }

        /// Whether `byte` is ASCII that no URL may hold (RFC 3986), other
        /// than what the caller refuses (controls, space) and what ends the
        /// path (`?`, `#`): percent-encoded in the path.
        private static func isForbidden(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "\\"), UInt8(ascii: "^"),
                 UInt8(ascii: "`"), UInt8(ascii: "{"), UInt8(ascii: "|"), UInt8(ascii: "}"), UInt8(ascii: "["), UInt8(ascii: "]"):
                true
            default:
                false
            }
        }

        /// Whether a `%` in `text` is not followed by two hex digits.
        private static func hasStrayPercent(_ text: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
            var index = text.startIndex
            while index < text.endIndex {
                if text[index] == UInt8(ascii: "%") {
                    guard index + 2 < text.endIndex, URLSpelling.hexValue(text[index + 1]) != nil,
                          URLSpelling.hexValue(text[index + 2]) != nil else { return true }
                    index += 3
                } else {
                    index += 1
                }
            }
            return false
        }

        /// `path` (which begins with `/`) with its `.` and `..` segments
        /// resolved (RFC 3986, 5.2.4), as libcurl does before a request.
        private static func withoutDotSegments(_ path: [UInt8]) -> [UInt8] {
            guard path.contains(UInt8(ascii: ".")) else { return path }
            let segments = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
            var kept: [ArraySlice<UInt8>] = []
            for (index, segment) in segments.enumerated() {
                let isLast = index == segments.count - 1
                if segment.elementsEqual(".".utf8) {
                    if isLast { kept.append([]) }
                } else if segment.elementsEqual("..".utf8) {
                    if !kept.isEmpty { kept.removeLast() }
                    if isLast { kept.append([]) }
                } else {
                    kept.append(segment)
                }
            }
            var out: [UInt8] = []
            out.reserveCapacity(path.count)
            for segment in kept {
                out.append(UInt8(ascii: "/"))
                out.append(contentsOf: segment)
            }
            return out.isEmpty ? [UInt8(ascii: "/")] : out
        }

        private static func appendEncoded(_ byte: UInt8, to out: inout [UInt8]) {
            let digits = Array("0123456789ABCDEF".utf8)
            out.append(UInt8(ascii: "%"))
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }

        /// A letter, a digit, `-`, `_` or `~` (RFC 3986's unreserved, less `.`: see `normalized`).
        private static func isUnreserved(_ byte: UInt8) -> Bool {
            (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
        }

    }

    /// The value of a hex digit, or nil.
    public static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x37
        case 0x61...0x66: byte - 0x57
        default: nil
        }
    }

    /// Whether `byte` is an ASCII capital letter.
    public static func isCapital(_ byte: UInt8) -> Bool { (0x41...0x5A).contains(byte) }

    /// `byte` with an ASCII capital made small.
    public static func lowered(_ byte: UInt8) -> UInt8 { isCapital(byte) ? byte + 32 : byte }
}
