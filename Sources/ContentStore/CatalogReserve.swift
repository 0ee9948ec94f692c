#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Room held back on the cache's disk for the catalog: a file of its own
/// (`catalog.reserve`), allocated (not written, where the filesystem can
/// allocate) and given up when the disk fills.
///
/// A run that fills the disk has objects moved into place whose rows are
/// still to be written, and SQLite needs fresh pages for them (a new
/// catalog's log starts empty). Without room for them the objects stayed on
/// the full disk with nothing pointing at them, the run said "0 downloaded",
/// and the next run fetched them all again. Giving the reserve up lets those
/// rows (or, failing that, the kept rows of `UnrecordedRows`) be written.
public struct CatalogReserve: Sendable {
    /// Enough for the rows of a few full groups: a group of 512 small items
    /// touches some hundred 4 KiB pages of the catalog.
    public static let defaultBytes = 1 << 20

    public let path: String
    public let bytes: Int
    private let root: String

    public init(root: String, bytes: Int = defaultBytes) {
        self.root = root
        path = root + "/catalog.reserve"
        self.bytes = bytes
    }

    /// The least room worth holding (when `bytes` is more): the rows of a few dozen items.
    public static let leastBytes = 64 << 10

    /// Takes the room, unless it is held already: `bytes`, or a quarter of
    /// the room free where that is less, so that a catalog being made still
    /// has the rest. A disk with room for a fraction of the reserve needs it
    /// most: on a 2 MiB tmpfs, the rows of 20 photos found no room once a
    /// sound filled the disk, and the run stored them without a row (the
    /// next one fetched them again). Best effort: a disk that is full
    /// already (under `leastBytes` to give), or a read-only one, has none to
    /// take. Only a regular file of its own is grown: a link put in its place
    /// (a cache a group shares) is not followed into someone else's file.
    public func hold() {
        var info = stat()
        let held = lstat(path, &info) == 0 ? Int64(info.st_blocks) * 512 : 0
        if held >= Int64(bytes) { return }
        var disk = statvfs()
        guard statvfs(root, &disk) == 0 else { return }
        // Whole 4 KiB blocks.
        let target = min(Int64(bytes), Int64(disk.f_bavail) * Int64(disk.f_frsize) / 4) & ~4095
        guard target >= min(Int64(bytes), Int64(Self.leastBytes)), held < target else { return }
        var created = true
        var fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o666)
        if fd < 0, errno == EEXIST {
            created = false
            fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        }
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return }
        // Not half a reserve: one this process made and could not allocate goes at once
        // (one another process made is that process's to keep).
        if posix_fallocate(fd, 0, off_t(target)) != 0, created { _ = unlink(path) }
    }

    /// The room held now (none once given up, here or by another process).
    public var heldBytes: Int64 {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG ? Int64(info.st_blocks) * 512 : 0
    }

    /// Gives the room up; true when there was some to give (the caller then
    /// tries once more what the full disk refused).
    public func release() -> Bool {
        unlink(path) == 0
    }

    /// Runs `body`; when it fails for a full disk, gives the room up if it
    /// is still held, and asks `makingRoom` for more (the catalog's
    /// checkpoint: true when it may have made some); when either did, runs
    /// `body` once more.
    public func retryingOnFullDisk<T>(makingRoom: () -> Bool = { false }, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch where OutOfSpace.isCause(of: error, onDiskOf: root) {
            let released = release()
            guard makingRoom() || released else { throw error }
            return try body()
        }
    }
}
