import CFileSync
import Crypto
import Foundation
import Testing
import TestSupport
@testable import ContentStore

@Suite struct ObjectStoreTests {
    private func stage(_ data: Data, in store: ObjectStore) throws -> StagedBlob {
        let path = store.temporaryDirectory + "/\(UUID().uuidString).done"
        try data.write(to: URL(fileURLWithPath: path))
        let hash = SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
        return StagedBlob(path: path, sha256: hash, size: Int64(data.count))
    }

    @Test func committedBlobLandsUnderItsHashReadOnly() async throws {
        try await TemporaryDirectory.with { directory in
            // Given a staged body
            let store = try ObjectStore(root: directory.path)
            let blob = try stage(fixtureBytes(count: 1000, seed: 1), in: store)

            // When it is committed
            let created = try store.commit([blob])

            // Then it is at objects/sha256/<2 hex>/<hex>, read-only, and the staged file is gone
            let path = try #require(store.path(for: blob.sha256))
            #expect(created == [blob.sha256])
            #expect(path == directory.path + "/objects/sha256/\(blob.sha256.prefix(2))/\(blob.sha256)")
            #expect(FileManager.default.contents(atPath: path) == fixtureBytes(count: 1000, seed: 1))
            let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(permissions == 0o444)
            #expect(!FileManager.default.fileExists(atPath: blob.path))
            #expect(store.contains(blob.sha256))
        }
    }

    @Test func sameBytesAreStoredOnce() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try ObjectStore(root: directory.path)
            let first = try stage(fixtureBytes(count: 500, seed: 7), in: store)
            let second = try stage(fixtureBytes(count: 500, seed: 7), in: store)

            let createdTogether = try store.commit([first, second])
            let third = try stage(fixtureBytes(count: 500, seed: 7), in: store)
            let createdLater = try store.commit([third])

            #expect(createdTogether == [first.sha256])
            #expect(createdLater.isEmpty)
            let objects = try FileManager.default.subpathsOfDirectory(atPath: store.objectsDirectory).filter { $0.count > 3 }
            #expect(objects.count == 1)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: store.temporaryDirectory)
            #expect(leftovers.isEmpty)
        }
    }

    /// An object file cut short from outside is not the object: `contains`
    /// with its size says so, and the same bytes stored again replace it
    /// (the rename that refuses to overwrite dropped the good copy).
    @Test func aDamagedObjectIsReplacedByTheSameBytesStoredAgain() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try ObjectStore(root: directory.path)
            let content = fixtureBytes(count: 5000, seed: 8)
            let blob = try stage(content, in: store)
            _ = try store.commit([blob])
            let path = try #require(store.path(for: blob.sha256))
            #expect(chmod(path, 0o644) == 0)
            #expect(truncate(path, 1200) == 0)

            #expect(store.contains(blob.sha256))
            #expect(!store.contains(blob.sha256, size: blob.size))
            let created = try store.commit([try stage(content, in: store)])

            #expect(created == [blob.sha256])
            #expect(FileManager.default.contents(atPath: path) == content)
            #expect(store.contains(blob.sha256, size: blob.size))
            let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(permissions == 0o444)
            #expect(try FileManager.default.contentsOfDirectory(atPath: store.temporaryDirectory).isEmpty)
        }
    }

    /// Whatever holds an object's name that is not these bytes is replaced
    /// by them: a link to nothing (objects moved to a disk now gone; the
    /// body was dropped, "downloaded" said, and fetched again every run),
    /// other bytes of the same length put there by hand. A directory there
    /// fails the blob.
    @Test func aNameHeldByALinkOrOtherBytesIsMendedByTheBytesStored() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try ObjectStore(root: directory.path)
            let content = fixtureBytes(count: 3000, seed: 11)
            let blob = try stage(content, in: store)
            let path = try #require(store.path(for: blob.sha256))
            let fanOut = (path as NSString).deletingLastPathComponent
            try FileManager.default.createDirectory(atPath: fanOut, withIntermediateDirectories: true)

            #expect(symlink("/nonexistent/elsewhere", path) == 0)
            #expect(try store.commit([blob]) == [blob.sha256])
            #expect(FileManager.default.contents(atPath: path) == content)
            var info = stat()
            #expect(lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG)

            #expect(unlink(path) == 0)
            try fixtureBytes(count: 3000, seed: 12).write(to: URL(fileURLWithPath: path))
            #expect(try store.commit([try stage(content, in: store)]).isEmpty)
            #expect(FileManager.default.contents(atPath: path) == content)

            // An empty directory goes; one that holds something fails the blob, named.
            #expect(unlink(path) == 0 && mkdir(path, 0o755) == 0)
            #expect(try store.commit([try stage(content, in: store)]) == [blob.sha256])
            #expect(FileManager.default.contents(atPath: path) == content)
            #expect(unlink(path) == 0 && mkdir(path, 0o755) == 0 && mkdir(path + "/x", 0o755) == 0)
            let refused = #expect(throws: StoreError.self) { try store.commit([try stage(content, in: store)]) }
            #expect(refused?.message == "cannot store \(path): a directory is at its name (remove it)")
            // A link to another file of its size is no object: looked up, it is missing.
            let other = directory.appending("other")
            try fixtureBytes(count: 3000, seed: 15).write(to: URL(fileURLWithPath: other))
            #expect(rmdir(path + "/x") == 0 && rmdir(path) == 0 && symlink(other, path) == 0)
            #expect(!store.contains(blob.sha256))
            #expect(try !store.lookUp(blob.sha256, size: 3000))
        }
    }

    /// A staged body whose name now holds a link (the temporary directory
    /// is writable by everyone sharing the cache) is neither stored nor
    /// followed: the link's target keeps its bytes and its mode.
    @Test func aStagedBodyReplacedByALinkIsNotStored() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try ObjectStore(root: directory.path)
            let content = fixtureBytes(count: 2000, seed: 13)
            let blob = try stage(content, in: store)
            let victim = directory.appending("victim")
            try content.write(to: URL(fileURLWithPath: victim))
            #expect(chmod(victim, 0o600) == 0)
            #expect(unlink(blob.path) == 0 && symlink(victim, blob.path) == 0)

            #expect(throws: StoreError.self) { try store.commit([blob]) }
            let permissions = try FileManager.default.attributesOfItem(atPath: victim)[.posixPermissions] as? Int
            #expect(permissions == 0o600)
            #expect(!store.contains(blob.sha256))
        }
    }

    /// A fan-out directory that is a link is not stored through: objects
    /// landed outside the cache, and `list` called them cached.
    @Test func aFanOutThatIsALinkIsNotStoredThrough() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try ObjectStore(root: directory.path)
            let blob = try stage(fixtureBytes(count: 700, seed: 14), in: store)
            let elsewhere = directory.appending("elsewhere")
            #expect(mkdir(elsewhere, 0o777) == 0)
            try FileManager.default.createDirectory(atPath: store.objectsDirectory, withIntermediateDirectories: true)
            #expect(symlink(elsewhere, "\(store.objectsDirectory)/\(blob.sha256.prefix(2))") == 0)

            #expect(throws: StoreError.self) { try store.commit([blob]) }
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
        }
    }

    /// A run about to store many objects makes the fan-outs ahead, beside
    /// any made meanwhile for an object; one that is a link is passed over
    /// (left a link, nothing made through it, an object for it refused) and
    /// the rest are made.
    ///
    /// They are made on a thread of their own, below the downloads' (on
    /// Linux, where a thread's nice value is its own), as far below the
    /// process as the writers: whether started from a thread at the
    /// process's level, or from one as low as the writers (whose level a new
    /// thread inherits).
    @Test(.timeLimit(.minutes(1)))
    func theFanOutsAreMadeAheadBesideThoseObjectsNeed() async throws {
        func isDirectory(_ path: String) -> Bool {
            var info = stat()
            return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
        }
        /// Makes `store`'s fan-outs ahead from a new thread lowered by
        /// `steps` (from the process's level) first; returns the nice value of
        /// that thread and of the thread that made them.
        func makeFanOutsAhead(in store: ObjectStore, startedBelowBy steps: Int32) async -> (starter: Int32, maker: Int32) {
            await withCheckedContinuation { done in
                Thread {
                    if steps > 0 { _ = mf_lower_thread_priority(steps) }
                    let starter = niceOfThisThread()
                    store.makeFanOutsAhead { done.resume(returning: (starter, niceOfThisThread())) }
                }.start()
            }
        }
        let lowered = min(19, niceOfTheProcess() + MF_BACKGROUND_NICE_STEPS)
        try await TemporaryDirectory.with { directory in
            let store = try ObjectStore(root: directory.path)
            let blob = try stage(fixtureBytes(count: 600, seed: 15), in: store)
            try store.flush(staged: [blob])
            #expect(try store.moveIntoPlace(blob))

            let fromTheProcessLevel = await makeFanOutsAhead(in: store, startedBelowBy: 0)
            #if os(Linux)
            // (Started at the process's level unless the test's thread had inherited a lowered one's.)
            if fromTheProcessLevel.starter == niceOfTheProcess() { #expect(fromTheProcessLevel.maker == lowered) }
            #endif

            let made = try FileManager.default.contentsOfDirectory(atPath: store.objectsDirectory).sorted()
            #expect(made == ObjectStore.fanOutNames)
            #expect(made.count == 256 && made.first == "00" && made.last == "ff")
            #expect(made.allSatisfy { isDirectory("\(store.objectsDirectory)/\($0)") })
            #expect(store.contains(blob.sha256, size: 600))
            try store.flush(staged: [])
        }
        try await TemporaryDirectory.with { directory in
            let store = try ObjectStore(root: directory.path)
            // A body whose hash begins with 00, and a link where its fan-out goes.
            let seed = try #require((UInt64(1000)...UInt64(5000)).first { seed in
                Array(SHA256.hash(data: fixtureBytes(count: 300, seed: seed))).first == 0
            })
            let blob = try stage(fixtureBytes(count: 300, seed: seed), in: store)
            let elsewhere = directory.appending("elsewhere")
            #expect(mkdir(elsewhere, 0o777) == 0)
            try FileManager.default.createDirectory(atPath: store.objectsDirectory, withIntermediateDirectories: true)
            #expect(symlink(elsewhere, "\(store.objectsDirectory)/00") == 0)

            let fromAsLowAsTheWriters = await makeFanOutsAhead(in: store, startedBelowBy: MF_BACKGROUND_NICE_STEPS)
            #if os(Linux)
            #expect(fromAsLowAsTheWriters == (lowered, lowered))
            #endif

            var info = stat()
            #expect(lstat("\(store.objectsDirectory)/00", &info) == 0 && info.st_mode & S_IFMT == S_IFLNK)
            #expect(ObjectStore.fanOutNames.dropFirst().allSatisfy { isDirectory("\(store.objectsDirectory)/\($0)") })
            try store.flush(staged: [blob])
            #expect(throws: StoreError.self) { try store.moveIntoPlace(blob) }
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
        }
    }

    @Test func namesThatAreNotHashesNeverBecomePaths() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try ObjectStore(root: directory.path)
            #expect(store.path(for: "../../etc/passwd") == nil)
            #expect(store.path(for: String(repeating: "A", count: 64)) == nil)
            #expect(store.path(for: String(repeating: "a", count: 63)) == nil)
            #expect(store.path(for: String(repeating: "a", count: 64)) != nil)
            #expect(throws: StoreError.self) {
                try store.commit([StagedBlob(path: directory.appending("x"), sha256: "../x", size: 1)])
            }
        }
    }

    @Test func removeDeletesTheObject() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try ObjectStore(root: directory.path)
            let blob = try stage(Data("hello".utf8), in: store)
            _ = try store.commit([blob])
            try store.remove(blob.sha256)
            #expect(!store.contains(blob.sha256))
            // Removing again is not an error.
            try store.remove(blob.sha256)
        }
    }

    @Test func theWholeFilesystemIsSyncedOnlyWhileLittleElseWaitsForWriteback() async throws {
        try await TemporaryDirectory.with { directory in
            // Little waiting: one syncfs for the bytes, one for the names.
            let quiet = try ObjectStore(root: directory.appending("quiet"), pendingWriteback: { 1 << 20 })
            let first = try stage(fixtureBytes(count: 3000, seed: 21), in: quiet)
            #expect(try quiet.commit([first]) == [first.sha256])
            #expect(quiet.flushes == (wholeFilesystem: 2, fileByFile: 0))

            // A gigabyte of someone else's writes waiting: the store's own files and
            // directories are synced instead, and the objects land all the same.
            let busy = try ObjectStore(root: directory.appending("busy"), pendingWriteback: { 1 << 30 })
            let blobs = try (0..<5).map { try stage(fixtureBytes(count: 3000 + $0, seed: UInt64(30 + $0)), in: busy) }
            #expect(try busy.commit(blobs) == Set(blobs.map(\.sha256)))
            #expect(busy.flushes == (wholeFilesystem: 0, fileByFile: 2))
            for blob in blobs {
                let path = try #require(busy.path(for: blob.sha256))
                #expect(FileManager.default.fileExists(atPath: path))
            }
        }
    }

    @Test func aFileByFileFlushPassesOverAStagedFileThatIsGone() async throws {
        try await TemporaryDirectory.with { directory in
            // As a syncfs would: moving the missing one fails that item alone.
            let store = try ObjectStore(root: directory.path, pendingWriteback: { 1 << 30 })
            let gone = StagedBlob(path: store.temporaryDirectory + "/gone.done", sha256: String(repeating: "a", count: 64), size: 1)
            let present = try stage(fixtureBytes(count: 100, seed: 40), in: store)
            try store.flush(staged: [gone, present])
            #expect(store.flushes == (wholeFilesystem: 0, fileByFile: 1))
            #expect(throws: StoreError.self) { try store.moveIntoPlace(gone) }
            #expect(try store.moveIntoPlace(present))
        }
    }

    @Test func aFanOutRemovedAfterAMoveDoesNotFailEveryLaterFlush() async throws {
        try await TemporaryDirectory.with { directory in
            let store = try ObjectStore(root: directory.path, pendingWriteback: { 1 << 30 })
            let blob = try stage(fixtureBytes(count: 100, seed: 41), in: store)
            try store.flush(staged: [blob])
            #expect(try store.moveIntoPlace(blob))
            // Someone removes the object and its fan-out before the names are flushed.
            let path = try #require(store.path(for: blob.sha256))
            try FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent)
            try store.flush(staged: [])
            let next = try stage(fixtureBytes(count: 100, seed: 42), in: store)
            #expect(try store.commit([next]) == [next.sha256])
            #expect(store.flushes == (wholeFilesystem: 0, fileByFile: 4))
        }
    }

    @Test func pendingWritebackIsDirtyPlusWritebackFromMeminfo() {
        let meminfo = """
            MemTotal:       24684544 kB
            Dirty:             20480 kB
            Writeback:          1024 kB
            WritebackTmp:          0 kB

            """
        let parsed: Int64? = SystemMemory.pendingWriteback(meminfo: Array(meminfo.utf8)[...])
        let expected: Int64 = 21_504 * 1024
        #expect(parsed == expected)
        #expect(SystemMemory.pendingWriteback(meminfo: Array("MemTotal: 1 kB\n".utf8)[...]) == nil)
        // This machine's own answer (Linux has /proc/meminfo).
        #expect(SystemMemory.pendingWriteback() != nil)
    }
}
