import Foundation

/// The parsed request line and header block of one request.
struct RequestHead {
    var method: String
    var target: String
    var versionMajor: Int
    var versionMinor: Int
    /// Lowercased names; repeated headers joined with ", ".
    var headers: [String: String]

    var isHTTP10: Bool { versionMajor == 1 && versionMinor == 0 }

    /// The tokens of the `Connection` header, lowercased.
    var connectionTokens: Set<String> {
        guard let value = headers["connection"] else { return [] }
        return Set(value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
    }

    /// HTTP/1.1 connections persist unless the client says `close`; HTTP/1.0 ones only
    /// when the client asks for `keep-alive`.
    var wantsKeepAlive: Bool {
        let tokens = connectionTokens
        if tokens.contains("close") { return false }
        if versionMajor == 1 && versionMinor >= 1 { return true }
        return tokens.contains("keep-alive")
    }

    /// Parses the bytes of a request head, without the terminating blank line.
    /// Returns nil when it is not a well-formed HTTP/1.x request.
    static func parse(_ bytes: ArraySlice<UInt8>) -> RequestHead? {
        // Header bytes outside ASCII are not expected from our clients; decoding them
        // leniently is fine for a test server.
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n")
        guard !lines.isEmpty else { return nil }
        let requestLine = lines.removeFirst()
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        guard let (major, minor) = parseVersion(parts[2]) else { return nil }

        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            // Obsolete line folding is not accepted (RFC 9112 allows rejecting it).
            guard let first = line.first, first != " ", first != "\t" else { return nil }
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[..<colon].lowercased()
            guard !name.isEmpty, !name.contains(" ") else { return nil }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            if let existing = headers[name] {
                headers[name] = existing + ", " + value
            } else {
                headers[name] = value
            }
        }
        return RequestHead(method: String(parts[0]), target: String(parts[1]),
                           versionMajor: major, versionMinor: minor, headers: headers)
    }

    private static func parseVersion(_ token: Substring) -> (Int, Int)? {
        guard token.hasPrefix("HTTP/") else { return nil }
        let numbers = token.dropFirst(5).split(separator: ".")
        guard numbers.count == 2, let major = Int(numbers[0]), let minor = Int(numbers[1]), major == 1 else {
            return nil
        }
        return (major, minor)
    }
}

enum URLParts {
    /// Splits a request target into its percent-decoded path and its parsed query.
    /// Absolute-form targets (`http://host/path`, as sent to proxies) are reduced to the path.
    static func split(target: String) -> (path: String, query: [String: String]) {
        var target = Substring(target)
        if let schemeEnd = target.range(of: "://"), target[..<schemeEnd.lowerBound].allSatisfy(\.isLetter) {
            let afterScheme = target[schemeEnd.upperBound...]
            target = afterScheme.firstIndex(of: "/").map { afterScheme[$0...] } ?? "/"
        }
        let rawPath: Substring
        let rawQuery: Substring?
        if let mark = target.firstIndex(of: "?") {
            rawPath = target[..<mark]
            rawQuery = target[target.index(after: mark)...]
        } else {
            rawPath = target
            rawQuery = nil
        }
        let path = rawPath.removingPercentEncoding ?? String(rawPath)
        return (path, rawQuery.map(parseQuery) ?? [:])
    }

    /// Parses `a=1&b=x+y&flag` into `["a": "1", "b": "x y", "flag": ""]`.
    static func parseQuery(_ query: Substring) -> [String: String] {
        var result: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let key: Substring
            let value: Substring
            if let equals = pair.firstIndex(of: "=") {
                key = pair[..<equals]
                value = pair[pair.index(after: equals)...]
            } else {
                key = pair
                value = ""
            }
            result[decodeQueryComponent(key)] = decodeQueryComponent(value)
        }
        return result
    }

    private static func decodeQueryComponent(_ component: Substring) -> String {
        let spaced = component.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }
}

/// The outcome of interpreting a `Range` header against a representation of `size` bytes.
enum ByteRangeRequest: Equatable {
    /// No usable range: serve the whole representation with 200. Covers syntax errors
    /// and multiple ranges, which a server may ignore (RFC 9110 §14.2).
    case ignore
    /// Syntactically valid but outside the representation: 416.
    case unsatisfiable
    /// Serve these bytes with 206.
    case range(Range<Int>)

    /// Interprets a single `bytes=a-`, `bytes=a-b` or `bytes=-n` range.
    static func parse(_ header: String, size: Int) -> ByteRangeRequest {
        let value = header.trimmingCharacters(in: .whitespaces)
        guard value.lowercased().hasPrefix("bytes=") else { return .ignore }
        let spec = value.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .ignore }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)

        if first.isEmpty {
            // Suffix range: the final n bytes.
            guard let count = decimal(last) else { return .ignore }
            guard count > 0, size > 0 else { return .unsatisfiable }
            return .range(max(0, size - count)..<size)
        }
        guard let start = decimal(first) else { return .ignore }
        var end = size - 1
        if !last.isEmpty {
            guard let requestedEnd = decimal(last) else { return .ignore }
            // last < first is invalid syntax, which means "ignore the header".
            guard requestedEnd >= start else { return .ignore }
            end = min(requestedEnd, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .range(start..<(end + 1))
    }

    /// A non-negative decimal made only of ASCII digits (no sign, no spaces).
    private static func decimal(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }
}

enum EntityTags {
    /// Weak comparison of `etag` against an `If-None-Match` list (RFC 9110 §13.1.2).
    static func noneMatchHits(_ header: String, etag: String) -> Bool {
        let wanted = opaque(etag)
        for candidate in header.split(separator: ",") {
            let tag = candidate.trimmingCharacters(in: .whitespaces)
            if tag == "*" || opaque(tag) == wanted { return true }
        }
        return false
    }

    /// Strong comparison, as `If-Range` requires: weak tags never match.
    static func strongMatch(_ tag: String, etag: String) -> Bool {
        !tag.hasPrefix("W/") && !etag.hasPrefix("W/") && tag == etag
    }

    /// Whether an `If-Range` value looks like an entity tag rather than a date.
    static func isEntityTag(_ value: String) -> Bool {
        value.hasPrefix("\"") || value.hasPrefix("W/")
    }

    private static func opaque(_ tag: String) -> String {
        tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag
    }
}
