import ContentStore
import Crypto
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import MediaFetch

@Suite struct IngestorTests {
    private final class Outcomes: Sendable {
        let results = Mutex<[String: Bool]>([:])
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
                ingestor.submit(blob, record) { result in
                    outcomes.results.withLock { $0[name] = (try? result.get()) != nil }
                }
            }
            ingestor.finish()

            #expect(outcomes.results.withLock { $0 } == ["good": true, "bad": false])
            #expect(cache.store.contains(hash))
            #expect(try cache.catalog.entries().map(\.url) == ["http://h/good"])
        }
    }
}
