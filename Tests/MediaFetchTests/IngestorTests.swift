import ContentStore
import Crypto
import Foundation
import GRDB
import Synchronization
import Testing
import TestSupport
@testable import MediaFetch

@Suite struct IngestorTests {
    private final class Outcomes: Sendable {
        let results = Mutex<[String: Bool]>([:])
    }

    /// The cache's store, logging what the ingest thread asks of it ("flush",
    /// after a "flushed:<path>" for each body and other file it covers, and
    /// "move:<staged path>"), with switches to see and break what comes after a move.
    private final class WatchedStore: BlobStore {
        let inner: ObjectStore
        let log = Mutex<[String]>([])
        /// Once a body has been moved, every flush fails.
        let failFlushesAfterMove: Bool
        /// Runs after each move (say, to put a new partial where the body was).
        let afterMove: @Sendable (StagedBlob) -> Void

        init(_ inner: ObjectStore, failFlushesAfterMove: Bool = false,
             afterMove: @escaping @Sendable (StagedBlob) -> Void = { _ in }) {
            self.inner = inner
            self.failFlushesAfterMove = failFlushesAfterMove
            self.afterMove = afterMove
        }

        var events: [String] { log.withLock { $0 } }

        func contains(_ sha256: String, size: Int64?) -> Bool { inner.contains(sha256, size: size) }

        func flush(staged: [StagedBlob], files: [String]) throws(StoreError) {
            if failFlushesAfterMove, events.contains(where: { $0.hasPrefix("move:") }) {
                throw StoreError("injected flush failure")
            }
            try inner.flush(staged: staged, files: files)
            log.withLock { $0 += (staged.map(\.path) + files).map { "flushed:\($0)" } + ["flush"] }
        }

        func moveIntoPlace(_ blob: StagedBlob) throws(StoreError) -> Bool {
            let new = try inner.moveIntoPlace(blob)
            log.withLock { $0.append("move:\(blob.path)") }
            afterMove(blob)
            return new
        }

        func remove(_ sha256: String) throws(StoreError) { try inner.remove(sha256) }
    }

    /// A blob in the cache's temporary directory and its record.
    private func staged(_ index: Int, in cache: MediaCache) throws -> (StagedBlob, IngestRecord) {
        let content = fixtureBytes(count: 1000 + index, seed: UInt64(index))
        let path = cache.store.temporaryDirectory + "/item-\(index).done"
        try content.write(to: URL(fileURLWithPath: path))
        let hash = SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined()
        let blob = StagedBlob(path: path, sha256: hash, size: Int64(content.count))
        return (blob, IngestRecord(url: "http://h/\(index)", collection: "c", kind: .file, sha256: hash, size: blob.size))
    }

    @Test(.timeLimit(.minutes(1)))
    func submittersAreToldToWaitWhileTheQueueIsFullAndToGoOnWhenItDrains() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            _ = try cache.catalog // opened in the background: created before the other process comes
            // Another writer holds the catalog, as a second process might: the
            // ingest thread's commit waits for it, and the queue fills up.
            var holding = Configuration()
            holding.allowsUnsafeTransactions = true // the transaction spans two accesses
            let other = try DatabaseQueue(path: cache.root + "/catalog.sqlite", configuration: holding)
            try await other.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }
            let store = WatchedStore(cache.store)
            let ingestor = Ingestor(cache: cache, store: store, maxPending: 4)
            let outcomes = Outcomes()
            let room = Mutex<Set<Int>>([])
            func submit(_ index: Int) throws {
                let (blob, record) = try staged(index, in: cache)
                ingestor.submit(blob, record, whenRoom: { room.withLock { _ = $0.insert(index) } }) { result in
                    outcomes.results.withLock { $0["\(index)"] = (try? result.get()) != nil }
                }
            }

            try submit(0)
            // The ingest thread moves it into the store and, once no other item
            // comes to share the next flush, flushes its name and goes on to
            // record it: there it waits on the lock.
            func nameFlushed() -> Bool {
                let events = store.events
                guard let move = events.firstIndex(where: { $0.hasPrefix("move:") }) else { return false }
                return events[(move + 1)...].contains("flush")
            }
            while !nameFlushed() {
                try await Task.sleep(for: .milliseconds(5))
            }
            for index in 1...4 { try submit(index) }
            #expect(room.withLock { $0 } == [0, 1, 2, 3, 4], "room was withheld below the limit")
            // The fifth is queued, but its submitter is told to wait.
            try submit(5)
            try await Task.sleep(for: .milliseconds(200))
            #expect(!room.withLock { $0.contains(5) }, "the fifth submitter was let on past the limit")
            #expect(ingestor.pendingCount == 5)

            // The other writer lets go: the ingest thread takes the next group,
            // the waiting submitter is let on, and everything is stored.
            try await other.writeWithoutTransaction { try $0.execute(sql: "COMMIT") }
            while !room.withLock({ $0.contains(5) }) { try await Task.sleep(for: .milliseconds(5)) }
            ingestor.finish()
            #expect(outcomes.results.withLock { $0 } == Dictionary(uniqueKeysWithValues: (0...5).map { ("\($0)", true) }))
            #expect(try cache.catalog.entries().count == 6)
        }
    }

    /// Bodies stored on a disk that then filled: a new catalog's log has no
    /// room for their rows, and nor has `unrecorded/`. The room held back for
    /// the catalog is given up and the rows are written; without it, the
    /// objects stayed on the full disk with nothing pointing at them.
    @Test(.enabled(if: SmallFilesystem.canMount), .timeLimit(.minutes(1)))
    func theRoomHeldBackLetsTheRowsOfStoredBodiesBeWrittenOnAFullDisk() async throws {
        try await SmallFilesystem.with(kilobytes: 8192) { mountPoint, _ in
            let cache = try MediaCache(root: mountPoint + "/cache")
            _ = try cache.catalog
            cache.reserve.hold()
            var info = stat()
            #expect(stat(cache.reserve.path, &info) == 0 && Int(info.st_blocks) * 512 >= CatalogReserve.defaultBytes)
            let items = try (0..<20).map { try staged($0, in: cache) }
            // The disk fills up (another program, or the downloads still running).
            let filler = open(mountPoint + "/filler", O_WRONLY | O_CREAT, 0o644)
            try #require(filler >= 0)
            let block = [UInt8](repeating: 1, count: 4096)
            while block.withUnsafeBytes({ write(filler, $0.baseAddress, $0.count) }) > 0 {}
            close(filler)

            let ingestor = Ingestor(cache: cache)
            let outcomes = Outcomes()
            for (index, (blob, record)) in items.enumerated() {
                ingestor.submit(blob, record, whenRoom: {}) { result in
                    outcomes.results.withLock { $0["\(index)"] = (try? result.get()) != nil }
                }
            }
            #expect(ingestor.finish() == nil)

            #expect(outcomes.results.withLock { $0 } == Dictionary(uniqueKeysWithValues: (0..<20).map { ("\($0)", true) }))
            #expect(try cache.catalog.entries().count == 20)
            #expect(try objectPaths(inCache: cache.root).count == 20)
            #expect(access(cache.reserve.path, F_OK) != 0)
        }
    }

    @Test func anItemSubmittedAfterTheRunEndedFailsInsteadOfVanishing() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            let ingestor = Ingestor(cache: cache)
            #expect(ingestor.finish() == nil)
            let (blob, record) = try staged(1, in: cache)
            let outcome = Mutex<String?>(nil)
            let toldToGoOn = Mutex(false)
            ingestor.submit(blob, record, whenRoom: { toldToGoOn.withLock { $0 = true } }) { result in
                if case .failure(let error) = result { outcome.withLock { $0 = error.message } }
            }
            #expect(outcome.withLock { $0 } == "cannot store it: the run is over")
            // Removed as a failed store removes it (nothing to resume it by): it was left in tmp/ for the sweep.
            #expect(access(blob.path, F_OK) != 0)
            #expect(toldToGoOn.withLock { $0 })
            #expect(try cache.catalog.entries().isEmpty)
        }
    }

    @Test func oneBadItemDoesNotSinkItsGroup() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            let content = fixtureBytes(count: 2000, seed: 1)
            let goodPath = cache.store.temporaryDirectory + "/good.done"
            try content.write(to: URL(fileURLWithPath: goodPath))
            let hash = SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined()
            let good = StagedBlob(path: goodPath, sha256: hash, size: 2000)
            // Vanished before it could be stored (say, removed by hand).
            let bad = StagedBlob(path: cache.store.temporaryDirectory + "/gone.done",
                                 sha256: String(repeating: "c", count: 64), size: 1)
            let outcomes = Outcomes()
            let ingestor = Ingestor(cache: cache)

            for (name, blob) in [("bad", bad), ("good", good)] {
                let record = IngestRecord(url: "http://h/\(name)", collection: "c", kind: .file,
                                          sha256: blob.sha256, size: blob.size)
                ingestor.submit(blob, record, whenRoom: {}) { result in
                    outcomes.results.withLock { $0[name] = (try? result.get()) != nil }
                }
            }
            ingestor.finish()

            #expect(outcomes.results.withLock { $0 } == ["good": true, "bad": false])
            #expect(cache.store.contains(hash))
            #expect(try cache.catalog.entries().map(\.url) == ["http://h/good"])
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aLoneItemIsStoredAndRecordedWithoutWaitingForMore() async throws {
        try await TemporaryDirectory.with { directory in
            // Given an ingestor that gets one item and then nothing for a while
            let cache = try MediaCache(root: directory.appending("cache"))
            let ingestor = Ingestor(cache: cache)
            let (blob, record) = try staged(7, in: cache)
            let seen = Mutex<(stored: Bool, recorded: Bool)?>(nil)
            ingestor.submit(blob, record, whenRoom: {}) { result in
                // When it completes, the object is in place and its row is in the catalog
                let recorded = (try? cache.catalog.entries().map(\.url)) == [record.url]
                seen.withLock { $0 = ((try? result.get()) != nil && cache.store.contains(blob.sha256), recorded) }
            }

            // Then it completes on its own, before the run ends (its name is flushed
            // alone once no other group comes to share the flush)
            while seen.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(5)) }
            #expect(seen.withLock { $0?.stored } == true)
            #expect(seen.withLock { $0?.recorded } == true)
            #expect(ingestor.finish() == nil)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func everyNameIsFlushedAfterItsBytesAndBeforeItsRow() async throws {
        try await TemporaryDirectory.with { directory in
            // Given items arriving in bursts (several groups), some with the same bytes
            let cache = try MediaCache(root: directory.appending("cache"))
            let store = WatchedStore(cache.store)
            let ingestor = Ingestor(cache: cache, store: store)
            // Per item: the log's length when it was submitted and when it completed.
            let marks = Mutex<[Int: (submitted: Int, completed: Int?, path: String)]>([:])
            for burst in 0..<4 {
                for index in (burst * 15)..<(burst * 15 + 15) {
                    // Items 0–4 and 30–34 share bytes with items 5–9: duplicates in one group and across groups.
                    let seed = index < 5 || (30..<35).contains(index) ? index % 5 + 5 : index
                    let content = fixtureBytes(count: 3000, seed: UInt64(seed))
                    let path = cache.store.temporaryDirectory + "/o-\(index).done"
                    try content.write(to: URL(fileURLWithPath: path))
                    let hash = SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined()
                    let blob = StagedBlob(path: path, sha256: hash, size: 3000)
                    let record = IngestRecord(url: "http://h/o\(index)", collection: "c", kind: .file, sha256: hash, size: 3000)
                    marks.withLock { $0[index] = (store.events.count, nil, path) }
                    ingestor.submit(blob, record, whenRoom: {}) { result in
                        #expect((try? result.get()) != nil)
                        let now = store.events.count
                        marks.withLock { $0[index]?.completed = now }
                    }
                }
                try await Task.sleep(for: .milliseconds(30))
            }
            #expect(ingestor.finish() == nil)

            // Then for each: a flush after it was handed over and before its move
            // (its bytes), and a flush after its move and before its row (its name)
            let events = store.events
            for (index, mark) in marks.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
                let completed = try #require(mark.completed, "item \(index) never completed")
                let move = try #require(events.firstIndex(of: "move:\(mark.path)"),
                                        "item \(index) was never moved")
                #expect(events[mark.submitted..<move].contains("flushed:\(mark.path)"),
                        "item \(index) was moved before a flush of its bytes")
                #expect(events[move..<completed].contains("flush"), "item \(index) was recorded before its name was flushed")
                // Its row is in the catalog's log, which the next flush covers too
                // (the last rows' is synced when the ingestor finishes).
                if events[completed...].contains("flush") {
                    #expect(events[completed...].contains("flushed:\(cache.catalogWriteAheadLog)"),
                            "item \(index)'s row was not in the next flush")
                }
            }
            #expect(try cache.catalog.entries().count == 60)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aFailedFlushFailsTheMovedItemsWithoutTouchingWhatNowHasTheirOldNames() async throws {
        try await TemporaryDirectory.with { directory in
            // Given a store whose flushes fail once a body has been moved, and a new
            // download that takes the moved body's old name at once
            let cache = try MediaCache(root: directory.appending("cache"))
            let store = WatchedStore(cache.store, failFlushesAfterMove: true) { blob in
                _ = FileManager.default.createFile(atPath: blob.path, contents: Data("a new partial".utf8))
            }
            let ingestor = Ingestor(cache: cache, store: store)
            let (blob, record) = try staged(3, in: cache)
            let outcome = Mutex<String?>(nil)

            // When the flush that should make its name durable fails
            ingestor.submit(blob, record, whenRoom: {}) { result in
                if case .failure(let error) = result { outcome.withLock { $0 = error.message } }
            }
            while outcome.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(5)) }
            ingestor.finish()

            // Then the item fails with the reason, no row points at it, and the
            // file now at its old name is left alone
            #expect(outcome.withLock { $0 } == "cannot store it: injected flush failure")
            #expect(try cache.catalog.entries().isEmpty)
            #expect(FileManager.default.contents(atPath: blob.path) == Data("a new partial".utf8))
        }
    }
}
