import Foundation
import URLText
#if canImport(Glibc)
import Glibc
#endif

/// An in-memory resource added with `addResource`.
struct MemoryResource: Sendable {
    let data: Data
    let contentType: String
    let etag: String
    let lastModified: Int  // seconds since 1970
    var coding: ResourceCoding? = nil
}

/// The `Content-Encoding` a resource's bytes are sent with (they are stored
/// coded), and whether a range answer says so again.
public struct ResourceCoding: Sendable {
    public let contentEncoding: String
    /// Whether a 206 carries `Content-Type` and `Content-Encoding`: after
    /// `If-Range`, RFC 9110 (§15.3.7) has a server leave them out.
    public let labelsOnRanges: Bool

    public init(_ contentEncoding: String, labelsOnRanges: Bool = true) {
        self.contentEncoding = contentEncoding
        self.labelsOnRanges = labelsOnRanges
    }
}

/// What a `GET`/`HEAD` for a resource or file serves: metadata plus where the bytes are.
struct Entity {
    enum Source {
        case memory(Data)
        /// Closed when the reply that sends it is done.
        case file(OpenFile)
    }

    let size: Int
    let etag: String
    let lastModified: Int
    let contentType: String
    let source: Source
    var coding: ResourceCoding? = nil
}

extension OriginServer {
    /// The default `Last-Modified` of in-memory resources: Sun, 01 Jan 2023 00:00:00 GMT.
    static let defaultLastModified = 1_672_531_200

    func addResource(_ path: String, data: Data, contentType: String, etag: String?, lastModified: Date?,
                     coding: ResourceCoding? = nil) {
        let tag = etag ?? Self.contentETag(data)
        state.withLock { state in
            var modified = lastModified.map(HTTPDate.seconds) ?? Self.defaultLastModified
            if lastModified == nil, let previous = state.resources[path], previous.etag != tag {
                modified = previous.lastModified + 3600
            }
            state.resources[path] = MemoryResource(data: data, contentType: contentType, etag: tag, lastModified: modified,
                                                   coding: coding)
        }
    }

    /// A strong ETag from a cheap 64-bit FNV-1a-style hash of the content and its size.
    /// Whole 8-byte words are mixed at a time to keep 64 MiB resources quick to add even
    /// in debug builds. Each step is a bijection of the running hash, so changing any
    /// single word of the content always changes the tag.
    static func contentETag(_ data: Data) -> String {
        let hash = data.withUnsafeBytes { raw -> UInt64 in
            var hash: UInt64 = 0xCBF2_9CE4_8422_2325
            let prime: UInt64 = 0x0000_0100_0000_01B3
            var offset = 0
            while offset + 8 <= raw.count {
                hash = (hash ^ raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) &* prime
                offset += 8
            }
            while offset < raw.count {
                hash = (hash ^ UInt64(raw[offset])) &* prime
                offset += 1
            }
            return hash
        }
        return "\"\(String(hash, radix: 16))-\(data.count)\""
    }

    enum FileLookup {
        case notFound
        /// The path tries to leave the root (`..`) or is otherwise malformed.
        case badRequest
        case found(Entity)
    }

    /// Opens the regular file at the decoded request `path` under the root directory.
    func openFile(_ path: String) -> FileLookup {
        guard let rootPath else { return .notFound }
        guard path.hasPrefix("/"), !path.contains("\0") else { return .badRequest }
        let segments = path.split(separator: "/")
        // Clients normally remove dot segments; one that sends them is probing for traversal.
        if segments.contains(where: { $0 == ".." || $0 == "." }) { return .badRequest }
        guard !segments.isEmpty else { return .notFound }

        // Resolve symlinks and make sure the file is really inside the root.
        let candidate = rootPath + "/" + segments.joined(separator: "/")
        guard let resolvedPointer = realpath(candidate, nil) else { return .notFound }
        let resolved = String(cString: resolvedPointer)
        free(resolvedPointer)
        guard resolved.hasPrefix(rootPath + "/") else { return .notFound }

        let fd = open(resolved, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .notFound }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            return .notFound
        }
        let size = Int(info.st_size)
        let modifiedNanoseconds = Int(info.st_mtim.tv_sec) * 1_000_000_000 + Int(info.st_mtim.tv_nsec)
        // Hashing a large file per request would be too slow; inode, size and mtime change
        // whenever the file is replaced or rewritten, which is what an ETag must track.
        let etag = "\"\(String(info.st_ino, radix: 16))-\(String(size, radix: 16))-\(String(modifiedNanoseconds, radix: 16))\""
        return .found(Entity(size: size, etag: etag, lastModified: Int(info.st_mtim.tv_sec),
                             contentType: Self.contentType(forPath: resolved), source: .file(OpenFile(fd: fd))))
    }

    static func contentType(forPath path: String) -> String {
        let ext = (path as NSString).pathExtension.lowercased()
        switch ext {
        case "txt": return "text/plain; charset=utf-8"
        case "html", "htm": return "text/html; charset=utf-8"
        case "json": return "application/json"
        case "xml": return "application/xml"
        case "rss": return "application/rss+xml"
        case "atom": return "application/atom+xml"
        case "jpg", "jpeg": return "image/jpeg"
        case "png": return "image/png"
        case "gif": return "image/gif"
        case "webp": return "image/webp"
        case "mp3": return "audio/mpeg"
        case "m4a": return "audio/mp4"
        case "wav": return "audio/wav"
        case "aif", "aiff": return "audio/aiff"
        case "flac": return "audio/flac"
        case "ogg", "oga": return "audio/ogg"
        case "mp4", "m4v": return "video/mp4"
        case "webm": return "video/webm"
        case "zip": return "application/zip"
        default: return "application/octet-stream"
        }
    }
}
