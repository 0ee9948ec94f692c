import ContentStore
import Foundation
import MediaCheck
import Transfer
import Synchronization
import URLText

/// One thing to put in the cache: a URL, and where it belongs.
public struct FetchItem: Sendable, Equatable {
    public var url: String
    public var collection: String
    public var kind: ItemKind
    public var title: String?
    /// JSON object text with facts about the item, kept in the catalog.
    public var metadata: String?

    public init(url: String, collection: String, kind: ItemKind = .file, title: String? = nil, metadata: String? = nil) {
        self.url = url
        self.collection = collection
        self.kind = kind
        self.title = title
        self.metadata = metadata
    }

    /// The URL as the catalog knows it: in its one spelling (`URLSpelling`,
    /// as the engine requests it; a URL from `URLList` is spelt so already),
    /// without its password.
    var catalogURL: String { URLPassword.removed(from: URLSpelling.normalized(url)) }
}

/// The run as a whole at a moment.
public struct RunProgress: Sendable, Equatable {
    public var total = 0
    /// Downloaded and stored in this run.
    public var done = 0
    public var failed = 0
    /// Already cached: not downloaded again.
    public var skipped = 0
    /// Body bytes received over the network in this run.
    public var bytesReceived: Int64 = 0
    /// The sizes of the bodies stored in this run (`done`): what the time
    /// left takes an item not started yet to hold (see `ProgressText`).
    public var bytesStored: Int64 = 0
    /// Bytes held before that downloads went on from (see `EngineSnapshot.bytesResumed`).
    public var bytesResumed: Int64 = 0
    public var bytesPerSecond: Double = 0
    /// Transfers running now.
    public var active: [TransferSnapshot] = []
    /// Transfers waiting for a slot.
    public var queued = 0
    /// Transfers sleeping before their next attempt.
    public var waitingToRetry = 0
    /// Whole seconds until the first of those wakes.
    public var nextRetryInSeconds: Int?
    /// Items another mediafetch process is downloading into the same cache,
    /// waited for (counted as cached once it has stored them).
    public var waitingForOtherProcess = 0
    /// Downloaded, and waiting to be moved into the store and recorded: a
    /// wait for another process's catalog lock showed "0/50 items" with all
    /// 50 bodies in.
    public var storing = 0
    /// The host failing without an answer the longest (see `EngineSnapshot.failingHost`).
    public var failingHost: FailingHost?
}

/// What a fetch job reports while it runs. The stream ends with `.finished`.
public enum JobEvent: Sendable {
    case progress(RunProgress)
    case stored(url: String, sha256: String, size: Int64, resumedBytes: Int64)
    /// `givenUpHost`: the failure is its host's, given up (see `HostReachability`).
    case failed(url: String, reason: String, givenUpHost: String? = nil)
    case retrying(url: String, attempt: Int, delay: Double, reason: String)
    /// A host turned connections away while it answered others: it gets at
    /// most `connections` transfers at once while it keeps to that (see `TransferEvent`).
    case hostLimited(host: String, connections: Int)
    /// A host answered 429 Too Many Requests: its URLs wait `seconds`, then
    /// one goes alone until it is served (see `TransferEvent`). Sent when a pause begins.
    case hostPaused(host: String, seconds: Double)
    case finished(FetchReport)
}

/// A host given up in a run, and how many of its URLs failed so.
public struct GivenUpHost: Sendable, Equatable {
    /// `host:port`, as the failure lines name it.
    public let host: String
    public var failed: Int

    public init(host: String, failed: Int) {
        self.host = host
        self.failed = failed
    }
}

/// The outcome of a fetch job.
public struct FetchReport: Sendable, Equatable {
    /// A report of nothing done yet (and of a run with nothing to fetch).
    public init() {}

    public var total = 0
    /// Lines of the list that repeated an earlier one (the same URL in the
    /// same collection): not in `total`, fetched and counted once.
    public var repeats = 0
    public var downloaded = 0
    public var skipped = 0
    /// How many items failed.
    public var failed = 0
    /// The first failed URLs (up to `failuresKept`) with their reasons, in the
    /// order they failed: each was said as it happened, and a list whose
    /// host is gone would otherwise keep a record per URL for the whole run.
    public var failures: [FailureRecord] = []
    /// How many failures `failures` keeps.
    public static let failuresKept = 100
    /// Body bytes received in this run: of the bodies stored, and of those
    /// kept to resume later or thrown away.
    public var bytesReceived: Int64 = 0
    /// Bytes held before that downloads went on from, as soon as a server
    /// agreed to go on: also of bodies a stopped run did not finish.
    public var resumedBytes: Int64 = 0
    public var seconds: Double = 0
    /// True when the run was cancelled (Ctrl-C) before every item was tried
    /// (false when the disk filled up or the catalog failed first:
    /// `outOfSpace` and `catalogFailure` say why it stopped).
    public var interrupted = false
    /// Why the run stopped before every item was tried, when the disk
    /// holding the cache filled up: the first such failure's reason. The
    /// items that failed for want of room are left, not failed.
    public var outOfSpace: String?
    /// Why the run stopped before every item was tried, when the catalog
    /// failed as a whole (a lock another process held past the wait, a
    /// damaged file), in SQLite's words. The items it could not record are
    /// left, not failed: their objects are stored, and a later run records them.
    public var catalogFailure: String?
    /// Of `downloaded`, how many are stored but not yet in the catalog: it
    /// failed (or the run was interrupted while it waited for its lock), and
    /// their rows wait in `unrecorded/` for the next run (see `UnrecordedRows`).
    public var awaitingRecord = 0
    /// Of `downloaded`, how many were asked for over https and came over
    /// plain http after a redirect (see `DownloadedBody.cameOverPlainHTTP`).
    public var overPlainHTTP = 0
    /// The hosts given up in this run (see `HostReachability`), in the order
    /// their first URL failed so, each with how many of its URLs failed so.
    /// A list whose host is gone prints a line per URL: 20,000 lines, and no
    /// word of which host it was at the end.
    public var givenUpHosts: [GivenUpHost] {
        get { givenUpOrder.map { GivenUpHost(host: $0, failed: givenUpCounts[$0] ?? 0) } }
        set {
            givenUpOrder = newValue.map(\.host)
            givenUpCounts = Dictionary(newValue.map { ($0.host, $0.failed) }, uniquingKeysWith: +)
        }
    }
    /// `givenUpHosts` as kept: counted by host (a run may give thousands up), in order.
    private var givenUpOrder: [String] = []
    private var givenUpCounts: [String: Int] = [:]

    /// The cache could not take more, and the run stopped (see `outOfSpace` and `catalogFailure`).
    public var stoppedEarly: Bool { outOfSpace != nil || catalogFailure != nil }

    /// A URL failed because its host was given up: counted with its host.
    mutating func countGivenUp(host: String) {
        if givenUpCounts[host] == nil { givenUpOrder.append(host) }
        givenUpCounts[host, default: 0] += 1
    }

    /// Items neither stored, found cached nor failed: not tried, or cut off.
    public var left: Int { max(0, total - downloaded - skipped - failed) }

    /// Everything asked for is in the cache.
    public var succeeded: Bool { failed == 0 && !interrupted && !stoppedEarly && awaitingRecord == 0 }
}

/// Puts items into the cache: skips what is cached, downloads the rest
/// through the transfer engine, stores and records each as it completes.
public final class FetchJob: Sendable {
    public let cache: MediaCache
    public let configuration: TransferConfiguration
    /// Events while the job runs; ends with `.finished`. Unbounded: item
    /// events are few per item and progress ticks come four times a second.
    public let events: AsyncStream<JobEvent>
    private let eventSink: AsyncStream<JobEvent>.Continuation
    /// Whether each stored item is an event of its own (`.stored`).
    public let reportsEachStoredItem: Bool
    /// How many items `settleCached` looks up at a time: what it holds for
    /// the lookups is bounded by this, not by the length of the list.
    private let settlePart: Int
    /// How many objects `settleCached` remembers having looked at before it
    /// forgets them all (see `settleCachedPart`).
    private let objectsRemembered: Int
    /// From how many downloads on the fan-outs are made ahead.
    private let fanOutsAheadFrom: Int
    /// Where bodies go: the cache's own store unless a test breaks it.
    private let ingestStore: (any BlobStore)?
    private let state: SleepingLock<State>
    /// Sounds being decoded and photos being walked before they are stored
    /// (see `checkSound`, `checkPhoto`).
    private let mediaChecks = DispatchGroup()
    /// Where photos are walked to their end, one at a time (see `checkPhoto`).
    private let photoWalks = DispatchQueue(label: "mf-photo-walk", qos: .utility)
    /// Bodies whose `Content-Encoding` is undone, one at a time (see `decode`).
    private let decodes = DispatchQueue(label: "mf-decode", qos: .utility)
    /// The threads a run's checks of what it downloaded take at most, beside the transfers' (see `ThreadLimit`).
    public static let checkThreadsAtMost = SoundCheck.threadsAtMost

    private struct State {
        var progress = RunProgress()
        /// Which progress events are sent.
        var progressGate: ProgressGate
        var report = FetchReport()
        /// URLs whose cached object's file was found gone, with that object.
        var missingObjects: [String: String] = [:]
        /// The downloads, to stop when the disk fills up.
        var downloads: Task<Void, Never>?
        /// The job was cancelled: a catalog that then fails (its lock wait
        /// cut short) does not stop the run as a failed catalog would.
        var cancelled = false
        /// When the run began, before it looked for its URLs in the catalog:
        /// its failures do not overwrite fetches recorded since (`FailureRecord.since`).
        var began = Date()
        /// The store's fan-outs are to be made ahead once the first body is
        /// handed over to be stored (see `download`).
        var fanOutsAheadDue = false

        /// Counts the items of `requested` (`items`, without its repeats) as the run's.
        mutating func count(_ items: any FetchList, of requested: any FetchList) {
            progress.total = items.count
            report.total = items.count
            report.repeats = requested.count - items.count
        }
    }

    /// `reportsEachStoredItem: false` leaves `.stored` out of `events` (the
    /// counts still come with `.progress` and the report): each event wakes
    /// the consumer's task, a thread switch per file that a display showing
    /// only totals does not need.
    public convenience init(cache: MediaCache, configuration: TransferConfiguration = TransferConfiguration(),
                            reportsEachStoredItem: Bool = true) {
        self.init(cache: cache, configuration: configuration, reportsEachStoredItem: reportsEachStoredItem,
                  settlePart: 4096, objectsRemembered: 1 << 16)
    }

    /// `settlePart`: how many items are looked up in the catalog at a time;
    /// `objectsRemembered`: how many objects' files are remembered as looked
    /// for (both small in tests, so that a short list crosses parts and
    /// forgets objects); `ingestStore`: where bodies go instead of the
    /// cache's store (a test's store that fails); `heartbeat`: the longest
    /// the run goes without a progress event (see `reportProgress`);
    /// `fanOutsAheadFrom`: from how many downloads on the store's fan-out
    /// directories are made ahead (see `ObjectStore.makeFanOutsAhead`).
    init(cache: MediaCache, configuration: TransferConfiguration, reportsEachStoredItem: Bool,
         settlePart: Int, objectsRemembered: Int, ingestStore: (any BlobStore)? = nil, heartbeat: Duration = .seconds(1),
         fanOutsAheadFrom: Int = ObjectStore.objectsWorthMakingFanOutsAhead) {
        self.cache = cache
        self.fanOutsAheadFrom = fanOutsAheadFrom
        state = SleepingLock(State(progressGate: ProgressGate(heartbeat: heartbeat)))
        self.ingestStore = ingestStore
        self.configuration = configuration
        self.reportsEachStoredItem = reportsEachStoredItem
        self.settlePart = max(1, settlePart)
        self.objectsRemembered = max(1, objectsRemembered)
        (events, eventSink) = AsyncStream.makeStream(of: JobEvent.self, bufferingPolicy: .unbounded)
    }

    /// Runs the job to the end (or until the task is cancelled) and returns the report.
    /// Cancelling it also ends a wait for another process's catalog lock:
    /// what could not be recorded then is kept for the next run (see
    /// `UnrecordedRows`), and the run ends as interrupted.
    /// `whenDownloadsBegin` is told how many items will be downloaded, when
    /// there are any (once the cached ones are known): a note about the
    /// downloads is for a run that makes some.
    public func run(_ requested: any FetchList,
                    whenDownloadsBegin: (@Sendable (_ count: Int) -> Void)? = nil) async throws -> FetchReport {
        try await withTaskCancellationHandler {
            try await runUntilCancelled(requested, whenDownloadsBegin: whenDownloadsBegin)
        } onCancel: {
            state.withLock { $0.cancelled = true }
            cache.stopWaitingForCatalogLocks()
        }
    }

    private func runUntilCancelled(_ requested: any FetchList,
                                   whenDownloadsBegin: (@Sendable (Int) -> Void)?) async throws -> FetchReport {
        let clock = ContinuousClock()
        let started = clock.now
        defer { eventSink.finish() }
        let items = requested.withoutRepeats()
        state.withLock {
            $0.began = Date()
            $0.count(items, of: requested)
        }

        let ingestor = Ingestor(cache: cache, store: ingestStore)
        let engine: TransferEngine
        do {
            engine = try TransferEngine(configuration: configuration, partialDirectory: cache.store.temporaryDirectory)
        } catch {
            await ingestor.finishing()
            throw CacheError("cannot start the transfer engine: \(error)")
        }
        let forwarding = Task { await forward(engine.events) }
        // Seen by other runs on the cache from now on (see `OtherProcessLookout`).
        let mark = cache.runs.mark()
        defer { mark?.remove() }
        engine.sweepPartials()
        // Before the downloads can fill the disk.
        cache.reserve.hold()

        do {
            // On a filesystem of small blocks the catalog is made first: a disk
            // that the downloads filled while SQLite made its shared memory
            // turned SQLite's first store into a hole into a SIGBUS (seen
            // on a 6 MB ext4, in one run of eight).
            if cache.claimEmptyCatalog(), !OutOfSpace.hasSmallBlocks(directory: cache.root) {
                // A catalog that did not exist holds nothing: the downloads
                // start while it is created, and stop if it cannot be (a
                // child that throws ends the group, which cancels the other).
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { await self.download(items, engine: engine, ingestor: ingestor, mark: mark, whenBegun: whenDownloadsBegin) }
                    group.addTask { _ = try await self.cache.openedCatalog() }
                    while try await group.next() != nil {}
                }
            } else {
                // Waits for the catalog without holding a thread of the pool.
                _ = try await cache.openedCatalog()
                let toDownload: any FetchList
                recordKeptRows()
                removePartialsOfCachedURLs(engine)
                // Before the lookup: a change since means another process has recorded rows (see `OtherProcessLookout`).
                let version = try? cache.catalog.versionOthersChange()
                do {
                    toDownload = try settleCached(items, ingestor: ingestor)
                } catch let error as CatalogWriteFailure
                            where state.withLock({ $0.cancelled }) && Catalog.isLockTimeout(error.underlying) {
                    // Interrupted while waiting for the catalog's lock: nothing was fetched, all is left.
                    toDownload = [FetchItem]()
                } catch let error as CatalogWriteFailure {
                    throw CacheError.catalog("record in", at: cache.catalogPath, error.underlying, then: "; nothing was fetched")
                } catch {
                    throw cache.catalogReadError(error)
                }
                // Interrupted while the list was being looked up: nothing is started.
                if !Task.isCancelled {
                    await download(toDownload, engine: engine, ingestor: ingestor, catalogVersion: version, mark: mark,
                                   whenBegun: whenDownloadsBegin)
                }
            }
        } catch {
            engine.shutdown()
            await ingestor.finishing()
            await forwarding.value
            throw error
        }
        engine.shutdown()
        let closingError = await ingestor.finishing()
        await forwarding.value
        if let closingError { throw closingError }

        var report = state.withLock { state -> FetchReport in
            state.report.seconds = (clock.now - started).seconds
            // The engine counts every body byte: also those kept to resume
            // (an interrupted run would say "0 B") or thrown away.
            state.report.bytesReceived = max(state.report.bytesReceived, state.progress.bytesReceived)
            // Counted by the engine when a server agreed to go on: a run interrupted
            // before a resumed body was whole never said it resumed.
            state.report.resumedBytes = state.progress.bytesResumed
            return state.report
        }
        // Interrupted only when something asked for is missing because of it.
        if Task.isCancelled, report.left > 0 || report.awaitingRecord > 0, !report.stoppedEarly {
            report.interrupted = true
        }
        reportProgress { _ in }
        eventSink.yield(.finished(report))
        return report
    }

    /// The job for a cache this process cannot write (read-only media, or
    /// another user's): when every item is cached, with its file, and
    /// already in its collection, nothing needs writing, and the report says
    /// they were all cached (the objects' last access is not updated). Nil
    /// when anything would need fetching or recording; the events then end
    /// without a report. Reads the catalog only.
    public func runWithoutWriting(_ requested: any FetchList) throws -> FetchReport? {
        let started = ContinuousClock.now
        defer { eventSink.finish() }
        let items = requested.withoutRepeats()
        let remaining: any FetchList
        do {
            remaining = try settleCached(items, writing: false)
        } catch is NeedsWriting {
            return nil
        } catch {
            throw cache.catalogReadError(error)
        }
        guard remaining.count == 0 else { return nil }
        let report = state.withLock { state -> FetchReport in
            state.count(items, of: requested)
            state.report.seconds = (ContinuousClock.now - started).seconds
            return state.report
        }
        reportProgress { _ in }
        eventSink.yield(.finished(report))
        return report
    }

    /// Thrown by `settleCached` when it may not write and an item would have to be recorded.
    private struct NeedsWriting: Error {}

    /// A write to the catalog failed before the downloads (not a read: the message says which).
    private struct CatalogWriteFailure: Error {
        let underlying: any Error
    }

    /// Records the rows an earlier run kept because the catalog could not
    /// take them, or held when it was killed (see `UnrecordedRows`), before the list is looked up, so
    /// their URLs count as cached. A URL fetched since keeps its newer row
    /// (`Catalog.record(kept:)`); one whose object is gone is left out (and
    /// fetched again). A file goes only once its rows are durable. A
    /// catalog that fails now is left to the run's own writes to report:
    /// the kept rows only spare downloads, and wait for the next run.
    private func recordKeptRows() {
        guard !Task.isCancelled, let catalog = try? cache.catalog else { return }
        _ = cache.unrecorded.replay({ records, fetchedAt in
            let present = records.filter { cache.store.contains($0.sha256, size: $0.size) }
            try cache.store.makeNamesDurable(of: present.map(\.sha256))
            try cache.reserve.retryingOnFullDisk { try catalog.record(present, at: fetchedAt, kept: true) }
            try catalog.makeDurable()
        }, stops: Catalog.failsEveryRow)
    }

    /// Removes the partials of URLs cached since they were left (by a run
    /// killed while another process cached them): none would be resumed.
    /// Only where the object's file is there; a catalog that fails now is
    /// left to the run's own reads to report.
    private func removePartialsOfCachedURLs(_ engine: TransferEngine) {
        guard !Task.isCancelled, let catalog = try? cache.catalog else { return }
        engine.removePartials { urls in
            guard let sources = try? catalog.cachedSources(for: urls) else { return [] }
            return Set(sources.filter { cache.store.contains($0.value.sha256, size: $0.value.size) }.keys)
        }
    }

    /// Items whose URL is cached are not downloaded: they are recorded in
    /// their collection if they are new there. Returns the items left to
    /// fetch. The list is settled a part at a time, each part's new members
    /// and touched objects in a transaction of their own: should a later
    /// part fail, what earlier parts recorded stays, and is found again by
    /// the next run. A cancelled run stops settling between parts.
    /// Without `writing`, nothing is recorded or touched, and an item cached
    /// but new in its collection throws `NeedsWriting`.
    /// `ingestor` takes the last-access updates of the objects found (none
    /// without it).
    private func settleCached(_ items: any FetchList, writing: Bool = true, ingestor: Ingestor? = nil) throws -> any FetchList {
        let names = try cache.catalog.collectionNames()
        var storedNames: [String: String] = [:]
        var remaining: [Int32] = []
        var missing: [String: String] = [:]
        var skipped = 0
        var objects: [String: Bool] = [:]
        // Also when a part fails (Ctrl-C in a wait for another process's
        // lock, say): the parts before it are recorded, and count as cached.
        defer {
            state.withLock {
                $0.missingObjects = missing
                $0.progress.skipped = skipped
                $0.report.skipped = skipped
            }
        }
        for start in stride(from: 0, to: items.count, by: settlePart) {
            var part = (start..<min(start + settlePart, items.count)).map { items[$0] }
            for index in part.indices {
                // A name stored in another Unicode form (café with e + accent)
                // is the same collection, not a second one that looks the same.
                let name = part[index].collection
                let stored = storedNames[name] ?? CollectionName.find(name, among: names) ?? name
                storedNames[name] = stored
                part[index].collection = stored
            }
            skipped += try settleCachedPart(part, from: start, remaining: &remaining, missing: &missing, objects: &objects,
                                            writing: writing, ingestor: ingestor)
            // A list of distinct objects would keep an entry per URL: looking again costs a system call.
            if objects.count > objectsRemembered { objects.removeAll() }
            if Task.isCancelled { break }
        }
        // Positions, not copies: the items left are read from the list again as they start.
        // Every name looked up, not only those stored in another form: Swift's
        // == holds café and cafe + accent equal, so one entry serves both spellings.
        return FetchListSelection(selecting: remaining, of: items, storedCollectionNames: storedNames)
    }

    /// `settleCached` for one part of the list (the items from position
    /// `start` on): appends the positions of the items to fetch to
    /// `remaining`, and the URLs of those whose object's file is gone (or
    /// damaged) to `missing` as well; returns how many were cached. Many URLs may share one object:
    /// `objects` holds whether the file of each object seen so far is there,
    /// so it is looked for, and touched, once (again only after
    /// `settleCached` has forgotten it, past `objectsRemembered` objects).
    private func settleCachedPart(_ part: [FetchItem], from start: Int, remaining: inout [Int32], missing: inout [String: String],
                                  objects: inout [String: Bool], writing: Bool, ingestor: Ingestor?) throws -> Int {
        // Each URL as the catalog keeps it, worked out once.
        let keys = part.map(\.catalogURL)
        let cached = try cache.catalog.cachedSources(for: keys)
        var found: [(item: FetchItem, key: String, source: CachedSource)] = []
        var firstSeen: [String] = []
        for (offset, (item, key)) in zip(part, keys).enumerated() {
            guard let source = cached[key] else {
                remaining.append(Int32(start + offset))
                continue
            }
            let hasFile: Bool
            if let known = objects[source.sha256] {
                hasFile = known
            } else {
                // Not looked at is not missing: an `objects/sha256/aa` this user may not
                // enter had its URLs fetched again, each failed at its store, and listed as failed.
                do {
                    hasFile = try cache.store.lookUp(source.sha256, size: source.size)
                } catch {
                    throw CacheError.unreadableObjects(error)
                }
                objects[source.sha256] = hasFile
                if hasFile { firstSeen.append(source.sha256) }
            }
            guard hasFile else {
                // Catalogued, but the file is gone or not its size: fetched again (and kept, as missing, if that fails).
                missing[item.url] = source.sha256
                remaining.append(Int32(start + offset))
                continue
            }
            found.append((item, key, source))
        }
        var present: [String: Set<String>] = [:]
        for (collection, entries) in Dictionary(grouping: found, by: \.item.collection) {
            present[collection] = try cache.catalog.itemURLs(inCollection: collection, among: entries.map(\.key))
        }
        let newEntries = found.filter { present[$0.item.collection]?.contains($0.key) != true }
        // An item of unknown kind takes the kind (and a sound's facts) its URL was found to have.
        let unknown = newEntries.filter { $0.item.kind == .file }.map(\.key)
        let known = unknown.isEmpty ? [:] : try cache.catalog.knownKinds(of: unknown)
        let newInCollection = newEntries.map { item, key, source in
            let knownKind = item.kind == .file ? known[key] : nil
            return IngestRecord(url: item.url, collection: item.collection, kind: knownKind?.kind ?? item.kind, title: item.title,
                                sha256: source.sha256, size: source.size,
                                metadata: MediaKinds.metadata(item.metadata, takingFactsOf: knownKind?.metadata), fetched: false)
        }
        guard writing else {
            if !newInCollection.isEmpty { throw NeedsWriting() }
            return found.count
        }
        // Found in place: a failure when its file was gone is past.
        let failuresPast = found.filter(\.source.lastFetchFailed).map(\.key)
        do {
            try cache.reserve.retryingOnFullDisk { try cache.catalog.record(newInCollection, clearingFailuresOf: failuresPast) }
        } catch {
            throw CatalogWriteFailure(underlying: error)
        }
        ingestor?.touch(firstSeen)
        return found.count
    }

    /// Downloads through the engine's batch interface: no task per item, and
    /// each body goes to the ingestor from the thread that finished it. The
    /// next download starts when the ingestor has room, so memory stays flat
    /// however long the list and however slow the disk.
    /// A full disk or a failed catalog stops them: the items not started are
    /// left for a later run (as after Ctrl-C) rather than each requested and
    /// failed in turn. `catalogVersion`: the catalog's `versionOthersChange`
    /// when the list was looked up in it (nil: a new catalog, see `OtherProcessLookout`);
    /// `mark`: this run's in `runs/`, if it has one.
    private func download(_ items: any FetchList, engine: TransferEngine, ingestor: Ingestor, catalogVersion: Int? = nil,
                          mark: RunMarkers.Mark?, whenBegun: (@Sendable (Int) -> Void)?) async {
        if items.count > 0 { whenBegun?(items.count) }
        // Made once the first body is handed over to be stored, not now: a
        // thread making 256 directories beside the first transfers put off
        // the first request (2.55 ms from here, against 0.80 ms, by the
        // medians of 16 runs of 2000 small files each way, in alternating
        // order). The first group's moves are a gather later.
        if items.count >= fanOutsAheadFrom { state.withLock { $0.fanOutsAheadDue = true } }
        let downloads = Task { [self] in
            let resumeAnswerCheck: @Sendable (Int) -> ResumeAnswerCheck? = { index in
                let item = items[index]
                return { PageInsteadOfMedia.resumeAnswerRefusal($0, url: item.url, kind: item.kind) }
            }
            let lookout = OtherProcessLookout(cache: cache, catalogVersion: catalogVersion, mark: mark)
            defer { lookout.stop() }
            // An item another process was downloading into this cache, retaken at the end of the
            // list (or any item, once such a process was seen): settled as cached if that process
            // stored it, as at the start of the run; waited for if it has moved it into the store
            // and not yet recorded it (its rows are held in `unrecorded/` meanwhile).
            let heldFiles = Mutex<[String: Set<String>]>([:])
            let settledMeanwhile: @Sendable (Int) -> SettledMeanwhile = { [self] index in
                // Looked at before the catalog: a row recorded (and its file removed) in
                // between is found in the catalog. One look at a time: they share what they read.
                let held = heldFiles.withLock { known in cache.unrecorded.urlsHeldByOtherProcesses(known: &known) }
                var remaining: [Int32] = []
                var missing: [String: String] = [:]
                var objects: [String: Bool] = [:]
                let found = try? settleCachedPart([items[index]], from: 0, remaining: &remaining, missing: &missing,
                                                  objects: &objects, writing: true, ingestor: ingestor)
                guard found == 1 else {
                    return held.contains(items[index].catalogURL) ? .beingRecorded : .notStored
                }
                state.withLock {
                    $0.progress.skipped += 1
                    $0.report.skipped += 1
                }
                return .settled
            }
            await engine.download(count: items.count, url: { items[$0].url }, resumeAnswerCheck: resumeAnswerCheck,
                                  settledMeanwhile: settledMeanwhile, othersAtWork: lookout.sawOthers) { [self] index, result, ready in
                switch result {
                case .success(let body):
                    let item = items[index]
                    let opening = Self.opening(of: body)
                    if let coding = CodedBodies.codingToUndo(contentEncoding: body.contentEncoding, contentType: body.contentType,
                                                             url: item.url, redirectedTo: body.redirectedTo, opening: opening) {
                        decode(body, coding: coding, of: item, ingestor: ingestor, whenRoom: ready)
                    } else {
                        judge(body, of: item, opening: opening, ingestor: ingestor, whenRoom: ready)
                    }
                case .failure(let error):
                    // A cancelled item is neither stored nor failed: the run was interrupted.
                    if error.kind != .cancelled {
                        fail(items[index], reason: error.message, outOfSpace: error.isOutOfSpace,
                             hostGivenUp: error.kind == .hostGivenUp, ingestor: ingestor)
                    }
                    ready()
                }
            }
            // Every item is completed; the sounds still being decoded go to the ingestor after.
            await withCheckedContinuation { continuation in mediaChecks.notify(queue: .global()) { continuation.resume() } }
        }
        // A disk that filled (or a catalog that failed) before the handle was kept stops the downloads here.
        let alreadyStopped = state.withLock { state -> Bool in
            state.downloads = downloads
            return state.report.stoppedEarly
        }
        if alreadyStopped { downloads.cancel() }
        await withTaskCancellationHandler {
            await downloads.value
        } onCancel: {
            downloads.cancel()
        }
        state.withLock { state in
            state.downloads = nil
            // None handed over (every item failed or was cancelled): none wanted any more.
            state.fanOutsAheadDue = false
        }
    }

    /// A body's first bytes, read from its file only where they were not
    /// kept (a resumed body), and once.
    private static func opening(of body: DownloadedBody) -> () -> [UInt8] {
        if let kept = body.opening { return { kept } }
        var read: [UInt8]?
        return {
            if let read { return read }
            let opening = BodyOpening.opening(of: body.path)
            read = opening
            return opening
        }
    }

    /// Judges a body by its type, name and bytes (see `PageInsteadOfMedia`
    /// and `MediaKinds`), then stores it, checks it as a photo or a sound
    /// first, or refuses it. `whenRoom` is called once it has been handed on.
    private func judge(_ body: DownloadedBody, of item: FetchItem, opening: @escaping () -> [UInt8], ingestor: Ingestor,
                       whenRoom: @escaping @Sendable () -> Void) {
        if let refusal = PageInsteadOfMedia.reason(contentType: body.contentType, contentEncoding: body.contentEncoding,
                                                   url: item.url, redirectedTo: body.redirectedTo, kind: item.kind,
                                                   size: body.size, opening: opening) {
            refuse(body, of: item, reason: refusal, ingestor: ingestor)
            whenRoom()
        } else {
            switch MediaKinds.judge(kind: item.kind, url: item.url, redirectedTo: body.redirectedTo,
                                    contentType: body.contentType, opening: opening) {
            case .store(.photo):
                checkPhoto(body, of: item, opening: opening(), ingestor: ingestor, whenRoom: whenRoom)
            case .store(let kind):
                store(body, of: item, as: kind, ingestor: ingestor, whenRoom: whenRoom)
            case .checkSound(let refusable, let otherwise):
                checkSound(body, of: item, refusable: refusable, otherwise: otherwise, ingestor: ingestor, whenRoom: whenRoom)
            }
        }
    }

    /// Undoes a body's `Content-Encoding` (see `ContentDecoding`) on a thread
    /// that decodes one body at a time, then judges the decoded body as any
    /// other. The body as sent stays, held by the decoded body's file, until
    /// that is stored or given up (see `FinishedFile`); a body that does not
    /// decode is refused (damaged, cut short, decoding to more than the
    /// limit, or to nothing), and one a run stopped meanwhile, or a full
    /// disk, is kept to be resumed, as a body the store cannot take is.
    private func decode(_ body: DownloadedBody, coding: ContentDecoding.Coding, of item: FetchItem, ingestor: Ingestor,
                        whenRoom: @escaping @Sendable () -> Void) {
        checkBegan()
        let limit = configuration.maxFileSize ?? ContentDecoding.defaultLimit(encodedSize: body.size)
        let stop: @Sendable () -> Bool = { [self] in state.withLock { $0.cancelled || $0.report.stoppedEarly } }
        decodes.async { [self] in
            defer { mediaChecks.leave() }
            let result = ContentDecoding.decode(body, coding: coding, limit: limit, stop: stop)
            checkEnded()
            switch result {
            case .success(let decoded) where decoded.size == 0:
                // Nothing, decoded: as an empty body, never stored (a cached empty photo is never fetched again).
                refuse(decoded, of: item, reason: CodedBodies.emptyRefusal(coding: coding, contentType: body.contentType,
                                                                           size: body.size), ingestor: ingestor)
                whenRoom()
            case .success(let decoded):
                // (The body as sent goes with the decoded one, or stays to resume where it would.)
                judge(decoded, of: item, opening: Self.opening(of: decoded), ingestor: ingestor, whenRoom: whenRoom)
            case .failure(let failure) where failure.kind == .notThatCoding:
                // Not known to be deflate's after all: judged as it came.
                judge(body, of: item, opening: Self.opening(of: body), ingestor: ingestor, whenRoom: whenRoom)
            case .failure(let failure) where failure.kind == .stopped || failure.isOutOfSpace:
                if body.file.keepForResume() { body.file.release() } else { body.file.discard() }
                if failure.isOutOfSpace {
                    fail(item, reason: CodedBodies.refusal(failure, coding: coding, contentType: body.contentType, size: body.size,
                                                           maxFileSize: configuration.maxFileSize),
                         outOfSpace: true, ingestor: ingestor)
                }
                whenRoom()
            case .failure(let failure):
                refuse(body, of: item, reason: CodedBodies.refusal(failure, coding: coding, contentType: body.contentType,
                                                                   size: body.size, maxFileSize: configuration.maxFileSize),
                       ingestor: ingestor)
                whenRoom()
            }
        }
    }

    /// A body that is not stored: removed (not kept to resume: the next run
    /// asks again), and its item failed with `reason`.
    private func refuse(_ body: DownloadedBody, of item: FetchItem, reason: String, ingestor: Ingestor) {
        body.file.discard()
        // Received all the same (the summary counts what arrived).
        state.withLock { $0.report.bytesReceived += body.bytesReceived }
        fail(item, reason: reason, ingestor: ingestor)
    }

    /// Stores a photo unless it is cut short (see `ImageEnd`): known from its
    /// last bytes at once, or else from a walk of the file on a thread that
    /// walks one at a time (this runs where nothing may block); it counts
    /// as being stored meanwhile. A cut photo is refused.
    private func checkPhoto(_ body: DownloadedBody, of item: FetchItem, opening: [UInt8], ingestor: Ingestor,
                            whenRoom: @escaping @Sendable () -> Void) {
        let format = MediaSignature.image(opening)
        let verdict = ImageEnd.quickVerdict(format: format, opening: opening, closing: body.closing, size: body.size)
        @Sendable func finish(_ shortfall: String?) {
            if let shortfall {
                refuse(body, of: item, reason: MediaKinds.photoRefusal(shortfall, contentType: body.contentType, size: body.size),
                       ingestor: ingestor)
                whenRoom()
            } else {
                store(body, of: item, as: .photo, ingestor: ingestor, whenRoom: whenRoom)
            }
        }
        switch (verdict, format) {
        case (.cutShort(let words), _):
            finish(words)
        case (.needsWalk, let format?):
            checkBegan()
            photoWalks.async { [self] in
                defer { mediaChecks.leave() }
                let shortfall = ImageEnd.walkedShortfall(format: format, size: body.size, path: body.path)
                checkEnded()
                finish(shortfall)
            }
        default:
            finish(nil)
        }
    }

    /// A check of a body begins: the run waits for it before its end
    /// (`mediaChecks`), and the status line counts it as being stored (a
    /// long sound takes seconds to decode).
    private func checkBegan() {
        mediaChecks.enter()
        state.withLock { $0.progress.storing += 1 }
    }

    /// The check's verdict is in: no longer being checked (what follows,
    /// storing or refusing, counts for itself). `mediaChecks` is left by
    /// the caller once that has been handed on.
    private func checkEnded() {
        state.withLock { $0.progress.storing -= 1 }
    }

    /// Decodes a body through libsndfile (on a thread of its own, see
    /// `SoundCheck.start`), then stores it as a sound with its facts; or, when
    /// it does not decode, refuses it where `MediaKinds.refuses` says so,
    /// else stores it as `otherwise`. The next item starts when this one is
    /// stored or refused. A run stopped meanwhile (interrupted, or a full
    /// disk) keeps the whole body to be resumed where it can, as when the
    /// store cannot take it.
    private func checkSound(_ body: DownloadedBody, of item: FetchItem, refusable: Bool, otherwise: ItemKind, ingestor: Ingestor,
                            whenRoom: @escaping @Sendable () -> Void) {
        checkBegan()
        let stop: @Sendable () -> Bool = { [self] in state.withLock { $0.cancelled || $0.report.stoppedEarly } }
        SoundCheck.start(body.path, stop: stop) { [self] result in
            defer { mediaChecks.leave() }
            checkEnded()
            switch result {
            case .success(let facts):
                store(body, of: item, as: .sound, metadata: MediaKinds.metadata(item.metadata, adding: facts),
                      ingestor: ingestor, whenRoom: whenRoom)
            case .failure(let error) where error.stage == .stopped:
                if body.file.keepForResume() { body.file.release() } else { body.file.discard() }
                whenRoom()
            case .failure(let error) where MediaKinds.refuses(error, refusable: refusable):
                refuse(body, of: item, reason: MediaKinds.refusal(error, contentType: body.contentType, size: body.size,
                                                                  soundAsked: otherwise == .sound), ingestor: ingestor)
                whenRoom()
            case .failure:
                // Not proven damaged, or nothing known of it (no libsndfile, no thread): stored as it came.
                store(body, of: item, as: otherwise, ingestor: ingestor, whenRoom: whenRoom)
            }
        }
    }

    /// Hands a downloaded body to the ingestor, as an item of `kind` with
    /// `metadata` (the item's own when nil); the group commit happens on
    /// the ingest thread (and its rows on the one beside it, see `Ingestor.step`):
    /// the completion may run on either, so it touches only what is thread-safe.
    private func store(_ body: DownloadedBody, of item: FetchItem, as kind: ItemKind, metadata: String? = nil,
                       ingestor: Ingestor, whenRoom: @escaping @Sendable () -> Void) {
        var record = IngestRecord(
            url: item.url, collection: item.collection, kind: kind, title: item.title,
            sha256: body.sha256, size: body.size, contentType: body.contentType,
            etag: body.etag, lastModified: body.lastModified, metadata: metadata ?? item.metadata)
        record.replacesMissingObject = state.withLock { $0.missingObjects[item.url] }
        let blob = StagedBlob(path: body.path, sha256: body.sha256, size: body.size, isReadOnly: body.file.isReadOnly)
        let fanOutsAheadDue = state.withLock { state in
            state.progress.storing += 1
            defer { state.fanOutsAheadDue = false }
            return state.fanOutsAheadDue
        }
        if fanOutsAheadDue { cache.store.makeFanOutsAhead() }
        // The validator goes just before the body leaves its name: the name may be another download's after that.
        // A body that cannot be stored stays to be resumed when it can be proven complete.
        ingestor.submit(blob, record, beforeLeaving: { body.file.forgetValidator() },
                        keepOnFailure: { body.file.keepForResume() }, whenRoom: whenRoom) { [self] result in
            // Moved into the store (or removed): let go of the partial's lock.
            body.file.release()
            state.withLock { $0.progress.storing -= 1 }
            switch result {
            case .success:
                countDownloaded(body, awaitingRecord: false)
                if reportsEachStoredItem {
                    eventSink.yield(.stored(url: item.url, sha256: body.sha256, size: body.size, resumedBytes: body.resumedBytes))
                }
            case .failure(let error):
                // Stored, its row kept for the next run: downloaded, not left to fetch.
                if error.rowsKept { countDownloaded(body, awaitingRecord: true) }
                fail(item, reason: error.message, outOfSpace: error.outOfSpace, catalogFailure: error.catalogFailure,
                     lockTimedOut: error.lockTimedOut, ingestor: ingestor)
            }
        }
    }

    /// Counts a body stored in this run; `awaitingRecord` when its row waits
    /// for the next run (see `UnrecordedRows`).
    private func countDownloaded(_ body: DownloadedBody, awaitingRecord: Bool) {
        state.withLock {
            $0.progress.done += 1
            $0.progress.bytesStored += body.size
            $0.report.downloaded += 1
            if awaitingRecord { $0.report.awaitingRecord += 1 }
            $0.report.bytesReceived += body.bytesReceived
            if body.cameOverPlainHTTP { $0.report.overPlainHTTP += 1 }
        }
    }

    /// `outOfSpace`: it failed because the disk holding the cache is full;
    /// `catalogFailure`: because the catalog failed as a whole. Either stops
    /// the downloads, and is no failure of the item: it is left for the next
    /// run, as one not tried (not listed, nor recorded), and the first such
    /// reason is the report's.
    /// `hostGivenUp`: it failed because its host was given up (counted by host for the summary).
    private func fail(_ item: FetchItem, reason: String, outOfSpace: Bool = false, catalogFailure: String? = nil,
                      lockTimedOut: Bool = false, hostGivenUp: Bool = false, ingestor: Ingestor) {
        if outOfSpace || catalogFailure != nil {
            let downloadsToStop = state.withLock { state -> Task<Void, Never>? in
                // Interrupted while waiting for the catalog's lock (Ctrl-C ends that wait): the
                // item is left, as any other then. A damaged catalog is still said.
                guard !state.report.stoppedEarly, !(state.cancelled && lockTimedOut) else { return nil }
                if outOfSpace {
                    state.report.outOfSpace = RedactedURL.inText(reason)
                } else {
                    state.report.catalogFailure = catalogFailure.map(RedactedURL.inText)
                }
                return state.downloads
            }
            downloadsToStop?.cancel()
            return
        }
        // A reason may quote the URL, password and all: the catalog keeps it redacted.
        let failure = FailureRecord(url: item.url, message: RedactedURL.inText(reason), since: state.withLock { $0.began })
        ingestor.noteFailure(failure)
        // Named as a person reads it (percent-encoding decoded), as the give-up's own line names it.
        let givenUpHost = hostGivenUp ? (try? RequestTarget(item.url)).map { RequestTarget.readable(hostKey: $0.hostKey) } : nil
        state.withLock {
            $0.progress.failed += 1
            $0.report.failed += 1
            if let givenUpHost { $0.report.countGivenUp(host: givenUpHost) }
            if $0.report.failures.count < FetchReport.failuresKept { $0.report.failures.append(failure) }
        }
        // When the catalog cannot be opened the run fails as a whole, with
        // one line: the items that fail because of it are not listed.
        if !cache.catalogFailed { eventSink.yield(.failed(url: item.url, reason: reason, givenUpHost: givenUpHost)) }
    }

    /// Applies `update` to the progress and sends it, as `ProgressGate` lets it.
    private func reportProgress(_ update: (inout RunProgress) -> Void) {
        let changed = state.withLock { state -> RunProgress? in
            update(&state.progress)
            return state.progressGate.admits(state.progress, at: .now) ? state.progress : nil
        }
        if let changed { eventSink.yield(.progress(changed)) }
    }

    /// Turns engine events into job events, adding the job's own counts.
    private func forward(_ engineEvents: AsyncStream<TransferEvent>) async {
        for await event in engineEvents {
            switch event {
            case .progress(let snapshot):
                reportProgress { progress in
                    progress.bytesReceived = snapshot.bytesReceived
                    progress.bytesResumed = snapshot.bytesResumed
                    progress.failingHost = snapshot.failingHost
                    progress.bytesPerSecond = snapshot.bytesPerSecond
                    progress.active = snapshot.active
                    progress.queued = snapshot.queued
                    progress.waitingToRetry = snapshot.waitingToRetry
                    progress.nextRetryInSeconds = snapshot.nextRetryInSeconds
                    progress.waitingForOtherProcess = snapshot.waitingForOtherProcess
                }
            case .retrying(_, let url, let attempt, let delay, let reason):
                eventSink.yield(.retrying(url: url, attempt: attempt, delay: delay, reason: reason.message))
            case .hostLimited(let host, let connections):
                eventSink.yield(.hostLimited(host: host, connections: connections))
            case .hostPaused(let host, let seconds):
                eventSink.yield(.hostPaused(host: host, seconds: seconds))
            case .finished:
                break
            }
        }
    }
}

/// Which progress events a job sends: one that changed a figure, and the
/// same figures again once `heartbeat` has passed since the last sent (the
/// engine's last word repeats its last tick when nothing happened in
/// between, and so may the job's own). Without the heartbeat a stalled
/// transfer's run went silent for as long as the stall, which a watchdog
/// reading `--progress json` could not tell from a hung mediafetch.
struct ProgressGate {
    let heartbeat: Duration
    private var sent: (progress: RunProgress, at: ContinuousClock.Instant)?

    init(heartbeat: Duration) {
        self.heartbeat = heartbeat
    }

    /// Whether `progress`, at `now`, is sent (and then remembered as sent).
    mutating func admits(_ progress: RunProgress, at now: ContinuousClock.Instant) -> Bool {
        if let sent, sent.progress == progress, now - sent.at < heartbeat { return false }
        sent = (progress, now)
        return true
    }
}

