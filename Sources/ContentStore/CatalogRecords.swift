import Foundation

/// What kind of media an item is.
public enum ItemKind: String, Sendable, Codable, CaseIterable {
    case photo, sound, file
}

/// One finished download (or an already cached URL) to record: the object,
/// the source URL that produced it, and the item in a collection.
/// Codable: the rows a failed catalog could not take are kept as JSON (see `UnrecordedRows`).
public struct IngestRecord: Sendable, Equatable, Codable {
    public var url: String
    public var collection: String
    public var kind: ItemKind
    public var title: String?
    /// The object's hash and size; the object must already be durable in the store.
    public var sha256: String
    public var size: Int64
    public var contentType: String?
    public var etag: String?
    public var lastModified: String?
    /// Free-form facts about the item (JSON object text), such as a photo's id or a sound's format.
    public var metadata: String?
    /// False when the URL was cached already and only the item is new.
    public var fetched: Bool
    /// The object this URL was cached as before, whose file was found gone;
    /// its row goes once no URL points at it.
    public var replacesMissingObject: String?

    public init(url: String, collection: String, kind: ItemKind, title: String? = nil, sha256: String, size: Int64,
                contentType: String? = nil, etag: String? = nil, lastModified: String? = nil,
                metadata: String? = nil, fetched: Bool = true) {
        self.url = url
        self.collection = collection
        self.kind = kind
        self.title = title
        self.sha256 = sha256
        self.size = size
        self.contentType = contentType
        self.etag = etag
        self.lastModified = lastModified
        self.metadata = metadata
        self.fetched = fetched
    }
}

/// A URL that failed, remembered with its reason.
public struct FailureRecord: Sendable, Equatable {
    public var url: String
    public var message: String
    /// When the run that failed it found the URL not cached: a fetch of it
    /// recorded since (by another process) is newer news than this failure,
    /// which is then not recorded. Nil: recorded whatever came before.
    public var since: Date?
    public init(url: String, message: String, since: Date? = nil) {
        self.url = url
        self.message = message
        self.since = since
    }
}

/// A URL whose last fetch failed, as `list --failed` shows it.
public struct CatalogFailure: Sendable, Equatable {
    public let url: String
    /// The reason, as it was said when it failed (passwords redacted).
    public let message: String
    public let failedAt: Date
    /// Whether the URL is still cached (it failed when fetched again): it
    /// has an object, whose file is there where `Catalog.readFailures` was
    /// given the files to look in (a URL whose file was gone keeps its
    /// object when fetching it again fails).
    public let isCached: Bool
}

/// A URL the catalog already has an object for.
public struct CachedSource: Sendable, Equatable {
    public let url: String
    public let sha256: String
    public let size: Int64
    /// Whether the URL's last fetch failed (its object was gone then).
    public var lastFetchFailed = false
}

/// One item as `list` shows it: a URL in a collection and the object it resolved to.
public struct CatalogEntry: Sendable, Equatable, Codable {
    public let sha256: String
    public let size: Int64
    public let url: String
    public let kind: ItemKind
    public let collection: String
    public let title: String?
    public let contentType: String?
    public let addedAt: Date
    public let metadata: String?
}

/// Totals for `stats`.
public struct CatalogStats: Sendable, Equatable, Codable {
    /// Distinct stored objects and their bytes on disk.
    public let objects: Int
    public let bytes: Int64
    /// Items across collections and the bytes they stand for.
    public let items: Int
    public let logicalBytes: Int64
    /// How many of the items are of each kind (a kind with none is absent).
    public var itemsByKind: [ItemKind: Int] = [:]
    public let collections: Int
    /// URLs known, and how many of them last failed.
    public let sources: Int
    public let failedSources: Int

    /// Bytes not stored twice thanks to content addressing.
    public var bytesSavedByDeduplication: Int64 { max(0, logicalBytes - bytes) }
}

/// Why a file will not be opened as the catalog, in a few words for a person.
public struct CatalogRefusal: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension IngestRecord {
    /// The record as one line of JSON, as `JSONEncoder` with sorted keys
    /// writes it (nil members left out), for `JSONDecoder` to read back.
    /// Written by hand: the encoder took 4 µs a row, 2% of the CPU of a run
    /// of small files, for rows that are read only after a crash.
    var jsonLine: String {
        var line = "{"
        func member(_ key: String, _ value: String) {
            if line.utf8.count > 1 { line += "," }
            line += "\"\(key)\":"
            line += value
        }
        func text(_ key: String, _ value: String?) {
            if let value { member(key, Self.jsonQuoted(value)) }
        }
        text("collection", collection)
        text("contentType", contentType)
        text("etag", etag)
        member("fetched", fetched ? "true" : "false")
        text("kind", kind.rawValue)
        text("lastModified", lastModified)
        text("metadata", metadata)
        text("replacesMissingObject", replacesMissingObject)
        text("sha256", sha256)
        member("size", String(size))
        text("title", title)
        text("url", url)
        return line + "}"
    }

    /// `value` as a JSON string: quotes, backslashes and control characters
    /// escaped, the rest as it is (UTF-8).
    static func jsonQuoted(_ value: String) -> String {
        var bytes: [UInt8] = [UInt8(ascii: "\"")]
        bytes.reserveCapacity(value.utf8.count + 2)
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes += [UInt8(ascii: "\\"), byte]
            case 0x08: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "b")]
            case 0x09: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0x0A: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0C: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "f")]
            case 0x0D: bytes += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0..<0x20:
                bytes += Array("\\u00".utf8) + [Self.hexDigits[Int(byte >> 4)], Self.hexDigits[Int(byte & 0xF)]]
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
        return String(decoding: bytes, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}
