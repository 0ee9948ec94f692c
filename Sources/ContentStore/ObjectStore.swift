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
    /// The system's error number, when a system call failed.
    public let code: Int32?
    public init(_ message: String, code: Int32? = nil) {
        self.message = message
        self.code = code
    }
    public var description: String { message }

    static func system(_ what: String, _ path: String, errno code: Int32 = errno) -> StoreError {
        StoreError("\(what) \(path): \(String(cString: strerror(code)))", code: code)
    }
}

/// Where blobs live. A second backend (an S3-style object store) implements
/// this without touching the engine or the commands.
public protocol BlobStore: Sendable {
    /// True when the object named `sha256` is present and, when `size` is
    /// given, has that size: a file cut short by outside damage is no object.
    func contains(_ sha256: String, size: Int64?) -> Bool
    /// Makes the bytes of `staged`, the files at `files` (others on the
    /// store's filesystem, such as the catalog's log) and every name given
    /// by `moveIntoPlace` since the last flush durable.
    func flush(staged: [StagedBlob], files: [String]) throws(StoreError)
    /// Puts one staged blob in place under its hash; returns false when the
    /// same bytes were stored already (the staged copy is dropped). The
    /// blob's bytes must be durable first (`flush(staged:)` with it), and its
    /// new name is durable only after the next `flush`.
    func moveIntoPlace(_ blob: StagedBlob) throws(StoreError) -> Bool
    /// Removes an object.
    func remove(_ sha256: String) throws(StoreError)
}

extension BlobStore {
    /// Whether the object named `sha256` is present, whatever its size.
    public func contains(_ sha256: String) -> Bool {
        contains(sha256, size: nil)
    }

    /// `flush(staged:files:)` with no other files.
    public func flush(staged: [StagedBlob]) throws(StoreError) {
        try flush(staged: staged, files: [])
    }

    /// Makes every staged blob durable under its hash, in one group: one flush
    /// for their bytes, the moves, one flush for their names. Returns the
    /// hashes that were new (the others were already stored).
    public func commit(_ blobs: [StagedBlob]) throws(StoreError) -> Set<String> {
        guard !blobs.isEmpty else { return [] }
        try flush(staged: blobs)
        var created = Set<String>()
        for blob in blobs {
            if try moveIntoPlace(blob) { created.insert(blob.sha256) }
        }
        // Also when every blob was a duplicate: the object found may be
        // another process's rename that is not durable yet.
        try flush(staged: [])
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
    /// What changed since the last flush: the fan-out directories that got
    /// names, objects whose mode was changed (relative to the objects
    /// directory), and whether the objects directory got a fan-out.
    private let unflushed = Mutex(Unflushed())
    private struct Unflushed {
        var fanOuts: Set<String> = []
        var modeChanged: [String] = []
        var objectsDirectory = false

        mutating func merge(_ other: Unflushed) {
            fanOuts.formUnion(other.fanOuts)
            modeChanged += other.modeChanged
            objectsDirectory = objectsDirectory || other.objectsDirectory
        }
    }
    /// Held for the whole of a flush: a flush that took the names another
    /// has moved must finish (or give them back) before that other flush
    /// may report them durable.
    private let flushing = Mutex(())
    /// Whether a file-by-file flush has synced the directories above the
    /// fan-outs (the root, `objects`, `objects/sha256`) once: a new cache's.
    private let parentsSynced = Mutex(false)
    /// Bytes the system has yet to write back (dirty, or being written),
    /// above which a flush syncs this store's files one by one instead of the
    /// whole filesystem (see `flush(staged:)`); nil where the system does not say.
    private let pendingWriteback: @Sendable () -> Int64?
    /// How many flushes synced the whole filesystem, and how many file by file.
    private let flushCounts = Mutex((wholeFilesystem: 0, fileByFile: 0))
    /// The threads a flush file by file syncs on, several at once.
    private let flushLanes = ParallelSyncs()
    var flushes: (wholeFilesystem: Int, fileByFile: Int) { flushCounts.withLock { $0 } }
    /// Where bodies are written before they are complete; same filesystem as the objects.
    public let temporaryDirectory: String
    public let objectsDirectory: String

    /// Where the objects of the cache at `root` live (known without opening it).
    public static func objectsDirectory(root: String) -> String { root + "/objects/sha256" }

    /// The two directories, held open: files are moved by names relative to
    /// them, so the kernel resolves one name per file instead of a whole path
    /// (and the flush needs no open of its own).
    private let temporaryDirectoryDescriptor: Int32
    private let objectsDirectoryDescriptor: Int32
    /// Why `objectsDirectoryDescriptor` could not be opened (a reader's
    /// store only); 0 when it was.
    private let objectsDirectoryError: Int32
    /// Why there is no objects' directory when a name on its way is there as
    /// something else (see `brokenPath`); nil when there is simply none.
    private let objectsPathProblem: StoreError?

    /// Opens the store under `root` to read it only: nothing is created (a
    /// cache on a read-only disk, or copied without its empty `tmp/`, is
    /// listed as it is; root listing another user's cache leaves no
    /// directory its owner cannot write). Objects are looked for; nothing
    /// can be stored. Without an `objects/` directory, no object is there.
    public init(readingAt root: String) {
        self.root = root
        pendingWriteback = { nil }
        temporaryDirectory = root + "/tmp"
        objectsDirectory = Self.objectsDirectory(root: root)
        temporaryDirectoryDescriptor = -1
        objectsDirectoryDescriptor = open(objectsDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        objectsDirectoryError = objectsDirectoryDescriptor < 0 ? errno : 0
        objectsPathProblem = objectsDirectoryError == ENOENT || objectsDirectoryError == ENOTDIR
            ? Self.brokenPath(from: root, to: objectsDirectory) : nil
    }

    /// What stands in the way of `path` below `root` when it cannot be
    /// opened: a link to nothing (a disk not mounted) or something not a
    /// directory. Nil when a name on the way is simply not there.
    static func brokenPath(from root: String, to path: String) -> StoreError? {
        guard path.hasPrefix(root + "/") else { return nil }
        var walked = root
        for name in path.dropFirst(root.count + 1).split(separator: "/") {
            walked += "/\(name)"
            var info = stat()
            guard lstat(walked, &info) == 0 else { return nil }
            if info.st_mode & S_IFMT == S_IFLNK {
                var target = stat()
                if stat(walked, &target) != 0 {
                    let reason = String(cString: strerror(errno))
                    let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: walked)) ?? "?"
                    return StoreError("\(walked) is a link to \(link), which cannot be reached (\(reason))")
                }
                info = target
            }
            if info.st_mode & S_IFMT != S_IFDIR { return StoreError("\(walked) is not a directory") }
        }
        return nil
    }

    /// Opens (creating if needed) the store under `root`. `pendingWriteback`
    /// says how many bytes the system has yet to write back (tests pass their own).
    public init(root: String, pendingWriteback: @escaping @Sendable () -> Int64? = SystemMemory.pendingWriteback) throws(StoreError) {
        self.root = root
        self.pendingWriteback = pendingWriteback
        self.temporaryDirectory = root + "/tmp"
        self.objectsDirectory = root + "/objects/sha256"
        for directory in [temporaryDirectory, objectsDirectory] {
            do {
                try Self.makeDirectories(directory)
            } catch {
                // "cannot create …/objects/sha256: No such file or directory" said nothing of a link to a disk not mounted.
                throw Self.brokenPath(from: root, to: directory) ?? error
            }
        }
        temporaryDirectoryDescriptor = try Self.openDirectory(temporaryDirectory)
        objectsDirectoryError = 0
        objectsPathProblem = nil
        do {
            objectsDirectoryDescriptor = try Self.openDirectory(objectsDirectory)
        } catch {
            close(temporaryDirectoryDescriptor)
            throw error
        }
    }

    /// Throws when the temporary and objects directories are on different
    /// filesystems (a symlink to another disk): bodies are renamed from one
    /// into the other, and each would fail, after its download. Only what
    /// stores bodies needs to ask; reading a cache works either way.
    /// `temporarySubdirectories` of `tmp/` that exist (where partials are)
    /// are looked at too: one of them linked elsewhere failed its items alike.
    public func checkOneFilesystem(temporarySubdirectories: [String] = []) throws(StoreError) {
        var temporary = stat()
        var objects = stat()
        guard fstat(temporaryDirectoryDescriptor, &temporary) == 0, fstat(objectsDirectoryDescriptor, &objects) == 0 else {
            return
        }
        var elsewhere: String? = temporary.st_dev != objects.st_dev ? temporaryDirectory : nil
        for name in temporarySubdirectories where elsewhere == nil {
            var shard = stat()
            if fstatat(temporaryDirectoryDescriptor, name, &shard, 0) == 0, shard.st_dev != objects.st_dev {
                elsewhere = "\(temporaryDirectory)/\(name)"
            }
        }
        if let elsewhere {
            throw StoreError("\(elsewhere) and \(objectsDirectory) are on different filesystems "
                + "(downloads are renamed from one into the other): keep them on one", code: EXDEV)
        }
    }

    deinit {
        if temporaryDirectoryDescriptor >= 0 { close(temporaryDirectoryDescriptor) }
        if objectsDirectoryDescriptor >= 0 { close(objectsDirectoryDescriptor) }
    }

    /// `mkdir -p`, with the system's reason in the error ("Not a directory"
    /// when `--cache` names a file), not Foundation's error numbers.
    static func makeDirectories(_ path: String) throws(StoreError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            let parent = prefix
            prefix += "/" + component
            // The umask decides the mode, as for curl's or wget's directories (002: a group's shared cache).
            if mkdir(prefix, 0o777) != 0, errno != EEXIST {
                let code = errno
                // A directory this user may not enter: what is in it may well exist ("cannot create" misled).
                if code == EACCES, !parent.isEmpty, access(parent, X_OK) != 0 { throw StoreError.system("cannot enter", parent, errno: code) }
                throw StoreError.system("cannot create", prefix, errno: code)
            }
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

    public func contains(_ sha256: String, size: Int64?) -> Bool {
        guard Self.isValidHash(sha256), let found = sizeOfObject("\(sha256.prefix(2))/\(sha256)") else { return false }
        return size.map { found == $0 } ?? true
    }

    /// Throws when the objects' directory cannot be entered; a cache
    /// without one (nothing stored yet) has no objects. One that is a link
    /// to nothing, or a file, is not that: it listed every object as gone.
    func checkObjectsReadable() throws(StoreError) {
        guard objectsDirectoryDescriptor < 0 else { return }
        if let objectsPathProblem { throw objectsPathProblem }
        guard objectsDirectoryError != ENOENT, objectsDirectoryError != ENOTDIR else { return }
        throw StoreError.system("cannot read", objectsDirectory, errno: objectsDirectoryError)
    }

    /// `contains`, for a reader that says what it finds (`list`, `stats`):
    /// throws when the object cannot be looked for, rather than calling it
    /// missing. An `objects/` another user may not enter listed every
    /// object as gone, "get fetches them again", with the files intact.
    public func lookUp(_ sha256: String, size: Int64?) throws(StoreError) -> Bool {
        guard Self.isValidHash(sha256) else { return false }
        let target = "\(sha256.prefix(2))/\(sha256)"
        try checkObjectsReadable()
        if objectsDirectoryDescriptor < 0 { return false }
        var info = stat()
        guard fstatat(objectsDirectoryDescriptor, target, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return false }
            throw StoreError.system("cannot look at", "\(objectsDirectory)/\(target)")
        }
        // A file, not a link to one: a link to another file of the size stood for
        // the object, whose name was then no longer the hash of what it held.
        return info.st_mode & S_IFMT == S_IFREG && (size.map { Int64(info.st_size) == $0 } ?? true)
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
        // The body written, still: a link or another file put at its name
        // (the temporary directory is writable by everyone sharing the cache)
        // is neither followed nor stored.
        var staged = stat()
        guard fstatat(sourceDirectory, source, &staged, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw StoreError.system("cannot look at", blob.path)
        }
        // Ours, and by one name: a hard link put there to another of this user's
        // files (where the system allows one) is no body written here.
        guard staged.st_mode & S_IFMT == S_IFREG, Int64(staged.st_size) == blob.size, staged.st_nlink == 1,
              staged.st_uid == Self.effectiveUser else {
            throw StoreError("\(blob.path) is no longer the body written (another program replaced it); not stored")
        }
        // Objects are immutable: read-only for everyone. Through a descriptor
        // that refuses a link, not by name (which follows one).
        if !blob.isReadOnly {
            let fd = openat(sourceDirectory, source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            defer { if fd >= 0 { _ = close(fd) } }
            guard fd >= 0, fchmod(fd, 0o444) == 0 else {
                throw StoreError.system("cannot make read-only", blob.path)
            }
        }
        // No existence check first: the rename refuses to replace an object,
        // and a duplicate (the same bytes from another URL, collection or
        // process) is then dropped.
        var moved = mf_renameat_noreplace(sourceDirectory, source, objectsDirectoryDescriptor, target) == 0
        var code = errno
        if !moved, code == ENOENT, access(blob.path, F_OK) == 0 {
            // The fan-out directory was removed since we made it: make it again.
            try makeDirectory(fanOut)
            moved = mf_renameat_noreplace(sourceDirectory, source, objectsDirectoryDescriptor, target) == 0
            code = errno
        }
        var placedNew = moved
        if !moved, code == EEXIST {
            // Something holds the name already: the same bytes (another URL,
            // collection or process), or outside damage (a file cut short, a
            // link to nothing, other bytes of the same length put there by hand).
            // The bytes just hashed replace it: the same bytes lose nothing,
            // other ones are mended, and a rename is what dropping them cost.
            // A directory there refuses it (see below).
            let intact = sizeOfObject(target) == blob.size
            moved = renameat(sourceDirectory, source, objectsDirectoryDescriptor, target) == 0
            code = errno
            placedNew = moved && !intact
            if !moved, intact {
                // Another user's object in a sticky fan-out directory (EPERM): the same
                // bytes, as far as can be told; the copy goes, as before this replaced.
                _ = unlinkat(sourceDirectory, source, 0)
                return false
            }
        }
        if !moved, code == EISDIR || code == ENOTEMPTY || code == EEXIST {
            // A directory at the object's name (made by hand): an empty one goes, and the
            // body takes its place; else the item fails every run, naming it.
            if unlinkat(objectsDirectoryDescriptor, target, AT_REMOVEDIR) == 0 {
                moved = renameat(sourceDirectory, source, objectsDirectoryDescriptor, target) == 0
                code = errno
                placedNew = moved
            }
            if !moved {
                throw StoreError("cannot store \(objectsDirectory)/\(target): a directory is at its name (remove it)", code: code)
            }
        }
        if moved {
            // A duplicate's too: the name it replaced may be another process's rename, not durable yet.
            unflushed.withLock { state in
                state.fanOuts.insert(fanOut)
                if moved, !blob.isReadOnly { state.modeChanged.append(target) }
            }
        }
        if !moved {
            // The directory that refused the name is what to look at, not the body's temporary name.
            throw StoreError.system("cannot move \(blob.path) into", "\(objectsDirectory)/\(fanOut)", errno: code)
        }
        return placedNew
    }

    /// The size of the file at `target` (relative to the objects directory),
    /// or nil when there is none to look at.
    private func sizeOfObject(_ target: String) -> Int64? {
        var info = stat()
        guard fstatat(objectsDirectoryDescriptor, target, &info, AT_SYMLINK_NOFOLLOW) == 0,
              info.st_mode & S_IFMT == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// The directory descriptor and name to reach `path` by: relative to the
    /// temporary directory when it is in it (or in one of its subdirectories,
    /// where partials are), else the path itself.
    private func relativeToTemporaryDirectory(_ path: String) -> (Int32, String) {
        let prefix = temporaryDirectory + "/"
        if path.hasPrefix(prefix) {
            let name = path.dropFirst(prefix.count)
            if !name.isEmpty { return (temporaryDirectoryDescriptor, String(name)) }
        }
        return (AT_FDCWD, path)
    }

    public func remove(_ sha256: String) throws(StoreError) {
        guard let target = path(for: sha256) else { throw StoreError("not a SHA-256 name: \(sha256)") }
        if unlink(target) != 0, errno != ENOENT { throw StoreError.system("cannot remove", target) }
    }

    /// This process's user: `geteuid` is a system call, asked once a body otherwise.
    private static let effectiveUser = geteuid()

    static func isValidHash(_ text: String) -> Bool {
        text.utf8.count == sha256Length && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The 256 fan-out directories' names, `00` to `ff`.
    static let fanOutNames: [String] = {
        let digits = Array("0123456789abcdef")
        return (0..<256).map { String([digits[$0 >> 4], digits[$0 & 15]]) }
    }()

    /// From how many objects to store a run makes the fan-outs ahead: 1,000
    /// random hashes leave each of the 256 empty one time in 50 (255/256 to
    /// the 1,000th), about five of them a run; the rest would be made anyway.
    public static let objectsWorthMakingFanOutsAhead = 1000

    /// Makes every fan-out directory not known to exist yet, on a thread of
    /// its own at a low priority, for a run about to store at least
    /// `objectsWorthMakingFanOutsAhead` objects: it would make nearly all of
    /// them anyway, one at a time on the thread that moves bodies into place
    /// (256 directories, 5 ms of CPU on a run of 2000 small files), on that
    /// thread's busiest path. The caller chooses when (a run: once its first
    /// body is handed over, see `FetchJob`).
    /// The few left empty take a block and an inode each (1 MiB on ext4).
    /// Best effort: a fan-out that cannot be made (a link or a file in its
    /// place) is passed over, and made or refused when an object needs it,
    /// as before; a full disk ends it. The names are made durable by the
    /// next flush, as any fan-out's. `then` runs once it is done (for tests):
    /// on that thread, or at once when every fan-out is known already.
    public func makeFanOutsAhead(then done: (@Sendable () -> Void)? = nil) {
        let missing = knownDirectories.withLock { known in Self.fanOutNames.filter { !known.contains($0) } }
        guard !missing.isEmpty else {
            done?()
            return
        }
        let thread = Thread { [self] in
            defer { done?() }
            mf_name_this_thread("mf-fan-outs")
            // Behind the downloads, beside the writers (whose thread may have started this one).
            _ = mf_lower_thread_priority(MF_BACKGROUND_NICE_STEPS)
            for fanOut in missing where !knownDirectories.withLock({ $0.contains(fanOut) }) {
                do throws(StoreError) {
                    try makeDirectory(fanOut)
                } catch where error.code == ENOSPC || error.code == EDQUOT {
                    return
                } catch {
                    continue
                }
            }
        }
        thread.qualityOfService = .utility
        thread.stackSize = 256 << 10
        thread.start()
    }

    private func makeDirectory(_ fanOut: String) throws(StoreError) {
        if mkdirat(objectsDirectoryDescriptor, fanOut, 0o777) != 0, errno != EEXIST {
            throw StoreError.system("cannot create", "\(objectsDirectory)/\(fanOut)")
        }
        // A directory, not a link to one: objects stored through a link put there
        // landed outside the cache, and `list` called them cached.
        var info = stat()
        guard fstatat(objectsDirectoryDescriptor, fanOut, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            throw StoreError("\(objectsDirectory)/\(fanOut) is not a directory (a link, or a file, put there by hand); not stored")
        }
        // Made by another process just now, maybe: its name must be durable all the same.
        unflushed.withLock { $0.objectsDirectory = true }
        knownDirectories.withLock { _ = $0.insert(fanOut) }
    }

    /// Above this many bytes of other work waiting for writeback, a flush
    /// goes file by file: a `syncfs` would write all of it back and wait.
    static let wholeFilesystemFlushLimit: Int64 = 64 << 20

    /// One `syncfs` covers a whole group of files: 2000 small files flushed
    /// in 25 groups took 0.07 s, against 0.57 s for an `fdatasync` per file
    /// and an `fsync` per directory. But it writes back every dirty page of
    /// the filesystem, other programs' too: with 1 GB that another program
    /// had just written still dirty it took 1.9 s, file by file 0.76 s (and
    /// a 300-file `get` took 1.5 s instead of 0.35 s). So the whole filesystem
    /// is synced only while little else waits to be written back.
    public func flush(staged: [StagedBlob], files: [String]) throws(StoreError) {
        try flushing.withLock { _ throws(StoreError) in
            let pending = unflushed.withLock { state in
                defer { state = Unflushed() }
                return state
            }
            do throws(StoreError) {
                if (pendingWriteback() ?? 0) <= Self.wholeFilesystemFlushLimit {
                    if mf_syncfs(temporaryDirectoryDescriptor) != 0 {
                        throw StoreError.system("cannot flush the filesystem of", temporaryDirectory)
                    }
                    flushCounts.withLock { $0.wholeFilesystem += 1 }
                } else {
                    try flushFileByFile(staged, files, pending)
                    flushCounts.withLock { $0.fileByFile += 1 }
                }
            } catch {
                // Not flushed: the next flush must cover these names again.
                unflushed.withLock { $0.merge(pending) }
                throw error
            }
        }
    }

    /// The staged files' and the other files' bytes (`fdatasync`), the
    /// objects whose mode changed (`fsync`), then the directories that got
    /// names (`fsync`): the fan-outs, and the objects directory when it got a
    /// fan-out; the first time, the directories above too. A file or fan-out
    /// that is gone is passed over, as `syncfs` would: moving into it fails
    /// that item alone.
    private func flushFileByFile(_ staged: [StagedBlob], _ files: [String], _ pending: Unflushed) throws(StoreError) {
        let flushes = (staged.map(\.path) + files).map { FileFlush(name: $0, inStore: false) }
            + (pending.modeChanged + pending.fanOuts).map { FileFlush(name: $0, inStore: true) }
        try flushLanes.run(flushes) { [self] flush throws(StoreError) in
            if flush.inStore {
                try sync(objectsDirectoryDescriptor, flush.name, shown: "\(objectsDirectory)/\(flush.name)")
            } else {
                try sync(AT_FDCWD, flush.name, shown: flush.name, dataOnly: true)
            }
        }
        // Flushes run one at a time (`flushing`): nothing changes the flag between here and the end.
        let firstTime = !parentsSynced.withLock { $0 }
        if pending.objectsDirectory || firstTime, fsync(objectsDirectoryDescriptor) != 0 {
            throw StoreError.system("cannot flush", objectsDirectory)
        }
        if firstTime {
            // A new cache: `objects/sha256`, `objects` and `tmp` got their names just now.
            for directory in [root + "/objects", root] {
                try sync(AT_FDCWD, directory, shown: directory)
            }
            // Only once they are durable: after a failure the next flush tries them again.
            parentsSynced.withLock { $0 = true }
        }
    }

    /// One file or directory that a flush file by file syncs: a file by its
    /// path (its bytes), or an object or fan-out by its name in the store (all of it).
    private struct FileFlush: Sendable {
        let name: String
        let inStore: Bool
    }

    /// Makes the names of these objects durable, whoever moved them into
    /// place: their fan-out directories are synced, then the objects
    /// directory. (The rows a run held when it was killed point at objects
    /// it moved and may not have flushed: see `UnrecordedRows.hold`.)
    public func makeNamesDurable(of hashes: [String]) throws(StoreError) {
        guard !hashes.isEmpty else { return }
        for fanOut in Set(hashes.map { String($0.prefix(2)) }) {
            try sync(objectsDirectoryDescriptor, fanOut, shown: "\(objectsDirectory)/\(fanOut)")
        }
        if fsync(objectsDirectoryDescriptor) != 0 { throw StoreError.system("cannot flush", objectsDirectory) }
    }

    /// `fsync` (or `fdatasync`) of the file or directory `name` relative to
    /// `directory`; nothing when it is gone.
    private func sync(_ directory: Int32, _ name: String, shown: String, dataOnly: Bool = false) throws(StoreError) {
        let fd = openat(directory, name, O_RDONLY | O_CLOEXEC)
        if fd < 0, errno == ENOENT { return }
        guard fd >= 0 else { throw StoreError.system("cannot open", shown) }
        defer { close(fd) }
        if (dataOnly ? fdatasync(fd) : fsync(fd)) != 0 { throw StoreError.system("cannot flush", shown) }
    }
}

/// What the kernel says of memory.
public enum SystemMemory {
    /// Bytes of dirty pages and pages under writeback, system-wide
    /// (`/proc/meminfo`); nil where there is no such file.
    @Sendable public static func pendingWriteback() -> Int64? {
        let fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 8192)
        var length = 0
        while length < buffer.count {
            let count = buffer.withUnsafeMutableBytes { bytes -> Int in
                guard let base = bytes.baseAddress else { return 0 }
                return read(fd, base + length, bytes.count - length)
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            length += count
        }
        return pendingWriteback(meminfo: buffer[0..<length])
    }

    /// `Dirty` plus `Writeback` from the text of `/proc/meminfo`, in bytes.
    static func pendingWriteback(meminfo: ArraySlice<UInt8>) -> Int64? {
        var total: Int64 = 0
        var found = 0
        for line in meminfo.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " "))
            guard fields.count >= 2,
                  fields[0].elementsEqual("Dirty:".utf8) || fields[0].elementsEqual("Writeback:".utf8),
                  let kibibytes = Int64(String(decoding: fields[1], as: UTF8.self)) else { continue }
            total += kibibytes.multipliedReportingOverflow(by: 1024).overflow ? .max / 4 : kibibytes * 1024
            found += 1
        }
        return found == 0 ? nil : total
    }
}

private let sha256Length = 64
