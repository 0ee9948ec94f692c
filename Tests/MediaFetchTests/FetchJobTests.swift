@testable import ContentStore
import Foundation
import GRDB
import SampleMedia
import Testing
import TestOrigin
import TestSupport
import Transfer
@testable import MediaFetch

@Suite struct FetchJobTests {
    /// A cache let go while its catalog is still opening (here: waiting
    /// for another process's lock to migrate an older schema) ends that
    /// wait and waits for the opening, instead of leaving a thread that opens
    /// the catalog after its owner is gone (tests that removed their
    /// directory next found catalog files come back).
    @Test(.timeLimit(.minutes(1)))
    func aCacheLetGoWhileItsCatalogWaitsForALockEndsTheWait() async throws {
        try await TemporaryDirectory.with { directory in
            let root = directory.appending("cache")
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            let path = root + "/catalog.sqlite"
            var holding = Configuration()
            holding.allowsUnsafeTransactions = true // the transaction spans two accesses
            let old = try DatabaseQueue(path: path, configuration: holding)
            try await old.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
            try Catalog.migrator.migrate(old, upTo: "v1: objects, sources, collections, items")
            try await old.writeWithoutTransaction { try $0.execute(sql: "BEGIN IMMEDIATE") }

            // On a thread of its own: the release below waits for the opening.
            // With a wait of ten minutes, a release that did not end it would
            // outlast the test's time limit.
            let released = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                do {
                    let cache = try MediaCache(root: root, catalogLockWaitLimit: .seconds(600))
                    // Long enough for the opening to be in its wait for the lock.
                    usleep(300_000)
                    _ = cache.root
                } catch {
                    Issue.record("the cache did not open: \(error)")
                }
                released.signal()
            }
            while released.wait(timeout: .now()) == .timedOut { try await Task.sleep(for: .milliseconds(20)) }
            try await old.writeWithoutTransaction { try $0.execute(sql: "COMMIT") }
            // Time for an opening still waiting (it tries every 100 ms) to get the lock and migrate.
            try await Task.sleep(for: .milliseconds(500))
            // The opening gave up: the older schema is still there, unmigrated.
            let applied = try await old.read { try Catalog.migrator.appliedIdentifiers($0) }
            #expect(applied == ["v1: objects, sources, collections, items"])
        }
    }

    /// `list` and `stats` read an older catalog as it is: not migrated (a
    /// write, which a read-only copy or another user's cache would refuse).
    @Test func aReadingCacheReadsAnOlderCatalogWithoutMigratingIt() async throws {
        try await TemporaryDirectory.with { directory in
            let root = directory.appending("cache")
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            let path = root + "/catalog.sqlite"
            let old = try DatabaseQueue(path: path)
            try await old.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
            try Catalog.migrator.migrate(old, upTo: "v1: objects, sources, collections, items")
            try old.close()
            let before = [path, path + "-wal"].map { FileManager.default.contents(atPath: $0) }

            let cache = try MediaCache(root: root, readingOnly: true)
            #expect(try cache.catalog.stats().objects == 0)
            #expect(try cache.catalog.collectionNames().isEmpty)

            #expect([path, path + "-wal"].map { FileManager.default.contents(atPath: $0) ?? Data() } == before.map { $0 ?? Data() })
            let applied = try await DatabaseQueue(path: path).read { try Catalog.migrator.appliedIdentifiers($0) }
            #expect(applied == ["v1: objects, sources, collections, items"])
        }
    }

    /// Runs `job` on `items`; returns its report and the progress events it sent.
    private func runCollectingProgress(_ job: FetchJob, _ items: [FetchItem]) async throws -> (FetchReport, [RunProgress]) {
        let events = Task { () -> [RunProgress] in
            var seen: [RunProgress] = []
            for await event in job.events {
                if case .progress(let progress) = event { seen.append(progress) }
            }
            return seen
        }
        let report = try await job.run(items)
        return (report, await events.value)
    }

    private func quickRetries() -> TransferConfiguration {
        var configuration = TransferConfiguration()
        configuration.retry = RetryPolicy(maxRetries: 1, baseDelay: 0.01, maxDelay: 0.02)
        return configuration
    }

    /// A list whose hosts are gone prints a line per URL; the summary says
    /// at the end which hosts were given up, and how many URLs each took down.
    @Test func theSummaryNamesTheHostsGivenUp() async throws {
        try await withOrigin { origin, directory in
            // Given URLs of two ports that refuse connections, more of one, and good ones between
            let few = try ReservedPort(), many = try ReservedPort()
            var items: [FetchItem] = []
            for index in 0..<600 {
                items.append(FetchItem(url: many.url("/m\(index).jpg"), collection: "dead", kind: .photo))
                if index % 10 == 0 { items.append(FetchItem(url: few.url("/f\(index).jpg"), collection: "dead", kind: .photo)) }
            }
            items += origin.addFixtures(count: 10, size: 2000, firstSeed: 7).map { FetchItem(url: $0, collection: "dead", kind: .photo) }

            // When they are fetched with a short patience (3 s: failures further apart
            // than the patience start the count again, and on a loaded machine 1 s
            // went by with none after the first 1,200 of 0.7 s)
            var configuration = quickRetries()
            configuration.retry = RetryPolicy(maxRetries: 3, baseDelay: 0.02, maxDelay: 0.05)
            configuration.unreachableHostPatience = 3
            let job = FetchJob(cache: try MediaCache(root: directory.appending("cache")), configuration: configuration)
            let givenUpSaid = Task { () -> [String: Int] in
                var byHost: [String: Int] = [:]
                for await event in job.events {
                    if case .failed(let url, let reason, _) = event, reason.hasPrefix("given up: ") {
                        byHost[String(url.dropFirst("http://".count).prefix { $0 != "/" }), default: 0] += 1
                    }
                }
                return byHost
            }
            let report = try await job.run(items)
            let said = await givenUpSaid.value

            // Then the good ones are stored, and each host given up is counted with
            // the URLs that failed so (the others failed on their own retries)
            #expect(report.downloaded == 10)
            #expect(report.failed == 660)
            let hosts = report.givenUpHosts.map(\.host)
            #expect(Set(hosts).isSubset(of: ["127.0.0.1:\(many.port)", "127.0.0.1:\(few.port)"]), "\(hosts)")
            #expect(hosts.contains("127.0.0.1:\(many.port)"), "\(report.givenUpHosts)")
            #expect(Dictionary(uniqueKeysWithValues: report.givenUpHosts.map { ($0.host, $0.failed) }) == said)
            let summary = ProgressText.summary(report)
            #expect(summary.contains("; \(said.values.reduce(0, +)) of them at "), "\(summary)")
            #expect(summary.contains("127.0.0.1:\(many.port)"), "\(summary)")
        }
    }

    @Test func cachedURLsJoinANewCollectionWithoutADownload() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 30, size: 5000, firstSeed: 0)
            let cache = try MediaCache(root: directory.appending("cache"))
            let first = try await FetchJob(cache: cache, configuration: quickRetries())
                .run(urls.map { FetchItem(url: $0, collection: "alps", kind: .photo) })

            let second = try await FetchJob(cache: cache, configuration: quickRetries())
                .run(urls.map { FetchItem(url: $0, collection: "favourites", kind: .photo) })

            #expect(first.downloaded == 30)
            #expect(second.downloaded == 0)
            #expect(second.skipped == 30)
            #expect(second.succeeded)
            #expect(origin.requests().count == 30)
            #expect(try cache.catalog.entries(collection: "favourites").count == 30)
            #expect(try cache.catalog.stats().objects == 30)
        }
    }

    /// The cache's store, with every flush failing as a full disk fails it.
    private final class FullDiskStore: BlobStore {
        let inner: ObjectStore
        init(_ inner: ObjectStore) { self.inner = inner }
        func contains(_ sha256: String, size: Int64?) -> Bool { inner.contains(sha256, size: size) }
        func flush(staged: [StagedBlob], files: [String]) throws(StoreError) {
            throw StoreError("cannot sync \(inner.root): No space left on device", code: ENOSPC)
        }
        func moveIntoPlace(_ blob: StagedBlob) throws(StoreError) -> Bool { try inner.moveIntoPlace(blob) }
        func remove(_ sha256: String) throws(StoreError) { try inner.remove(sha256) }
    }

    /// A full disk stops the run: the items not yet started are left for a
    /// later run instead of each being requested and failed in turn.
    @Test func aFullDiskStopsTheDownloads() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 300, size: 3000, firstSeed: 300)
            let cache = try MediaCache(root: directory.appending("cache"))
            var configuration = quickRetries()
            configuration.maxConcurrentTransfers = 2
            let job = FetchJob(cache: cache, configuration: configuration, reportsEachStoredItem: true,
                               settlePart: 4096, objectsRemembered: 16, ingestStore: FullDiskStore(cache.store))

            let report = try await job.run(urls.map { FetchItem(url: $0, collection: "alps") })

            #expect(report.outOfSpace == "cannot store it: cannot sync \(cache.root): No space left on device")
            #expect(!report.succeeded)
            #expect(!report.interrupted)
            // Failing for want of room is no failure of the item: all 300 are left for the next run.
            #expect(report.downloaded == 0)
            #expect(report.failures.isEmpty)
            #expect(report.left == 300)
            #expect(origin.requests().count < 300)
            #expect(ProgressText.summary(report).hasSuffix("0 failed (\(ByteSize.format(report.bytesReceived)) received in "
                + "\(ByteSize.oneDecimal(report.seconds)) s); stopped with 300 left to fetch: no room left for the cache"))
            #expect(try cache.catalog.stats().objects == 0)
        }
    }

    /// A catalog another process holds locked past the wait stops the run,
    /// as a full disk does: the first group that cannot be recorded says why,
    /// the items not started are left, and no later group waits out the lock
    /// again. What was stored meanwhile is recorded by the next run, not fetched again.
    @Test func aCatalogLockedPastTheWaitStopsTheRun() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 300, size: 3000, firstSeed: 600)
            // Each answer pauses after its head, so the run is still downloading when the wait ends.
            for index in 0..<300 { origin.setFault("/p\(index).jpg", .stallAfter(bytes: 0, seconds: 0.02)) }
            let root = directory.appending("cache")
            let items = urls.map { FetchItem(url: $0, collection: "alps") }
            // Given a cache whose catalog exists, then is locked by another connection for the whole run
            _ = try MediaCache(root: root).catalog.stats()
            let lock = try CatalogLockHolder(root + "/catalog.sqlite")
            let cache = try MediaCache(root: root, catalogLockWaitLimit: .milliseconds(100))
            var configuration = quickRetries()
            configuration.maxConcurrentTransfers = 2

            // When a job runs on it
            let report = try await FetchJob(cache: cache, configuration: configuration).run(items)

            // Then it stopped, naming SQLite's reason, with none failed: what was stored waits
            // to be recorded (counted as downloaded), the rest is left
            #expect(report.catalogFailure?.contains("(SQLite error 5: database is locked)") == true, "\(report)")
            #expect(report.outOfSpace == nil)
            #expect(!report.succeeded && !report.interrupted)
            #expect(report.failures.isEmpty)
            #expect(report.downloaded == report.awaitingRecord)
            #expect(report.left == 300 - report.downloaded)
            #expect(origin.requests().count < 300)
            #expect(ProgressText.summary(report).hasSuffix("; stopped, as the catalog cannot record: \(report.left) left to "
                + "fetch, \(report.awaitingRecord) stored for the next run to record"))
            // and the lock was waited out once, not again for each group after the first
            #expect(try cache.catalog.lockWaitsGivenUp == 1)

            // When the lock is let go, the next run records everything
            try lock.release()
            let stored = try objectPaths(inCache: root).count
            #expect(stored > 0)
            #expect(stored == report.awaitingRecord)
            #expect(try cache.rowsAwaitingRecord() == stored)
            #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/unrecorded").count >= 1)
            let requestsBefore = origin.requests().count
            let again = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)
            #expect(again.succeeded)
            #expect(again.downloaded == 300 - stored)
            #expect(again.skipped == stored)
            #expect(try cache.catalog.entries(collection: "alps").count == 300)
            // Only what was not stored was asked for again, and nothing is left to record.
            #expect(origin.requests().count - requestsBefore == 300 - stored)
            #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/unrecorded").isEmpty)
        }
    }

    /// Another process holding the catalog's write lock (as `BEGIN IMMEDIATE` does) until `release`.
    private final class CatalogLockHolder: Sendable {
        private let database: DatabaseQueue
        private let locked = DispatchSemaphore(value: 0)
        private let released = DispatchSemaphore(value: 0)

        init(_ path: String) throws {
            database = try DatabaseQueue(path: path)
            let thread = Thread { [database, locked, released] in
                // GRDB wants every transaction ended within its access: this one waits inside it.
                try? database.writeWithoutTransaction { db in
                    try db.execute(sql: "BEGIN IMMEDIATE")
                    locked.signal()
                    released.wait()
                    try db.execute(sql: "ROLLBACK")
                }
                locked.signal()
            }
            thread.start()
            locked.wait()
        }

        func release() throws {
            released.signal()
            locked.wait()
            try database.close()
        }
    }

    /// Ctrl-C while the run waits for another process's catalog lock ends
    /// the wait (it would otherwise last its whole limit, here 90 s):
    /// the run ends as interrupted, and what it stored is recorded by the next run.
    @Test(.timeLimit(.minutes(1)))
    func cancellingEndsAWaitForTheCatalogLock() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 40, size: 3000, firstSeed: 700)
            let root = directory.appending("cache")
            let items = urls.map { FetchItem(url: $0, collection: "alps") }
            _ = try MediaCache(root: root).catalog.stats()
            let lock = try CatalogLockHolder(root + "/catalog.sqlite")
            let waiting = DispatchSemaphore(value: 0)
            let cache = try MediaCache(root: root, catalogLockWaitLimit: .seconds(90)) { waiting.signal() }

            // When the job is cancelled once it waits for the lock (from a
            // thread of its own, as the command's signal handler does)
            let job = Task { try await FetchJob(cache: cache, configuration: self.quickRetries()).run(items) }
            DispatchQueue.global().async {
                waiting.wait()
                job.cancel()
            }
            let report = try await job.value

            // Then it ended as interrupted, not as a failed catalog, with nothing failed
            #expect(report.interrupted)
            #expect(report.catalogFailure == nil)
            #expect(report.failures.isEmpty)
            #expect(!report.succeeded)
            let stored = try objectPaths(inCache: root).count
            #expect(stored > 0)
            #expect(report.downloaded == stored && report.awaitingRecord == stored)
            #expect(ProgressText.summary(report).hasSuffix("; interrupted with \(report.left) left to fetch, \(stored) stored "
                + "for the next run to record"))

            // and the next run, the lock let go, records what was stored without fetching it again
            try lock.release()
            let requestsBefore = origin.requests().count
            let again = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)
            #expect(again.succeeded)
            #expect(again.skipped == stored)
            #expect(origin.requests().count - requestsBefore == 40 - stored)
        }
    }

    /// Ctrl-C in a wait for the lock while a long list is settled part by
    /// part: the parts settled before it count as cached (they said 0).
    @Test(.timeLimit(.minutes(1)))
    func partsSettledBeforeAnInterruptedLockWaitCountAsCached() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 6, size: 1000, firstSeed: 720)
            let root = directory.appending("cache")
            // The first three are in "pins" already; the last three are cached, in "alps" only.
            let first = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries())
                .run(urls.prefix(3).map { FetchItem(url: $0, collection: "pins") }
                     + urls.suffix(3).map { FetchItem(url: $0, collection: "alps") })
            #expect(first.succeeded)
            let lock = try CatalogLockHolder(root + "/catalog.sqlite")
            let waiting = DispatchSemaphore(value: 0)
            let cache = try MediaCache(root: root, catalogLockWaitLimit: .seconds(90)) { waiting.signal() }

            // Parts of three: the first needs no write, the second waits for the lock and is interrupted.
            let job = Task {
                try await FetchJob(cache: cache, configuration: self.quickRetries(), reportsEachStoredItem: false,
                         settlePart: 3, objectsRemembered: 16)
                    .run(urls.map { FetchItem(url: $0, collection: "pins") })
            }
            DispatchQueue.global().async {
                waiting.wait()
                job.cancel()
            }
            let report = try await job.value
            try lock.release()

            #expect(report.interrupted)
            #expect(report.skipped == 3)
            #expect(report.downloaded == 0)
            #expect(origin.requests().count == 6)
        }
    }

    /// A run of at least so many downloads makes every fan-out of the store
    /// ahead; a shorter one only those its objects need. Either way each
    /// object is stored and readable under its hash.
    @Test(.timeLimit(.minutes(1)))
    func aLongRunMakesTheFanOutsAheadAShortOneOnlyThoseItNeeds() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 3, size: 1000, firstSeed: 790)
            for (name, from) in [("short", 4), ("long", 3)] {
                let cache = try MediaCache(root: directory.appending(name))
                let report = try await FetchJob(cache: cache, configuration: quickRetries(), reportsEachStoredItem: false,
                                                settlePart: 4096, objectsRemembered: 16, fanOutsAheadFrom: from)
                    .run(urls.map { FetchItem(url: $0, collection: "pins") })
                #expect(report.succeeded && report.downloaded == 3)
                let objects = try cache.catalog.cachedSources(for: urls).values.map(\.sha256)
                #expect(objects.count == 3 && objects.allSatisfy { cache.store.contains($0, size: 1000) })
                let needed = Set(objects.map { String($0.prefix(2)) })
                // The thread that makes them ahead may still be at it: given ten seconds to finish.
                let deadline = ContinuousClock.now + .seconds(10)
                while from == 3, ContinuousClock.now < deadline,
                      try FileManager.default.contentsOfDirectory(atPath: cache.store.objectsDirectory).count < 256 {
                    try await Task.sleep(for: .milliseconds(5))
                }
                let made = Set(try FileManager.default.contentsOfDirectory(atPath: cache.store.objectsDirectory))
                #expect(made == (from == 3 ? Set(ObjectStore.fanOutNames) : needed), "\(name)")
            }
        }
    }

    /// A list of URLs kept as their bytes, with repeats and cached items
    /// spread over the lookup's parts: each URL is fetched once, the cached
    /// ones not at all, and the items left are read from the list again by
    /// their positions (through the repeats' selection) into the right collection.
    @Test func repeatsAndCachedItemsAcrossPartsLeaveEachOtherURLToOneDownload() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 6, size: 1000, firstSeed: 760)
            let root = directory.appending("cache")
            let cached = [urls[1], urls[3]]
            #expect(try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries())
                .run(cached.map { FetchItem(url: $0, collection: "trip") }).succeeded)

            let list: URLBlock = [urls[0], urls[1], urls[0], urls[2], urls[3], urls[1], urls[4], urls[2], urls[5], urls[4]]
            let report = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries(),
                                            reportsEachStoredItem: false, settlePart: 3, objectsRemembered: 16)
                .run(URLItems(urls: list, collection: "trip", kind: .photo))

            #expect(report.total == 6)
            #expect(report.skipped == 2)
            #expect(report.downloaded == 4)
            // The summary adds up to the list's ten lines.
            #expect(report.repeats == 4)
            #expect(ProgressText.summary(report).hasPrefix("4 downloaded, 2 already cached, 0 failed, 4 repeated in the list ("))
            #expect(report.succeeded)
            for url in urls {
                let path = try #require(URL(string: url)?.path)
                #expect(origin.requests(for: path).count == 1, "\(url)")
            }
            let entries = try MediaCache(root: root).catalog.entries(collection: "trip")
            #expect(Set(entries.map(\.url)) == Set(urls))
            #expect(entries.filter { !cached.contains($0.url) }.allSatisfy { $0.kind == .photo })
        }
    }

    /// A web page sent with 200 for a URL that names a photo (a login page)
    /// fails the item, and nothing of it is stored; a URL that names no media
    /// keeps its page.
    @Test func aWebPageWhereAPhotoWasAskedForIsRefusedNotStored() async throws {
        try await withOrigin { origin, directory in
            let photos = origin.addFixtures(count: 2, size: 3000, firstSeed: 950)
            let login = try #require(URL(string: photos[0])?.path)
            origin.setFault(login, .html)
            origin.addResource("/about", data: Data("<html><body>about</body></html>".utf8), contentType: "text/html")
            let root = directory.appending("cache")
            let items = [FetchItem(url: photos[0], collection: "trip"), FetchItem(url: photos[1], collection: "trip"),
                         FetchItem(url: origin.url("/about"), collection: "trip")]

            let report = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)

            #expect(report.downloaded == 2)
            #expect(report.failed == 1)
            let reason = try #require(report.failures.first?.message)
            #expect(reason.hasPrefix("the server sent a web page (text/html, "), "\(reason)")
            #expect(reason.hasSuffix(") where a .\((photos[0] as NSString).pathExtension) file was asked for; not stored"), "\(reason)")
            let entries = try MediaCache(root: root).catalog.entries(collection: "trip")
            #expect(Set(entries.map(\.url)) == [photos[1], origin.url("/about")])
            #expect(try objectPaths(inCache: root).count == 2)
            // Nothing left in the partials' directories either.
            #expect(try FileManager.default.subpathsOfDirectory(atPath: root + "/tmp").filter { $0.contains("/") } == [])
            // And the next run asks again.
            origin.clearFaults()
            #expect(try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items).downloaded == 1)
        }
    }

    /// A body whose type names an image it is not is refused: a sign-in
    /// page labelled image/jpeg at a URL that names no media, zeros sent as
    /// a JPEG, random bytes sent as a PNG were stored with exit 0, and their
    /// URLs counted as cached for good. A real photo so labelled is stored;
    /// so are bytes whose type claims no image, other media labelled an
    /// image (a video for a `.gif`), and a page at a URL and type that name
    /// no media.
    @Test func bytesLabelledAnImageTheyAreNotAreRefused() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/img/123", data: Data("<!DOCTYPE html><html><body>Please sign in</body></html>".utf8),
                               contentType: "image/jpeg")
            origin.addResource("/pin/zeros.jpg", data: Data(count: 5_000), contentType: "image/jpeg")
            origin.addResource("/img/9", data: fixtureBytes(count: 4_000, seed: 970), contentType: "image/png")
            let photo = SamplePhotos.photo(971)
            origin.addResource("/img/5", data: photo, contentType: "image/jpeg")
            origin.addResource("/r.jpg", data: fixtureBytes(count: 4_000, seed: 972))
            let clip = Data([0, 0, 0, 0x18]) + Data("ftypmp42".utf8) + fixtureBytes(count: 4_000, seed: 973)
            origin.addResource("/clip.gif", data: clip, contentType: "image/gif")
            origin.addResource("/feed", data: Data("<html><body>news</body></html>".utf8), contentType: "text/html")
            // A playlist labelled a sound, and a compressed SVG labelled an image, at URLs that name no media.
            origin.addResource("/radio", data: Data("#EXTM3U\nhttp://radio.example/live\n".utf8), contentType: "audio/x-mpegurl")
            origin.addResource("/logo.svgz", data: gzipStored(Data("<svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8)),
                               contentType: "image/svg+xml")
            // A script's byte order mark before a JPEG.
            origin.addResource("/thumb.php", data: Data([0xEF, 0xBB, 0xBF]) + photo, contentType: "image/jpeg")
            let paths = ["/img/123", "/pin/zeros.jpg", "/img/9", "/img/5", "/r.jpg", "/clip.gif", "/feed", "/radio", "/logo.svgz", "/thumb.php"]
            let items = paths.map { FetchItem(url: origin.url($0), collection: "pins") }
            let root = directory.appending("cache")

            let report = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)

            let reasons = Dictionary(uniqueKeysWithValues: report.failures.map { ($0.url, $0.message) })
            #expect(reasons == [
                origin.url("/img/123"): "the server sent a web page (image/jpeg, 55 B) where its type names an image; not stored",
                origin.url("/pin/zeros.jpg"): "the server sent data of no image format (image/jpeg, 4.9 KiB) where a .jpg file was asked for; not stored",
                origin.url("/img/9"): "the server sent data of no image format (image/png, 3.9 KiB) where its type names an image; not stored",
            ])
            let entries = try MediaCache(root: root).catalog.entries(collection: "pins")
            #expect(Dictionary(uniqueKeysWithValues: entries.map { ($0.url, $0.kind) }) == [
                origin.url("/img/5"): .photo, origin.url("/r.jpg"): .file, origin.url("/clip.gif"): .file, origin.url("/feed"): .file,
                origin.url("/radio"): .sound, origin.url("/logo.svgz"): .file, origin.url("/thumb.php"): .file,
            ])
            #expect(try objectPaths(inCache: root).count == 7)
            // Not cached: the next run asks again.
            let again = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)
            #expect(again.failed == 3 && again.skipped == 7)
            #expect(origin.requests(for: "/pin/zeros.jpg").count == 2)
        }
    }

    /// An error page in Latin-1 or Shift_JIS, and a login page gzipped
    /// unasked and sent as bytes, are refused where media was asked for:
    /// each was stored as the photo or sound.
    @Test func textInAnotherCharsetAndCompressedBytesAreRefusedWhereMediaWasAskedFor() async throws {
        try await withOrigin { origin, directory in
            let photo = origin.addFixtures(count: 1, size: 3000, firstSeed: 960)[0]
            let latin1 = Data("Acc".utf8) + Data([0xE8]) + Data("s refus".utf8) + Data([0xE9, 0x0A])
            origin.addResource("/refused.jpg", data: latin1, contentType: "text/plain")
            let japanese = Data([0x83, 0x41, 0x83, 0x4E, 0x83, 0x5A, 0x83, 0x58, 0x8B, 0x91, 0x94, 0xDB])
            origin.addResource("/refused.mp3", data: japanese, contentType: "text/plain; charset=Shift_JIS")
            origin.addResource("/login.jpg", data: gzipStored(Data("<html><body>Sign in</body></html>".utf8)),
                               contentType: "application/octet-stream")
            let root = directory.appending("cache")
            let items = [photo, origin.url("/refused.jpg"), origin.url("/refused.mp3"), origin.url("/login.jpg")]
                .map { FetchItem(url: $0, collection: "trip") }

            let report = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)

            #expect(report.downloaded == 1)
            #expect(Set(report.failures.map(\.message)) == [
                "the server sent text (text/plain, 13 B) where a .jpg file was asked for; not stored",
                "the server sent text (text/plain, 12 B) where a .mp3 file was asked for; not stored",
                "the server sent compressed data (application/octet-stream, 56 B) where a .jpg file was asked for; not stored",
            ])
            #expect(try objectPaths(inCache: root).count == 1)
            #expect(try MediaCache(root: root).catalog.entries(collection: "trip").map(\.url) == [photo])
        }
    }

    /// A photo and a sound a server gzips or deflates unasked are stored
    /// decoded, as what they are (they were refused as compressed data,
    /// every run); a compressed file the server labels so (Apache's
    /// `AddEncoding x-gzip .gz`) is stored as sent; a coded body cut short
    /// is refused and asked for again by the next run.
    @Test func bodiesCodedUnaskedAreStoredDecodedAndACompressedFileAsSent() async throws {
        try await withOrigin { origin, directory in
            let photo = SamplePhotos.photo(980)
            let soundPath = directory.appending("walk.wav")
            try SampleSounds.write(.wav, to: soundPath, seconds: 2, seed: 981)
            let sound = try #require(FileManager.default.contents(atPath: soundPath))
            let archive = Compression.compress(Data("a tar file".utf8), .gzip)
            let coded: [String: (body: Data, type: String, coding: String)] = [
                "/pins/summit.jpg": (Compression.compress(photo, .gzip), "image/jpeg", "gzip"),
                "/img/7": (Compression.compress(photo, .raw), "image/jpeg", "deflate"),
                "/sounds/walk.wav": (Compression.compress(sound, .zlib), "audio/wav", "deflate"),
                "/maps/trail.tar.gz": (archive, "application/x-gzip", "x-gzip"),
                "/pins/cut.jpg": (Compression.compress(photo, .gzip).dropLast(50), "image/jpeg", "gzip"),
            ]
            for (path, answer) in coded {
                origin.route(path) { _ in
                    OriginResponse(headers: [("Content-Type", answer.type), ("Content-Encoding", answer.coding), ("ETag", "\"c1\"")],
                                   body: answer.body)
                }
            }
            let root = directory.appending("cache")
            let items = coded.keys.sorted().map { FetchItem(url: origin.url($0), collection: "pins") }

            let report = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)

            let cutSize = ByteSize.format(Int64(coded["/pins/cut.jpg"]?.body.count ?? 0))
            #expect(report.failures.map(\.message) == [
                "the server sent a gzip-coded body cut short (its gzip stream ends at byte \(coded["/pins/cut.jpg"]?.body.count ?? 0) "
                    + "before its end; image/jpeg, \(cutSize) as sent); not stored",
            ])
            #expect(report.downloaded == 4)
            let entries = Dictionary(uniqueKeysWithValues: try MediaCache(root: root).catalog.entries(collection: "pins").map { ($0.url, $0) })
            #expect(entries[origin.url("/pins/summit.jpg")]?.kind == .photo)
            #expect(entries[origin.url("/pins/summit.jpg")]?.size == Int64(photo.count))
            #expect(entries[origin.url("/img/7")]?.sha256 == entries[origin.url("/pins/summit.jpg")]?.sha256)
            #expect(entries[origin.url("/sounds/walk.wav")]?.kind == .sound)
            #expect(entries[origin.url("/sounds/walk.wav")]?.metadata?.contains("\"durationSeconds\":2") == true,
                    "\(entries[origin.url("/sounds/walk.wav")]?.metadata ?? "")")
            #expect(entries[origin.url("/maps/trail.tar.gz")]?.size == Int64(archive.count))
            // The stored objects are the photo, the sound and the archive, byte for byte; nothing is left in tmp/.
            let stored = try Set(objectPaths(inCache: root).map { try #require(FileManager.default.contents(atPath: $0)) })
            #expect(stored == [photo, sound, archive])
            #expect(HeldPartials(in: root + "/tmp").count == 0)
            #expect(report.bytesReceived == Int64(coded.values.map(\.body.count).reduce(0, +)))

            let again = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)
            #expect(again.skipped == 4 && again.failed == 1)
            #expect(origin.requests(for: "/pins/cut.jpg").count == 2)
        }
    }

    /// A gzipped body cut off and resumed by a 206 that does not say its
    /// coding again (RFC 9110 has a server leave it out after `If-Range`)
    /// is the gzipped body still: stored decoded (it was stored gzipped, for
    /// good, at a URL that names no media). One sent whole again to a
    /// resume (a server that ignores ranges) is decoded too (it was refused
    /// as compressed data at every run); one that decodes to nothing is
    /// refused, as an empty body is.
    @Test func aCodedBodyResumedOrSentWholeAgainIsStoredDecodedAndAnEmptyOneIsRefused() async throws {
        try await withOrigin { origin, directory in
            let photo = SamplePhotos.photo(990) + fixtureBytes(count: 600_000, seed: 991)
            let coded = Compression.compress(photo, .gzip)
            // Resumed in the run that was cut off, and in the next run (the labels then come from the partial's validator).
            for path in ["/dl/7", "/dl/8"] {
                origin.addResource(path, data: coded, contentType: "image/jpeg", coding: ResourceCoding("gzip", labelsOnRanges: false))
            }
            origin.setFault("/dl/7", .dropAfter(bytes: coded.count / 2), times: 1)
            origin.setFault("/dl/8", .dropAfter(bytes: coded.count / 2), times: 2)
            origin.addResource("/pins/whole.jpg", data: coded, contentType: "image/jpeg", coding: ResourceCoding("gzip"))
            origin.setFault("/pins/whole.jpg", .dropAfter(bytes: coded.count / 2), times: 2)
            let empty = Compression.compress(Data(), .gzip)
            origin.addResource("/pins/empty.jpg", data: empty, contentType: "image/jpeg", coding: ResourceCoding("gzip"))
            let root = directory.appending("cache")
            let items = ["/dl/7", "/dl/8", "/pins/whole.jpg", "/pins/empty.jpg"].map { FetchItem(url: origin.url($0), collection: "pins") }

            let first = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)
            // The next run's resume of whole.jpg is answered with the whole body again.
            origin.setFault("/pins/whole.jpg", .ignoreRange)
            let second = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)

            #expect(first.downloaded == 1 && second.downloaded == 2, "\(first.failures) \(second.failures)")
            #expect(second.failures.map(\.message) == [
                "the server sent a gzip-coded body that decodes to nothing (image/jpeg, \(empty.count) B as sent); not stored",
            ])
            // Each stored from the 206 that resumed it, not from a new start.
            for path in ["/dl/7", "/dl/8"] { #expect(origin.requests(for: path).last?.header("Range") != nil, "\(path)") }
            let entries = Dictionary(uniqueKeysWithValues: try MediaCache(root: root).catalog.entries(collection: "pins").map { ($0.url, $0) })
            #expect(entries.count == 3)
            for path in ["/dl/7", "/dl/8", "/pins/whole.jpg"] {
                #expect(entries[origin.url(path)]?.kind == .photo, "\(path)")
                #expect(entries[origin.url(path)]?.size == Int64(photo.count), "\(path)")
            }
            #expect(try objectPaths(inCache: root).map { FileManager.default.contents(atPath: $0) } == [photo])
            #expect(HeldPartials(in: root + "/tmp").count == 0)
        }
    }

    /// A download link that names no media (`/dl/3`) but is redirected to
    /// one that does asks for that media: a sign-in page sent there was
    /// stored as the item, and the link counted as cached for good. A photo
    /// behind the same kind of link is stored.
    @Test func aPageBehindARedirectToAMediaNameIsRefused() async throws {
        try await withOrigin { origin, directory in
            let photo = SamplePhotos.photo(961)
            origin.addResource("/files/4.jpg", data: photo, contentType: "image/jpeg")
            origin.addResource("/files/3.jpg", data: Data("<!doctype html><html><body>Sign in</body></html>".utf8),
                               contentType: "text/html")
            origin.route("/dl/3") { _ in .redirect(to: "/files/3.jpg?token=secret") }
            origin.route("/dl/4") { _ in .redirect(to: "/files/4.jpg") }
            origin.addResource("/about", data: Data("<html>about</html>".utf8), contentType: "text/html")
            origin.route("/dl/about") { _ in .redirect(to: "/about") }
            // A target longer than messages show it (a name of 40 percent-encoded CJK characters).
            let longTarget = "/files/" + String(repeating: "%E6%9D%B1", count: 40) + ".jpg"
            origin.addResource(longTarget, data: Data("<!doctype html><html><body>Sign in</body></html>".utf8), contentType: "text/html")
            origin.route("/dl/5") { _ in .redirect(to: longTarget) }
            let root = directory.appending("cache")
            let items = ["/dl/3", "/dl/4", "/dl/about", "/dl/5"].map { FetchItem(url: origin.url($0), collection: "trip") }

            let report = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)

            #expect(report.downloaded == 2)
            #expect(report.failures.map(\.url).sorted() == [origin.url("/dl/3"), origin.url("/dl/5")])
            #expect(report.failures.first { $0.url == origin.url("/dl/3") }?.message ==
                "the server sent a web page (text/html, 48 B) where a .jpg file was asked for "
                    + "(redirected to \(origin.url("/files/3.jpg"))?…); not stored")
            #expect(Set(try MediaCache(root: root).catalog.entries(collection: "trip").map(\.url)) == [origin.url("/dl/4"), origin.url("/dl/about")])
            // Not cached: the next run asks again.
            let again = try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items)
            #expect(again.failures.map(\.url).sorted() == [origin.url("/dl/3"), origin.url("/dl/5")])
            #expect(origin.requests(for: "/dl/3").count == 2)
        }
    }

    /// `stats` counts the rows in `unrecorded/` the next run would record:
    /// not those of bodies never moved into the store, nor those recorded
    /// already (a run killed while it held a group's rows leaves both; 435
    /// were counted where 26 waited), and a row in two files once.
    @Test func onlyRowsOfStoredObjectsNotYetRecordedAreCountedAsWaiting() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            func row(_ name: String, _ hash: Character) -> IngestRecord {
                IngestRecord(url: "http://h/\(name).jpg", collection: "c", kind: .photo, title: nil,
                             sha256: String(repeating: hash, count: 64), size: 10)
            }
            let stored = row("stored", "a"), recorded = row("recorded", "b"), neverMoved = row("never-moved", "c")
            for record in [stored, recorded] {
                let path = try #require(cache.path(for: record.sha256))
                try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                        withIntermediateDirectories: true)
                #expect(FileManager.default.createFile(atPath: path, contents: Data(count: 10)))
            }
            try cache.catalog.record([recorded])
            try cache.unrecorded.keep([stored, recorded, neverMoved], fetchedAt: Date())
            // A run killed between keeping a group and letting its held file go leaves the rows twice.
            try cache.unrecorded.keep([stored], fetchedAt: Date())

            // (Waited for: another test's spawned process may hold a copy of a file's lock for an instant.)
            #expect(await waitUntil { cache.unrecorded.waitingRecords().count == 4 })
            #expect(try cache.rowsAwaitingRecord() == 1)
        }
    }

    /// `data` as a gzip stream of one stored (uncompressed) deflate block.
    private func gzipStored(_ data: Data) -> Data {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in data {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        crc ^= 0xFFFF_FFFF
        let length = UInt16(data.count)
        func littleEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
        return Data([0x1F, 0x8B, 0x08, 0, 0, 0, 0, 0, 0, 0x03, 0x01] + littleEndian(length) + littleEndian(~length))
            + data + Data(littleEndian(crc) + littleEndian(UInt32(data.count)))
    }

    /// A catalog damaged on disk is named, with SQLite's reason in a few
    /// words: the lookup of a long list quoted a kilobyte of SQL.
    @Test func aDamagedCatalogIsNamedInOneShortLine() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 30, size: 1000, firstSeed: 900)
            let root = directory.appending("cache")
            let items = urls.map { FetchItem(url: $0, collection: "alps") }
            #expect(try await FetchJob(cache: try MediaCache(root: root), configuration: quickRetries()).run(items).succeeded)
            // Every row into the file, then the source table's first page overwritten.
            let catalog = root + "/catalog.sqlite"
            let database = try DatabaseQueue(path: catalog)
            try await database.writeWithoutTransaction { try $0.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            let page = try await database.read { try Int.fetchOne($0, sql: "SELECT rootpage FROM sqlite_master WHERE name = 'source'") }
            let pageSize = try await database.read { try Int.fetchOne($0, sql: "PRAGMA page_size") }
            try database.close()
            let file = try #require(FileHandle(forUpdatingAtPath: catalog))
            try file.seek(toOffset: UInt64((try #require(page) - 1) * (try #require(pageSize))))
            try file.write(contentsOf: Data(repeating: 0xA5, count: try #require(pageSize)))
            try file.close()

            let error = await #expect(throws: CacheError.self) {
                try await FetchJob(cache: try MediaCache(root: root), configuration: self.quickRetries()).run(items)
            }
            #expect(error?.message == "cannot read the catalog at \(catalog): SQLite error 11: database disk image is malformed")
        }
    }

    @Test func repeatsAreDroppedPerCollectionKeepingTheFirstInOrder() {
        let a = FetchItem(url: "http://h/a", collection: "x", title: "first")
        let b = FetchItem(url: "http://h/b", collection: "x")
        let aElsewhere = FetchItem(url: "http://h/a", collection: "y")
        let c = FetchItem(url: "http://h/c", collection: "x")

        let list = [a, b, aElsewhere, FetchItem(url: "http://h/a", collection: "x", title: "again"), c, b]
        #expect(list.withoutRepeats().items == [a, b, aElsewhere, c])
        #expect([b, b, b].withoutRepeats().items == [b])
        #expect([a, b, aElsewhere, c].withoutRepeats().items == [a, b, aElsewhere, c])
        #expect([FetchItem]().withoutRepeats().items.isEmpty)
        // Items are told apart by a hash first: when every hash is the same,
        // the items themselves decide, and the answer is the same.
        #expect(list.withoutRepeats(hash: { _, _ in 7 }).items == [a, b, aElsewhere, c])
        #expect((list + list + [FetchItem(url: "http://h/d", collection: "x")]).withoutRepeats(hash: { _, _ in 7 }).items
                == [a, b, aElsewhere, c, FetchItem(url: "http://h/d", collection: "x")])
    }

    /// A list is settled a few items at a time: cached items in every part
    /// join the new collection once, items already there stay as they are,
    /// and only the new URLs are downloaded.
    @Test func aListCheckedInPartsSettlesEveryPart() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 30, size: 2000, firstSeed: 100)
            let cache = try MediaCache(root: directory.appending("cache"))
            _ = try await FetchJob(cache: cache, configuration: quickRetries())
                .run(urls.prefix(25).map { FetchItem(url: $0, collection: "alps") })
            // 40 items in parts of 7: the last part is a short one.
            let items = urls.map { FetchItem(url: $0, collection: "favourites") }
                + urls.prefix(10).map { FetchItem(url: $0, collection: "alps", title: "again") }

            let report = try await FetchJob(cache: cache, configuration: quickRetries(), reportsEachStoredItem: true,
                                            settlePart: 7, objectsRemembered: 1 << 16).run(items)

            #expect(report.succeeded)
            #expect(report.skipped == 35)
            #expect(report.downloaded == 5)
            #expect(origin.requests().count == 30)
            #expect(Set(try cache.catalog.entries(collection: "favourites").map(\.url)) == Set(urls))
            let alps = try cache.catalog.entries(collection: "alps")
            #expect(alps.count == 25)
            // Members already there are left as they are, not recorded again.
            #expect(alps.allSatisfy { $0.title == nil })
        }
    }

    /// Objects shared by URLs in several parts, once they are forgotten
    /// between parts: a file that is there is found each time, and one that
    /// is gone sends every URL sharing it to be downloaded again.
    @Test(arguments: [true, false])
    func objectsForgottenBetweenPartsAreLookedForAgain(fileKept: Bool) async throws {
        try await withOrigin { origin, directory in
            let shared = fixtureBytes(count: 3000, seed: 300)
            let sharing = (0..<6).map { index -> String in
                origin.addResource("/same\(index).jpg", data: shared)
                return origin.url("/same\(index).jpg")
            }
            let distinct = (0..<4).map { index -> String in
                origin.addResource("/own\(index).jpg", data: fixtureBytes(count: 3000, seed: UInt64(310 + index)))
                return origin.url("/own\(index).jpg")
            }
            // Shared and distinct objects alternate, so each part of 3 meets the shared one again.
            let urls = [sharing[0], distinct[0], sharing[1], distinct[1], sharing[2], distinct[2],
                        sharing[3], distinct[3], sharing[4], sharing[5]]
            let cache = try MediaCache(root: directory.appending("cache"))
            _ = try await FetchJob(cache: cache, configuration: quickRetries()).run(urls.map { FetchItem(url: $0, collection: "alps") })
            let sharedHash = try #require(try cache.catalog.entries().first { $0.url == sharing[0] }?.sha256)
            if !fileKept { try cache.store.remove(sharedHash) }

            let report = try await FetchJob(cache: cache, configuration: quickRetries(), reportsEachStoredItem: true,
                                            settlePart: 3, objectsRemembered: 2)
                .run(urls.map { FetchItem(url: $0, collection: "favourites") })

            #expect(report.succeeded)
            #expect(report.skipped == (fileKept ? 10 : 4))
            #expect(report.downloaded == (fileKept ? 0 : 6))
            #expect(origin.requests().count == (fileKept ? 10 : 16))
            #expect(cache.store.contains(sharedHash))
            #expect(Set(try cache.catalog.entries(collection: "favourites").map(\.url)) == Set(urls))
        }
    }

    /// A collection stored as "cafe" + combining accent (macOS gives names so)
    /// is the one `café` means: its items are not split over two that look alike.
    @Test func aCollectionStoredInAnotherUnicodeFormIsTheSameCollection() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 3000, seed: 71))
            origin.addResource("/b.jpg", data: fixtureBytes(count: 3000, seed: 72))
            let cache = try MediaCache(root: directory.appending("cache"))
            let decomposed = "cafe\u{301}", composed = "caf\u{E9}"
            _ = try await FetchJob(cache: cache, configuration: quickRetries())
                .run([FetchItem(url: origin.url("/a.jpg"), collection: decomposed)])

            let report = try await FetchJob(cache: cache, configuration: quickRetries())
                .run([FetchItem(url: origin.url("/a.jpg"), collection: composed), FetchItem(url: origin.url("/b.jpg"), collection: composed)])

            #expect(report.succeeded)
            #expect(try cache.catalog.collectionNames().map { Array($0.utf8) } == [Array(decomposed.utf8)])
            #expect(try cache.catalog.entries(collection: decomposed).count == 2)
        }
    }

    /// Both spellings of one name in one list, the stored one first: every
    /// item goes into the stored collection (the second spelling had made a
    /// second collection that looked the same).
    @Test func bothSpellingsOfACollectionInOneListGoToTheStoredOne() async throws {
        try await withOrigin { origin, directory in
            for name in ["a", "b", "c"] { origin.addResource("/\(name).jpg", data: fixtureBytes(count: 3000, seed: UInt64(name.utf8.first ?? 0))) }
            let cache = try MediaCache(root: directory.appending("cache"))
            let decomposed = "cafe\u{301}", composed = "caf\u{E9}"
            _ = try await FetchJob(cache: cache, configuration: quickRetries())
                .run([FetchItem(url: origin.url("/a.jpg"), collection: composed), FetchItem(url: origin.url("/b.jpg"), collection: composed)])

            // b is cached (no download), so c's row is recorded in a group of its own, with the name it is given.
            let report = try await FetchJob(cache: cache, configuration: quickRetries())
                .run([FetchItem(url: origin.url("/b.jpg"), collection: composed), FetchItem(url: origin.url("/c.jpg"), collection: decomposed)])

            #expect(report.succeeded)
            #expect(report.downloaded == 1)
            #expect(try cache.catalog.collectionNames().map { Array($0.utf8) } == [Array(composed.utf8)])
            #expect(try cache.catalog.entries(collection: composed).count == 3)
        }
    }

    @Test func onlyTheFirstJobOnANewCatalogSkipsTheLookup() async throws {
        try await TemporaryDirectory.with { directory in
            let root = directory.appending("cache")
            let new = try MediaCache(root: root)
            #expect(new.claimEmptyCatalog())
            // A second job may find what the first stored.
            #expect(!new.claimEmptyCatalog())
            _ = try await new.openedCatalog()
            // Opened again, the catalog is there: it may hold anything.
            #expect(!(try MediaCache(root: root).claimEmptyCatalog()))
        }
    }

    @Test(arguments: [true, false])
    func storedItemsAreEventsOnlyWhenAskedForButAlwaysCounted(reportsEachStoredItem: Bool) async throws {
        try await withOrigin { origin, directory in
            let items = (0..<12).map { index -> FetchItem in
                origin.addResource("/s\(index)", data: fixtureBytes(count: 3000, seed: UInt64(100 + index)))
                return FetchItem(url: origin.url("/s\(index)"), collection: "c")
            }
            let cache = try MediaCache(root: directory.appending("cache"))
            let job = FetchJob(cache: cache, configuration: quickRetries(), reportsEachStoredItem: reportsEachStoredItem)
            let events = Task { () -> (stored: Int, lastDone: Int) in
                var stored = 0
                var lastDone = 0
                for await event in job.events {
                    if case .stored = event { stored += 1 }
                    if case .progress(let progress) = event { lastDone = progress.done }
                }
                return (stored, lastDone)
            }

            let report = try await job.run(items)
            let seen = await events.value

            #expect(report.downloaded == 12)
            #expect(seen.stored == (reportsEachStoredItem ? 12 : 0))
            #expect(seen.lastDone == 12)
        }
    }

    @Test func progressIsReportedOnlyWhenSomethingChanged() async throws {
        try await withOrigin { origin, directory in
            // Quiet for a while before it answers: many ticks with nothing new.
            origin.route("/slow") { _ in
                usleep(300_000)
                return OriginResponse(body: Data("late".utf8))
            }
            let cache = try MediaCache(root: directory.appending("cache"))
            var configuration = quickRetries()
            configuration.progressInterval = 0.01
            // No heartbeat within the test: a loaded machine may take seconds over it.
            let job = FetchJob(cache: cache, configuration: configuration, reportsEachStoredItem: true,
                               settlePart: 4096, objectsRemembered: 1 << 16, heartbeat: .seconds(3600))
            let (report, progress) = try await runCollectingProgress(job, [FetchItem(url: origin.url("/slow"), collection: "c")])

            #expect(report.downloaded == 1)
            #expect(progress.last?.done == 1)
            #expect(progress.count >= 2)
            let repeats = zip(progress, progress.dropFirst()).filter { $0 == $1 }.count
            #expect(repeats == 0, "\(repeats) of \(progress.count) progress events repeated the one before")
        }
    }

    /// While a server is quiet nothing changes, yet the run still says it
    /// is alive once a heartbeat: it went silent for the whole stall.
    @Test func unchangedProgressIsSentAgainOnceAHeartbeat() {
        var gate = ProgressGate(heartbeat: .seconds(1))
        let start = ContinuousClock.now
        var quiet = RunProgress()
        quiet.total = 1
        var moved = quiet
        moved.bytesReceived = 10
        let steps: [(RunProgress, Duration)] = [
            (quiet, .zero), (quiet, .milliseconds(250)), (quiet, .milliseconds(999)), (quiet, .seconds(1)),
            (quiet, .milliseconds(1500)),
            // A change goes at once, and the heartbeat counts from it.
            (moved, .milliseconds(1600)), (moved, .milliseconds(2500)), (quiet, .milliseconds(2550)),
        ]
        let sent = steps.map { progress, after in gate.admits(progress, at: start + after) }
        #expect(sent == [true, false, false, true, false, true, false, true])
    }

    @Test func aFailureIsReportedAndRememberedWhileTheRestIsStored() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/ok", data: Data("fine".utf8))
            origin.setFault("/broken", .status(500))
            let cache = try MediaCache(root: directory.appending("cache"))
            let job = FetchJob(cache: cache, configuration: quickRetries())
            let events = Task { () -> [String] in
                var kinds: [String] = []
                for await event in job.events {
                    switch event {
                    case .stored: kinds.append("stored")
                    case .failed: kinds.append("failed")
                    case .retrying: kinds.append("retrying")
                    case .finished: kinds.append("finished")
                    case .progress, .hostLimited, .hostPaused: break
                    }
                }
                return kinds
            }

            let report = try await job.run([FetchItem(url: origin.url("/ok"), collection: "c"),
                                            FetchItem(url: origin.url("/broken"), collection: "c"),
                                            FetchItem(url: origin.url("/ok"), collection: "c")])

            #expect(report.total == 2)
            #expect(report.downloaded == 1)
            // Tried twice (one retry): the message says so, or it reads as if it was tried once.
            #expect(report.failures.map(\.url) == [origin.url("/broken")])
            #expect(report.failures.map(\.message) == ["HTTP 500 Internal Server Error (after 2 attempts)"])
            #expect(!report.succeeded)
            #expect(try cache.catalog.stats().failedSources == 1)
            let kinds = await events.value
            #expect(kinds.filter { $0 == "stored" }.count == 1)
            #expect(kinds.contains("retrying"))
            #expect(kinds.last == "finished")
        }
    }

    /// Every failure is counted, and said as it happens; the report keeps
    /// the first `failuresKept` in full, not a record per URL of a list
    /// whose host is gone.
    @Test func theReportCountsEveryFailureAndKeepsTheFirstOnes() async throws {
        try await withOrigin { origin, directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            let job = FetchJob(cache: cache, configuration: quickRetries())
            let said = Task { () -> Int in
                var count = 0
                for await event in job.events { if case .failed = event { count += 1 } }
                return count
            }
            let count = FetchReport.failuresKept + 20
            let items = (0..<count).map { FetchItem(url: origin.url("/gone/\($0)"), collection: "c") }

            let report = try await job.run(items)

            #expect(report.failed == count)
            #expect(report.failures.count == FetchReport.failuresKept)
            #expect(Set(report.failures.map(\.url)).count == FetchReport.failuresKept)
            #expect(report.left == 0)
            #expect(!report.succeeded)
            #expect(await said.value == count)
            #expect(try cache.catalog.stats().failedSources == count)
        }
    }

    @Test func anObjectDeletedByHandIsDownloadedAgain() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a", data: fixtureBytes(count: 1000, seed: 1))
            let cache = try MediaCache(root: directory.appending("cache"))
            let items = [FetchItem(url: origin.url("/a"), collection: "c")]
            _ = try await FetchJob(cache: cache).run(items)
            let hash = try #require(try cache.catalog.entries().first?.sha256)
            try cache.store.remove(hash)

            let report = try await FetchJob(cache: cache).run(items)

            #expect(report.downloaded == 1)
            #expect(cache.store.contains(hash))
        }
    }
}
