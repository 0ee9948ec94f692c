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

    /// True for the system's error numbers of a full disk: no space left, or the user's quota spent.
    public static func isSystemCode(_ code: Int32) -> Bool {
        code == ENOSPC || code == EDQUOT
    }

    /// Why the catalog in `directory` must not be opened now, if it must not.
    /// SQLite maps its shared-memory file (`-shm`) after writing one byte per
    /// 4 KiB page of it; on a filesystem of smaller blocks the rest of each
    /// page is a hole, and on a full disk the first store into such a hole
    /// kills the process with SIGBUS (seen on ext4 with 1 KiB blocks, which
    /// mkfs makes below 512 MB). There the room is looked at first.
    public static func catalogOpeningProblem(directory: String) -> String? {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { return nil }
        // Root may use the blocks kept back for it; others only the available
        // ones. Neither may use ext4's reserve for metadata, counted as free:
        // 2% of the blocks, at most 4096 (a full 24 MB ext4 showed 503 KiB free).
        let freeBlocks = Int64(geteuid() == 0 ? info.f_bfree : info.f_bavail)
        let metadataReserve = min(Int64(info.f_blocks) / 50, 4096)
        let free = Int64(info.f_frsize) * max(0, freeBlocks - metadataReserve)
        guard lacksRoomForSharedMemory(blockSize: Int(info.f_frsize), freeBytes: free) else { return nil }
        return "the disk holding the cache is full (on a filesystem of \(info.f_frsize)-byte blocks SQLite "
            + "needs some room for the catalog's shared memory before it opens it): free some space"
    }

    /// Whether a filesystem of `blockSize` with `freeBytes` left may fail
    /// SQLite's shared memory: blocks smaller than a page, and less room than
    /// a few of its 32 KiB regions take.
    static func lacksRoomForSharedMemory(blockSize: Int, freeBytes: Int64) -> Bool {
        blockSize < 4096 && freeBytes < 256 * 1024
    }
}
