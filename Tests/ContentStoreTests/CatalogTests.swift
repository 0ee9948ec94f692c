import Foundation
import GRDB
import Synchronization
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

    /// The lock that serialises openings is waited for as the catalog's own
    /// is: with a notice once the wait is long, and up to the limit (a
    /// process stuck while holding it kept every later opening waiting in
    /// silence); released within the wait, the opening goes on.
    @Test(.timeLimit(.minutes(1))) // the blocking wait it replaced would hang here
    func theOpeningLockIsWaitedForWithANoticeAndALimit() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            _ = try Catalog(path: path)
            let holder = open(path + ".lock", O_RDWR | O_CLOEXEC)
            #expect(holder >= 0)
            #expect(flock(holder, LOCK_EX) == 0)
            let notices = Atomic(0)

            let error = #expect(throws: DatabaseError.self) {
                try Catalog(path: path, lockWaitLimit: .milliseconds(600), noticeAfter: .milliseconds(100),
                            onLockWait: { notices.add(1, ordering: .relaxed) })
            }
            #expect(error?.resultCode == .SQLITE_BUSY)
            #expect(Catalog.isLockTimeout(try #require(error)))
            #expect(notices.load(ordering: .relaxed) == 1)

            // Released while the next opening waits: it opens.
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(300)) { close(holder) }
            _ = try Catalog(path: path, lockWaitLimit: .seconds(30))
        }
    }

    /// What a process killed while it made a new catalog leaves: the first
    /// page, switched to WAL, and SQLite's journal of that switch (the file
    /// was empty before it). Every opening was refused after it, `get`'s
    /// too, with "attempt to write a readonly database": the first look is
    /// read-only, and SQLite rolls a journal back only through a connection
    /// that may write. Rolled back, the catalog is empty, as one whose
    /// making was cut off is.
    @Test func aJournalLeftByAKillWhileTheCatalogWasMadeIsRolledBack() async throws {
        try await TemporaryDirectory.with { directory in
            func leftByAKill(_ name: String, pagesBefore: UInt8 = 0) throws -> String {
                let path = directory.appending(name)
                let made = try DatabaseQueue(path: path)
                try made.writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA page_size = 4096")
                    _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
                }
                try made.close()
                // A journal's header: its magic number, no record counted yet, a checksum's
                // seed, the size the file had (0 pages), the sector and page sizes.
                var journal = Data([0xD9, 0xD5, 0x05, 0xF9, 0x20, 0xA1, 0x63, 0xD7, 0, 0, 0, 0, 0xE3, 0x89, 0xBA, 0xED,
                                    0, 0, 0, pagesBefore, 0, 0, 0x02, 0x00, 0, 0, 0x10, 0x00])
                journal.append(Data(count: 512 - journal.count))
                try journal.write(to: URL(fileURLWithPath: path + "-journal"))
                // As the kill left it: the log and its index were not made yet.
                for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
                return path
            }

            let read = try leftByAKill("read.sqlite")
            #expect(throws: CatalogRefusal.self) {
                _ = try Catalog(path: read, readingOnly: true, refusingNewSchema: { "it holds no catalog yet" })
            }
            #expect(!FileManager.default.fileExists(atPath: read + "-journal"))
            #expect(try FileManager.default.attributesOfItem(atPath: read)[.size] as? Int == 0)

            // A journal of a file that had pages (a catalog restored beside a stale one) is not played
            // over it, which would empty it: refused as before.
            let restored = try leftByAKill("restored.sqlite", pagesBefore: 3)
            #expect(throws: (any Error).self) { _ = try Catalog(path: restored) }
            #expect(FileManager.default.fileExists(atPath: restored + "-journal"))
            #expect(try FileManager.default.attributesOfItem(atPath: restored)[.size] as? Int == 4096)

            let written = try leftByAKill("written.sqlite")
            let catalog = try Catalog(path: written)
            try catalog.record([record("https://h/a.jpg", "pins", hashA)])
            #expect(try catalog.entries(collection: "pins").map(\.url) == ["https://h/a.jpg"])
        }
    }

    /// Rows an earlier run kept (see `UnrecordedRows`), recorded late: a URL
    /// fetched since keeps its newer source; the item joins its collection
    /// all the same; recency does not move back.
    @Test func keptRowsDoNotOverwriteWhatWasRecordedSince() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            try catalog.record([record("http://h/1", "alps", hashA)], at: Date(timeIntervalSince1970: 2000))

            try catalog.record([record("http://h/1", "pins", hashB), record("http://h/2", "pins", hashB)],
                               at: Date(timeIntervalSince1970: 1000), kept: true)

            let sources = try catalog.cachedSources(for: ["http://h/1", "http://h/2"])
            #expect(sources["http://h/1"]?.sha256 == hashA)
            #expect(sources["http://h/2"]?.sha256 == hashB)
            #expect(Set(try catalog.entries(collection: "pins").map(\.url)) == ["http://h/1", "http://h/2"])
            let lastAccess = try DatabaseQueue(path: directory.appending("catalog.sqlite")).read { db in
                try Double.fetchOne(db, sql: "SELECT lastAccessAt FROM object WHERE hash = ?", arguments: [hashA])
            }
            #expect(lastAccess == 2000)

            // A kept row newer than what is there replaces it.
            try catalog.record([record("http://h/2", "pins", hashA)], at: Date(timeIntervalSince1970: 3000), kept: true)
            #expect(try catalog.cachedSources(for: ["http://h/2"])["http://h/2"]?.sha256 == hashA)
        }
    }

    /// An item's kind, title and metadata may have been recorded since a
    /// kept row was written: the late row only fills in what is missing.
    @Test func keptRowsOnlyFillInWhatAnItemLacks() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            var newer = record("http://h/1", "pins", hashA)
            newer.kind = .sound
            newer.title = "newer"
            var bare = record("http://h/2", "pins", hashA)
            bare.title = nil
            bare.metadata = nil
            try catalog.record([newer, bare], at: Date(timeIntervalSince1970: 2000))

            var late1 = record("http://h/1", "pins", hashA)
            late1.title = "older"
            late1.metadata = #"{"photoId":"old"}"#
            var late2 = record("http://h/2", "pins", hashA)
            late2.title = "kept title"
            try catalog.record([late1, late2], at: Date(timeIntervalSince1970: 1000), kept: true)

            let entries = Dictionary(uniqueKeysWithValues: try catalog.entries(collection: "pins").map { ($0.url, $0) })
            #expect(entries["http://h/1"]?.kind == .sound)
            #expect(entries["http://h/1"]?.title == "newer")
            #expect(entries["http://h/1"]?.metadata == #"{"photoId":"1"}"#)
            #expect(entries["http://h/2"]?.title == "kept title")
            #expect(entries["http://h/2"]?.metadata == #"{"photoId":"1"}"#)

            // A row of this run still replaces them.
            try catalog.record([late1], at: Date(timeIntervalSince1970: 3000))
            let now = try catalog.entries(collection: "pins").first { $0.url == "http://h/1" }
            #expect(now?.title == "older")
            #expect(now?.kind == .photo)
        }
    }

    @Test func urlsAreRecordedAndLookedUpWithoutTheirPasswords() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            try catalog.record([record("http://ann:hunter2@h/1", "alps", hashA)],
                               failures: [FailureRecord(url: "http://ann:hunter2@h/2", message: "HTTP 404")])

            #expect(try catalog.entries().map(\.url) == ["http://ann@h/1"])
            #expect(try catalog.itemURLs(inCollection: "alps", among: ["http://ann@h/1"]) == ["http://ann@h/1"])
            #expect(try catalog.cachedSources(for: ["http://ann:other@h/1"]).keys.sorted() == ["http://ann@h/1"])
            let urls = try DatabaseQueue(path: directory.appending("catalog.sqlite")).read { db in
                try String.fetchAll(db, sql: "SELECT url FROM source UNION ALL SELECT url FROM item")
            }
            #expect(urls.sorted() == ["http://ann@h/1", "http://ann@h/1", "http://ann@h/2"])
        }
    }

    /// More URLs than one query of 500 asks about: every part is asked
    /// about, and URLs are matched without their passwords.
    @Test func membershipIsCheckedForJustTheURLsAskedAbout() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            let alps = (0..<1200).map { "http://h/alps/\($0)" }
            try catalog.record(alps.map { record($0, "alps", hashA) } + [record("http://h/tatry/1", "tatry", hashB)])
            let asked = alps.filter { !$0.hasSuffix("7") } + ["http://h/tatry/1", "http://h/unknown"]
            try catalog.record([record("http://ann:hunter2@h/tatry/2", "tatry", hashB)])
            #expect(try catalog.itemURLs(inCollection: "tatry", among: ["http://ann:other@h/tatry/2"]) == ["http://ann@h/tatry/2"])

            let found = try catalog.itemURLs(inCollection: "alps", among: asked)

            #expect(found == Set(alps.filter { !$0.hasSuffix("7") }))
            #expect(try catalog.itemURLs(inCollection: "tatry", among: asked) == ["http://h/tatry/1"])
            #expect(try catalog.itemURLs(inCollection: "nowhere", among: asked).isEmpty)
            #expect(try catalog.itemURLs(inCollection: "alps", among: []).isEmpty)
        }
    }

    @Test func anOlderCatalogLosesItsPasswordsWhenOpened() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            // A catalog as the first schema wrote it, with URLs as given, its
            // last pages still in the write-ahead log (the old version did
            // not checkpoint on close; here its connection stays open).
            let old = try olderCatalog(at: path, upTo: "v1: objects, sources, collections, items")
            try old.write { db in
                try insertObjectsAndCollections(db, ["c"])
                try db.execute(sql: """
                    INSERT INTO source (url, hash, fetchedAt, lastError) VALUES
                      ('http://ann:hunter2@h/only', ?, 5, NULL),
                      ('http://ann:hunter2@h/both', ?, 9, NULL),
                      ('http://ann@h/both', ?, 1, NULL),
                      ('http://ann:hunter2@h/failed', NULL, NULL, 'HTTP 401 for http://ann:hunter2@h/failed'),
                      ('http://ann:o@h/gone', NULL, NULL, 'HTTP 404 Not Found'),
                      ('http://ann@h/failed', ?, 3, NULL)
                    """, arguments: [hashA, hashB, hashA, hashA])
                try db.execute(sql: """
                    INSERT INTO item (collectionId, url, kind, addedAt) VALUES
                      (1, 'http://ann:hunter2@h/only', 'photo', 0),
                      (1, 'http://ann:hunter2@h/both', 'photo', 0), (1, 'http://ann@h/both', 'photo', 0)
                    """)
            }
            #expect((FileManager.default.contents(atPath: path + "-wal") ?? Data()).range(of: Data("hunter2".utf8)) != nil)

            let catalog = try Catalog(path: path)

            // No trace of the password is left in the files, even in free
            // pages or in the log's old frames (the migration checkpoints).
            for file in [path, path + "-wal"] {
                let bytes = FileManager.default.contents(atPath: file) ?? Data()
                #expect(bytes.range(of: Data("hunter2".utf8)) == nil, "\(file) holds the password")
            }
            try old.close()

            // The newer fetch with an object wins; an object beats a failure.
            let sources = try catalog.cachedSources(for: ["http://ann@h/only", "http://ann@h/both", "http://ann@h/failed"])
            #expect(sources.mapValues(\.sha256) == ["http://ann@h/only": hashA, "http://ann@h/both": hashB, "http://ann@h/failed": hashA])
            #expect(try catalog.entries().map(\.url).sorted() == ["http://ann@h/both", "http://ann@h/only"])
            #expect(try catalog.stats().sources == 4)
            let errors = try DatabaseQueue(path: path).read { db in
                try String.fetchAll(db, sql: "SELECT lastError FROM source WHERE lastError IS NOT NULL")
            }
            // A short password is taken out of URLs only, not out of every word.
            #expect(errors == ["HTTP 404 Not Found"])
        }
    }

    /// The objects `hashA` and `hashB`, and the collections `names` (ids from
    /// 1), as an older version wrote them.
    private func insertObjectsAndCollections(_ db: Database, _ names: [String]) throws {
        for hash in [hashA, hashB] {
            try db.execute(sql: "INSERT INTO object VALUES (?, 10, NULL, 0, 0)", arguments: [hash])
        }
        for (index, name) in names.enumerated() {
            try db.execute(sql: "INSERT INTO collection (id, name, createdAt) VALUES (?, ?, 0)", arguments: [index + 1, name])
        }
    }

    /// A catalog written before URLs were spelt one way gets that spelling
    /// when opened: a URL known two ways keeps the source fetched last with
    /// an object, and one item a collection.
    @Test func anOlderCatalogsURLsAreRespeltWhenOpened() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let old = try olderCatalog(at: path, upTo: "v3: items keyed by URL, without a rowid")
            try old.write { db in
                try insertObjectsAndCollections(db, ["c", "d"])
                try db.execute(sql: """
                    INSERT INTO source (url, hash, fetchedAt, lastError) VALUES
                      ('http://h/a/./one.jpg', ?, 5, NULL),
                      ('http://h:80/two.jpg', ?, 9, NULL), ('http://h/two.jpg', ?, 1, NULL),
                      ('http://h/%74hree.jpg', NULL, NULL, 'HTTP 404 Not Found'), ('http://h/three.jpg', ?, 3, NULL),
                      ('http://h/日本.jpg', ?, 2, NULL)
                    """, arguments: [hashA, hashB, hashA, hashA, hashB])
                try db.execute(sql: """
                    INSERT INTO item (collectionId, url, kind, addedAt) VALUES
                      (1, 'http://h/a/./one.jpg', 'photo', 0),
                      (1, 'http://h:80/two.jpg', 'photo', 0), (1, 'http://h/two.jpg', 'photo', 0), (2, 'http://h:80/two.jpg', 'photo', 0),
                      (1, 'http://h/three.jpg', 'photo', 0), (2, 'http://h/日本.jpg', 'photo', 0)
                    """)
            }
            try old.close()

            let catalog = try Catalog(path: path)

            let sources = try catalog.cachedSources(for: ["http://h/a/one.jpg", "http://h/two.jpg", "http://h/three.jpg",
                                                          "http://h/%E6%97%A5%E6%9C%AC.jpg"])
            #expect(sources.mapValues(\.sha256) == ["http://h/a/one.jpg": hashA, "http://h/two.jpg": hashB,
                                                    "http://h/three.jpg": hashA, "http://h/%E6%97%A5%E6%9C%AC.jpg": hashB])
            #expect(try catalog.stats().sources == 4)
            #expect(try catalog.entries().map { "\($0.collection) \($0.url)" } == [
                "c http://h/a/one.jpg", "c http://h/three.jpg", "c http://h/two.jpg",
                "d http://h/%E6%97%A5%E6%9C%AC.jpg", "d http://h/two.jpg",
            ])
        }
    }

    /// A catalog written before hosts that are addresses or IDNs were spelt
    /// one way gets that spelling when opened: `127.1` is `127.0.0.1`,
    /// `bücher` is `xn--bcher-kva`, and a URL known both ways keeps the
    /// source fetched last.
    @Test func anOlderCatalogsHostsAreRespeltWhenOpened() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let old = try olderCatalog(at: path, upTo: "v5: objects keyed by hash, without a rowid")
            try old.write { db in
                try insertObjectsAndCollections(db, ["c"])
                try db.execute(sql: """
                    INSERT INTO source (url, hash, fetchedAt) VALUES
                      ('http://127.1:8080/a.jpg', ?, 5), ('http://127.0.0.1:8080/a.jpg', ?, 1), ('http://[0:0::1]/b.jpg', ?, 2)
                    """, arguments: [hashA, hashB, hashB])
                try db.execute(sql: """
                    INSERT INTO item (collectionId, url, kind, addedAt) VALUES
                      (1, 'http://127.1:8080/a.jpg', 'photo', 0), (1, 'http://[0:0::1]/b.jpg', 'photo', 0)
                    """)
                try db.execute(sql: "INSERT INTO source (url, hash, fetchedAt) VALUES ('http://bücher.example/c.jpg', ?, 3)", arguments: [hashA])
            }
            try old.close()

            let catalog = try Catalog(path: path)

            let sources = try catalog.cachedSources(for: ["http://127.0.0.1:8080/a.jpg", "http://[::1]/b.jpg", "http://xn--bcher-kva.example/c.jpg"])
            #expect(sources.mapValues(\.sha256) == ["http://127.0.0.1:8080/a.jpg": hashA, "http://[::1]/b.jpg": hashB,
                                                    "http://xn--bcher-kva.example/c.jpg": hashA])
            #expect(try catalog.stats().sources == 3)
            #expect(try catalog.entries().map(\.url) == ["http://127.0.0.1:8080/a.jpg", "http://[::1]/b.jpg"])
        }
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

    /// The version others change moves with another connection's commit
    /// (another process's rows), not with the catalog's own.
    @Test func theVersionOthersChangeMovesWithTheirCommitsOnly() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let catalog = try Catalog(path: path)
            let first = try catalog.versionOthersChange()
            try catalog.record([record("http://h/1", "alps", hashA)])
            #expect(try catalog.versionOthersChange() == first)

            let other = try DatabaseQueue(path: path)
            try other.write { db in try db.execute(sql: "INSERT INTO collection (name, createdAt) VALUES ('tatry', 0)") }
            try other.close()
            let second = try catalog.versionOthersChange()
            #expect(second != first)
            try catalog.record([record("http://h/2", "alps", hashB)])
            #expect(try catalog.versionOthersChange() == second)
        }
    }

    /// Entries come by collection and then URL, not in the order their rows
    /// were recorded (the order downloads finished, another on every run).
    @Test func entriesAreSortedByCollectionThenURL() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            try catalog.record([record("http://h/c", "tatry", hashA)])
            try catalog.record([record("http://h/b", "alps", hashB), record("http://h/z", "tatry", hashB)])
            try catalog.record([record("http://h/a", "tatry", hashA), record("http://h/a", "alps", hashA)])

            try catalog.record([record("http://h/y", "Banana", hashA), record("http://h/x", "banana", hashB),
                                record("http://h/w", "Tatry", hashA)])

            // Collections without regard to the case of their ASCII letters (capitals first when
            // two differ only so), then URLs
            let listed = try catalog.entries().map { "\($0.collection) \($0.url)" }
            #expect(listed == ["alps http://h/a", "alps http://h/b", "Banana http://h/y", "banana http://h/x",
                               "Tatry http://h/w", "tatry http://h/a", "tatry http://h/c", "tatry http://h/z"])
        }
    }

    /// A body's rows are bound through SQLite's C API as GRDB binds them:
    /// an empty text is text and a missing one NULL, text ends at a NUL (GRDB
    /// reads it back so), numbers keep their types.
    @Test func rowValuesAreStoredAsGRDBStoresThem() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let catalog = try Catalog(path: path)
            try catalog.record([IngestRecord(url: "http://h/1", collection: "c", kind: .sound, title: "", sha256: hashA, size: 1 << 40,
                                             contentType: nil, etag: "a\u{0}b", lastModified: nil, metadata: "é")])
            let row = try DatabaseQueue(path: path).read { db in
                try Row.fetchOne(db, sql: """
                    SELECT typeof(item.title) AS titleType, item.title, item.kind, item.metadata, hex(source.etag) AS etag,
                      source.lastModified IS NULL AS noLastModified, object.mediaType IS NULL AS noType,
                      typeof(object.size) AS sizeType, object.size, typeof(object.storedAt) AS dateType
                    FROM item JOIN source ON source.url = item.url JOIN object ON object.hash = source.hash
                    """)
            }
            let values = try #require(row)
            #expect(values["titleType"] == "text")
            #expect(values["title"] == "")
            #expect(values["kind"] == "sound")
            #expect(values["metadata"] == "é")
            #expect(values["etag"] == "61")
            #expect(values["noLastModified"] == true)
            #expect(values["noType"] == true)
            #expect(values["sizeType"] == "integer")
            #expect(values["size"] == Int64(1) << 40)
            #expect(values["dateType"] == "real")
        }
    }

    /// A row SQLite refuses fails its group with SQLite's code and words,
    /// and leaves none of the group's rows; the next group is recorded with
    /// the same statements, reset after the failure.
    @Test func aRefusedRowFailsItsGroupWithSQLitesCodeAndTheNextGroupIsRecorded() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let catalog = try Catalog(path: path)
            try DatabaseQueue(path: path).write { db in
                try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON item WHEN NEW.url = 'http://h/bad' BEGIN SELECT RAISE(ABORT, 'boom'); END")
            }
            #expect {
                try catalog.record([record("http://h/good", "c", hashA), record("http://h/bad", "c", hashB)])
            } throws: { error in
                guard let error = error as? DatabaseError else { return false }
                return error.extendedResultCode == .SQLITE_CONSTRAINT_TRIGGER && error.message == "boom" && !Catalog.failsEveryRow(error)
            }
            #expect(try catalog.entries().isEmpty)
            try catalog.record([record("http://h/good", "c", hashA)])
            #expect(try catalog.entries().map(\.url) == ["http://h/good"])
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

    /// Two processes fetch one URL: the one that began first fails last. Its
    /// failure is older news than the other's fetch, and is not recorded
    /// (it stayed in `list --failed` for good: the URL, cached, was never
    /// fetched again to clear it). A failure after the fetch still is.
    @Test func aFailureDoesNotOverwriteAFetchRecordedSinceItsRunBegan() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            let began = Date()
            try catalog.record([record("http://h/1", "b", hashA)], at: began.addingTimeInterval(1))

            try catalog.record([], failures: [FailureRecord(url: "http://h/1", message: "timed out", since: began)],
                               at: began.addingTimeInterval(4))
            #expect(try catalog.stats().failedSources == 0)

            try catalog.record([], failures: [FailureRecord(url: "http://h/1", message: "HTTP 404", since: began.addingTimeInterval(2))],
                               at: began.addingTimeInterval(5))
            #expect(try catalog.stats().failedSources == 1)
        }
    }

    /// A run that finds a URL's object in place clears its last failure
    /// (a fetch when the file was gone), and only that URL's.
    @Test func aURLFoundInPlaceLosesItsLastFailure() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            try catalog.record([record("http://h/back", "c", hashA)])
            try catalog.record([], failures: [FailureRecord(url: "http://h/back", message: "HTTP 503"),
                                              FailureRecord(url: "http://h/never", message: "HTTP 404")])
            #expect(try catalog.cachedSources(for: ["http://h/back"])["http://h/back"]?.lastFetchFailed == true)

            try catalog.record([], clearingFailuresOf: ["http://h/back", "http://h/never"])

            var failed: [CatalogFailure] = []
            try catalog.readFailures { forEach in try forEach { failed.append($0) } }
            #expect(failed.map(\.url) == ["http://h/never"])
        }
    }

    /// A URL whose object's file was gone and whose fetch then failed keeps
    /// its object and its items, listed as missing: clearing it dropped the
    /// item from its collection for good after one failed retry.
    @Test func aFailedRefetchOfAMissingFileKeepsItsItem() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = try Catalog(path: directory.appending("catalog.sqlite"))
            try catalog.record([record("http://h/gone", "trip", hashA, size: 100), record("http://h/other", "c", hashB, size: 40)])

            try catalog.record([], failures: [FailureRecord(url: "http://h/gone", message: "HTTP 404")])

            #expect(Array(try catalog.cachedSources(for: ["http://h/gone"]).keys) == ["http://h/gone"])
            #expect(try catalog.entries(collection: "trip").map(\.url) == ["http://h/gone"])
            let stats = try catalog.stats()
            #expect(stats.objects == 2)
            #expect(stats.items == 2)
            var failed: [CatalogFailure] = []
            try catalog.readFailures { forEach in try forEach { failed.append($0) } }
            #expect(failed.map(\.url) == ["http://h/gone"])
            #expect(failed.first?.isCached == true)
        }
    }

    /// An item's URL is kept once, in its row, beside its source's two (the
    /// row and the key's index): 400 URLs of 3 KB made a catalog of 7.4×
    /// their bytes with the item's two indexes, 4.5× without (such a row
    /// fills most of a page on its own).
    @Test func anItemsLongURLIsKeptOnce() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let catalog = try Catalog(path: path)
            let urls = (0..<400).map { index in
                "http://h/\(index)?" + (0..<3000).map { _ in String(UnicodeScalar(UInt8.random(in: 97...122))) }.joined()
            }
            try catalog.record(urls.map { IngestRecord(url: $0, collection: "c", kind: .photo, sha256: hashA, size: 1) })
            // Everything in the main file: the log emptied into it.
            try DatabaseQueue(path: path).writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            let size = fileSize(path)
            let urlBytes = urls.reduce(0) { $0 + $1.utf8.count }
            #expect(size < 6 * urlBytes, "the catalog is \(Double(size) / Double(urlBytes))× its URLs")
            #expect(try Catalog(path: path).entries().count == 400)
        }
    }

    /// A catalog of the second schema (or of `schema`) at `path` with `items` items of URLs of
    /// 2 KB (and their sources), its log emptied into the file, closed.
    private func makeOlderCatalogOfLongURLs(at path: String, items: Int, schema: String = "v2: URLs without passwords") throws {
        let old = try olderCatalog(at: path, upTo: schema)
        try old.write { db in
            try db.execute(sql: "INSERT INTO object VALUES (?, 10, 'image/jpeg', 0, 0)", arguments: [hashA])
            try db.execute(sql: "INSERT INTO collection (id, name, createdAt) VALUES (1, 'alps', 0)")
            for index in 0..<items {
                let url = "http://h/\(index)?" + String(repeating: "q", count: 2_000)
                try db.execute(sql: "INSERT INTO source (url, hash, fetchedAt) VALUES (?, ?, 1)", arguments: [url, hashA])
                try db.execute(sql: "INSERT INTO item (collectionId, url, kind, addedAt) VALUES (1, ?, 'photo', ?)",
                               arguments: [url, Double(index)])
            }
        }
        try old.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try old.close()
    }

    /// A catalog whose items are rekeyed gives back the old table's pages
    /// (a quarter of its pages and 8 MiB at least are free, and it is small
    /// enough to vacuum) and leaves no log the size of the new table.
    @Test func aRekeyedCatalogShrinksAndLeavesNoLog() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            try makeOlderCatalogOfLongURLs(at: path, items: 4_000)
            let before = fileSize(path)

            let catalog = try Catalog(path: path)

            #expect(try catalog.entries().count == 4_000)
            #expect(fileSize(path) < before * 3 / 4, "\(before) bytes before, \(fileSize(path)) after")
            #expect(fileSize(path + "-wal") == 0)
        }
    }

    /// An older catalog on a disk without room to rekey its items is
    /// refused in one line, unmigrated (the migration filled the disk, and
    /// its pages stayed in a log that could not be emptied), and is
    /// migrated once there is room.
    @Test(.enabled(if: SmallFilesystem.canMount))
    func anOlderCatalogIsRekeyedOnlyWhereThereIsRoom() async throws {
        try await SmallFilesystem.with(kilobytes: 16 * 1024) { mountPoint, remount in
            let path = mountPoint + "/catalog.sqlite"
            try makeOlderCatalogOfLongURLs(at: path, items: 400)

            let refusal = #expect(throws: CatalogRefusal.self) { try Catalog(path: path) }
            #expect(refusal?.description.hasSuffix("free some space and run again") == true, "\(refusal?.description ?? "")")
            #expect(try appliedMigrations(path) == ["v1: objects, sources, collections, items", "v2: URLs without passwords"])

            #expect(remount("size=64m"))
            #expect(try Catalog(path: path).entries().count == 400)
            #expect(try appliedMigrations(path) == Catalog.migrator.migrations)
        }
    }

    /// The same for a catalog of the fourth schema, whose objects are
    /// rewritten (v5): refused in one line where there is no room, migrated once there is.
    @Test(.enabled(if: SmallFilesystem.canMount))
    func aCatalogOfTheFourthSchemaIsRekeyedOnlyWhereThereIsRoom() async throws {
        try await SmallFilesystem.with(kilobytes: 8 * 1024) { mountPoint, remount in
            let path = mountPoint + "/catalog.sqlite"
            try makeOlderCatalogOfLongURLs(at: path, items: 200, schema: "v4: URLs in one spelling")
            let fourth = try appliedMigrations(path)

            let refusal = #expect(throws: CatalogRefusal.self) { try Catalog(path: path) }
            #expect(refusal?.description.contains("this version keeps its rows another way") == true, "\(refusal?.description ?? "")")
            #expect(try appliedMigrations(path) == fourth)

            #expect(remount("size=64m"))
            #expect(try Catalog(path: path).entries().count == 200)
            #expect(try appliedMigrations(path) == Catalog.migrator.migrations)
        }
    }

    /// An older catalog with no items has nothing to rewrite, and needs no
    /// room for it: a new catalog whose making a full disk cut short after
    /// the second schema was refused the 4 MiB of a rewrite on a 2 MiB disk.
    @Test(.enabled(if: SmallFilesystem.canMount))
    func anOlderCatalogWithoutItemsIsUpgradedOnASmallDisk() async throws {
        try await SmallFilesystem.with(kilobytes: 2048) { mountPoint, _ in
            let path = mountPoint + "/catalog.sqlite"
            try olderCatalog(at: path, upTo: "v2: URLs without passwords").close()

            #expect(try Catalog(path: path).entries().isEmpty)
            #expect(try appliedMigrations(path) == Catalog.migrator.migrations)
        }
    }

    /// A catalog of the second schema keeps every item, field by field, when
    /// its items are rekeyed; lookups by URL and by collection find them.
    @Test func itemsKeepEveryFieldWhenRekeyedByURL() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let old = try olderCatalog(at: path, upTo: "v2: URLs without passwords")
            try old.write { db in
                try db.execute(sql: "INSERT INTO object VALUES (?, 10, 'image/jpeg', 0, 0)", arguments: [hashA])
                try db.execute(sql: "INSERT INTO object VALUES (?, 20, 'audio/flac', 0, 0)", arguments: [hashB])
                try db.execute(sql: "INSERT INTO collection (id, name, createdAt) VALUES (1, 'alps', 0), (2, 'tatry', 0)")
                try db.execute(sql: """
                    INSERT INTO source (url, hash, contentType, fetchedAt) VALUES
                      ('http://h/a', ?, 'image/jpeg', 1), ('http://h/b', ?, 'audio/flac', 2)
                    """, arguments: [hashA, hashB])
                try db.execute(sql: """
                    INSERT INTO item (collectionId, url, kind, title, addedAt, metadata) VALUES
                      (1, 'http://h/a', 'photo', 'Lift', 5, '{"id":1}'), (2, 'http://h/a', 'photo', NULL, 6, NULL),
                      (2, 'http://h/b', 'sound', 'Brook', 7, '{"id":2}')
                    """)
            }
            try old.close()

            let catalog = try Catalog(path: path)

            let entries = try catalog.entries().map { [$0.collection, $0.url, $0.kind.rawValue, $0.title ?? "-", $0.metadata ?? "-",
                                                       "\($0.addedAt.timeIntervalSince1970)", $0.sha256 == hashA ? "A" : "B"] }
            #expect(entries == [["alps", "http://h/a", "photo", "Lift", #"{"id":1}"#, "5.0", "A"],
                                ["tatry", "http://h/a", "photo", "-", "-", "6.0", "A"],
                                ["tatry", "http://h/b", "sound", "Brook", #"{"id":2}"#, "7.0", "B"]])
            #expect(try catalog.itemURLs(inCollection: "tatry", among: ["http://h/a", "http://h/b", "http://h/c"]) == ["http://h/a", "http://h/b"])
            #expect(try catalog.itemCounts(of: [hashA, hashB]) == [hashA: 2, hashB: 1])
            #expect(try appliedMigrations(path) == Catalog.migrator.migrations)
            // One table, no index of its own beside its key.
            let indexes = try DatabaseQueue(path: path).read { db in
                try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'item'")
            }
            #expect(indexes.allSatisfy { $0.hasPrefix("sqlite_autoindex") } && indexes.count <= 1, "\(indexes)")
        }
    }

    /// A catalog of the fourth schema keeps every object and source, field
    /// by field, when its objects are keyed by hash without a rowid; a new
    /// catalog is made so. The objects are then one B-tree with no index
    /// beside it, and a source still lets go of an object deleted.
    @Test func objectsKeepEveryFieldWhenKeyedByHashWithoutARowid() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let old = try olderCatalog(at: path, upTo: "v4: URLs in one spelling")
            try old.write { db in
                try db.execute(sql: "INSERT INTO object VALUES (?, 10, 'image/jpeg', 1, 2), (?, 20, 'audio/flac', 3, 4)",
                               arguments: [hashA, hashB])
                try db.execute(sql: "INSERT INTO collection (id, name, createdAt) VALUES (1, 'alps', 0)")
                try db.execute(sql: """
                    INSERT INTO source (url, hash, etag, lastModified, contentType, fetchedAt, lastError, lastErrorAt) VALUES
                      ('http://h/a', ?, '"e1"', 'Mon, 30 Nov 2026 18:00:00 GMT', 'image/jpeg', 5, NULL, NULL),
                      ('http://h/b', ?, NULL, NULL, 'audio/flac', 6, NULL, NULL),
                      ('http://h/gone', NULL, NULL, NULL, NULL, NULL, 'HTTP 404 Not Found', 7)
                    """, arguments: [hashA, hashB])
                try db.execute(sql: """
                    INSERT INTO item (collectionId, url, kind, addedAt) VALUES (1, 'http://h/a', 'photo', 8), (1, 'http://h/b', 'sound', 9)
                    """)
            }
            try old.close()

            let catalog = try Catalog(path: path)

            #expect(try appliedMigrations(path) == Catalog.migrator.migrations)
            let sources = try catalog.cachedSources(for: ["http://h/a", "http://h/b", "http://h/gone"])
            #expect(sources.mapValues(\.sha256) == ["http://h/a": hashA, "http://h/b": hashB])
            let stats = try catalog.stats()
            #expect(stats.objects == 2 && stats.bytes == 30 && stats.items == 2 && stats.sources == 3, "\(stats)")
            let rows = try DatabaseQueue(path: path).read { db in
                try Row.fetchAll(db, sql: "SELECT * FROM source ORDER BY url").map { $0.description }
                    + Row.fetchAll(db, sql: "SELECT * FROM object ORDER BY hash").map { $0.description }
            }
            #expect(rows == [
                #"[url:"http://h/a" hash:"\#(hashA)" etag:"\"e1\"" lastModified:"Mon, 30 Nov 2026 18:00:00 GMT" contentType:"image/jpeg" fetchedAt:5.0 lastError:NULL lastErrorAt:NULL]"#,
                #"[url:"http://h/b" hash:"\#(hashB)" etag:NULL lastModified:NULL contentType:"audio/flac" fetchedAt:6.0 lastError:NULL lastErrorAt:NULL]"#,
                #"[url:"http://h/gone" hash:NULL etag:NULL lastModified:NULL contentType:NULL fetchedAt:NULL lastError:"HTTP 404 Not Found" lastErrorAt:7.0]"#,
                #"[hash:"\#(hashA)" size:10 mediaType:"image/jpeg" storedAt:1.0 lastAccessAt:2.0]"#,
                #"[hash:"\#(hashB)" size:20 mediaType:"audio/flac" storedAt:3.0 lastAccessAt:4.0]"#,
            ])
            let fresh = directory.appending("fresh.sqlite")
            try Catalog(path: fresh).record([record("http://h/1", "c", hashA)])
            for catalogPath in [path, fresh] {
                let (schema, indexes) = try DatabaseQueue(path: catalogPath).read { db in
                    (try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'object'") ?? "",
                     try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('object', 'source') ORDER BY name"))
                }
                #expect(schema.hasSuffix("WITHOUT ROWID"), "\(schema)")
                #expect(schema.contains(#""hash" TEXT NOT NULL PRIMARY KEY"#) || schema.contains(#""hash" TEXT PRIMARY KEY"#), "\(schema)")
                #expect(indexes == ["source_on_hash", "sqlite_autoindex_source_1"])
            }
            // The sources' reference to their object holds: deleting one sets theirs to NULL.
            let hashes = try DatabaseQueue(path: path).write { db in
                try db.execute(sql: "PRAGMA foreign_keys = ON")
                try db.execute(sql: "DELETE FROM object WHERE hash = ?", arguments: [hashB])
                return try Row.fetchAll(db, sql: "SELECT url, hash FROM source ORDER BY url").map { "\($0["url"] as String) \(($0["hash"] as String?) ?? "NULL")" }
            }
            #expect(hashes == ["http://h/a \(hashA)", "http://h/b NULL", "http://h/gone NULL"])
        }
    }

    @Test func reopeningKeepsDataAndMigratesOnce() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            try Catalog(path: path).record([record("http://h/1", "c", hashA)])
            let reopened = try Catalog(path: path)
            #expect(try reopened.entries().count == 1)
            #expect(try appliedMigrations(path) == Catalog.migrator.migrations)
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

@Suite struct CatalogErrorTextTests {
    /// One short line: SQLite's code and words, not the statement GRDB quotes.
    @Test func anErrorIsSQLitesCodeAndWordsWithoutTheStatement() {
        let full = DatabaseError(resultCode: .SQLITE_FULL, message: "database or disk is full",
                                 sql: "SELECT " + String(repeating: "?, ", count: 500) + "?")
        #expect(Catalog.describe(full) == "SQLite error 13: database or disk is full")
        #expect(OutOfSpace.isCause(of: full))
        let corrupt = DatabaseError(resultCode: .SQLITE_CORRUPT, message: "database disk image is malformed", sql: "COMMIT")
        #expect(Catalog.describe(corrupt) == "SQLite error 11: database disk image is malformed")
        #expect(!OutOfSpace.isCause(of: corrupt))
        #expect(Catalog.describe(StoreError("cannot sync /c: Input/output error")) == "cannot sync /c: Input/output error")
    }

    /// A group whose transaction failed is tried row by row only when a row
    /// may be the cause: a lock held past its minute cost another minute an item.
    @Test func onlyARowsOwnErrorIsTriedRowByRow() {
        for code in [ResultCode.SQLITE_BUSY, .SQLITE_FULL, .SQLITE_IOERR, .SQLITE_CORRUPT, .SQLITE_READONLY,
                     .SQLITE_PERM, .SQLITE_NOMEM, .SQLITE_PROTOCOL, .SQLITE_NOLFS, .SQLITE_INTERRUPT] {
            #expect(Catalog.failsEveryRow(DatabaseError(resultCode: code)), "\(code)")
        }
        #expect(!Catalog.failsEveryRow(DatabaseError(resultCode: .SQLITE_CONSTRAINT)))
        #expect(!Catalog.failsEveryRow(DatabaseError(resultCode: .SQLITE_MISMATCH)))
        #expect(Catalog.failsEveryRow(StoreError("cannot open the catalog")))
    }

    @Test func aLockHeldTooLongSaysSo() {
        let busy = DatabaseError(resultCode: .SQLITE_BUSY, message: "database is locked", sql: "BEGIN IMMEDIATE TRANSACTION")
        #expect(Catalog.describe(busy) == "another process has held it locked for over 60 s (SQLite error 5: database is locked)")
        // Not every lock error is a wait that ran out: these come at once.
        let locked = DatabaseError(resultCode: .SQLITE_LOCKED, message: "database table is locked")
        #expect(Catalog.describe(locked) == "SQLite error 6: database table is locked")
        let snapshot = DatabaseError(resultCode: .SQLITE_BUSY_SNAPSHOT, message: "database is locked")
        #expect(Catalog.describe(snapshot) == "SQLite error 5: database is locked")
    }

    /// Only blocks smaller than a page leave holes in SQLite's shared memory.
    @Test func aCatalogIsNotOpenedWhereItsSharedMemoryMayNotFit() {
        #expect(OutOfSpace.lacksRoomForSharedMemory(blockSize: 1024, freeBytes: 12 * 1024))
        #expect(OutOfSpace.lacksRoomForSharedMemory(blockSize: 2048, freeBytes: 255 * 1024))
        #expect(!OutOfSpace.lacksRoomForSharedMemory(blockSize: 1024, freeBytes: 256 * 1024))
        #expect(!OutOfSpace.lacksRoomForSharedMemory(blockSize: 4096, freeBytes: 0))
    }

    @Test func aFullDiskIsKnownByItsSystemCode() {
        #expect(OutOfSpace.isCause(of: StoreError("x", code: ENOSPC)))
        #expect(OutOfSpace.isCause(of: StoreError("x", code: EDQUOT)))
        #expect(!OutOfSpace.isCause(of: StoreError("x", code: EACCES)))
        #expect(!OutOfSpace.isCause(of: StoreError("x")))
    }

    /// SQLite says a shared-memory file it could not grow is an I/O error,
    /// and a file it could not create a failure to open: a full disk's (or
    /// one out of inodes) only where the disk shows it.
    @Test(.enabled(if: SmallFilesystem.canMount))
    func sqlitesErrorsThatHideAFullDiskCountOnlyWhereTheDiskIsFull() async throws {
        let shared = DatabaseError(resultCode: ResultCode.SQLITE_IOERR_SHMSIZE, message: "disk I/O error")
        let cannotOpen = DatabaseError(resultCode: .SQLITE_CANTOPEN, message: "unable to open database file")
        let otherIO = DatabaseError(resultCode: ResultCode.SQLITE_IOERR_READ, message: "disk I/O error")
        try await SmallFilesystem.with(kilobytes: 1024) { mountPoint, remount in
            #expect(!OutOfSpace.isCause(of: shared, onDiskOf: mountPoint))
            #expect(!OutOfSpace.isCause(of: cannotOpen, onDiskOf: mountPoint))
            #expect(OutOfSpace.isCause(of: DatabaseError(resultCode: .SQLITE_FULL), onDiskOf: mountPoint))

            var info = statvfs()
            #expect(statvfs(mountPoint, &info) == 0)
            let filler = mountPoint + "/filler"
            #expect(FileManager.default.createFile(atPath: filler, contents: Data(count: Int(info.f_bavail) * Int(info.f_frsize))))
            #expect(OutOfSpace.shortage(causing: shared, onDiskOf: mountPoint) == .space)
            #expect(!OutOfSpace.isCause(of: otherIO, onDiskOf: mountPoint))
            #expect(!OutOfSpace.isCause(of: cannotOpen, onDiskOf: mountPoint))

            try FileManager.default.removeItem(atPath: filler)
            // Room, but no inode: as many as the files there now (the root and one more).
            #expect(FileManager.default.createFile(atPath: mountPoint + "/one", contents: Data()))
            #expect(remount("nr_inodes=2"))
            #expect(OutOfSpace.shortage(causing: cannotOpen, onDiskOf: mountPoint) == .inodes)
            #expect(!OutOfSpace.isCause(of: shared, onDiskOf: mountPoint))
            // Without an inode, a full disk's own error is still for want of space.
            #expect(OutOfSpace.shortage(causing: DatabaseError(resultCode: .SQLITE_FULL), onDiskOf: mountPoint) == .space)
            // Only the code itself: the ones it is the primary code of come from elsewhere.
            #expect(!OutOfSpace.isCause(of: DatabaseError(resultCode: ResultCode.SQLITE_CANTOPEN_ISDIR), onDiskOf: mountPoint))
            // A read-only medium reports no inode free, and is not full for it.
            #expect(remount("ro"))
            #expect(OutOfSpace.shortage(causing: cannotOpen, onDiskOf: mountPoint) == nil)
        }
        try await TemporaryDirectory.with { directory in
            #expect(!OutOfSpace.isCause(of: shared, onDiskOf: directory.path))
            #expect(!OutOfSpace.isCause(of: cannotOpen, onDiskOf: directory.path))
        }
    }
}

@Suite struct CatalogLockTests {
    /// Opening a catalog whose schema is current takes no write lock, so
    /// another process's write transaction does not hold the opening up (a
    /// run would start no download until it ended), and lookups work meanwhile.
    @Test(.timeLimit(.minutes(1)))
    func anUpToDateCatalogOpensWhileAnotherProcessHoldsTheWriteLock() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let hash = String(repeating: "d", count: 64)
            do {
                let first = try Catalog(path: path)
                try first.record([IngestRecord(url: "http://h/1", collection: "c", kind: .file, sha256: hash, size: 1)])
            }
            var holding = Configuration()
            holding.allowsUnsafeTransactions = true // the transaction spans two accesses
            let other = try DatabaseQueue(path: path, configuration: holding)
            try await other.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }
            // A wait would fail here: the limit is shorter than the hold.
            let opened = try Catalog(path: path, lockWaitLimit: .milliseconds(300))
            #expect(opened.lockWaitsGivenUp == 0)
            #expect(try opened.cachedSources(for: ["http://h/1"]).count == 1)
            try await other.writeWithoutTransaction { try $0.execute(sql: "COMMIT") }
        }
    }

    /// A writer waits for another process's write transaction, and says so
    /// once when the wait is long: 60 silent seconds looked like a hang.
    @Test(.timeLimit(.minutes(1)))
    func aLongWaitForAnotherProcesssLockIsToldOnce() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let waits = Mutex(0)
            let catalog = try Catalog(path: path, noticeAfter: .milliseconds(100)) { waits.withLock { $0 += 1 } }
            var holding = Configuration()
            holding.allowsUnsafeTransactions = true // the transaction spans two accesses
            let other = try DatabaseQueue(path: path, configuration: holding)
            try await other.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }

            // On a thread of its own: a pool thread blocked in the wait could starve the test that ends it.
            let written = DispatchSemaphore(value: 0)
            let recorded = Mutex(false)
            DispatchQueue.global().async {
                let record = IngestRecord(url: "http://h/1", collection: "c", kind: .file,
                                          sha256: String(repeating: "c", count: 64), size: 1)
                recorded.withLock { $0 = (try? catalog.record([record])) != nil }
                written.signal()
            }
            while waits.withLock({ $0 }) == 0 { try await Task.sleep(for: .milliseconds(20)) }
            try await other.writeWithoutTransaction { try $0.execute(sql: "COMMIT") }
            written.wait()
            #expect(recorded.withLock { $0 })

            #expect(waits.withLock { $0 } == 1)
            #expect(try catalog.entries().map(\.url) == ["http://h/1"])
        }
    }

    /// A last-access update is not worth a wait: under another process's
    /// lock it gives up at once (a wait would outlast the test's limit),
    /// while this process's other work still waits as usual.
    @Test(.timeLimit(.minutes(1)))
    func touchesDoNotWaitForALockButOtherWritesDo() async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.appending("catalog.sqlite")
            let catalog = try Catalog(path: path, lockWaitLimit: .seconds(120))
            let hash = String(repeating: "d", count: 64)
            try catalog.record([IngestRecord(url: "http://h/1", collection: "c", kind: .file, sha256: hash, size: 1)])
            var holding = Configuration()
            holding.allowsUnsafeTransactions = true // the transaction spans two accesses
            let other = try DatabaseQueue(path: path, configuration: holding)
            try await other.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }

            #expect(throws: DatabaseError.self) { try catalog.touch([hash], waitingForLock: false) }
            #expect(catalog.lockWaitsGivenUp == 0)
            // Reading is not held up, and a write after the touch still waits for the lock to go.
            #expect(try catalog.cachedSources(for: ["http://h/1"]).count == 1)
            // On a thread of its own: a pool thread blocked in the wait could starve the test that ends it.
            let written = DispatchSemaphore(value: 0)
            let outcome = Mutex<Bool?>(nil)
            DispatchQueue.global().async {
                outcome.withLock { $0 = (try? catalog.touch([hash])) != nil }
                written.signal()
            }
            #expect(written.wait(timeout: .now() + .milliseconds(300)) == .timedOut)
            try await other.writeWithoutTransaction { try $0.execute(sql: "COMMIT") }
            written.wait()
            #expect(outcome.withLock { $0 } == true)
            #expect(catalog.lockWaitsGivenUp == 0)
        }
    }

    /// The sleeps follow SQLite's own schedule, so the wait is known from
    /// the number of tries: 60 s is given up after about 600 of them.
    @Test func theWaitIsKnownFromTheTries() {
        #expect(LockWait.waited(beforeTry: 0) == .zero)
        #expect(LockWait.waited(beforeTry: 3) == .milliseconds(8))
        #expect(LockWait.waited(beforeTry: 12) == .milliseconds(328))
        #expect(LockWait.waited(beforeTry: 14) == .milliseconds(528))
        let givesUp = (0...).first { LockWait.waited(beforeTry: $0) >= .seconds(Catalog.busySeconds) }
        #expect(givesUp == 609)
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
            let applied = try appliedMigrations(path)
            #expect(applied == Catalog.migrator.migrations)
        }
    }
}

/// The size of the file at `path` (0 when there is none).
private func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
}

/// A catalog at `path` as an older version wrote it: the migrations up to
/// `migration`, in write-ahead-log mode, its connection left open.
private func olderCatalog(at path: String, upTo migration: String) throws -> DatabaseQueue {
    let old = try DatabaseQueue(path: path)
    try old.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
    try Catalog.migrator.migrate(old, upTo: migration)
    return old
}

/// The migrations recorded in the catalog at `path`, in the order applied.
private func appliedMigrations(_ path: String) throws -> [String] {
    try DatabaseQueue(path: path).read { db in
        try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid")
    }
}
