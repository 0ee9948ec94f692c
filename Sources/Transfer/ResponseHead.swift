import Foundation
import URLText

/// The status line and the headers of the final response (after redirects),
/// collected line by line from libcurl's header callback.
struct ResponseHead: Sendable {
    var status = 0
    var reason = ""
    /// The most characters of a reason phrase kept (`reason`).
    static let longestReason = 120
    /// The HTTP major version of the status line: 2 or 3 for a response on a
    /// connection that other transfers may share (a stream), 1 otherwise.
    var majorVersion = 1
    /// The values of the fields the engine reads; a repeated field keeps its
    /// last value, but for `Content-Length`, whose values are all kept (see
    /// `lengthsDisagree`). Stored inline rather than in a dictionary: they
    /// are filled for every response on the loop thread.
    private var values = FieldValues()
    /// True once the blank line ending a final (not 1xx, not followed redirect) block was seen.
    var isComplete = false
    /// True once the blank line ending a redirect that libcurl follows was
    /// seen (until the next response's status line): a new connection may come.
    var endedInRedirect = false
    /// A status line may come next: at the start, and after the blank line
    /// ending a 1xx or a followed redirect. Elsewhere a line beginning
    /// `HTTP/` is no new response (libcurl checks only a block's first
    /// line): a header line or a trailer so made reset the head, and
    /// repeated every 29 s held a slot for ever.
    private(set) var awaitsStatusLine = true
    /// The paths of the `Location`s of the redirects followed to this
    /// response, each ending in a newline: which file an ETag names depends
    /// on them. Paths only: a signed link's query (an expiry, a signature)
    /// changes at every request, and a mirror's host may too, for one file.
    private(set) var redirectedThrough = ""

    /// The path of the last redirect's `Location` followed to this response; nil when none was.
    var lastRedirectPath: String? {
        redirectedThrough.split(separator: "\n").last.map(String.init)
    }

    /// The redirects followed to this response, as a short stable name (a
    /// 64-bit FNV-1a hash in hex); empty when there were none. Bytes held
    /// are resumed only through the same redirects: nginx gives two files of
    /// one size and time the same ETag, so when a URL that redirected to one
    /// redirected to the other, the 206 to `If-Range` stitched them together.
    var route: String {
        guard !redirectedThrough.isEmpty else { return "" }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in redirectedThrough.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The fields that were present, with lower-cased names.
    var fields: [String: String] {
        var fields: [String: String] = [:]
        for field in Field.allCases { fields[field.rawValue] = values[field] }
        return fields
    }

    /// `Content-Length`; nil when absent, not a count of bytes (negative),
    /// when the response gave two different counts (see `lengthsDisagree`),
    /// or beside a `Transfer-Encoding`, which frames the body instead (RFC
    /// 9112 6.3; libcurl reads such a body by its chunks, as curl does). A
    /// list of one count repeated (`10, 10`) is that count.
    var contentLength: Int64? {
        !isTransferEncoded && !lengths.conflict ? lengths.first : nil
    }
    /// Whether the response gave different byte counts in two `Content-Length`
    /// fields or in one's list: which one frames the body is anybody's guess
    /// (libcurl takes the last), and RFC 9112 makes it an unrecoverable error.
    /// A value that is not a count beside another one counts as different.
    var lengthsDisagree: Bool { !isTransferEncoded && lengths.conflict }
    /// The `Content-Length` beside a `Transfer-Encoding` (chunks), when it is
    /// one count of bytes: the chunks frame the body (RFC 9112 6.3), but a
    /// body whose chunks add up to another length is refused (RFC 9112: "ought
    /// to be handled as an error"): a proxy that chunked an upstream answer cut
    /// short sent half a photo, which was stored as whole.
    var lengthBesideChunks: Int64? {
        isTransferEncoded && !lengths.conflict ? lengths.first : nil
    }
    /// Whether the body is framed by a `Transfer-Encoding` (chunks).
    var isTransferEncoded: Bool { values[.transferEncoding] != nil }
    /// Whether that `Transfer-Encoding` names chunks (`identity`, long
    /// obsolete, does not: the body then ends where its connection does).
    var isChunked: Bool { values[.transferEncoding]?.lowercased().contains("chunked") == true }

    /// The body has neither a length nor chunks: it ends with its
    /// connection, so a break there looks like its end.
    var endsWithItsConnection: Bool { contentLength == nil && !isChunked }
    /// Whether the response's one `Content-Length` is no count of bytes: not
    /// decimal digits (`1e3`, `-1`) or more than fits in 63 bits. libcurl
    /// reads what it can of it (`1e3` as 1, 2^63 as no length), so where the
    /// body ends is a guess: 2^63 stored a 3-byte body as whole.
    var lengthIsNoCount: Bool { !isTransferEncoded && lengths.seen > 0 && lengths.first == nil && !lengths.conflict }

    /// The `Content-Length` values as they came, read once (on the loop
    /// thread, per response) rather than parsed again at each question.
    private struct Lengths: Sendable {
        /// Values seen (repeated fields and list members alike: RFC 9110 5.3).
        var seen = 0
        /// The first value, when it is a count of bytes.
        var first: Int64?
        /// A later value that is not the first one's count (or not a count).
        var conflict = false

        mutating func note(_ value: Slice<UnsafeRawBufferPointer>) {
            for member in value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                let count = Self.count(member)
                seen += 1
                if seen == 1 {
                    first = count
                } else if count == nil || count != first {
                    conflict = true
                }
            }
        }

        /// Decimal digits between optional blanks, within `Int64`; nil otherwise (a sign included).
        private static func count(_ bytes: Slice<UnsafeRawBufferPointer>) -> Int64? {
            let digits = bytes.trimmingBlanks()
            guard !digits.isEmpty else { return nil }
            var count: Int64 = 0
            for byte in digits {
                guard (48...57).contains(byte) else { return nil }
                let (times, overflowTimes) = count.multipliedReportingOverflow(by: 10)
                let (sum, overflowSum) = times.addingReportingOverflow(Int64(byte - 48))
                guard !overflowTimes, !overflowSum else { return nil }
                count = sum
            }
            return count
        }
    }
    private var lengths = Lengths()
    /// Fields sent more than once with different values (`ETag: "a"`, then
    /// `ETag: "b"`): taken as absent. The last one was taken, and a 206 whose
    /// second `Content-Range` named the bytes asked for, or whose second
    /// `ETag` matched the validator held, had another range's or another
    /// version's bytes stitched on.
    private var conflicting: Set<Field> = []
    var etag: String? { conflicting.contains(.etag) ? nil : values[.etag] }
    var lastModified: String? { conflicting.contains(.lastModified) ? nil : values[.lastModified] }
    /// Where a redirect points (`Location`), as sent.
    var location: String? { values[.location] }
    /// A `Location` with a control byte in it, taken as absent as any such
    /// value is, and kept to be named in the failure it causes (libcurl
    /// cannot follow it, and the target was named nowhere).
    private(set) var malformedLocation: String?
    /// When the response was made (`Date`).
    var date: String? { values[.date] }
    /// The media type; nil when the header is missing or empty (`Content-Type:`).
    var contentType: String? { values[.contentType].flatMap { $0.isEmpty ? nil : $0 } }
    /// The codings the server applied to the body (`gzip`, `br`), as sent;
    /// nil when none is named (missing, empty, or `identity`). mediafetch
    /// asks for none, so a coded body is stored as it came.
    var contentEncoding: String? {
        values[.contentEncoding].flatMap { value in
            let trimmed = value.trimmingCharacters(in: .whitespaces)
            return trimmed.isEmpty || trimmed.lowercased() == "identity" ? nil : trimmed
        }
    }

    /// `Retry-After` as seconds: either delta-seconds (a fraction taken too)
    /// or an HTTP date. A date counts from the response's own `Date` when it
    /// has one, not from this machine's clock: against a server 700 s ahead,
    /// a date 3 s after its `Date` read as a wait of 12 min, and gave the
    /// host up; one an hour behind was not waited for at all.
    func retryAfter(now: Date = Date()) -> Double? {
        guard let value = values[.retryAfter] else { return nil }
        if value.utf8.allSatisfy({ (48...57).contains($0) || $0 == 46 }), let seconds = Double(value) {
            // (Digits alone: Swift reads "nan", "inf" and "1e9" as numbers too.) Held
            // where it still reads as "a very long time", not as a wait it never asked for.
            return min(seconds, 1e15)
        }
        guard let when = HTTPDate.date(value) else { return nil }
        let reference = date.flatMap(HTTPDate.date) ?? now
        return max(0, when.timeIntervalSince(reference))
    }

    /// The first and last byte positions and the complete length of a `Content-Range: bytes a-b/total`.
    var contentRange: (start: Int64, end: Int64, total: Int64?)? {
        guard !conflicting.contains(.contentRange), let value = values[.contentRange] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bytes" else { return nil }
        let rangeAndTotal = parts[1].split(separator: "/", maxSplits: 1)
        guard let range = rangeAndTotal.first,
              let dash = range.firstIndex(of: "-"),
              let start = Int64(range[range.startIndex..<dash]),
              let end = Int64(range[range.index(after: dash)...]) else { return nil }
        let total = rangeAndTotal.count == 2 ? Int64(rangeAndTotal[1]) : nil
        // A range must be ordered and lie inside the file: numbers a server
        // gets wrong are refused here, before anyone does arithmetic on them.
        guard start >= 0, start <= end, total.map({ end < $0 }) ?? true else { return nil }
        return (start, end, total)
    }

    /// The file's length in a 416's `Content-Range: bytes */N`.
    var unsatisfiedRangeLength: Int64? {
        guard !conflicting.contains(.contentRange), let value = values[.contentRange], value.lowercased().hasPrefix("bytes */") else {
            return nil
        }
        return Int64(value.dropFirst("bytes */".count)).flatMap { $0 >= 0 ? $0 : nil }
    }

    /// The wanted fields' lower-case names as bytes, to match header lines against.
    private static let wanted: [(field: Field, bytes: [UInt8])] = Field.allCases.map { ($0, Array($0.rawValue.utf8)) }

    /// Feeds one raw header line (with its CRLF). A status line starts a new
    /// block, so the headers of a redirect do not leak into the final response.
    /// Works on bytes: it runs for every header of every transfer, and only a
    /// wanted field's value becomes a string.
    ///
    /// Only an empty line ends a head: one of spaces (a broken server's empty
    /// folded line) is passed over, or the body began before `Content-Range`
    /// and `ETag` came. Fields after the end (trailers, which libcurl hands
    /// over as header lines after the body) are not the response's. A value
    /// with a control byte in it (a bare CR, say) is malformed and taken as
    /// absent: a validator is sent back in `If-Range`.
    mutating func consume(bytes raw: UnsafeRawBufferPointer) {
        var line = raw[...]
        while let last = line.last, last == 13 || last == 10 { line = line.dropLast() }
        if line.isEmpty {
            // 1xx answers and redirects are followed by another block.
            let redirect = (300...399).contains(status) && values[.location]?.isEmpty == false
            let followed = (100...199).contains(status) || redirect
            isComplete = !followed
            awaitsStatusLine = followed
            endedInRedirect = redirect
            if redirect { redirectedThrough += URLPath.of(values[.location] ?? "") + "\n" }
            return
        }
        while let last = line.last, last == 32 || last == 9 { line = line.dropLast() }
        if line.isEmpty { return }
        if awaitsStatusLine, line.starts(with: "HTTP/".utf8) {
            let through = redirectedThrough
            self = ResponseHead()
            redirectedThrough = through
            awaitsStatusLine = false
            let parts = line.split(separator: 32, maxSplits: 2)
            // "HTTP/2", "HTTP/1.1": the digit after the slash.
            if let major = line.dropFirst(5).first, (49...57).contains(major) { majorVersion = Int(major - 48) }
            if parts.count >= 2 { status = Int(String(decoding: UnsafeRawBufferPointer(rebasing: parts[1]), as: UTF8.self)) ?? 0 }
            if parts.count == 3 {
                // Quoted in failure lines and kept in the catalog: a server's 20,000
                // characters made a line of that length. Cut, as `…`, at 120.
                reason = String(decoding: UnsafeRawBufferPointer(rebasing: parts[2]), as: UTF8.self).cut(toScalars: Self.longestReason)
            }
            return
        }
        guard !isComplete, let colon = line.firstIndex(of: 58),
              let field = Self.wantedField(UnsafeRawBufferPointer(rebasing: line[line.startIndex..<colon])) else { return }
        let value = line[line.index(after: colon)...].trimmingBlanks()
        guard !value.contains(where: { ($0 < 32 && $0 != 9) || $0 == 127 }) else {
            if field == .location { malformedLocation = String(decoding: UnsafeRawBufferPointer(rebasing: value), as: UTF8.self) }
            return
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: value), as: UTF8.self)
        switch field {
        case .contentLength, .contentEncoding:
            // Lists, whether in one field or several (RFC 9110 5.3).
            if field == .contentLength { lengths.note(value) }
            values[field] = values[field].map { $0 + ", " + text } ?? text
        case .contentRange, .etag, .lastModified:
            if let earlier = values[field], earlier != text { conflicting.insert(field) }
            values[field] = text
        default:
            values[field] = text
        }
    }

    /// The wanted field whose name is `bytes` in any case; nil for the others.
    private static func wantedField(_ bytes: UnsafeRawBufferPointer) -> Field? {
        for wanted in wanted where wanted.bytes.count == bytes.count {
            if zip(wanted.bytes, bytes).allSatisfy({ $0 == ((65...90).contains($1) ? $1 | 0x20 : $1) }) { return wanted.field }
        }
        return nil
    }

    /// Text form of `consume(bytes:)`, for tests.
    mutating func consume(line: Substring) {
        var copy = String(line)
        copy.withUTF8 { consume(bytes: UnsafeRawBufferPointer($0)) }
    }
}

private extension Slice<UnsafeRawBufferPointer> {
    /// Without the spaces and tabs around it.
    func trimmingBlanks() -> Self {
        var trimmed = self
        while let first = trimmed.first, first == 32 || first == 9 { trimmed = trimmed.dropFirst() }
        while let last = trimmed.last, last == 32 || last == 9 { trimmed = trimmed.dropLast() }
        return trimmed
    }
}

/// Header fields the engine reads, by their lower-case names; others are
/// skipped without building strings.
private enum Field: String, CaseIterable {
    case contentLength = "content-length", contentType = "content-type", contentRange = "content-range",
         contentEncoding = "content-encoding", date, etag, lastModified = "last-modified", location,
         retryAfter = "retry-after", transferEncoding = "transfer-encoding"
}

/// One optional value per `Field`, stored inline (no allocation per response).
private struct FieldValues: Sendable {
    private var contentLength, contentType, contentRange, contentEncoding, date, etag, lastModified, location, retryAfter,
                transferEncoding: String?

    subscript(field: Field) -> String? {
        get {
            switch field {
            case .contentLength: contentLength
            case .contentType: contentType
            case .contentRange: contentRange
            case .contentEncoding: contentEncoding
            case .date: date
            case .etag: etag
            case .lastModified: lastModified
            case .location: location
            case .retryAfter: retryAfter
            case .transferEncoding: transferEncoding
            }
        }
        set {
            switch field {
            case .contentLength: contentLength = newValue
            case .contentType: contentType = newValue
            case .contentRange: contentRange = newValue
            case .contentEncoding: contentEncoding = newValue
            case .date: date = newValue
            case .etag: etag = newValue
            case .lastModified: lastModified = newValue
            case .location: location = newValue
            case .retryAfter: retryAfter = newValue
            case .transferEncoding: transferEncoding = newValue
            }
        }
    }
}

extension StringProtocol {
    /// The text, or its first `limit - 1` scalars and `…` when it is longer:
    /// what a server sends is quoted in failure lines and kept in the catalog.
    /// Counted in scalars, not characters: one letter with 20,000 combining
    /// marks is one character.
    func cut(toScalars limit: Int) -> String {
        guard utf8.count > limit, unicodeScalars.count > limit else { return String(self) }
        return String(String.UnicodeScalarView(unicodeScalars.prefix(limit - 1))) + "…"
    }
}
