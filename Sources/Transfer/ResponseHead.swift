import Foundation

/// The status line and the headers of the final response (after redirects),
/// collected line by line from libcurl's header callback.
struct ResponseHead: Sendable {
    var status = 0
    var reason = ""
    /// The values of the wanted fields (see `wanted`), by their index there;
    /// a repeated field keeps its last value. Stored inline rather than in a
    /// dictionary: they are filled for every response on the loop thread.
    private var values = FieldValues()
    /// True once the blank line ending a final (not 1xx, not followed redirect) block was seen.
    var isComplete = false

    /// The value of a field the engine reads, by its lower-case name (nil for others).
    subscript(name: String) -> String? {
        Self.wanted.firstIndex { $0.name == name }.flatMap { values[$0] }
    }

    /// The fields that were present, with lower-cased names.
    var fields: [String: String] {
        var fields: [String: String] = [:]
        for (index, field) in Self.wanted.enumerated() { fields[field.name] = values[index] }
        return fields
    }

    var contentLength: Int64? { values[Self.contentLengthIndex].flatMap { Int64($0) } }
    var etag: String? { values[Self.etagIndex] }
    var lastModified: String? { values[Self.lastModifiedIndex] }
    var contentType: String? { values[Self.contentTypeIndex] }

    /// `Retry-After` as seconds: either delta-seconds or an HTTP date.
    func retryAfter(now: Date = Date()) -> Double? {
        guard let value = values[Self.retryAfterIndex] else { return nil }
        if let seconds = Double(value) { return max(0, seconds) }
        if let date = HTTPDate.parse(value) { return max(0, date.timeIntervalSince(now)) }
        return nil
    }

    /// The first and last byte positions and the complete length of a `Content-Range: bytes a-b/total`.
    var contentRange: (start: Int64, end: Int64, total: Int64?)? {
        guard let value = values[Self.contentRangeIndex] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bytes" else { return nil }
        let rangeAndTotal = parts[1].split(separator: "/", maxSplits: 1)
        guard let range = rangeAndTotal.first,
              let dash = range.firstIndex(of: "-"),
              let start = Int64(range[range.startIndex..<dash]),
              let end = Int64(range[range.index(after: dash)...]) else { return nil }
        let total = rangeAndTotal.count == 2 ? Int64(rangeAndTotal[1]) : nil
        return (start, end, total)
    }

    /// Header fields the engine reads, lower-case; others are skipped without building strings.
    private static let wanted: [(name: String, bytes: [UInt8])] = [
        "content-length", "content-type", "content-range", "etag", "last-modified", "location", "retry-after",
    ].map { ($0, Array($0.utf8)) }
    private static let contentLengthIndex = 0, contentTypeIndex = 1, contentRangeIndex = 2, etagIndex = 3,
                       lastModifiedIndex = 4, locationIndex = 5, retryAfterIndex = 6

    /// Feeds one raw header line (with its CRLF). A status line starts a new
    /// block, so the headers of a redirect do not leak into the final response.
    /// Works on bytes: it runs for every header of every transfer, and only a
    /// wanted field's value becomes a string.
    mutating func consume(bytes raw: UnsafeRawBufferPointer) {
        var line = raw[...]
        while let last = line.last, last == 13 || last == 10 || last == 32 || last == 9 { line = line.dropLast() }
        if line.isEmpty {
            // 1xx answers and redirects are followed by another block.
            let followed = (100...199).contains(status) || ((300...399).contains(status) && values[Self.locationIndex] != nil)
            isComplete = !followed
            return
        }
        if line.starts(with: "HTTP/".utf8) {
            self = ResponseHead()
            let parts = line.split(separator: 32, maxSplits: 2)
            if parts.count >= 2 { status = Int(String(decoding: UnsafeRawBufferPointer(rebasing: parts[1]), as: UTF8.self)) ?? 0 }
            if parts.count == 3 { reason = String(decoding: UnsafeRawBufferPointer(rebasing: parts[2]), as: UTF8.self) }
            return
        }
        guard let colon = line.firstIndex(of: 58),
              let index = Self.wantedIndex(UnsafeRawBufferPointer(rebasing: line[line.startIndex..<colon])) else { return }
        var value = line[line.index(after: colon)...]
        while let first = value.first, first == 32 || first == 9 { value = value.dropFirst() }
        values[index] = String(decoding: UnsafeRawBufferPointer(rebasing: value), as: UTF8.self)
    }

    /// The index in `wanted` of the field whose name is `bytes` in any case; nil for the others.
    private static func wantedIndex(_ bytes: UnsafeRawBufferPointer) -> Int? {
        for (index, field) in wanted.enumerated() where field.bytes.count == bytes.count {
            if zip(field.bytes, bytes).allSatisfy({ $0 == ((65...90).contains($1) ? $1 | 0x20 : $1) }) { return index }
        }
        return nil
    }

    /// Text form of `consume(bytes:)`, for tests.
    mutating func consume(line: Substring) {
        var copy = String(line)
        copy.withUTF8 { consume(bytes: UnsafeRawBufferPointer($0)) }
    }
}

/// One optional value per wanted header field, stored inline (no allocation per response).
private struct FieldValues: Sendable {
    private var storage: (String?, String?, String?, String?, String?, String?, String?)
        = (nil, nil, nil, nil, nil, nil, nil)

    subscript(index: Int) -> String? {
        get {
            switch index {
            case 0: storage.0
            case 1: storage.1
            case 2: storage.2
            case 3: storage.3
            case 4: storage.4
            case 5: storage.5
            default: storage.6
            }
        }
        set {
            switch index {
            case 0: storage.0 = newValue
            case 1: storage.1 = newValue
            case 2: storage.2 = newValue
            case 3: storage.3 = newValue
            case 4: storage.4 = newValue
            case 5: storage.5 = newValue
            default: storage.6 = newValue
            }
        }
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
