import ContentStore

/// URLs kept as their bytes, one after another, with where each ends: a
/// list of a million URLs costs its bytes and eight more a URL, where an
/// array of `String`s cost a heap block and 16 bytes a URL, and the items
/// made of them 72 more. A `String` is made when one is read.
///
/// The bytes are kept in segments of 1 MiB (a longer URL gets one of its
/// own): one array of them all was copied whole each time it grew, and a
/// list of 145 MiB needed one block of 152 MB besides the old one, which a
/// `ulimit -v` of 439 MiB refused: the run died of it.
public struct URLBlock: RandomAccessCollection, Sendable, ExpressibleByArrayLiteral {
    private var segments: [[UInt8]] = []
    /// Where each URL ends: its segment in the high 32 bits, its end in that segment in the low 32.
    private var ends: [UInt64] = []

    /// The most URLs a block holds: a job counts its items' positions in 32 bits.
    public static let maxCount = Int(Int32.max)
    static let segmentSize = 1 << 20

    public init() {}

    public init(arrayLiteral urls: String...) {
        for url in urls { append(url) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { ends.count }

    /// The URLs' bytes in all.
    public var byteCount: Int { segments.reduce(0) { $0 + $1.count } }

    public subscript(index: Int) -> String {
        let end = ends[index]
        let segment = Int(end >> 32)
        // A URL starts where the one before ends, in the same segment, or at its start.
        let start = index > 0 && ends[index - 1] >> 32 == end >> 32 ? Int(ends[index - 1] & 0xFFFF_FFFF) : 0
        return String(decoding: segments[segment][start..<Int(end & 0xFFFF_FFFF)], as: UTF8.self)
    }

    /// Adds `url` at the end (callers keep to `maxCount`).
    public mutating func append(_ url: String) {
        let count = url.utf8.count
        if segments.isEmpty || segments[segments.count - 1].count + count > Self.segmentSize && !segments[segments.count - 1].isEmpty {
            var segment: [UInt8] = []
            segment.reserveCapacity(Swift.max(Self.segmentSize, count))
            segments.append(segment)
        }
        let last = segments.count - 1
        segments[last].append(contentsOf: url.utf8)
        ends.append(UInt64(last) << 32 | UInt64(segments[last].count))
    }

    /// Adds the URLs of `other` at the end, in their order.
    public mutating func append(contentsOf other: URLBlock) {
        // (The one list of most runs is taken as it is: copied, it was held twice.)
        guard !isEmpty else {
            self = other
            return
        }
        for url in other { append(url) }
    }

    public static func += (block: inout URLBlock, other: URLBlock) {
        block.append(contentsOf: other)
    }
}

extension URLBlock: Equatable {
    /// The same URLs in the same order, however their bytes are kept.
    public static func == (lhs: URLBlock, rhs: URLBlock) -> Bool {
        lhs.count == rhs.count && lhs.elementsEqual(rhs)
    }
}

/// URLs that all go into one collection, as one kind of item: what `get`
/// asks for, kept as a `URLBlock` for the whole run.
public struct URLItems: FetchList {
    public let urls: URLBlock
    public let collection: String
    public let kind: ItemKind

    public init(urls: URLBlock, collection: String, kind: ItemKind = .file) {
        self.urls = urls
        self.collection = collection
        self.kind = kind
    }

    public var count: Int { urls.count }

    public subscript(_ index: Int) -> FetchItem {
        FetchItem(url: urls[index], collection: collection, kind: kind)
    }
}
