import Foundation

/// The status line and the headers of the final response (after redirects),
/// collected line by line from libcurl's header callback.
struct ResponseHead: Sendable {
    var status = 0
    var reason = ""
    /// Header fields with lower-cased names; a repeated field keeps its last value.
    var fields: [String: String] = [:]
    /// True once the blank line ending a final (not 1xx, not followed redirect) block was seen.
    var isComplete = false

    subscript(name: String) -> String? { fields[name] }

    var contentLength: Int64? { fields["content-length"].flatMap { Int64($0) } }
    var etag: String? { fields["etag"] }
    var lastModified: String? { fields["last-modified"] }
    var contentType: String? { fields["content-type"] }

    /// `Retry-After` as seconds: either delta-seconds or an HTTP date.
    func retryAfter(now: Date = Date()) -> Double? {
        guard let value = fields["retry-after"] else { return nil }
        if let seconds = Double(value) { return max(0, seconds) }
        if let date = HTTPDate.parse(value) { return max(0, date.timeIntervalSince(now)) }
        return nil
    }

    /// The first byte position and the complete length of a `Content-Range: bytes a-b/total`.
    var contentRange: (start: Int64, total: Int64?)? {
        guard let value = fields["content-range"] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bytes" else { return nil }
        let rangeAndTotal = parts[1].split(separator: "/", maxSplits: 1)
        guard let range = rangeAndTotal.first,
              let dash = range.firstIndex(of: "-"),
              let start = Int64(range[range.startIndex..<dash]) else { return nil }
        let total = rangeAndTotal.count == 2 ? Int64(rangeAndTotal[1]) : nil
        return (start, total)
    }

    /// Feeds one raw header line (with its CRLF). A status line starts a new
    /// block, so the headers of a redirect do not leak into the final response.
    mutating func consume(line raw: Substring) {
        let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        if line.isEmpty {
            // 1xx answers and redirects are followed by another block.
            let followed = (100...199).contains(status) || ((300...399).contains(status) && fields["location"] != nil)
            isComplete = !followed
            return
        }
        if line.hasPrefix("HTTP/") {
            self = ResponseHead()
            let parts = line.split(separator: " ", maxSplits: 2)
            if parts.count >= 2 { status = Int(parts[1]) ?? 0 }
            if parts.count == 3 { reason = String(parts[2]) }
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[line.startIndex..<colon].lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        fields[name] = value
    }
}

/// HTTP dates (RFC 9110 IMF-fixdate, and the obsolete RFC 850 and asctime forms).
enum HTTPDate {
    private static let formats = [
        "EEE, dd MMM yyyy HH:mm:ss zzz",
        "EEEE, dd-MMM-yy HH:mm:ss zzz",
        "EEE MMM d HH:mm:ss yyyy",
    ]

    static func parse(_ text: String) -> Date? {
        for format in formats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }
}
