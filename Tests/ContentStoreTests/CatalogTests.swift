import Foundation
import Testing
import TestSupport
@testable import ContentStore

@Suite struct CatalogTests {
    private let hashA = String(repeating: "a", count: 64)
    private let hashB = String(repeating: "b", count: 64)

    private func record(_ url: String, _ collection: String, _ hash: String, size: Int64 = 100, fetched: Bool = true) -> IngestRecord {
        IngestRecord(url: url, collection: collection, kind: .photo, title: "t \(url)", sha256: hash, size: size,
                     contentType: "image/jpeg", etag: "\"e\"", metadata: #"{"photoId":"1"}"#, fetched: fetched)
    }

    @Test func recordedItemsAreListedWithTheirObject() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            try catalog.record([record("http://h/1", "alps", hashA), record("http://h/2", "tatry", hashB, size: 50)])

            let all = try catalog.entries()
            let alps = try catalog.entries(collection: "alps")
            let sounds = try catalog.entries(kind: .sound)

            #expect(all.count == 2)
            #expect(alps.map(\.url) == ["http://h/1"])
            #expect(alps.first?.sha256 == hashA)
            #expect(alps.first?.title == "t http://h/1")
            #expect(alps.first?.metadata == #"{"photoId":"1"}"#)
            #expect(sounds.isEmpty)
        }
    }

    @Test func statsCountBytesSavedByDeduplication() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            // Two URLs with the same bytes, and the same URL in a second collection.
            try catalog.record([
                record("http://h/1", "one", hashA, size: 100),
                record("http://mirror/1", "one", hashA, size: 100),
                record("http://h/1", "two", hashA, size: 100, fetched: false),
                record("http://h/2", "two", hashB, size: 40),
            ])
            try catalog.record([], failures: [FailureRecord(url: "http://h/404", message: "HTTP 404")])

            let stats = try catalog.stats()

            #expect(stats.objects == 2)
            #expect(stats.bytes == 140)
            #expect(stats.items == 4)
            #expect(stats.logicalBytes == 340)
            #expect(stats.bytesSavedByDeduplication == 200)
            #expect(stats.collections == 2)
            #expect(stats.sources == 4)
            #expect(stats.failedSources == 1)
        }
    }

    @Test func cachedSourcesFindOnlyURLsWithAnObject() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            try catalog.record([record("http://h/1", "c", hashA)],
                               failures: [FailureRecord(url: "http://h/bad", message: "HTTP 500")])
            let urls = ["http://h/1", "http://h/bad", "http://h/unknown"] + (0..<1200).map { "http://h/many/\($0)" }

            let cached = try catalog.cachedSources(for: urls)

            #expect(Array(cached.keys) == ["http://h/1"])
            #expect(cached["http://h/1"] == CachedSource(url: "http://h/1", sha256: hashA, size: 100))
        }
    }

    @Test func aSuccessClearsTheLastErrorOfASource() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            try catalog.record([], failures: [FailureRecord(url: "http://h/1", message: "HTTP 503")])
            try catalog.record([record("http://h/1", "c", hashA)])
            #expect(try catalog.stats().failedSources == 0)
        }
    }

    @Test func reopeningKeepsDataAndMigratesOnce() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            try Catalog(path: path).record([record("http://h/1", "c", hashA)])
            let reopened = try Catalog(path: path)
            #expect(try reopened.entries().count == 1)
        }
    }

    @Test func closingLeavesTheWALForTheNextOpenerAndLosesNothing() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            do {
                let catalog = try Catalog(path: path)
                try catalog.record([record("http://h/1", "c", hashA), record("http://h/2", "c", hashB)])
            }
            // Closed without a checkpoint: the committed rows are still in the WAL.
            #expect(FileManager.default.fileExists(atPath: path + "-wal"))
            let reopened = try Catalog(path: path)
            #expect(try reopened.entries().map(\.url) == ["http://h/1", "http://h/2"])
        }
    }

    @Test func twoCatalogsOnOneFileWriteConcurrently() async throws {
        try await TemporaryDirectory.with { directory in
            // Like two mediafetch processes sharing a cache.
            let path = directory.appending("catalog.sqlite")
            let first = try Catalog(path: path)
            let second = try Catalog(path: path)
            await withTaskGroup(of: Void.self) { group in
                for (index, catalog) in [first, second].enumerated() {
                    group.addTask {
                        for n in 0..<50 {
                            let hash = String(format: "%064x", index * 1000 + n)
                            try? catalog.record([IngestRecord(url: "http://h/\(index)/\(n)", collection: "shared",
                                                              kind: .file, sha256: hash, size: 1)])
                        }
                    }
                }
            }
            #expect(try first.stats().items == 100)
        }
    }
}

@Suite struct CatalogOpeningTests {
    @Test func manyOpenersOfANewCatalogMigrateItOnce() async throws {
        try await TemporaryDirectory.with { directory in
            // Like several mediafetch processes started at once on a new cache.
            let path = directory.appending("catalog.sqlite")
            let opened = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 {
                    group.addTask { (try? Catalog(path: path)) != nil }
                }
                return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            #expect(opened == 8)
        }
    }
}
