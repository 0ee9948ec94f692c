import ContentStore
import Foundation

/// A cache root: the object store and the catalog beside it.
///
///     <root>/objects/sha256/ab/<hash>   complete, read-only objects
///     <root>/tmp/                       bodies being written, partials to resume
///     <root>/catalog.sqlite             the SQLite catalog (WAL)
public final class MediaCache: Sendable {
    public let root: String
    public let store: ObjectStore
    public let catalog: Catalog

    /// Opens (creating if needed) the cache at `root`.
    public init(root: String) throws(CacheError) {
        let absolute = URL(fileURLWithPath: root).standardizedFileURL.path
        self.root = absolute
        do {
            store = try ObjectStore(root: absolute)
        } catch {
            throw CacheError("cannot open the cache at \(absolute): \(error)")
        }
        do {
            catalog = try Catalog(path: absolute + "/catalog.sqlite")
        } catch {
            throw CacheError("cannot open the catalog at \(absolute)/catalog.sqlite: \(error)")
        }
    }

    /// The cache root to use: `explicit` (`--cache`), else `MEDIAFETCH_CACHE`, else `./Cache`.
    public static func resolveRoot(explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment["MEDIAFETCH_CACHE"], !fromEnvironment.isEmpty { return fromEnvironment }
        return "Cache"
    }

    /// Where an object lives on disk, for `list`.
    public func path(for sha256: String) -> String? { store.path(for: sha256) }
}

/// The cache cannot be opened or written.
public struct CacheError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
