import CFileSync
import ContentStore
import Foundation
import Transfer
import Synchronization

/// Moves finished bodies into the store and records them in the catalog in
/// groups: whatever finished while the previous group was being committed
/// goes into the next one, so a thousand small files cost a handful of
/// `syncfs` calls and transactions instead of a thousand.
///
/// Runs on a thread of its own because `syncfs` and SQLite writes block.
///
/// About `maxPending` items wait at most: past that, `submit` tells the
/// caller to wait until the ingest thread takes the next group, so downloads slow to
/// the store's pace instead of piling finished bodies up in memory (seen: 11,000
/// waiting items, and memory growing with the list, for 32,000 small files).
final class Ingestor: Sendable {
    private struct Pending {
        /// What was submitted, shared rather than copied: an item passes
        /// through several arrays on its way, and its record alone holds ten
        /// strings (copying them was 1.5% of the CPU on 2000 small files).
        private final class Submitted: Sendable {
            let blob: StagedBlob
            let record: IngestRecord
            let beforeLeaving: (@Sendable () -> Void)?
            let keepOnFailure: (@Sendable () -> Bool)?
            let completion: @Sendable (Result<Void, CacheError>) -> Void

            init(blob: StagedBlob, record: IngestRecord, beforeLeaving: (@Sendable () -> Void)?,
                 keepOnFailure: (@Sendable () -> Bool)?, completion: @escaping @Sendable (Result<Void, CacheError>) -> Void) {
                self.blob = blob
                self.record = record
                self.beforeLeaving = beforeLeaving
                self.keepOnFailure = keepOnFailure
                self.completion = completion
            }
        }

        private let submitted: Submitted
        var blob: StagedBlob { submitted.blob }
        var record: IngestRecord { submitted.record }
        /// Runs just before the blob leaves its name: moved into the store,
        /// or removed when it cannot be stored.
        var beforeLeaving: (@Sendable () -> Void)? { submitted.beforeLeaving }
        /// Asked when the blob cannot be stored: true when it stays where it
        /// is (to be resumed by a later run) instead of being removed.
        var keepOnFailure: (@Sendable () -> Bool)? { submitted.keepOnFailure }
        var completion: @Sendable (Result<Void, CacheError>) -> Void { submitted.completion }
        /// Its body became a new object when it was moved into the store
        /// (rather than finding the same bytes there already).
        var placedNew = false

        init(blob: StagedBlob, record: IngestRecord, beforeLeaving: (@Sendable () -> Void)?,
             keepOnFailure: (@Sendable () -> Bool)?, completion: @escaping @Sendable (Result<Void, CacheError>) -> Void) {
            submitted = Submitted(blob: blob, record: record, beforeLeaving: beforeLeaving,
                                  keepOnFailure: keepOnFailure, completion: completion)
        }
    }

    private struct Queue {
        var pending: [Pending] = []
        var failures: [FailureRecord] = []
        /// Objects used by this run (found cached): their last access is
        /// updated with the next rows recorded (see `touch`).
        var touches: [String] = []
        var stopping = false
        /// The thread has taken its last items: later ones are refused.
        var closed = false
        /// Why the end of the run could not be made durable, if it could not.
        var closingError: CacheError?
        /// Submitters waiting for room: each is resumed once.
        var waiters: [@Sendable () -> Void] = []
    }

    private let cache: MediaCache
    private let store: any BlobStore
    let maxPending: Int
    /// Set once the catalog has failed as a whole: later groups fail with
    /// the same error at once, instead of each waiting out a lock again.
    private let catalogFailure = Mutex<CacheError?>(nil)
    /// Set when a group's rows find the disk full (even if the room held
    /// back for them then takes them): the rest of the group being moved
    /// meanwhile stays out of the store, since its rows might find no room,
    /// and objects without a row are found by no run. Those bodies stay
    /// where they are, to be resumed (and proven complete) by the next run;
    /// the run stops for the full disk. Each group is looked at afresh
    /// (see `moveIntoPlace`): a disk that another program filled for a
    /// moment does not stop the run.
    private let catalogMetAFullDisk = Atomic(false)
    /// Objects this run placed new whose rows were neither recorded nor
    /// kept: removed on the ingest thread (see `removeUnrecordedObjects`).
    private let unrecordedObjects = Mutex<[String]>([])
    private let queue = SleepingLock(Queue())
    private let wake = DispatchSemaphore(value: 0)
    /// Where a step records the previous group's rows while it moves the
    /// current group into place. A queue of its own, not the global one: a
    /// wait there for another process's catalog lock must not hold a thread
    /// that the run's tasks need.
    private let recorder = DispatchQueue(label: "mediafetch.record")
    private let exited = DispatchSemaphore(value: 0)

    /// `maxPending` is how many items may wait for the ingest thread before
    /// `submit` asks callers to wait; two full groups by default.
    /// `store` is where bodies go: the cache's own store unless a test watches it.
    init(cache: MediaCache, store: (any BlobStore)? = nil, maxPending: Int = 2 * groupSize) {
        self.cache = cache
        self.store = store ?? cache.store
        self.maxPending = max(1, maxPending)
        let thread = Thread { [self] in
            mf_name_this_thread("mf-ingest")
            _ = mf_lower_thread_priority(0) // at the process's level at least (see the helper)
            self.run()
        }
        // Room for SQLite, short of the 8 MiB default a `ulimit -v` counts.
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Queues `blob` to be stored and `record` to be recorded with the next
    /// group; `completion` runs on the ingest thread (or the one recording
    /// rows beside it) once both are durable (or
    /// failed). Never blocks: `whenRoom` says when the caller may hand over
    /// another item, at once while fewer than `maxPending` items wait, else
    /// (on a Dispatch thread) once the ingest thread has taken a group. A
    /// caller that waits for it keeps the queue near `maxPending` (it can
    /// only pass it by the items that were already on their way).
    func submit(_ blob: StagedBlob, _ record: IngestRecord,
                beforeLeaving: (@Sendable () -> Void)? = nil,
                keepOnFailure: (@Sendable () -> Bool)? = nil,
                whenRoom: @escaping @Sendable () -> Void,
                completion: @escaping @Sendable (Result<Void, CacheError>) -> Void) {
        let item = Pending(blob: blob, record: record, beforeLeaving: beforeLeaving, keepOnFailure: keepOnFailure,
                           completion: completion)
        let admission = queue.withLock { queue -> Admission in
            if queue.closed { return .closed }
            queue.pending.append(item)
            let full = queue.pending.count > maxPending && !queue.stopping
            if full { queue.waiters.append(whenRoom) }
            return .queued(count: queue.pending.count, full: full)
        }
        switch admission {
        case .queued(let count, let full):
            // Only the first item of a group and a full group need the thread awake.
            if count == 1 || count == Self.groupSize { wake.signal() }
            if !full { whenRoom() }
        case .closed:
            // After `finish` nothing is taken any more: say so rather than drop it, and
            // leave the body as a failed store does (kept to resume where it can be, else removed).
            fail([item], because: StoreError("the run is over"), removingStaged: true)
            whenRoom()
        }
    }

    /// Lets waiting submitters go on, off the ingest thread (they may start
    /// downloads, which is file work).
    private static func resume(_ waiters: [@Sendable () -> Void]) {
        guard !waiters.isEmpty else { return }
        DispatchQueue.global().async {
            for resume in waiters { resume() }
        }
    }

    private enum Admission {
        case queued(count: Int, full: Bool)
        case closed
    }

    /// Items waiting for the ingest thread (for tests).
    var pendingCount: Int { queue.withLock { $0.pending.count } }

    /// Remembers a failed URL with the next group.
    func noteFailure(_ failure: FailureRecord) {
        queue.withLock { $0.failures.append(failure) }
        wake.signal()
    }

    /// Notes that these objects were used now, in the transaction of the
    /// next group (or at the end): a hint for pruning, not worth a
    /// transaction of its own, nor a wait for another process's lock before
    /// the downloads start. Lost if the catalog cannot take it.
    func touch(_ hashes: [String]) {
        guard !hashes.isEmpty else { return }
        let many = queue.withLock { queue in
            queue.touches += hashes
            return queue.touches.count >= Self.touchesHeldAtMost
        }
        // A long list of cached URLs must not pile them up until the first group.
        if many { wake.signal() }
    }

    /// Past this many waiting last-access updates, the ingest thread writes them.
    private static let touchesHeldAtMost = 4096

    /// Commits what is queued, makes the catalog durable, and stops the
    /// thread. Returns why the catalog could not be made durable, if so.
    @discardableResult
    func finish() -> CacheError? {
        let waiters = queue.withLock { queue -> [@Sendable () -> Void] in
            queue.stopping = true
            defer { queue.waiters.removeAll() }
            return queue.waiters
        }
        Self.resume(waiters)
        wake.signal()
        exited.wait()
        return queue.withLock { $0.closingError }
    }

    /// `finish`, waited for off the concurrency pool: the last group may wait
    /// for another process's catalog lock, and a pool thread blocked that
    /// long (there may be two in all) can keep the task that would cancel
    /// the wait from running.
    @discardableResult
    func finishing() async -> CacheError? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: self.finish()) }
        }
    }

    /// Room a row may take in the catalog's log: about a page, measured
    /// (958 KB of log for 217 rows, keyed by hashes), twice over.
    static let catalogBytesPerRow: Int64 = 8192

    /// A group gathers for up to this long after its first item, or until it
    /// holds `groupSize` items. Under load a group also takes everything that
    /// finished while the previous one was being committed, so groups grow by
    /// themselves; a short gather keeps the last group small, and the run,
    /// which ends only when that group is durable, ends sooner (2000 small
    /// bodies: the final commit took 17–20 ms with 100 ms, 1–14 ms with 10 ms).
    private static let gatherMilliseconds = 10
    private static let groupSize = 512

    /// Items moved into the store since the last flush: their names are not
    /// yet durable, so their rows wait for the next flush; held meanwhile in
    /// a file of their own (see `UnrecordedRows.hold`).
    private struct Moved {
        var items: [Pending] = []
        var rows: UnrecordedRows.HeldRows?
    }

    private func run() {
        var moved = Moved()
        while true {
            if moved.items.isEmpty {
                wake.wait()
            } else if wake.wait(timeout: .now() + .milliseconds(Self.gatherMilliseconds)) == .timedOut {
                // Nothing new came to share the flush: the moved items' names are flushed on their own.
                settle(&moved)
                continue
            }
            let deadline = DispatchTime.now() + .milliseconds(Self.gatherMilliseconds)
            while true {
                let (count, stopping) = queue.withLock { ($0.pending.count, $0.stopping) }
                if stopping || count >= Self.groupSize { break }
                // Woken early by a full group or `finish`; a stale wake just loops.
                if wake.wait(timeout: deadline) == .timedOut { break }
            }
            let (group, failures, stopping, waiters) = queue.withLock { queue in
                defer {
                    queue.pending.removeAll(keepingCapacity: true)
                    queue.failures.removeAll(keepingCapacity: true)
                    queue.waiters.removeAll(keepingCapacity: true)
                }
                return (queue.pending, queue.failures, queue.stopping, queue.waiters)
            }
            // There is room again: submitters waiting for it go on while this group is committed.
            Self.resume(waiters)
            step(group, failures, &moved)
            if stopping {
                // Anything queued after the drain above still gets committed.
                let late = queue.withLock { queue in
                    defer {
                        queue.pending.removeAll()
                        queue.failures.removeAll()
                        queue.closed = true
                    }
                    return (queue.pending, queue.failures)
                }
                step(late.0, late.1, &moved)
                settle(&moved)
                // The objects are durable group by group; the last rows only now.
                do {
                    try cache.catalog.makeDurable()
                } catch {
                    queue.withLock { $0.closingError = CacheError("cannot make the catalog durable: \(Catalog.describe(error))") }
                }
                break
            }
        }
        exited.signal()
    }

    /// One flush serves two groups: it makes this group's bytes durable and
    /// the names the previous group got when it was moved into the store;
    /// then the previous group's rows are recorded (a row never points at a
    /// name that is not durable) and this group is moved into place, its rows
    /// waiting for the next flush. Half the flushes of flushing before and
    /// after each group's moves, which on a slow disk is half the time.
    private func step(_ group: [Pending], _ failures: [FailureRecord], _ moved: inout Moved) {
        guard !group.isEmpty || !moved.items.isEmpty else {
            record([], failures)
            return
        }
        do {
            // The log holds the rows recorded since the last flush: a flush
            // that does not sync the whole filesystem must sync it too.
            try store.flush(staged: group.map(\.blob), files: [cache.catalogWriteAheadLog])
        } catch {
            // Nothing written since the last flush can be counted on. The moved
            // bodies' old names may be a new download's partial by now: only
            // the bodies still staged are removed.
            self.fail(moved.items, because: error, removingStaged: false)
            noteUnrecorded(moved.items)
            removeUnrecordedObjects(keeping: [])
            moved.rows?.release()
            self.fail(group, because: error, removingStaged: true)
            moved = Moved()
            record([], failures)
            return
        }
        // The rows and the moves touch different files: the rows go in on
        // `recorder` meanwhile, and the step ends when both are done. At
        // the end of a run, when the ingest thread is behind, this is most
        // of the wait after the last download (500 rows and 300 moves:
        // 9 and 6 ms).
        let previous = moved
        let recorded = DispatchGroup()
        if previous.items.isEmpty && failures.isEmpty {
            record([], [])
        } else {
            recorder.async(group: recorded) { self.record(previous.items, failures, heldIn: previous.rows) }
        }
        // Held before the moves: a process killed from here until the rows are recorded leaves them to the next run.
        let rows = cache.unrecorded.hold(group.map(\.record), fetchedAt: Date())
        let items = moveIntoPlace(group, rowsBeingRecorded: previous.items.count)
        // None moved (each failed on its own): no row of them is to be recorded, and none would release them.
        if items.isEmpty { rows?.release() }
        moved = Moved(items: items, rows: items.isEmpty ? nil : rows)
        recorded.wait()
        // Recorded, kept on their own (see `failKeepingRows`), or given up with their objects.
        previous.rows?.release()
        // Not an object the group just moved points at: its row comes next.
        removeUnrecordedObjects(keeping: Set(moved.items.map(\.record.sha256)))
    }

    /// Flushes the names of the moved items and records their rows.
    private func settle(_ moved: inout Moved) {
        guard !moved.items.isEmpty else { return }
        step([], [], &moved)
    }

    /// Moves each item's body into the store; returns those now in place (a
    /// duplicate counts: its row points at the object already there). An
    /// item that cannot be moved fails on its own.
    /// `rowsBeingRecorded`: the previous group's, recorded meanwhile.
    private func moveIntoPlace(_ group: [Pending], rowsBeingRecorded: Int) -> [Pending] {
        var moved: [Pending] = []
        moved.reserveCapacity(group.count)
        guard !group.isEmpty else { return moved }
        catalogMetAFullDisk.store(false, ordering: .relaxed)
        // The rows will need room in the catalog's log: as many items are
        // moved as the room left (the room held back for the catalog
        // included) has room for, beside the rows being recorded meanwhile.
        // Another process sharing the disk may still fill it while the rows
        // wait, and take the room given up for them (`removeUnrecordedObjects`).
        var roomFor = Int.max
        if let free = OutOfSpace.freeBytes(directory: cache.root) {
            roomFor = max(0, Int((free + cache.reserve.heldBytes) / Self.catalogBytesPerRow) - rowsBeingRecorded)
        }
        for (index, entry) in group.enumerated() {
            // Checked for each: the previous group's rows are being recorded meanwhile.
            if index >= roomFor || catalogMetAFullDisk.load(ordering: .relaxed) {
                self.fail([entry], because: StoreError("no room left for its row in the catalog", code: ENOSPC), removingStaged: true)
                continue
            }
            do {
                entry.beforeLeaving?()
                var placed = entry
                placed.placedNew = try store.moveIntoPlace(entry.blob)
                moved.append(placed)
            } catch {
                self.fail([entry], because: error, removingStaged: true)
            }
        }
        return moved
    }

    /// Records the rows of items whose objects are durable, in one
    /// transaction, and completes them. One bad row must not sink the
    /// group: on an error each is tried on its own, unless the error is the
    /// catalog's as a whole (`Catalog.failsEveryRow`).
    /// `rows`: the file that holds these entries' rows (see `UnrecordedRows.hold`).
    private func record(_ entries: [Pending], _ failures: [FailureRecord], heldIn rows: UnrecordedRows.HeldRows? = nil) {
        let touches = queue.withLock { queue in
            defer { queue.touches.removeAll() }
            return queue.touches
        }
        guard !entries.isEmpty || !failures.isEmpty else {
            // Only last-access times: not worth waiting for another process's lock.
            if !touches.isEmpty, catalogFailure.withLock({ $0 }) == nil {
                try? cache.catalog.touch(touches, waitingForLock: false)
            }
            return
        }
        if let failure = catalogFailure.withLock({ $0 }) {
            failKeepingRows(entries, failure, heldIn: rows)
            return
        }
        do {
            // A disk that filled: the room held back for the catalog is given up,
            // the log's commits copied into the catalog's file, and the group tried again.
            try cache.reserve.retryingOnFullDisk(makingRoom: makeRoomInTheLog) {
                try cache.catalog.record(entries.map(\.record), failures: failures, touching: touches)
            }
            for entry in entries { entry.completion(.success(())) }
        } catch {
            // One bad row must not sink the rest; a catalog that failed as a
            // whole (a lock held past its minute, a full disk) would only fail
            // again, a minute an item for a lock.
            let wholeCatalog = Catalog.failsEveryRow(error)
            if entries.count > 1, !wholeCatalog {
                for entry in entries { record([entry], []) }
            } else {
                let outOfSpace = OutOfSpace.isCause(of: error, onDiskOf: cache.root)
                // The URL is said where the failure is shown.
                let failure = CacheError("cannot record it in the catalog: \(Catalog.describe(error))", outOfSpace: outOfSpace,
                                         catalogFailure: wholeCatalog && !outOfSpace ? Catalog.describe(error) : nil,
                                         lockTimedOut: Catalog.isLockTimeout(error))
                if wholeCatalog {
                    catalogFailure.withLock { $0 = failure }
                    failKeepingRows(entries, failure, heldIn: rows)
                } else {
                    noteUnrecorded(entries)
                    for entry in entries { entry.completion(.failure(failure)) }
                }
            }
            if !failures.isEmpty, !wholeCatalog { try? cache.catalog.record([], failures: failures) }
        }
    }

    /// Fails items whose objects are durable but that the catalog as a whole
    /// could not take, keeping their rows (see `UnrecordedRows`) so that the
    /// next run records them instead of fetching them again. Best effort:
    /// each failure says whether its row was kept. The file that holds
    /// their rows already (`rows`) is kept, made durable, rather than
    /// written again: on a full disk a second copy could fail where the
    /// first stands, and the objects were then removed.
    private func failKeepingRows(_ entries: [Pending], _ failure: CacheError, heldIn rows: UnrecordedRows.HeldRows? = nil) {
        guard !entries.isEmpty else { return }
        let records = entries.map(\.record)
        // A full disk: the room held back for the catalog, if still held, takes them.
        let kept = rows?.keepDurably() == true || (try? cache.reserve.retryingOnFullDisk(makingRoom: makeRoomInTheLog) {
            try cache.unrecorded.keep(records, fetchedAt: Date())
        }) != nil
        if !kept { noteUnrecorded(entries) }
        for entry in entries { entry.completion(.failure(kept ? failure.withRowsKept : failure)) }
    }

    /// Notes the objects these items placed new in the store, whose rows
    /// were neither recorded nor kept, for `removeUnrecordedObjects`.
    private func noteUnrecorded(_ entries: [Pending]) {
        let placed = entries.filter(\.placedNew).map(\.record.sha256)
        if !placed.isEmpty { unrecordedObjects.withLock { $0 += placed } }
    }

    /// Removes the objects noted by `noteUnrecorded`, unless a row points at
    /// one by now or one of `keeping` (moved since, its row to come) is the
    /// same bytes: no run would ever find them, and on a full disk (a disk
    /// another process filled while the rows waited) they hold the room the
    /// next run needs. (Another process that found one of them in place, the
    /// same bytes fetched at the same moment, and has not recorded its row
    /// yet will have a row to a missing object, which its URL's next fetch
    /// repairs.) On the ingest thread, between moves.
    private func removeUnrecordedObjects(keeping: Set<String>) {
        let noted = unrecordedObjects.withLock { noted in
            defer { noted.removeAll() }
            return noted.filter { !keeping.contains($0) }
        }
        guard !noted.isEmpty, let recorded = try? cache.catalog.recordedObjects(among: noted) else { return }
        for hash in Set(noted) where !recorded.contains(hash) { try? store.remove(hash) }
    }

    /// On a full disk: the rest of the group being moved stays out of the
    /// store, and the catalog's log is made reusable (see
    /// `Catalog.checkpointToFreeRoom`); true when that worked.
    private func makeRoomInTheLog() -> Bool {
        catalogMetAFullDisk.store(true, ordering: .relaxed)
        return (try? cache.catalog.checkpointToFreeRoom()) != nil
    }

    /// Completes items that cannot be stored; with `removingStaged`, their
    /// bodies (still in the temporary directory) are removed, unless they
    /// can stay there to be resumed.
    private func fail(_ entries: [Pending], because error: any Error, removingStaged: Bool) {
        for entry in entries {
            if removingStaged, entry.keepOnFailure?() != true {
                entry.beforeLeaving?()
                _ = unlink(entry.blob.path)
            }
            entry.completion(.failure(CacheError("cannot store it: \(error)", outOfSpace: OutOfSpace.isCause(of: error))))
        }
    }
}
