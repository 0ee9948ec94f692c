import CFileSync
import Foundation
import GRDB

/// Whether an error of the store or the catalog means that the disk holding
/// the cache is full: a run stops on it instead of failing every item left.
public enum OutOfSpace {
    /// True for ENOSPC and EDQUOT from the store and `SQLITE_FULL` from the catalog.
    public static func isCause(of error: any Error) -> Bool {
        switch error {
        case let error as StoreError: error.code.map(isSystemCode) ?? false
        case let error as DatabaseError: error.resultCode == .SQLITE_FULL
        default: false
        }
    }

    /// What a full disk left short, when a full disk is why `error` happened.
    public enum Shortage: Sendable, Equatable {
        case space
        /// Room, but no inode for another file.
        case inodes
    }

    /// What a full disk left short, when `error` is a full disk's doing:
    /// `isCause(of:)`'s errors, and also the errors of SQLite that say
    /// nothing of space but come from a full disk when `directory` (where
    /// the catalog is) shows it: a shared-memory file it could not grow is an
    /// I/O error (`SQLITE_IOERR_SHMSIZE`; seen on a disk with 8–32 KiB free,
    /// and with any room short of a page once the `-shm` file was gone),
    /// counted with less room than `nearlyFullBytes` left, and a file it
    /// could not create a failure to open (`SQLITE_CANTOPEN`), counted with
    /// no inode left. SQLite keeps the system's error number to itself, so
    /// the disk is asked. Nil otherwise.
    public static func shortage(causing error: any Error, onDiskOf directory: String) -> Shortage? {
        if isCause(of: error) { return .space }
        guard let error = error as? DatabaseError else { return nil }
        // Exactly these codes: a pattern of a primary code matches each of its extended ones.
        let code = error.extendedResultCode
        guard code == .SQLITE_IOERR_SHMSIZE || code == .SQLITE_CANTOPEN else { return nil }
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return nil }
        if code == .SQLITE_CANTOPEN { return hasNoFreeInode(info) ? .inodes : nil }
        return usableBytes(info, directory: directory) < nearlyFullBytes ? .space : nil
    }

    /// Whether `error` is a full disk's doing (see `shortage(causing:onDiskOf:)`).
    public static func isCause(of error: any Error, onDiskOf directory: String) -> Bool {
        shortage(causing: error, onDiskOf: directory) != nil
    }

    /// Room but no inode left for another file, on a writable filesystem (a
    /// read-only one, such as squashfs or iso9660, reports none free; one
    /// that reports no inodes at all makes them as needed).
    private static func hasNoFreeInode(_ info: statvfs) -> Bool {
        info.f_files > 0 && info.f_favail == 0 && info.f_flag & UInt(ST_RDONLY) == 0
    }

    /// Less room than this is a full disk to SQLite's shared memory: a few
    /// of the 32 KiB regions it grows by (see `shortage(causing:onDiskOf:)`
    /// and `lacksRoomForSharedMemory`).
    static let nearlyFullBytes: Int64 = 256 << 10

    /// True for the system's error numbers of a full disk: no space left, or the user's quota spent.
    public static func isSystemCode(_ code: Int32) -> Bool {
        code == ENOSPC || code == EDQUOT
    }

    /// Why the catalog in `directory` must not be opened now, if it must not.
    /// SQLite maps its shared-memory file (`-shm`) after writing one byte per
    /// 4 KiB page of it; on a filesystem of smaller blocks the rest of each
    /// page is a hole, and on a full disk the first store into such a hole
    /// kills the process with SIGBUS (seen on ext4 with 1 KiB blocks, which
    /// mkfs makes below 512 MB). There the room is looked at first; once the
    /// catalog is open, `allocateSharedMemory` fills the holes.
    public static func catalogOpeningProblem(directory: String) -> String? {
        var info = statvfs()
        guard statvfs(directory, &info) == 0, hasSmallBlocks(info) else { return nil }
        let usable = usableBytes(info, directory: directory)
        guard lacksRoomForSharedMemory(blockSize: Int(info.f_frsize), freeBytes: usable) else { return nil }
        return "the disk holding the cache is full (on a filesystem of \(info.f_frsize)-byte blocks SQLite "
            + "needs some room for the catalog's shared memory before it opens it): free some space"
    }

    /// Gives the catalog's shared-memory file at `path` blocks for its first
    /// 64 KiB (two regions, enough for a log of 8,192 pages) on a filesystem
    /// of small blocks, so that a disk that fills up during a run cannot make
    /// SQLite's next store into a hole a SIGBUS. Throws when there is no
    /// room; does nothing elsewhere, or where the filesystem cannot allocate.
    static func allocateSharedMemory(_ path: String) throws(StoreError) {
        var info = statvfs()
        guard statvfs(path, &info) == 0, hasSmallBlocks(info) else { return }
        let fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        if mf_allocate_keeping_size(fd, 64 * 1024) != 0, isSystemCode(errno) {
            throw StoreError.system("cannot make room for", path)
        }
    }

    /// Bytes this process may still write on the filesystem holding
    /// `directory`; nil when it cannot be asked.
    public static func freeBytes(directory: String) -> Int64? {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return nil }
        return usableBytes(info, directory: directory)
    }

    /// Root may use the blocks kept back for it (in f_bfree); others only
    /// the available ones. ext4 also counts as free, in f_bfree only, a
    /// reserve for metadata that nobody's data may take: 2% of the blocks,
    /// at most 4096 (a full 24 MB ext4 showed 491 KiB free to root).
    private static func usableBytes(_ info: statvfs, directory: String) -> Int64 {
        var usableBlocks = Int64(info.f_bavail)
        if geteuid() == 0 {
            usableBlocks = Int64(info.f_bfree)
            if mf_filesystem_type(directory) == extFilesystemMagic { usableBlocks -= min(Int64(info.f_blocks) / 50, 4096) }
        }
        return Int64(info.f_frsize) * max(0, usableBlocks)
    }

    /// Whether `directory` is on a filesystem of blocks smaller than a page
    /// (see `catalogOpeningProblem`).
    public static func hasSmallBlocks(directory: String) -> Bool {
        var info = statvfs()
        return statvfs(directory, &info) == 0 && hasSmallBlocks(info)
    }

    /// Blocks smaller than a page, on a filesystem that can be written.
    private static func hasSmallBlocks(_ info: statvfs) -> Bool {
        info.f_frsize < 4096 && info.f_flag & UInt(ST_RDONLY) == 0
    }

    /// ext2, ext3 and ext4 (`EXT4_SUPER_MAGIC`).
    private static let extFilesystemMagic = 0xEF53

    /// Whether a filesystem of `blockSize` with `freeBytes` left may fail
    /// SQLite's shared memory: blocks smaller than a page, and less room than
    /// a few of its 32 KiB regions take.
    static func lacksRoomForSharedMemory(blockSize: Int, freeBytes: Int64) -> Bool {
        blockSize < 4096 && freeBytes < nearlyFullBytes
    }
}
