import ContentStore

/// URLs kept as their bytes, one after another, with where each ends: a
/// list of a million URLs costs its bytes and eight more a URL, where an
/// array of `String`s cost a heap block and 16 bytes a URL, and the items
/// made of them 72 more. A `String` is made when one is read.
public struct URLBlock: RandomAccessCollection, Equatable, Sendable, ExpressibleByArrayLiteral {
    private var bytes: [UInt8] = []
    private var ends: [Int] = []

    /// The most URLs a block holds: a job counts its items' positions in 32 bits.
    public static let maxCount = Int(Int32.max)

    public init() {}

    public init(arrayLiteral urls: String...) {
        for url in urls { append(url) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { ends.count }

    public subscript(index: Int) -> String {
        let start = index == 0 ? 0 : ends[index - 1]
        return String(decoding: bytes[start..<ends[index]], as: UTF8.self)
    }

    /// Adds `url` at the end (callers keep to `maxCount`).
    public mutating func append(_ url: String) {
        bytes.append(contentsOf: url.utf8)
        ends.append(bytes.count)
    }

    /// Adds the URLs of `other` at the end, in their order.
    public mutating func append(contentsOf other: URLBlock) {
        let base = bytes.count
        bytes.append(contentsOf: other.bytes)
        ends.append(contentsOf: other.ends.lazy.map { $0 + base })
    }

    public static func += (block: inout URLBlock, other: URLBlock) {
        block.append(contentsOf: other)
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
