import Dispatch
import Synchronization

extension TransferEngine {
    /// Downloads `count` URLs (`url(i)` for each index) and calls `completion`
    /// once for each index with its body or its error; returns when every
    /// index has been completed. A cancelled task stops the batch: running
    /// transfers end, partials stay for the next run, and items that never
    /// started are not completed at all.
    ///
    /// Same downloads as `download(_:)`, shaped for long lists: no task per
    /// item. A body that arrives whole in its first attempt is handed over
    /// on the writer thread that hashed it, which then starts the next item
    /// (once the caller is ready for it), so a small file costs no task
    /// switch; an attempt that fails goes on in a task of its own with
    /// `download(_:)`'s retries and resume.
    ///
    /// `completion` runs on the engine's threads (writer threads, Dispatch
    /// threads, or the task that retried), one call per index, possibly
    /// several at once; it must not block. Its third argument, `ready`, is how
    /// the caller slows the batch down: call it once, at once or later (from
    /// any thread that may do file work), when it can take another body; the
    /// item that takes this one's place starts only then.
    ///
    /// `resumeAnswerCheck` gives an item's `ResumeAnswerCheck`, if any.
    ///
    /// With `settledMeanwhile`, an item whose partial another process holds
    /// (downloading the same URL into the same cache) waits until nothing
    /// else is left to start; it is then asked, from a thread that may do
    /// file work, whether the caller finds the item stored now, and settles it
    /// itself (`.settled`: the item is not completed), else downloads it (into a
    /// private temporary if the partial is still held). Without it, such an
    /// item downloads privately at once. Once another process has been seen
    /// so, every item is asked before it starts, and again once its partial
    /// is opened if that is new (the other may have moved its own into the
    /// store in between); one the caller finds that
    /// process has stored and not yet recorded (`.beingRecorded`) waits as
    /// one whose partial it holds, for a while (see `Deferred.storedElsewhereWait`).
    /// `othersAtWork` says whether another process is storing into the same
    /// cache (its rows held, say): asked for each item until it says so (it
    /// must be quick), it counts as such a process seen.
    public func download(
        count: Int,
        url: @escaping @Sendable (Int) -> String,
        resumeAnswerCheck: (@Sendable (Int) -> ResumeAnswerCheck?)? = nil,
        settledMeanwhile: (@Sendable (Int) -> SettledMeanwhile)? = nil,
        othersAtWork: (@Sendable () -> Bool)? = nil,
        completion: @escaping @Sendable (Int, Result<DownloadedBody, TransferError>, _ ready: @escaping @Sendable () -> Void) -> Void
    ) async {
        guard count > 0 else { return }
        let batch = DownloadBatch(engine: self, count: count, url: url, resumeAnswerCheck: resumeAnswerCheck,
                                  settledMeanwhile: settledMeanwhile, othersAtWork: othersAtWork, completion: completion)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                batch.start(whenDone: { continuation.resume() })
            }
        } onCancel: {
            batch.cancel()
        }
    }
}

/// What the caller of `download(count:…)` finds of an item that another
/// process downloading into the same cache may have stored.
public enum SettledMeanwhile: Sendable {
    /// Found stored: the caller has settled it, and it is not completed.
    case settled
    /// Stored by that process, which records it with its next flush: the item waits.
    case beingRecorded
    /// Neither: the item is downloaded.
    case notStored
}

/// The state of one `download(count:url:completion:)` call.
///
/// Keeps a fixed number of items in flight (four times the engine's slots:
/// an item holds its place until its body is written and handed over, and
/// the slot queue must not run dry meanwhile: with twice the slots, 6–9 of
/// 16 slots were busy on average over 2000 small files, now 11–14),
/// besides up to `retryLimit` items waiting to retry, which give their place
/// up while they wait. Each item that completes starts the next one once the
/// caller is ready for it, on the thread that says so. One host's items take
/// no more than `hostShare` places while the list is read ahead for other
/// hosts' items (see `BatchPlaces`).
final class DownloadBatch: Sendable {
    private struct State {
        /// Items not yet completed (or given up because of a cancel).
        var remaining: Int
        /// Which item takes the next free place.
        var places: BatchPlaces
        var cancelled = false
        var whenDone: (@Sendable () -> Void)?
        /// Attempts on the loop, to stop on a cancel.
        var running: Set<TransferID> = []
        /// Items retrying in tasks of their own, to cancel on a cancel.
        var retrying: [TransferID: Task<Void, Never>] = [:]
        /// The transfers of parked items (see `BatchPlaces`), by index, with
        /// the attempt each made before it was parked.
        var parked: [Int: (id: TransferID, earlier: (made: Int, charged: Int))] = [:]
        /// Items sent to the end because another process held their partial,
        /// with what was seen of it when each was last taken again.
        var deferred: [Int: Deferred] = [:]
        /// Deferred items taken again and found still held, one after another (see `deferToEnd`).
        var heldAgainInARow = 0
        /// The `startNext` calls due after a pause for other processes: one for
        /// each that stopped without starting an item, or came during the
        /// pause, so that the places they had are filled again. (One call for them all started one item
        /// at a time: a process that took over URLs from a stopped one fetched
        /// them one after another.)
        var startsOwed = 0
        /// Whether the batch is paused for other processes (a retry of the
        /// owed starts is scheduled): a `startNext` meanwhile is owed too, not
        /// run. (Each owed start went round every deferred item again on
        /// its own: 29 items held by a process waiting out a 429 were looked
        /// at 16 times each a quarter second, a third of a core.)
        var pausedForOthers = false
        /// Partials of earlier runs being read back to seed their hash, off
        /// the thread that found them, and the items found after them, held
        /// until they are launched or `holdEnds` (see `startNext`).
        var seeding = 0
        var launchesHeld: [HeldLaunch] = []
        var holdEnds: ContinuousClock.Instant?
    }

    /// An item ready to launch, held behind a partial being read back.
    private typealias HeldLaunch = (index: Int, handed: HandedPartial)

    /// The longest the items after a partial being read back wait for it:
    /// a partial of gigabytes takes seconds, and the free slots stood idle.
    static let longestHold = Duration.seconds(2)

    /// What was seen of a deferred item's partial, which another process holds.
    struct Deferred {
        /// What was seen of it when last looked at (nil: gone), and since when it has been so.
        var seen: (progress: PartialFile.SharedProgress?, since: ContinuousClock.Instant)?
        /// Since when it has been found stored by the other process and not
        /// yet recorded: its partial gone (moved into the store), or its row
        /// held (`SettledMeanwhile.beingRecorded`). Nil: not so far.
        var storedElsewhereSince: ContinuousClock.Instant?

        /// How long an item found stored elsewhere and not yet recorded is
        /// looked for again before it is downloaded beside it (that process
        /// may be stopped): the rows of a group come with its next flush.
        /// By time, not by looks: as other items completed, eight looks
        /// passed in a moment, and two processes given one list at once
        /// still fetched a few of its small files twice.
        static let storedElsewhereWait = Duration.seconds(2)

        /// Notes that the item was found stored elsewhere and not yet
        /// recorded at `now`; whether it is to wait (be looked for again).
        mutating func waitsForItsRow(at now: ContinuousClock.Instant) -> Bool {
            let since = storedElsewhereSince ?? now
            storedElsewhereSince = since
            return now - since < Self.storedElsewhereWait
        }
    }

    private let engine: TransferEngine
    private let count: Int
    private let url: @Sendable (Int) -> String
    /// Each item's `ResumeAnswerCheck`, if it has one.
    private let resumeAnswerCheck: (@Sendable (Int) -> ResumeAnswerCheck?)?
    /// Whether the caller settled an item sent to the end (see `download(count:…)`).
    private let settledMeanwhile: (@Sendable (Int) -> SettledMeanwhile)?
    /// Whether another process has been seen downloading into the same
    /// cache: from then on each item is first looked for (`settledMeanwhile`).
    /// Outside the lock: read for every item.
    private let otherProcessSeen = Atomic<Bool>(false)
    /// Whether another process is storing into the cache (see `download(count:…)`).
    private let othersAtWork: (@Sendable () -> Bool)?
    private let completion: @Sendable (Int, Result<DownloadedBody, TransferError>, @escaping @Sendable () -> Void) -> Void
    private let state: SleepingLock<State>
    /// How many items are in flight at once (see `DescriptorBudget`).
    private let width: Int

    init(engine: TransferEngine, count: Int, url: @escaping @Sendable (Int) -> String,
         resumeAnswerCheck: (@Sendable (Int) -> ResumeAnswerCheck?)? = nil,
         settledMeanwhile: (@Sendable (Int) -> SettledMeanwhile)? = nil,
         othersAtWork: (@Sendable () -> Bool)? = nil,
         completion: @escaping @Sendable (Int, Result<DownloadedBody, TransferError>, @escaping @Sendable () -> Void) -> Void) {
        self.engine = engine
        self.othersAtWork = othersAtWork
        self.count = count
        self.url = url
        self.resumeAnswerCheck = resumeAnswerCheck
        self.settledMeanwhile = settledMeanwhile
        self.completion = completion
        let jobs = engine.configuration.maxConcurrentTransfers
        width = engine.descriptorBudget.batchWidth(jobs: jobs)
        let share = Self.hostShare(width: width, jobs: jobs, perHost: engine.configuration.maxTransfersPerHost)
        // Hosts not yet answered leave `--jobs` places to those that have, as one host does to the others,
        // and keep as many for hosts not tried yet.
        let places = BatchPlaces(count: count, share: share, unprovenShare: engine.configuration.maxTransfersPerHost,
                                 unprovenTotal: width - jobs, firstPlaceReserve: jobs,
                                 lookahead: engine.configuration.batchLookaheadPerPlace * width)
        state = SleepingLock(State(remaining: count, places: places))
    }

    /// The places one host's items may hold while other hosts' items wait.
    /// It feeds the host's slots as the whole batch feeds all of them (four
    /// times `--per-host`), and it leaves `--jobs` places to the other hosts,
    /// enough to fill every slot (while their items are within the lookahead:
    /// see `BatchPlaces.next()`): with `--per-host` as large as
    /// `--jobs`, a host paused for its 429s held every place with URLs
    /// waiting for its pause to end, and other hosts' URLs waited with it
    /// (18.9 s at `--jobs 2 --per-host 2`). The batch is at least twice
    /// `--jobs` wide (`DescriptorBudget.batchWidth`), so the share is too.
    static func hostShare(width: Int, jobs: Int, perHost: Int) -> Int {
        min(4 * min(jobs, perHost), width - jobs)
    }

    /// How far the list is read ahead for other hosts' items, in places of
    /// the batch: 4,096 items at `--jobs 16`, about 64 KiB of indices (the
    /// items of hosts in an outage are set aside beyond it).
    static let lookaheadPerPlace = 64

    /// Starts the first items; `whenDone` is called once every item is completed.
    func start(whenDone: @escaping @Sendable () -> Void) {
        let alreadyDone = state.withLock { state -> Bool in
            // A task cancelled before it got here has settled every item already.
            guard state.remaining > 0 else { return true }
            state.whenDone = whenDone
            return false
        }
        if alreadyDone {
            whenDone()
            return
        }
        // Opening the first partials is file work: off the cooperative pool.
        DispatchQueue.global().async { [self] in
            for _ in 0..<min(width, count) { startNext() }
        }
    }

    /// Stops starting items and stops those running; each running item then
    /// completes as cancelled (its partial kept).
    func cancel() {
        let (running, retrying, unstarted) = state.withLock { state in
            state.cancelled = true
            // Items nobody will start now are given up.
            engine.countWaitingForOtherProcess(-state.deferred.count)
            state.deferred.removeAll()
            return (state.running, Array(state.retrying.values), state.places.abandonUnstarted())
        }
        for id in running { engine.cancel(id) }
        for task in retrying { task.cancel() }
        settle(unstarted)
    }

    /// Starts the next item that can be started; items that fail before their
    /// first attempt (a bad URL, an unwritable partial) are completed on the way.
    private func startNext() {
        let paused = state.withLock { state in
            if state.pausedForOthers { state.startsOwed += 1 }
            return state.pausedForOthers
        }
        if paused { return }
        while true {
            let index: Int
            // The host whose place a set-aside item already holds.
            let heldPlace: String?
            switch state.withLock({ $0.places.next() }) {
            case .none:
                return
            case .fresh(let fresh):
                (index, heldPlace) = (fresh, nil)
            case .setAside(let setAside, let host):
                (index, heldPlace) = (setAside, host)
            }
            let target: RequestTarget
            do {
                target = try RequestTarget(url(index))
            } catch {
                // (A set-aside item parsed before; the same text cannot fail now.)
                if let heldPlace { release(heldPlace) }
                finish(index, .failure(error), then: nil)
                continue
            }
            // Parsed outside the lock: it runs for every item.
            if heldPlace == nil, !state.withLock({ $0.places.place(index, host: target.hostKey) }) { continue }
            // An item sent to the end: the other process may have stored it
            // meanwhile; so may it have any other, once it has been seen.
            var retaken = heldPlace == nil || settledMeanwhile == nil ? nil
                : state.withLock { $0.deferred.isEmpty ? nil : $0.deferred.removeValue(forKey: index) }
            if retaken != nil { engine.countWaitingForOtherProcess(-1) }
            // Asked about before its partial was opened (not yet found held).
            var askedBeforeOpening = false
            if retaken != nil || seesOtherProcess(), let settledMeanwhile {
                askedBeforeOpening = retaken == nil
                switch settledMeanwhile(index) {
                case .settled:
                    release(target.hostKey)
                    settle(1)
                    continue
                case .beingRecorded:
                    // Moved into the store by the other process, its row to come with that
                    // process's next flush: waited for, not fetched beside it (two processes
                    // given one list at once fetched a few of its small files twice).
                    var record = retaken ?? Deferred()
                    if record.waitsForItsRow(at: .now) {
                        if deferToEnd(index, host: target.hostKey, retaken: retaken, seen: record) { return }
                        continue
                    }
                    // Waited for long enough (its partial, gone with the move, is not waited for again).
                    retaken = record
                case .notStored:
                    break
                }
            }
            var opened: PartialFile?
            do {
                opened = try engine.openPartial(for: target, privateIfHeld: settledMeanwhile == nil || othersPartialStalled(&retaken, target))
            } catch where error == PartialFile.heldElsewhere {
                opened = nil
            } catch {
                release(target.hostKey)
                finish(index, .failure(error), then: nil)
                continue
            }
            // The other process's partial is gone: it has moved the body into the store, and
            // its row comes with its next flush. Looked for again a moment later (for 2 s), not fetched again.
            if let fresh = opened, fresh.opened != .unknown, var record = retaken {
                let waits = record.waitsForItsRow(at: .now)
                retaken = record
                if waits {
                    fresh.close(discard: true)
                    opened = nil
                }
            }
            // Its partial is new, and the other process may have moved its own into the store
            // since the item was asked about (its rows are held in `unrecorded/` from before the
            // move): asked again now that the name is this run's. (Two runs given one list
            // at once fetched 1-10% of it twice, 20-70 ms apart.)
            if askedBeforeOpening, let fresh = opened, fresh.opened != .unknown, let settledMeanwhile {
                switch settledMeanwhile(index) {
                case .settled:
                    fresh.close(discard: true)
                    release(target.hostKey)
                    settle(1)
                    continue
                case .beingRecorded:
                    fresh.close(discard: true)
                    var record = Deferred()
                    _ = record.waitsForItsRow(at: .now)
                    if deferToEnd(index, host: target.hostKey, retaken: nil, seen: record) { return }
                    continue
                case .notStored:
                    break
                }
            }
            guard let partial = opened else {
                if deferToEnd(index, host: target.hostKey, retaken: retaken) { return }
                continue
            }
            if retaken != nil { state.withLock { $0.heldAgainInARow = 0 } }
            if partial.resumable != nil {
                // Its bytes are read back once to seed the hash, which may take
                // a while: not on this thread (a writer's, often). The items after
                // it wait until it is launched (`longestHold` at most): launched meanwhile, they took the
                // free slots, and a run after a Ctrl-C began new files while the
                // partials waited behind them (interrupted again, it never resumed one).
                let holdBegins = state.withLock { state -> Bool in
                    state.seeding += 1
                    guard state.holdEnds == nil else { return false }
                    state.holdEnds = .now + Self.longestHold
                    return true
                }
                if holdBegins {
                    DispatchQueue.global().asyncAfter(deadline: .now() + Self.longestHold.seconds) { [self] in releaseHeld(seeded: false) }
                }
                let handed = HandedPartial(target: target, partial: partial)
                DispatchQueue.global().async { [self] in
                    let launched = launch(index, handed.target, handed.partial)
                    releaseHeld(seeded: true)
                    if !launched { startNext() }
                }
                return
            }
            let held = state.withLock { state -> Bool in
                guard state.seeding > 0, let ends = state.holdEnds, ContinuousClock.now < ends else { return false }
                state.launchesHeld.append((index, HandedPartial(target: target, partial: partial)))
                return true
            }
            if held || launch(index, target, partial) { return }
        }
    }

    /// Launches the items held behind partials being read back, once none is
    /// (`seeded`: one has just been launched) or the hold is over.
    private func releaseHeld(seeded: Bool) {
        let released = state.withLock { state -> [HeldLaunch] in
            if seeded { state.seeding -= 1 }
            if state.seeding == 0 { state.holdEnds = nil }
            guard state.holdEnds.map({ ContinuousClock.now >= $0 }) ?? true else { return [] }
            defer { state.launchesHeld.removeAll() }
            return state.launchesHeld
        }
        for held in released where !launch(held.index, held.handed.target, held.handed.partial) { startNext() }
    }

    /// Whether another process has been seen storing into the cache: one
    /// holding a partial, or one `othersAtWork` found.
    private func seesOtherProcess() -> Bool {
        if otherProcessSeen.load(ordering: .relaxed) { return true }
        guard othersAtWork?() == true else { return false }
        otherProcessSeen.store(true, ordering: .relaxed)
        return true
    }

    /// Whether the partial of a deferred item taken again (`retaken`; nil
    /// for any other item), which another process holds, has neither grown
    /// nor been marked alive (`PartialFile.markAlive`) for `--stall-timeout`
    /// (three marks at least): that process is stuck, or stopped (Ctrl-Z),
    /// or its transfer of the URL stalled, and the item is downloaded beside
    /// it (privately) rather than waited for any longer. Notes what was seen
    /// in `retaken`.
    private func othersPartialStalled(_ retaken: inout Deferred?, _ target: RequestTarget) -> Bool {
        guard retaken != nil else { return false }
        let progress = engine.sharedPartialProgress(of: target)
        let now = ContinuousClock.now
        guard let seen = retaken?.seen, seen.progress == progress else {
            retaken?.seen = (progress, now)
            return false
        }
        return now - seen.since > max(.seconds(engine.configuration.stallTimeout), PartialFile.aliveInterval * 3)
    }

    /// Sends item `index` of `host`, whose partial another process holds (or
    /// which it has stored and not yet recorded), to the end of the list (see
    /// `BatchPlaces`), with what was seen of it (`seen`; else `retaken`'s).
    /// One taken from there again (`retaken`) goes back; once every such item
    /// has been found held in turn, nothing else is left to start: returns
    /// true, and `startNext` stops, to run again a moment later (a place
    /// freed meanwhile owes its start until then).
    private func deferToEnd(_ index: Int, host: String, retaken: Deferred?, seen: Deferred? = nil) -> Bool {
        let (deferred, pauses, schedulesRetry) = state.withLock { state -> (Bool, Bool, Bool) in
            // A cancel meanwhile did not count it among the unstarted: it settles itself.
            guard !state.cancelled else { return (false, false, false) }
            state.places.deferToEnd(index, host: host)
            state.deferred[index] = seen ?? retaken ?? Deferred()
            engine.countWaitingForOtherProcess(1)
            otherProcessSeen.store(true, ordering: .relaxed)
            guard retaken != nil else { return (true, false, false) }
            state.heldAgainInARow += 1
            guard state.heldAgainInARow >= state.deferred.count else { return (true, false, false) }
            state.heldAgainInARow = 0
            state.startsOwed += 1
            if state.startsOwed == 1 { state.pausedForOthers = true }
            return (true, true, state.startsOwed == 1)
        }
        if schedulesRetry {
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.25) { [self] in
                let owed = state.withLock { state in
                    defer {
                        state.startsOwed = 0
                        state.pausedForOthers = false
                    }
                    return state.startsOwed
                }
                for _ in 0..<owed { startNext() }
            }
        }
        if !deferred {
            release(host)
            settle(1)
        }
        return pauses
    }

    /// Sets the item up and hands its first attempt to the loop. Returns
    /// false when the item was completed on the spot instead (it failed, or
    /// the batch was cancelled), so the caller starts another.
    private func launch(_ index: Int, _ target: RequestTarget, _ partial: PartialFile) -> Bool {
        let prepared: TransferEngine.PreparedDownload
        do {
            prepared = try engine.prepare(target, partial, resumeAnswerCheck: resumeAnswerCheck?(index))
        } catch {
            release(target.hostKey)
            finish(index, .failure(error), then: nil)
            return false
        }
        // Checked and registered under the lock `cancel` takes: a cancel
        // either stops this item here or finds it running.
        let admitted = state.withLock { state -> (id: TransferID, earlier: (made: Int, charged: Int))? in
            guard !state.cancelled else { return nil }
            // A parked item goes on as the same transfer, its attempt before
            // counted: to its host's reachability a second one failing would
            // make one dead URL an outage, whose failures use up no retry for 30 s.
            if !state.parked.isEmpty, let parked = state.parked.removeValue(forKey: index) {
                state.running.insert(parked.id)
                return parked
            }
            let id = engine.nextTransferID()
            state.running.insert(id)
            return (id, (0, 0))
        }
        guard let (id, earlier) = admitted else {
            engine.abandon(prepared, after: .cancelled)
            release(target.hostKey)
            settle(1)
            return false
        }
        let attempt = engine.makeAttempt(id: id, target: prepared.target, number: 1, sink: prepared.sink)
        let offset = attempt.requestedOffset
        attempt.onEnd = { [self] outcome in
            ended(index, prepared, FirstAttempt(id: id, outcome: outcome, offset: offset, earlier: earlier))
        }
        if !engine.submit(attempt) {
            attempt.takeOnEnd()?(.cancelled())
        } else if state.withLock({ $0.cancelled }) {
            // A cancel that came between the check and the submit: its stop
            // may have reached the loop before the start did.
            engine.cancel(id)
        }
        return true
    }

    private typealias FirstAttempt = TransferEngine.FirstAttempt

    /// A partial on its way to the thread that prepares it.
    /// `@unchecked Sendable`: one thread uses it at a time, the hand-over orders them.
    private struct HandedPartial: @unchecked Sendable {
        let target: RequestTarget
        let partial: PartialFile
    }

    /// The first attempt ended: on the writer thread for a sealed body (the
    /// common case, handed over here), else on the loop thread, so the rest
    /// goes to a task.
    private func ended(_ index: Int, _ prepared: TransferEngine.PreparedDownload, _ first: FirstAttempt) {
        state.withLock { state in
            _ = state.running.remove(first.id)
            // An answer, whatever it was: the host is there (see `BatchPlaces`).
            if first.outcome.head.status != 0 { state.places.answered(prepared.target.hostKey) }
        }
        if first.outcome.sealed, case .success = TransferEngine.classify(first.outcome) {
            let completed = TransferEngine.Completed(first.outcome, requestedOffset: first.offset)
            let result: Result<DownloadedBody, TransferError>
            do {
                let finished = try prepared.sink.finishSealed()
                result = .success(engine.body(prepared, completed, attempts: 1, finished: finished))
            } catch {
                // Safe on this writer thread: a sealed body's writer has nothing left to wait for.
                engine.abandon(prepared, after: error)
                result = .failure(error)
            }
            let host = prepared.target.hostKey
            finish(index, result, then: { [self] in
                release(host, answered: true)
                startNext()
            })
            return
        }
        // Retries, resume and their backoff live in `complete`: a task per
        // item that needs them. Registered under the lock `cancel` takes, so
        // a cancel either finds the task or the task starts cancelled (its
        // own removal waits for the lock, so it comes after the insertion).
        let host = prepared.target.hostKey
        // Whether a place was freed (the item gave way or is parked), and whether it is parked.
        let (freed, parks) = state.withLock { state -> (Bool, Bool) in
            if first.outcome.hostUnreachable || first.outcome.pausedHost || first.outcome.abort?.kind == .hostGivenUp {
                state.places.outageBegan(host)
            }
            // An item waiting to retry (a backoff, a Retry-After) gives its place
            // to the next item at once, up to `retryLimit` of them: a dead host
            // must not hold up the rest of the list for its backoffs.
            let givesWay = state.retrying.count < retryLimit
            // Past them, an item that failed for want of its host and holds
            // no bytes is parked (see `BatchPlaces`): an index, no partial,
            // started again later with a new one. (Not one refused as its host
            // is given up: that fails at once. Nor one parked before: started
            // again when the outage lookahead was full, it was parked at once
            // again, and taken again, a refused connection each time: 11
            // attempts a URL where 3 were asked for.)
            if !givesWay, first.earlier.made == 0, first.outcome.hostNotReached, first.outcome.abort?.kind != .hostGivenUp,
               prepared.sink.bytesHeld == 0, state.places.mayPark, !state.cancelled {
                return (true, true)
            }
            let task = retry(index, prepared, first, startsNextWhenDone: !givesWay)
            if state.cancelled { task.cancel() }
            state.retrying[first.id] = task
            if givesWay { state.places.release(host: host) }
            return (givesWay, false)
        }
        guard freed else { return }
        // Off the loop thread, which may be the one here: starting the next
        // item, and closing a parked item's partial (which may wait for its writer).
        DispatchQueue.global().async { [self] in
            if parks {
                engine.abandon(prepared, after: .cancelled)
                // A cancel meanwhile did not count it among the unstarted: it settles itself.
                let parked = state.withLock { state -> Bool in
                    guard !state.cancelled else { return false }
                    state.places.park(index, host: host)
                    // A failure for want of a host in an outage uses up no retry (see `TransferEngine.perform`).
                    state.parked[index] = (first.id, (1, first.outcome.hostUnreachable ? 0 : 1))
                    return true
                }
                guard parked else { return settle(1) }
            }
            startNext()
        }
    }

    /// The rest of an item whose first attempt failed, in a task of its own.
    private func retry(_ index: Int, _ prepared: TransferEngine.PreparedDownload, _ first: FirstAttempt,
                       startsNextWhenDone: Bool) -> Task<Void, Never> {
        // The next item's file work does not belong on the cooperative pool.
        var next: (@Sendable () -> Void)?
        if startsNextWhenDone {
            let host = prepared.target.hostKey
            next = { @Sendable [self] in
                release(host)
                DispatchQueue.global().async { self.startNext() }
            }
        }
        let nextItem = next
        return Task { [self] in
            let result: Result<DownloadedBody, TransferError>
            do throws(TransferError) {
                result = .success(try await engine.complete(prepared, after: first))
            } catch {
                result = .failure(error)
            }
            let host = prepared.target.hostKey
            state.withLock { state in
                state.retrying.removeValue(forKey: first.id)
                switch result {
                case .success:
                    // Its host answered in the end: no longer in an outage, and may hold its share.
                    state.places.outageEnded(host)
                    state.places.answered(host)
                case .failure:
                    // Its host is given up (or failed this URL's tries): the URLs
                    // of it parked try now, and fail at once if it is given up.
                    state.places.unpark(host)
                }
            }
            finish(index, result, then: nextItem)
        }
    }

    /// How many items may wait to retry beside those in flight: each holds
    /// its partial's descriptor while it waits (see `DescriptorBudget`).
    private var retryLimit: Int { engine.descriptorBudget.retryWaiting(jobs: engine.configuration.maxConcurrentTransfers) }

    /// Reports an item's result and counts it. `next` starts the item that
    /// takes its place once the caller is ready; nil when the caller of
    /// `finish` goes on starting items itself.
    private func finish(_ index: Int, _ result: Result<DownloadedBody, TransferError>,
                        then next: (@Sendable () -> Void)?) {
        completion(index, result, next ?? {})
        settle(1)
    }

    /// An item of `host` gave its place up; `answered` when its body came,
    /// which ends any outage of its host.
    private func release(_ host: String, answered: Bool = false) {
        state.withLock { state in
            state.places.release(host: host)
            if answered { state.places.outageEnded(host) }
        }
    }

    /// Counts `items` as completed; the last one wakes the caller.
    private func settle(_ items: Int) {
        guard items > 0 else { return }
        let done = state.withLock { state -> (@Sendable () -> Void)? in
            state.remaining -= items
            guard state.remaining == 0 else { return nil }
            defer { state.whenDone = nil }
            return state.whenDone
        }
        done?()
    }
}
