import Foundation
import Synchronization
import Testing
import TestSupport
@testable import ContentStore

@Suite struct CatalogReserveTests {
    private func heldBytes(_ path: String) -> Int? {
        var info = stat()
        return lstat(path, &info) == 0 ? Int(info.st_blocks) * 512 : nil
    }

    /// The whole room where four times it is free; a quarter of the room
    /// free where less is; none where that is under `leastBytes`.
    @Test(.enabled(if: SmallFilesystem.canMount))
    func theRoomTakenIsAQuarterOfTheRoomFreeAtMost() async throws {
        try await SmallFilesystem.with(kilobytes: 8192) { mountPoint, _ in
            let reserve = CatalogReserve(root: mountPoint)
            reserve.hold()
            #expect(heldBytes(reserve.path) == CatalogReserve.defaultBytes)
            reserve.hold()
            #expect(heldBytes(reserve.path) == CatalogReserve.defaultBytes)
            #expect(reserve.release())
            #expect(!reserve.release())
        }
        try await SmallFilesystem.with(kilobytes: 2048) { mountPoint, _ in
            let reserve = CatalogReserve(root: mountPoint)
            reserve.hold()
            let held = try #require(heldBytes(reserve.path))
            #expect(held >= 400 << 10 && held <= 512 << 10, "\(held)")
            // Held already: a second run on the fuller disk keeps it as it is.
            reserve.hold()
            #expect(heldBytes(reserve.path) == held)
        }
        try await SmallFilesystem.with(kilobytes: 200) { mountPoint, _ in
            let reserve = CatalogReserve(root: mountPoint)
            reserve.hold()
            #expect(heldBytes(reserve.path) == nil)
        }
    }

    /// A link put where the reserve goes (a cache a group shares) is not
    /// followed into someone else's file.
    @Test func aLinkInItsPlaceIsNotFollowed() async throws {
        try await TemporaryDirectory.with { directory in
            let theirs = directory.appending("theirs.txt")
            try Data("a small file".utf8).write(to: URL(fileURLWithPath: theirs))
            let reserve = CatalogReserve(root: directory.path)
            #expect(symlink(theirs, reserve.path) == 0)
            reserve.hold()
            #expect(FileManager.default.contents(atPath: theirs) == Data("a small file".utf8))
        }
    }

    /// What a full disk refused is tried once more after the room is given
    /// up, and only while there is room to give.
    @Test func aFullDiskIsTriedOnceMoreWithTheRoom() async throws {
        try await TemporaryDirectory.with { directory in
            let reserve = CatalogReserve(root: directory.path, bytes: 4096)
            reserve.hold()
            let tries = Mutex(0)
            let full = StoreError("cannot write: No space left on device", code: ENOSPC)
            let value = try reserve.retryingOnFullDisk {
                let count = tries.withLock { $0 += 1; return $0 }
                if count == 1 { throw full }
                return count
            }
            #expect(value == 2)
            #expect(access(reserve.path, F_OK) != 0)
            // The room is spent: the next full disk is the caller's to report.
            #expect(throws: StoreError.self) { try reserve.retryingOnFullDisk { () throws -> Int in throw full } }
            // Other errors are not retried.
            reserve.hold()
            tries.withLock { $0 = 0 }
            #expect(throws: StoreError.self) {
                try reserve.retryingOnFullDisk { () throws -> Int in
                    tries.withLock { $0 += 1 }
                    throw StoreError("cannot open: Permission denied", code: EACCES)
                }
            }
            #expect(tries.withLock { $0 } == 1)
            #expect(access(reserve.path, F_OK) == 0)
        }
    }
}
