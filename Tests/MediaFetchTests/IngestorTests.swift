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

    /// A blob in the cache's temporary directory and its record.
    private func staged(_ index: Int, in cache: MediaCache) throws -> (StagedBlob, IngestRecord) {
        let content = fixtureBytes(count: 1000 + index, seed: UInt64(index))
        let path = cache.store.temporaryDirectory + "/item-\(index).done"
        try content.write(to: URL(fileURLWithPath: path))
        let hash = SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined()
        let blob = StagedBlob(path: path, sha256: hash, size: Int64(content.count))
        return (blob, IngestRecord(url: "http://h/\(index)", collection: "c", kind: .file, sha256: hash, size: blob.size))
    }

    @Test func submittersAreToldToWaitWhileTheQueueIsFullAndToGoOnWhenItDrains() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            // Another writer holds the catalog, as a second process might: the
            // ingest thread's commit waits for it, and the queue fills up.
            var holding = Configuration()
            holding.allowsUnsafeTransactions = true // the transaction spans two accesses
            let other = try DatabaseQueue(path: cache.root + "/catalog.sqlite", configuration: holding)
            try await other.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }
            let ingestor = Ingestor(cache: cache, maxPending: 4)
            let outcomes = Outcomes()
            let room = Mutex<Set<Int>>([])
            func submit(_ index: Int) throws {
                let (blob, record) = try staged(index, in: cache)
                ingestor.submit(blob, record, whenRoom: { room.withLock { _ = $0.insert(index) } }) { result in
                    outcomes.results.withLock { $0["\(index)"] = (try? result.get()) != nil }
                }
            }

            try submit(0)
            // The ingest thread moves it into the store, and once no other item
            // comes to share the next flush, waits on the lock to record it.
            let first = SHA256.hash(data: fixtureBytes(count: 1000, seed: 0)).map { String(format: "%02x", $0) }.joined()
            while !cache.store.contains(first) { try await Task.sleep(for: .milliseconds(5)) }
            try await Task.sleep(for: .milliseconds(200))
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
            #expect(outcome.withLock { $0 } == "cannot store http://h/1: the run is over")
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

    @Test func aLoneItemIsStoredAndRecordedWithoutWaitingForMore() async throws {
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
}
