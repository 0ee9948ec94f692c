import CFileSync
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A finished body waiting in the temporary directory to become an object.
public struct StagedBlob: Sendable, Equatable {
    /// The temporary file, on the same filesystem as the objects.
    public let path: String
    /// SHA-256 of its bytes, lower-case hex, computed while it was written.
    public let sha256: String
    public let size: Int64

    public init(path: String, sha256: String, size: Int64) {
        self.path = path
        self.sha256 = sha256
        self.size = size
    }
}

/// An error of the store, naming the file and the system's reason.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }

    static func system(_ what: String, _ path: String, errno code: Int32 = errno) -> StoreError {
        StoreError("\(what) \(path): \(String(cString: strerror(code)))")
    }
}

/// Where blobs live. A second backend (an S3-style object store) implements
/// this without touching the engine or the commands.
public protocol BlobStore: Sendable {
    /// True when the object named `sha256` is present and complete.
    func contains(_ sha256: String) -> Bool
    /// Makes every staged blob durable under its hash, in one group.
    /// Returns the hashes that were new (the others were already stored).
    func commit(_ blobs: [StagedBlob]) throws(StoreError) -> Set<String>
    /// Removes an object.
    func remove(_ sha256: String) throws(StoreError)
}

/// Content-addressed objects on the local disk, Bazel-CAS style:
/// `<root>/objects/sha256/<first two hex>/<hex>`, read-only, complete by
/// construction: bodies are written in `<root>/tmp/`, made durable, then
/// renamed into place. The same bytes are stored once.
public final class ObjectStore: BlobStore {
    public let root: String
    /// Fan-out directories known to exist, so each is made once, not per object.
    private let knownDirectories = Mutex(Set<String>())
    /// Where bodies are written before they are complete; same filesystem as the objects.
    public let temporaryDirectory: String
    public let objectsDirectory: String

    /// Opens (creating if needed) the store under `root`.
    public init(root: String) throws(StoreError) {
        self.root = root
        self.temporaryDirectory = root + "/tmp"
        self.objectsDirectory = root + "/objects/sha256"
        for directory in [temporaryDirectory, objectsDirectory] {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw StoreError("cannot create \(directory): \(error.localizedDescription)")
            }
        }
    }

    /// The path of an object; nil when `sha256` is not 64 lower-case hex
    /// digits (so a name from the catalog can never point outside the store).
    public func path(for sha256: String) -> String? {
        guard Self.isValidHash(sha256) else { return nil }
        return "\(objectsDirectory)/\(sha256.prefix(2))/\(sha256)"
    }

    public func contains(_ sha256: String) -> Bool {
        guard let path = path(for: sha256) else { return false }
        return access(path, F_OK) == 0
    }

    public func commit(_ blobs: [StagedBlob]) throws(StoreError) -> Set<String> {
        guard !blobs.isEmpty else { return [] }
        // 1. The bodies' bytes reach the disk before any name points at them.
        try syncFilesystem()
        var created = Set<String>()
        for blob in blobs {
            guard let target = path(for: blob.sha256) else {
                throw StoreError("not a SHA-256 name: \(blob.sha256)")
            }
            if access(target, F_OK) == 0 {
                // Same bytes already stored (from another URL, collection or
                // process): drop the copy without a chmod and a rename that fails.
                _ = unlink(blob.path)
                continue
            }
            let directory = String(target.dropLast(sha256Length + 1))
            if !knownDirectories.withLock({ $0.contains(directory) }) { try makeDirectory(directory) }
            // Objects are immutable: read-only for everyone.
            if chmod(blob.path, 0o444) != 0 { throw StoreError.system("cannot make read-only", blob.path) }
            var moved = mf_rename_noreplace(blob.path, target) == 0
            if !moved, errno == ENOENT {
                // The fan-out directory was removed since we made it: make it again.
                try makeDirectory(directory)
                moved = mf_rename_noreplace(blob.path, target) == 0
            }
            if !moved {
                guard errno == EEXIST else { throw StoreError.system("cannot move into the store", blob.path) }
                // Stored by another process since the check above.
                _ = unlink(blob.path)
                continue
            }
            created.insert(blob.sha256)
        }
        // 2. The renames are durable before the caller records them in the catalog.
        if !created.isEmpty { try syncFilesystem() }
        return created
    }

    public func remove(_ sha256: String) throws(StoreError) {
        guard let target = path(for: sha256) else { throw StoreError("not a SHA-256 name: \(sha256)") }
        if unlink(target) != 0, errno != ENOENT { throw StoreError.system("cannot remove", target) }
    }

    static func isValidHash(_ text: String) -> Bool {
        text.utf8.count == sha256Length && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    private func makeDirectory(_ directory: String) throws(StoreError) {
        if mkdir(directory, 0o755) != 0, errno != EEXIST { throw StoreError.system("cannot create", directory) }
        knownDirectories.withLock { _ = $0.insert(directory) }
    }

    /// One `syncfs` covers a whole group of files: far cheaper than an fsync each.
    private func syncFilesystem() throws(StoreError) {
        let fd = open(temporaryDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError.system("cannot open", temporaryDirectory) }
        defer { close(fd) }
        if mf_syncfs(fd) != 0 { throw StoreError.system("cannot flush the filesystem of", temporaryDirectory) }
    }
}

private let sha256Length = 64
