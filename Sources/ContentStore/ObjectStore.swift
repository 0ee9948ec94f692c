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
    /// The file's mode is exactly 0444 already (the writer created it so and
    /// checked): the store need not change it.
    public let isReadOnly: Bool

    public init(path: String, sha256: String, size: Int64, isReadOnly: Bool = false) {
        self.path = path
        self.sha256 = sha256
        self.size = size
        self.isReadOnly = isReadOnly
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
    /// Makes every byte and name written so far durable.
    func flush() throws(StoreError)
    /// Puts one staged blob in place under its hash; returns false when the
    /// same bytes were stored already (the staged copy is dropped). The
    /// blob's bytes must be durable first (`flush`), and its new name is
    /// durable only after the next `flush`.
    func moveIntoPlace(_ blob: StagedBlob) throws(StoreError) -> Bool
    /// Removes an object.
    func remove(_ sha256: String) throws(StoreError)
}

extension BlobStore {
    /// Makes every staged blob durable under its hash, in one group: one flush
    /// for their bytes, the moves, one flush for their names. Returns the
    /// hashes that were new (the others were already stored).
    public func commit(_ blobs: [StagedBlob]) throws(StoreError) -> Set<String> {
        guard !blobs.isEmpty else { return [] }
        try flush()
        var created = Set<String>()
        for blob in blobs {
            if try moveIntoPlace(blob) { created.insert(blob.sha256) }
        }
        // Also when every blob was a duplicate: the object found may be
        // another process's rename that is not durable yet.
        try flush()
        return created
    }
}

/// Content-addressed objects on the local disk, Bazel-CAS style:
/// `<root>/objects/sha256/<first two hex>/<hex>`, read-only, complete by
/// construction: bodies are written in `<root>/tmp/`, made durable, then
/// renamed into place. The same bytes are stored once.
public final class ObjectStore: BlobStore {
    public let root: String
    /// Fan-out directories (the two hex digits) known to exist, so each is made once, not per object.
    private let knownDirectories = Mutex(Set<String>())
    /// Where bodies are written before they are complete; same filesystem as the objects.
    public let temporaryDirectory: String
    public let objectsDirectory: String
    /// The two directories, held open: files are moved by names relative to
    /// them, so the kernel resolves one name per file instead of a whole path
    /// (and the flush needs no open of its own).
    private let temporaryDirectoryDescriptor: Int32
    private let objectsDirectoryDescriptor: Int32

    /// Opens (creating if needed) the store under `root`.
    public init(root: String) throws(StoreError) {
        self.root = root
        self.temporaryDirectory = root + "/tmp"
        self.objectsDirectory = root + "/objects/sha256"
        for directory in [temporaryDirectory, objectsDirectory] { try Self.makeDirectories(directory) }
        temporaryDirectoryDescriptor = try Self.openDirectory(temporaryDirectory)
        do {
            objectsDirectoryDescriptor = try Self.openDirectory(objectsDirectory)
        } catch {
            close(temporaryDirectoryDescriptor)
            throw error
        }
    }

    deinit {
        close(temporaryDirectoryDescriptor)
        close(objectsDirectoryDescriptor)
    }

    /// `mkdir -p`, with the system's reason in the error ("Not a directory"
    /// when `--cache` names a file), not Foundation's error numbers.
    static func makeDirectories(_ path: String) throws(StoreError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o755) != 0, errno != EEXIST { throw StoreError.system("cannot create", prefix) }
        }
        var info = stat()
        guard stat(path, &info) == 0 else { throw StoreError.system("cannot create", path) }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw StoreError.system("cannot create", path, errno: ENOTDIR) }
    }

    private static func openDirectory(_ path: String) throws(StoreError) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError.system("cannot open", path) }
        return fd
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

    public func moveIntoPlace(_ blob: StagedBlob) throws(StoreError) -> Bool {
        guard Self.isValidHash(blob.sha256) else {
            throw StoreError("not a SHA-256 name: \(blob.sha256)")
        }
        let fanOut = String(blob.sha256.prefix(2))
        let target = "\(fanOut)/\(blob.sha256)"
        // A body in the temporary directory is named relative to it.
        let (sourceDirectory, source) = relativeToTemporaryDirectory(blob.path)
        if !knownDirectories.withLock({ $0.contains(fanOut) }) { try makeDirectory(fanOut) }
        // Objects are immutable: read-only for everyone.
        if !blob.isReadOnly, fchmodat(sourceDirectory, source, 0o444, 0) != 0 {
            throw StoreError.system("cannot make read-only", blob.path)
        }
        // No existence check first: the rename refuses to replace an object,
        // and a duplicate (the same bytes from another URL, collection or
        // process) is then dropped.
        var moved = mf_renameat_noreplace(sourceDirectory, source, objectsDirectoryDescriptor, target) == 0
        if !moved, errno == ENOENT, access(blob.path, F_OK) == 0 {
            // The fan-out directory was removed since we made it: make it again.
            try makeDirectory(fanOut)
            moved = mf_renameat_noreplace(sourceDirectory, source, objectsDirectoryDescriptor, target) == 0
        }
        if !moved {
            guard errno == EEXIST else { throw StoreError.system("cannot move into the store", blob.path) }
            _ = unlinkat(sourceDirectory, source, 0)
            return false
        }
        return true
    }

    /// The directory descriptor and name to reach `path` by: relative to the
    /// temporary directory when it is in it, else the path itself.
    private func relativeToTemporaryDirectory(_ path: String) -> (Int32, String) {
        let prefix = temporaryDirectory + "/"
        if path.hasPrefix(prefix) {
            let name = path.dropFirst(prefix.count)
            if !name.isEmpty, !name.utf8.contains(UInt8(ascii: "/")) { return (temporaryDirectoryDescriptor, String(name)) }
        }
        return (AT_FDCWD, path)
    }

    public func remove(_ sha256: String) throws(StoreError) {
        guard let target = path(for: sha256) else { throw StoreError("not a SHA-256 name: \(sha256)") }
        if unlink(target) != 0, errno != ENOENT { throw StoreError.system("cannot remove", target) }
    }

    static func isValidHash(_ text: String) -> Bool {
        text.utf8.count == sha256Length && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    private func makeDirectory(_ fanOut: String) throws(StoreError) {
        if mkdirat(objectsDirectoryDescriptor, fanOut, 0o755) != 0, errno != EEXIST {
            throw StoreError.system("cannot create", "\(objectsDirectory)/\(fanOut)")
        }
        knownDirectories.withLock { _ = $0.insert(fanOut) }
    }

    /// One `syncfs` covers a whole group of files: far cheaper than an fsync each.
    public func flush() throws(StoreError) {
        if mf_syncfs(temporaryDirectoryDescriptor) != 0 {
            throw StoreError.system("cannot flush the filesystem of", temporaryDirectory)
        }
    }
}

private let sha256Length = 64
