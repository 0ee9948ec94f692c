import CCurl
import CFileSync
import Foundation
import Synchronization
import URLText

/// A body downloaded into a file of its own, complete and hashed.
public struct DownloadedBody: Sendable {
    /// The URL that was asked for.
    public let url: String
    /// Where the body came from after redirects.
    public let effectiveURL: String
    /// The finished file, in the partial directory. The caller owns it now:
    /// move it into a store, or remove it, then release it.
    public let file: FinishedFile
    /// Where the finished file is.
    public var path: String { file.path }
    /// SHA-256 of the bytes, lower-case hex.
    public let sha256: String
    public let size: Int64
    public let contentType: String?
    /// The codings the server applied to the body (`Content-Encoding`), if any.
    public var contentEncoding: String? = nil
    public let etag: String?
    public let lastModified: String?
    /// Bytes kept from an earlier attempt or run instead of downloaded again.
    public let resumedBytes: Int64
    /// Attempts it took (1 when the first one succeeded).
    public let attempts: Int
    /// The body's first bytes (up to 512), as this process received them;
    /// nil for a body resumed from bytes written before (read the file).
    public var opening: [UInt8]? = nil
    /// The body's last bytes (up to 32), as far as this process knows them
    /// (kept as they arrived, or read back with a resumed partial); fewer
    /// or none when not known (read the file).
    public var closing: [UInt8] = []
    /// The body's size as the server sent it, when it was decoded from a
    /// `Content-Encoding` (see `ContentDecoding`); nil when it is as sent.
    public var encodedSize: Int64? = nil

    /// The bytes this run received of the body: as sent, less those resumed.
    public var bytesReceived: Int64 { (encodedSize ?? size) - resumedBytes }

    /// Where the URL was redirected to; nil when it was not. Messages name
    /// it through `TransferEngine.shownRedirectTarget`.
    public var redirectedTo: String? { effectiveURL == url ? nil : effectiveURL }
    /// Asked for over https, sent over plain http by a redirect: on the way,
    /// anyone could have changed the bytes (curl follows such redirects too).
    public var cameOverPlainHTTP: Bool {
        url.utf8.prefix(6).lazy.map { $0 | 0x20 }.elementsEqual("https:".utf8)
            && effectiveURL.utf8.prefix(5).lazy.map { $0 | 0x20 }.elementsEqual("http:".utf8)
    }
}

/// A small response held in memory (an API answer).
public struct FetchedResponse: Sendable, Equatable {
    public let url: String
    public let status: Int
    /// The header fields the engine keeps (content-type, content-length,
    /// content-encoding, etag, last-modified, location, retry-after,
    /// content-range, date, transfer-encoding), lower-cased.
    public let headers: [String: String]
    public let body: Data
}

/// Downloads over libcurl's multi interface: one loop thread runs every
/// transfer, its `SlotQueue` bounds concurrency overall and per host, and
/// failed attempts are retried with backoff, resuming partial bodies.
///
/// Call `shutdown()` when done, or use `withTransferEngine`.
public final class TransferEngine: Sendable {
    public let configuration: TransferConfiguration
    /// Where bodies are written while they arrive (and partials wait for a resume).
    public let partialDirectory: String
    /// Progress and retry events. Buffers the newest 512 events, so a slow
    /// reader loses old ticks rather than growing memory. Ends with `.finished`.
    public let events: AsyncStream<TransferEvent>

    private let eventSink: AsyncStream<TransferEvent>.Continuation
    private let loop: CurlLoop
    private let nextID = Atomic<UInt64>(0)
    /// Attempts made, first ones and retries (tests count them).
    let attemptsMade = Atomic<Int>(0)
    private let isShutDown = Atomic<Bool>(false)
    private let finishedBudget: FinishedFile.Budget
    /// The proxies the environment names, to name in a failure to reach one.
    private let proxies = ProxyEnvironment()
    /// What the resolver says of names libcurl could not resolve.
    private let nameVerdicts: NameVerdicts

    /// How the limit on open files is shared out; `configuration`'s
    /// transfers are at most its `maxJobs`.
    public let descriptorBudget: DescriptorBudget
    /// Where bodies' chunks come from, and what this engine adds to its budget while it lives.
    private let chunkPool: ChunkPool
    private let chunkShare: Int

    /// The subdirectories of the partial directory that partials are spread
    /// over (see `PartialFile.shardDirectory`).
    public static var partialShardNames: [String] { PartialFile.shardNames }

    /// Begins making those subdirectories of `partialDirectory` on another
    /// thread: a new cache's sixteen `mkdir`s (0.4 ms, and 2.5 ms on a busy
    /// ext4) then run while the rest of the run is set up, where an engine
    /// made them just before its first request. Only missing ones are made:
    /// a link at a shard's name is left to the engine, which removes it as it
    /// starts, before any partial goes there (removed from here, it raced
    /// with the cache's own checks of those names). The group is left when
    /// they are made.
    public static func makePartialDirectoriesAhead(in partialDirectory: String) -> DispatchGroup {
        let made = DispatchGroup()
        DispatchQueue.global().async(group: made) { PartialFile.makeShardDirectories(in: partialDirectory, removingLinks: false) }
        return made
    }

    /// `configuration.maxConcurrentTransfers` above what the limit on open
    /// files allows is lowered to `descriptorBudget.maxJobs`.
    public convenience init(configuration requested: TransferConfiguration = TransferConfiguration(), partialDirectory: String) throws {
        try self.init(configuration: requested, partialDirectory: partialDirectory, chunkPool: HashingWriter.pool)
    }

    /// An engine whose bodies take their chunks from `chunkPool`, and that asks
    /// `hostNames` about names that do not resolve (tests give their own).
    init(configuration requested: TransferConfiguration, partialDirectory: String, chunkPool: ChunkPool,
         hostNames: HostNames = .system) throws {
        self.chunkPool = chunkPool
        // No longer than libcurl's own lookup may take (within the connect timeout).
        nameVerdicts = NameVerdicts(hostNames, longestWait: .milliseconds(Int(min(2, max(0, requested.connectTimeout)) * 1000)))
        descriptorBudget = DescriptorBudget.current(heldFinishedBodies: requested.maxHeldFinishedBodies)
        var configuration = requested
        configuration.maxConcurrentTransfers = min(requested.maxConcurrentTransfers, descriptorBudget.maxJobs)
        configuration.maxTransfersPerHost = min(requested.maxTransfersPerHost, configuration.maxConcurrentTransfers)
        self.configuration = configuration
        self.partialDirectory = partialDirectory
        // Usually made already (by the store): FileManager's checks took half
        // a millisecond of the start, before the first request.
        var info = stat()
        if stat(partialDirectory, &info) != 0 || info.st_mode & S_IFMT != S_IFDIR {
            try FileManager.default.createDirectory(atPath: partialDirectory, withIntermediateDirectories: true)
        }
        PartialFile.makeShardDirectories(in: partialDirectory)
        (events, eventSink) = AsyncStream.makeStream(of: TransferEvent.self, bufferingPolicy: .bufferingNewest(512))
        loop = try CurlLoop(configuration: configuration,
                            maxConnections: descriptorBudget.connections(jobs: configuration.maxConcurrentTransfers),
                            partialDirectory: partialDirectory, names: nameVerdicts, proxies: proxies, events: eventSink)
        finishedBudget = FinishedFile.Budget(limit: configuration.maxHeldFinishedBodies)
        // Four of the largest chunks a slot for the first 16 slots, two for
        // each past them: with two, a 64 MiB body's writer often had them all
        // queued and its transfer had to wait (8 x 64 MiB: 0.87 s against
        // 0.75 s with four; peak RSS 44 -> 52 MiB), while a wide run (--jobs
        // 100) keeps to what it took before. At least two a slot, so that a
        // paused transfer always gets going again (see `ChunkPool`).
        let slots = configuration.maxConcurrentTransfers
        chunkShare = max(4 * min(slots, 16), 2 * slots) * ChunkPool.largest
        chunkPool.addShare(chunkShare)
    }

    deinit {
        assert(isShutDown.load(ordering: .relaxed), "TransferEngine released without shutdown()")
        loop.shutdown()
        chunkPool.removeShare(chunkShare)
    }

    /// Starts, on a thread of its own, the set-up that every engine of the
    /// process needs and that no option changes: libcurl's (TLS's among it)
    /// and the writer threads. A command that may download calls it as it
    /// starts (after `prepareProcess`; `get` does, before it reads its list):
    /// the set-up then runs on another core while the list is read and the
    /// cache opened, not after them (a run's first request went from 18.8 to
    /// 15.9 ms after exec). An engine made meanwhile waits for what it needs
    /// of it. The process waits for it before it exits (`waitForWarmUp`).
    /// Where no thread can be started (`ulimit -u`, a container's pids limit)
    /// nothing is begun, and the engine sets all up itself. Once a process.
    public static func warmUp() {
        let done = DispatchGroup()
        let begins = warmUpDone.withLock { begun -> Bool in
            guard begun == nil else { return false }
            done.enter()
            begun = done
            return true
        }
        guard begins else { return }
        // Not Foundation's `Thread`: it drops pthread_create's error, and a
        // thread that never ran would leave `waitForWarmUp` waiting for ever.
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, 512 << 10)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        #if canImport(Darwin)
        var thread: pthread_t?
        #else
        var thread = pthread_t()
        #endif
        if pthread_create(&thread, &attributes, warmUpThreadMain, nil) != 0 { done.leave() }
    }

    /// The set-up `warmUp` runs on its thread.
    fileprivate static func runWarmUp() {
        _ = CurlGlobal.initialized
        _ = WriterPool.shared
        warmUpDone.withLock { $0 }?.leave()
    }

    /// Returns once the set-up `warmUp` began is done, at once if none was.
    /// Called before the process exits: an exit meanwhile ran the clean-up
    /// that TLS registers at exit while TLS was still being set up (SIGSEGV
    /// in 21 of 300 runs that ended at once for a bad URL).
    public static func waitForWarmUp() {
        warmUpDone.withLock { $0 }?.wait()
    }

    /// What `warmUp` began, if it has.
    private static let warmUpDone = Mutex<DispatchGroup?>(nil)

    /// Process-wide settings for a program whose main work is transfers; call
    /// once at start-up, before any other thread starts (see
    /// `reserveDescriptorTable`) and before any engine runs. glibc's
    /// allocator keeps libcurl's per-transfer receive buffers on warm heap
    /// pages rather than mapping fresh ones for every transfer, and uses two
    /// heap arenas rather than one per thread (see `mf_tune_allocator`). The soft
    /// limit on open files is raised to the hard one (at most 65,536): finished
    /// bodies keep their descriptor until stored (see `maxHeldFinishedBodies`),
    /// and a desktop's usual soft limit of 1,024 would cap that at 256. So are
    /// the soft limits on address space and on processes (see `AddressSpace`, `ThreadLimit`). The descriptors
    /// the process was started with are counted (see
    /// `DescriptorBudget.countInherited`), and the descriptor table is grown
    /// once (see `reserveDescriptorTable`).
    public static func prepareProcess() {
        mf_tune_allocator()
        SoftLimit.raiseToHard(Int32(RLIMIT_AS.rawValue))
        SoftLimit.raiseToHard(mf_rlimit_nproc())
        // libcurl turns an international host name (bücher.example) into its
        // ASCII form through libidn2, which reads the name in the locale's
        // character set; in the C locale of a script, cron or CI every such
        // name failed as a "bad/illegal format". URLs are UTF-8 here whatever
        // the locale says.
        if setlocale(LC_CTYPE, "C.UTF-8") == nil { _ = setlocale(LC_CTYPE, "") }
        SoftLimit.raiseToHard(Int32(RLIMIT_NOFILE.rawValue), atMost: 65_536)
        // Before anything of this process's own is open.
        DescriptorBudget.inheritedAtStart.store(DescriptorBudget.countInherited(), ordering: .relaxed)
        reserveDescriptorTable()
    }

    /// Descriptor numbers the process's table is grown to at start-up.
    /// A run of 2000 small files at the defaults reached 1,125 (finished
    /// bodies hold theirs until stored).
    static let descriptorTableReserve = 4096

    /// Grows the process's descriptor table once, now, to
    /// `descriptorTableReserve` entries (or the soft limit, if lower; 32 KiB).
    ///
    /// Linux grows the table by doubling as descriptor numbers climb, and in
    /// a process with more than one thread each growth waits for an RCU grace
    /// period, during which every thread that opens a file or a socket waits
    /// too: 2000 small files at `--jobs 16` grew it five times (64 to 2,048)
    /// and lost 160 ms of thread time to it, whole milliseconds in which no
    /// download started. Grown here, while the process has one thread, it
    /// costs no grace period and never grows again in a usual run. Nothing is
    /// left open: standard error is duplicated to the top number and closed
    /// (the executable gives a closed standard descriptor a placeholder). On
    /// Linux only: the grace period is Linux's.
    static func reserveDescriptorTable() {
        #if os(Linux)
        let top = min(descriptorTableReserve, TransferConfiguration.descriptorLimit()) - 1
        guard top > STDERR_FILENO else { return }
        let duplicate = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, Int32(top))
        if duplicate >= 0 { close(duplicate) }
        #endif
    }

    /// Removes what crashed or killed runs left in the partial directory
    /// (see `PartialFile.sweep`); resumable partials stay for a week.
    @discardableResult
    public func sweepPartials(staleAfter: Double = 86_400) -> Int {
        PartialFile.sweep(directory: partialDirectory, staleAfter: staleAfter)
    }

    /// Removes the partials whose URLs are cached now, unless a process holds
    /// them (see `PartialFile.removeStored`). `stored` gets their URLs and
    /// returns those cached. Returns how many files were removed.
    @discardableResult
    public func removePartials(ofStored stored: ([String]) -> Set<String>) -> Int {
        PartialFile.removeStored(directory: partialDirectory, stored: stored)
    }

    /// Stops the loop thread; transfers still running end as cancelled.
    public func shutdown() {
        isShutDown.store(true, ordering: .relaxed)
        loop.shutdown()
    }

    /// Downloads `url` into a file under `partialDirectory`, streaming and
    /// hashing as bytes arrive. Resumes a partial left by an earlier attempt or
    /// run (`Range` + `If-Range`); retries what `RetryPolicy` allows.
    /// Throws `TransferError`.
    /// `resumeAnswerCheck` is asked when a server answers a resume with a
    /// whole body (200) before the bytes held give way to it.
    public func download(_ url: String, resumeAnswerCheck: ResumeAnswerCheck? = nil) async throws(TransferError) -> DownloadedBody {
        let (target, partial) = try openPartial(for: url)
        // Resuming re-reads the held bytes to restore the hash: blocking
        // I/O that belongs on a Dispatch thread, not the cooperative pool.
        let prepared = partial.resumable == nil
            ? try prepare(target, partial, resumeAnswerCheck: resumeAnswerCheck)
            : try await Self.offCooperativePool { [self] () throws(TransferError) in
                try prepare(target, partial, resumeAnswerCheck: resumeAnswerCheck)
            }
        return try await complete(prepared, after: nil)
    }

    /// A download ready for its first attempt.
    struct PreparedDownload: @unchecked Sendable {
        // @unchecked: the sink is used by one attempt at a time, handed over
        // between threads by the attempt's `onEnd`.
        let target: RequestTarget
        let sink: FileSink
    }

    /// Checks `url` and opens (or creates) its partial file.
    func openPartial(for url: String) throws(TransferError) -> (RequestTarget, PartialFile) {
        let target = try RequestTarget(url)
        return (target, try openPartial(for: target))
    }

    /// Counts `items` more (or fewer) waiting for another process (see `EngineSnapshot.waitingForOtherProcess`).
    func countWaitingForOtherProcess(_ items: Int) {
        loop.waitingForOtherProcess.add(items, ordering: .relaxed)
    }

    /// What is seen of the partial a process would resume for `target`, if there is one.
    func sharedPartialProgress(of target: RequestTarget) -> PartialFile.SharedProgress? {
        PartialFile.sharedProgress(directory: partialDirectory, url: target.url)
    }

    /// Opens (or resumes) the partial of a parsed URL; see `PartialFile.init` for `privateIfHeld`.
    func openPartial(for target: RequestTarget, privateIfHeld: Bool = true) throws(TransferError) -> PartialFile {
        try PartialFile(directory: partialDirectory, url: target.url, direct: configuration.directIO, privateIfHeld: privateIfHeld)
    }

    /// Sets up the sink for `partial`; a resumed partial is read once here to
    /// seed the hash (blocking). The partial is closed if this fails.
    func prepare(_ target: RequestTarget, _ partial: PartialFile,
                 resumeAnswerCheck: ResumeAnswerCheck? = nil) throws(TransferError) -> PreparedDownload {
        let sink: FileSink
        do {
            sink = try FileSink(partial: partial, maxFileSize: configuration.maxFileSize,
                                resumableThreshold: configuration.resumableThreshold, budget: finishedBudget,
                                directIO: configuration.directIO, chunkPool: chunkPool, resumeAnswerCheck: resumeAnswerCheck)
        } catch {
            partial.close(discard: true)
            throw error
        }
        // An earlier run's partial past this run's size limit is refused
        // before any request, and kept as it is: the 416 that proves a whole
        // body held would have started it over first, and dropped it.
        if let limit = configuration.maxFileSize, sink.bytesHeld > limit {
            let held = sink.bytesHeld
            sink.close(discard: false)
            throw TransferError.tooLarge(limit: limit, held: held)
        }
        return PreparedDownload(target: target, sink: sink)
    }

    /// An attempt that already ran, and what it started from.
    struct FirstAttempt: Sendable {
        let id: TransferID
        let outcome: AttemptOutcome
        /// The `Range` start it asked for.
        let offset: Int64
        /// Attempts made before this one (an item parked after one, see
        /// `BatchPlaces`): `charged` of them used up a retry.
        var earlier: (made: Int, charged: Int) = (0, 0)
    }

    /// Runs attempts (after `first`, if one already ran) until success, a final
    /// error, cancellation or the retries run out, and hands over the body.
    func complete(_ prepared: PreparedDownload, after first: FirstAttempt?) async throws(TransferError) -> DownloadedBody {
        let sink = prepared.sink
        do throws(TransferError) {
            let (outcome, attempts) = try await perform(prepared.target, sink: sink, first: first)
            return try body(prepared, outcome, attempts: attempts, finished: await sink.finish())
        } catch {
            abandon(prepared, after: error)
            throw error
        }
    }

    /// The body a successful download hands over. Never inlined: in
    /// `complete`, its values were 832 bytes of the frame an item waiting
    /// to retry keeps.
    @inline(never)
    func body(_ prepared: PreparedDownload, _ outcome: Completed, attempts: Int,
              finished: (file: FinishedFile, sha256: String, size: Int64)) -> DownloadedBody {
        let head = prepared.sink.head ?? outcome.head
        let labels = prepared.sink.labels ?? BodyLabels(of: head)
        return DownloadedBody(
            url: prepared.target.url, effectiveURL: outcome.effectiveURL ?? prepared.target.url,
            file: finished.file, sha256: finished.sha256, size: finished.size,
            contentType: labels.contentType, contentEncoding: labels.contentEncoding, etag: head.etag,
            lastModified: head.lastModified, resumedBytes: outcome.resumedBytes, attempts: attempts,
            opening: prepared.sink.opening, closing: prepared.sink.closing)
    }

    /// Closes a download that failed: a transient failure or a cancel keeps
    /// the partial for the next run.
    func abandon(_ prepared: PreparedDownload, after error: TransferError) {
        // Over the size limit, only an earlier run's partial is kept: this
        // run's bytes of a body of unknown length would be up to the limit a
        // URL, in tmp/, for a user who set the limit to spare the disk.
        let keeps = Self.keepsPartial(after: error) && (error.kind != .tooLarge || prepared.sink.resumedFromEarlierRun)
        prepared.sink.close(discard: !keeps, cancelled: error.kind == .cancelled)
    }

    /// Whether a partial is worth keeping after `error` (it is kept only if
    /// it can be resumed, see `PartialFile.close`): after a transient failure,
    /// a cancel, or a full disk or quota, where what was written is good and
    /// the run after the user has made room goes on from it, as curl -C -
    /// and aria2c do, instead of fetching gigabytes again; and after a body
    /// over this run's `--max-filesize`, which a run without it goes on
    /// from (300 MB of an interrupted 1 GB download were dropped); and after
    /// a page that answered a resume (`ResumeAnswerCheck`), which the file's
    /// bytes held must outlive; and after any final HTTP status but 404 and
    /// 410 (a 403 for a signed URL that expired, a 204): the URL may send
    /// the file again, and a later run goes on from them.
    static func keepsPartial(after error: TransferError) -> Bool {
        if case .http(let status) = error.kind, status != 404, status != 410 { return true }
        return error.kind == .cancelled || error.kind == .hostGivenUp || error.kind == .tooLarge || error.kind == .notTheFile
            || error.isOutOfSpace || error.isRetryable
    }

    /// Fetches a small response into memory (up to `maxBytes`), with the same
    /// slots and retries as downloads. Returns any final status; a 2xx is not
    /// required, but retryable statuses are retried first.
    public func fetch(_ url: String, maxBytes: Int = 16 << 20) async throws(TransferError) -> FetchedResponse {
        let target = try RequestTarget(url)
        let sink = MemorySink(limit: maxBytes)
        do {
            let (outcome, _) = try await perform(target, sink: sink)
            let head = sink.head ?? outcome.head
            return FetchedResponse(url: target.url, status: head.status, headers: head.fields, body: sink.data)
        } catch let error {
            if case .http(let status) = error.kind, let head = sink.head, head.status == status {
                return FetchedResponse(url: target.url, status: status, headers: head.fields, body: sink.data)
            }
            throw error
        }
    }

    /// Runs blocking `work` on a Dispatch thread and waits for it without
    /// holding a cooperative thread.
    private static func offCooperativePool<T>(_ work: @escaping () throws(TransferError) -> T) async throws(TransferError) -> T {
        let handOff = HandOff(work)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                handOff.run()
                continuation.resume()
            }
        }
        return try handOff.value.get()
    }

    /// What a successful attempt tells about the body it delivered.
    struct Completed {
        var effectiveURL: String?
        var head: ResponseHead
        var resumedBytes: Int64

        /// A 206 continued the bytes held from `requestedOffset` on.
        init(_ outcome: AttemptOutcome, requestedOffset: Int64) {
            effectiveURL = outcome.effectiveURL
            head = outcome.head
            resumedBytes = outcome.head.status == 206 ? requestedOffset : 0
        }

        /// All `bytes` were held already; `head` is what is known of them.
        init(wholeBodyHeld bytes: Int64, head: ResponseHead, effectiveURL: String?) {
            self.effectiveURL = effectiveURL
            self.head = head
            resumedBytes = bytes
        }
    }

    /// The next transfer's identity.
    func nextTransferID() -> TransferID {
        TransferID(rawValue: nextID.add(1, ordering: .relaxed).newValue)
    }

    /// Where an item's attempts stand between two of them: all `perform`
    /// keeps across a wait. The judging of each attempt is in `judge`, off
    /// the async frame: an item waiting to retry holds its task's frames
    /// whole, and `perform`'s was 7 KB with the judging in it (1,024 items
    /// may wait at once, see `DescriptorBudget.retryWaiting`).
    struct AttemptTally {
        /// Attempts that used up a retry, this one included.
        var attempt: Int
        /// Requests made, the restart after a 416 included (`attempt` does not count it).
        var requests: Int
        var restartedAfterRangeError = false
        /// The attempts left ask for the whole body, the bytes held kept
        /// until a whole body comes (see `refusesResumes`).
        var asksWhole = false
        /// Seconds of waiting servers have asked for (429 and 503 with Retry-After) that used up no retry.
        var scheduledWaits = 0.0
        /// Failures for want of the host (see `freeRetry` in `judge`): how many, and since when.
        var hostFailures = 0
        var hostFailingSince: ContinuousClock.Instant?
        /// Turn-aways for want of room at the host that used up no retry (see `roomRetry` in `judge`).
        var turnAwaysForgiven = 0
    }

    /// What follows an attempt.
    enum AfterAttempt {
        case done(Completed)
        /// Another attempt at once.
        case again
        /// Another attempt after this many seconds.
        case wait(Double)
    }

    /// Attempts until success, a final error, cancellation or the retries run
    /// out. `first`, when given, is the first attempt, already run. A final
    /// error is noted for the status line (see `RetryWaits.failedForGood`).
    private func perform(_ target: RequestTarget, sink: any BodySink,
                         first: FirstAttempt? = nil) async throws(TransferError) -> (Completed, Int) {
        do {
            return try await attempts(target, sink: sink, first: first)
        } catch {
            if error.kind != .cancelled { loop.retryWaits.failedForGood(host: target.hostKey) }
            throw error
        }
    }

    /// `perform`'s attempts.
    private func attempts(_ target: RequestTarget, sink: any BodySink,
                          first: FirstAttempt? = nil) async throws(TransferError) -> (Completed, Int) {
        let id = first?.id ?? nextTransferID()
        var tally = AttemptTally(attempt: first?.earlier.charged ?? 0, requests: first?.earlier.made ?? 0)
        // The wait before the next attempt, if any. The first attempt, when
        // it ran already, is judged before any wait: kept for after one,
        // it would be part of the frame.
        var wait: Double?
        if let first {
            tally.attempt += 1
            tally.requests += 1
            switch try await judgeNamingNames(first.outcome, offset: first.offset, id: id, target: target, sink: sink, tally: &tally) {
            case .done(let completed): return (completed, tally.attempt)
            case .again: wait = nil
            case .wait(let delay): wait = delay
            }
        }
        while true {
            if let delay = wait {
                // Counted while it sleeps, so that a display shows the wait (a long
                // Retry-After looked like a hang: nothing active, nothing moving).
                try await loop.retryWaits.sleep(id, host: target.hostKey, for: .milliseconds(Int(delay * 1000)))
            }
            tally.attempt += 1
            tally.requests += 1
            if Task.isCancelled { throw TransferError.cancelled }
            let offset = tally.asksWhole ? 0 : sink.resumeOffset
            // Waits in the loop's slot queue, then runs; a cancel reaches it in either place.
            let outcome = await run(makeAttempt(id: id, target: target, number: tally.attempt, sink: sink, asksWhole: tally.asksWhole))
            switch try await judgeNamingNames(outcome, offset: offset, id: id, target: target, sink: sink, tally: &tally) {
            case .done(let completed): return (completed, tally.attempt)
            case .again: wait = nil
            case .wait(let delay): wait = delay
            }
        }
    }

    /// What to add to the failure of `outcome` when it failed on a name the
    /// resolver says does not exist (see `HostNames`), which no retry mends:
    /// the host's asked for or redirected to, or the environment's proxy's
    /// (`AttemptOutcome.unresolvedName`); nil otherwise.
    private func noSuchNameNote(_ outcome: AttemptOutcome) async -> String? {
        guard let failed = outcome.unresolvedName, await nameVerdicts.verdict(for: failed.name) == .doesNotExist else { return nil }
        switch failed.owner {
        case .host: return "no such name: not tried again"
        case .proxy(let variable?): return "the proxy from $\(variable) has no such name: not tried again"
        case .proxy(nil): return "the proxy has no such name: not tried again"
        }
    }

    /// `judge`, told first whether the attempt failed on a name that does not exist.
    private func judgeNamingNames(_ outcome: AttemptOutcome, offset: Int64, id: TransferID, target: RequestTarget,
                                  sink: any BodySink, tally: inout AttemptTally) async throws(TransferError) -> AfterAttempt {
        let noSuchName = await noSuchNameNote(outcome)
        return try judge(outcome, offset: offset, id: id, target: target, sink: sink, noSuchName: noSuchName, tally: &tally)
    }

    /// Whether a status that answered a resume (`Range` with `If-Range`) may
    /// be the server's answer to those headers rather than to the URL: 412
    /// or 304 from a server that reads `If-Range` as `If-Match` or
    /// `If-None-Match`, 400 or 403 from a firewall's rule against ranges,
    /// 501 from a server without them. A plain request may well get the
    /// file, and the partial, kept a week, failed the URL on every run.
    /// Not the statuses that say what the URL is (404, 410), or ask for
    /// credentials (401, 407), nor those retried anyway.
    static func refusesResumes(_ error: TransferError) -> Bool {
        guard case .http(let status) = error.kind else { return false }
        switch status {
        case 401, 404, 407, 410: return false
        case 501: return true
        default: return (300...499).contains(status) && !error.isRetryable
        }
    }

    /// A redirect's target as messages name it: its query (a signed CDN
    /// link holds a token) as `?…`, so that it is seen to have one (a 403
    /// of an expired link read as one of the bare path), without its
    /// password, and cut (a server's `Location` of 30,000 characters made a
    /// failure line of that length).
    public static func shownRedirectTarget(_ url: String) -> String {
        let path = url.prefix { $0 != "?" }
        // The password goes first: cut, a long host lost the `@` that marks it.
        let shown = URLPassword.replaced(in: String(path), with: "***").cut(toScalars: 300)
        return path.endIndex < url.endIndex ? shown + "?…" : shown
    }

    /// How many more times than it has retries a URL may be turned away, for
    /// want of room, by a host that serves others meanwhile and is held to
    /// fewer now, without using one up: that is mediafetch's doing. Under
    /// `--retries 0` the host's first burst and each try of one more failed
    /// URLs; the burst's retries may come back before the limit is down to
    /// what the host takes, and on a loaded machine (a CI run of every test
    /// at once on two cores) a URL was turned away a third time before it was.
    static let turnAwaysForgivenBeyondRetries = 3

    /// Judges an attempt that asked for bytes from `offset` on: done, again
    /// at once, again after a wait, or a final error (thrown). `noSuchName`:
    /// it failed on a name the resolver says does not exist, and what to say
    /// of it (see `noSuchNameNote(_:)`). Never inlined:
    /// inlined, its locals would be kept in `perform`'s frame.
    @inline(never)
    private func judge(_ outcome: AttemptOutcome, offset: Int64, id: TransferID, target: RequestTarget, sink: any BodySink,
                       noSuchName: String?, tally: inout AttemptTally) throws(TransferError) -> AfterAttempt {
        // A whole body began in place of the bytes held: its own may be resumed.
        if tally.asksWhole, (200...299).contains(outcome.head.status) { tally.asksWhole = false }
        var result = Self.classify(outcome, maxFileSize: configuration.maxFileSize)
        if case .failure(let failure) = result, failure.kind == .network(curlCode: Int(CURLE_COULDNT_CONNECT.rawValue)) {
            // A proxy from the environment that is down: named, or it read as the server being down.
            let named = proxies.named(in: failure.message, scheme: target.scheme)
            if named != failure.message { result = .failure(TransferError(failure.kind, named, retryAfter: failure.retryAfter)) }
        }
        if case .success = result, let expected = sink.expectedTotal, expected != sink.bytesHeld {
            // A body that ended early without libcurl noticing (a short 206, say),
            // or chunks that add up to another length than the one given beside them.
            // A range answer that gave no length of its own ends where its connection
            // did: a break looks like its end, and what came of it is kept to resume
            // (it was dropped, and the whole body fetched again).
            if !(outcome.head.status == 206 && outcome.head.endsWithItsConnection) { sink.restart() }
            result = .failure(TransferError(.protocolViolation, outcome.head.isChunked && outcome.head.status == 200
                ? "the server's chunks held \(outcome.bodyBytes) bytes where its Content-Length said \(expected)"
                : "body ended at \(outcome.bodyBytes) of \(expected) bytes"))
        }
        var error: TransferError
        switch result {
        case .success:
            return .done(Completed(outcome, requestedOffset: offset))
        case .failure(let failure):
            error = failure
        }
        // libcurl counts a redirect it could not follow (to `market:`) and
        // keeps the URL asked for: that one is not named as its own target.
        if outcome.redirects > 0, let effective = outcome.effectiveURL, effective != target.url, error.kind != .cancelled,
           !error.message.hasPrefix("the server redirected to ") {
            // "HTTP 404" alone named only the URL asked for, not the one that answered.
            error = TransferError(error.kind, "\(error.message) (redirected to \(Self.shownRedirectTarget(effective)))",
                                  retryAfter: error.retryAfter)
        }
        if error.kind == .cancelled || Task.isCancelled { throw TransferError.cancelled }
        // A misspelt host: no retry mends it, and its host's patience took 30 s to say so.
        if let noSuchName { throw TransferError(error.kind, "\(error.message) (\(noSuchName))") }
        if error.kind == .http(status: 416), offset > 0, offset == sink.bytesHeld,
           let held = sink.wholeBodyHeld(answeredBy: outcome.head) {
            // Every byte is held already (a body complete when the last run
            // was killed before storing it): the file is exactly that long,
            // and still the version the validator names (If-Range, and the
            // 416's own validator where it sends one).
            loop.counters.bytesResumed.add(sink.newlyResumed(upTo: offset), ordering: .relaxed)
            return .done(Completed(wholeBodyHeld: offset, head: held, effectiveURL: outcome.effectiveURL))
        }
        // The held bytes no longer fit the file (a 416), or the range answer was
        // another version's or came by another redirect (the sink dropped them):
        // the whole body is asked for once, at once, using up no retry (a signed
        // link's partial used up a retry and its backoff, and under `--retries 0` failed).
        let rangeAnswerRefused = error.kind == .protocolViolation && sink.bytesHeld == 0
        if offset > 0, !tally.restartedAfterRangeError, rangeAnswerRefused || error.kind == .http(status: 416) {
            tally.restartedAfterRangeError = true
            if !rangeAnswerRefused { sink.restart() }
            tally.attempt -= 1
            return .again
        }
        // The server will not answer a resume (see `refusesResumes`): the
        // attempts left ask for the whole body, the first at once, using up no
        // retry. The bytes held stay until a whole body comes.
        if offset > 0, !tally.asksWhole, Self.refusesResumes(error) {
            tally.asksWhole = true
            tally.attempt -= 1
            return .again
        }
        // A failure for want of the host (no connection, or a stall or a
        // timeout without an answer; none of its transfers answered) in an
        // outage (other URLs of it fail too, or it answered earlier in the
        // run: see `HostReachability.isOutage`) uses up no retry while the
        // host's patience lasts (the one URL of a host that never answered
        // fails after its own retries, as it did): the host as a whole is
        // given up when it runs out (see `HostReachability`). A server that restarted for 20 s failed
        // every URL that tried it meanwhile, each of its 5 attempts spent
        // in about 6 s. Twice the patience at most, in case the host is
        // never given up; the backoff grows as for counted retries.
        var freeRetry = false
        if outcome.hostUnreachable, error.isRetryable, configuration.retry.maxRetries > 0,
           let patience = configuration.unreachableHostPatience {
            let since = tally.hostFailingSince ?? .now
            tally.hostFailingSince = since
            freeRetry = ContinuousClock.now - since < .milliseconds(Int(2 * patience * 1000))
        }
        if freeRetry { tally.hostFailures += 1 }
        // Turned away for want of room at a host that served others meanwhile and is held
        // to fewer now (it takes fewer at once than were sent: see `HostConcurrency`): mediafetch's own doing,
        // which uses up no retry, up to `turnAwaysForgivenBeyondRetries` more times than
        // the URL has retries.
        let roomRetry = !freeRetry && outcome.turnedAwayWhileServing && error.isRetryable
            && tally.turnAwaysForgiven < configuration.retry.maxRetries + Self.turnAwaysForgivenBeyondRetries
        if roomRetry { tally.turnAwaysForgiven += 1 }
        // A retry that uses up none backs off as the counted ones would, by how many of
        // its kind came before, and as far as the default retries' would at least: held
        // at the first retry's wait under `--retries 1`, two URLs of a refused port were
        // each tried 80 times in the 30 s of their host's patience.
        var unchargedPolicy = configuration.retry
        unchargedPolicy.maxRetries = max(unchargedPolicy.maxRetries, RetryPolicy().maxRetries)
        let uncharged = freeRetry ? tally.hostFailures : roomRetry ? tally.turnAwaysForgiven : nil
        let computedDelay = uncharged.map { unchargedPolicy.delay(beforeRetry: min($0, unchargedPolicy.maxRetries), after: error) }
            ?? configuration.retry.delay(beforeRetry: tally.attempt, after: error)
        guard let delay = computedDelay else {
            if offset > 0, !tally.asksWhole, error.retryAfter == nil, case .http(let status) = error.kind, (500...599).contains(status) {
                // Server errors to every resume, the retries used up: one more
                // attempt asks for the whole body (a server that fails range
                // requests alone kept the URL from being fetched on any run).
                tally.asksWhole = true
                tally.attempt -= 1
                return .again
            }
            if let asked = configuration.retry.refusedWait(before: tally.attempt, after: error) {
                let (askedText, limitText) = NumberText.distinctWaits(asked, configuration.retry.maxRetryAfter)
                throw TransferError(error.kind, "\(error.message) (the server asked to wait \(askedText) "
                    + "before trying again; mediafetch waits \(limitText) at most)")
            }
            // The last of several tries: say so, or "HTTP 500" reads as if it was tried once.
            // (A host given up says how long it was tried, not this URL's share.)
            guard tally.requests > 1, error.kind != .hostGivenUp else { throw error }
            // Retries that used up none (see below) are said to be: "after 6 attempts" under
            // `--retries 2` read as the option ignored.
            let uncounted = tally.requests > tally.attempt ? ", \(tally.requests - tally.attempt) of them not counted against --retries" : ""
            throw TransferError(error.kind, "\(error.message) (after \(tally.requests) attempts\(uncounted))", retryAfter: error.retryAfter)
        }
        // A 429 or 503 that says when to come back is the server's schedule,
        // not a failed attempt: it uses up no retry while the waits asked
        // for add up to `maxRetryAfter` (items a rate-limited host sent away
        // in turn had run out of attempts within seconds, 51 of 60 failed).
        if freeRetry || roomRetry {
            tally.attempt -= 1
        } else if error.kind == .http(status: 429) || error.kind == .http(status: 503), let asked = error.retryAfter, asked > 0,
           tally.scheduledWaits + delay <= configuration.retry.maxRetryAfter {
            tally.scheduledWaits += delay
            tally.attempt -= 1
        }
        // Not said of a retry that will not wait (its host was given up: it is refused at once).
        if !loop.retryWaits.isGivenUp(target.hostKey) {
            eventSink.yield(.retrying(id, url: target.url, attempt: tally.requests + 1, delay: delay, reason: error))
        }
        return .wait(delay)
    }

    /// An attempt at `target` for the loop.
    /// With `asksWhole`, it asks for the whole body whatever the sink holds.
    func makeAttempt(id: TransferID, target: RequestTarget, number: Int, sink: any BodySink, asksWhole: Bool = false) -> Attempt {
        attemptsMade.add(1, ordering: .relaxed)
        return Attempt(id: id, target: target, number: number, sink: sink, counters: loop.counters, asksWhole: asksWhole)
    }

    /// Hands an attempt to the loop; `onEnd` gets its outcome. Returns false,
    /// without running it, when the engine is shutting down or the current
    /// task is cancelled.
    func submit(_ attempt: Attempt) -> Bool {
        loop.submit(attempt)
    }

    /// Stops an attempt, running or waiting for a slot.
    func cancel(_ id: TransferID) {
        loop.cancel(id)
    }

    /// Runs one attempt on the loop thread; a cancel of the task cancels the
    /// transfer. Never inlined: its frames would be part of `perform`'s, kept
    /// whole while an item waits to retry (416 bytes of them).
    @inline(never)
    private func run(_ attempt: Attempt) async -> AttemptOutcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<AttemptOutcome, Never>) in
                attempt.onEnd = { continuation.resume(returning: $0) }
                if !loop.submit(attempt) {
                    attempt.takeOnEnd()?(.cancelled())
                }
            }
        } onCancel: {
            loop.cancel(attempt.id)
        }
    }

    /// What libcurl 7.88 says, under CURLE_UNSUPPORTED_PROTOCOL, of an answer
    /// that is not HTTP it speaks (rather than of a URL's scheme).
    private static let notHTTPWordings = ["HTTP/0.9", "Unsupported response code", "Unsupported HTTP version"]

    /// What OpenSSL says when the handshake's answer is not TLS: a plain
    /// HTTP server's `HTTP/1.1 400` read as a TLS record.
    private static let notTLSWordings = ["wrong version number", "packet length too long", "unknown protocol"]

    /// What OpenSSL says of a handshake that can never succeed, and what that
    /// means: no TLS version or algorithm in common (a server that speaks
    /// only TLS 1.0 or 1.1), or a client certificate asked for (TLS 1.3
    /// says so once the handshake is over: libcurl reports it as a failed
    /// receive or send). Each was tried five times, with backoff.
    private static let hopelessHandshakes: [(wording: String, meaning: String)] = {
        let noVersion = "no TLS version in common (the server's is older than this system allows?)"
        let noCipher = "no TLS cipher in common"
        return [
            ("certificate required", "the server asks for a client certificate, which mediafetch does not send"),
            ("unsupported protocol", noVersion), ("no protocols available", noVersion), ("alert protocol version", noVersion),
            ("legacy sigalg disallowed", "no TLS signature algorithm in common (the server's TLS is older than this system allows)"),
            ("no shared cipher", noCipher), ("no cipher match", noCipher),
        ]
    }()

    /// A 2xx with no bytes. A 204 says there is no content (final); an empty
    /// 200 may be a server's passing fault (tried again).
    static func emptyBody(_ head: ResponseHead) -> TransferError {
        let reason = head.reason.isEmpty ? "" : " \(head.reason)"
        if head.status == 200 {
            return TransferError(.protocolViolation, "the server sent an empty body (HTTP 200\(reason)): nothing to store")
        }
        return TransferError(.http(status: head.status), "HTTP \(head.status)\(reason): no body to store")
    }

    /// The `Location` of a redirect libcurl could not follow, as messages
    /// show it, when the URL it kept is not that target (`javascript:…`, a
    /// target it cannot parse, one with a control byte): "not a usable URL" read as the user's own
    /// URL at fault, and the target was named nowhere. A target libcurl read
    /// (`ftp://…`) is named by `judge` as the URL redirected to.
    private static func unusedRedirectTarget(_ outcome: AttemptOutcome) -> String? {
        guard (300...399).contains(outcome.head.status),
              let location = outcome.head.location ?? outcome.head.malformedLocation, !location.isEmpty,
              outcome.effectiveURL != location else { return nil }
        return shownRedirectTarget(location)
    }

    /// Whether `url` is an http or https URL (by its scheme, in any case).
    private static func isHTTPOrHTTPS(_ url: String) -> Bool {
        let scheme = url.prefix { $0 != ":" }.lowercased()
        return scheme == "http" || scheme == "https"
    }

    /// Turns libcurl's result and the response head into success or a `TransferError`.
    /// `maxFileSize` is named in the error when libcurl refuses a body as too large.
    static func classify(_ outcome: AttemptOutcome, maxFileSize: Int64? = nil) -> Result<Void, TransferError> {
        if outcome.cancelled { return .failure(.cancelled) }
        if let abort = outcome.abort { return .failure(abort) }
        let code = CURLcode(rawValue: UInt32(outcome.curlCode))
        if code != CURLE_OK {
            let message = outcome.curlMessage
            let hopeless = [CURLE_SSL_CONNECT_ERROR, CURLE_RECV_ERROR, CURLE_SEND_ERROR].contains(code)
                ? hopelessHandshakes.first { message.contains($0.wording) }?.meaning : nil
            switch code {
            case CURLE_OPERATION_TIMEDOUT where message.contains("SSL connection timeout"):
                // A server that waits, silent, for a plain request (mediafetch-origin does):
                // the handshake times out with no word of why. Tried again all the same.
                return .failure(TransferError(.timeout, "timed out: \(message) (no TLS answer: plain HTTP on this port?)"))
            case CURLE_OPERATION_TIMEDOUT:
                return .failure(TransferError(.timeout, "timed out: \(message)"))
            case CURLE_UNSUPPORTED_PROTOCOL where notHTTPWordings.contains(where: message.contains):
                // libcurl's code for an answer that is not HTTP/1.1 or 2 as well.
                return .failure(TransferError(.protocolViolation, "the server's answer is not valid HTTP: \(message)"))
            case _ where message.hasPrefix("Invalid Content-Length"):
                // libcurl refuses a negative length before the head is ours to read
                // (`+10000` reaches `beginBody`, which says the same).
                return .failure(TransferError(.protocolViolation,
                                              "the server gave a length that is no count of bytes (libcurl: \(message))"))
            case CURLE_UNSUPPORTED_PROTOCOL:
                // A scheme other than http and https redirected to: one libcurl did not
                // follow (`market:`), or one it did and then refused (`file:`).
                if let location = unusedRedirectTarget(outcome) {
                    return .failure(TransferError(.unsupportedURL, "the server redirected to \(location): only http and https are allowed"))
                }
                if let effective = outcome.effectiveURL, isHTTPOrHTTPS(effective),
                   !message.contains("not supported or disabled in libcurl") {
                    // At an http or https URL, libcurl's code for an answer it does not
                    // read as HTTP, whatever its words: they are the transfer's first
                    // error's, such as a reused connection's reset before the answer in
                    // HTTP/0.9 on the next one. (Not a libcurl built without https,
                    // which says so: that stays final.)
                    return .failure(TransferError(.protocolViolation, "the server's answer is not valid HTTP: \(message)"))
                }
                if outcome.redirects > 0, let effective = outcome.effectiveURL {
                    return .failure(TransferError(.unsupportedURL,
                        "the server redirected to \(shownRedirectTarget(effective)): only http and https are allowed"))
                }
                return .failure(TransferError(.unsupportedURL, "only http and https are allowed: \(message)"))
            case CURLE_URL_MALFORMAT:
                // Retrying cannot mend a URL (an unencoded '@' in a password, say).
                if let location = unusedRedirectTarget(outcome) {
                    return .failure(TransferError(.unsupportedURL, "the server redirected to a URL that cannot be used: \(location) (\(message))"))
                }
                return .failure(TransferError(.unsupportedURL, "not a usable URL: \(message)"))
            case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CIPHER,
                 CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_CRL_BADFILE,
                 CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED:
                // The same certificate comes back on every try: fail at once, not after four retries.
                return .failure(TransferError(.certificate(curlCode: outcome.curlCode), message))
            case _ where hopeless != nil:
                return .failure(TransferError(.certificate(curlCode: outcome.curlCode), "TLS handshake failed: \(hopeless ?? ""): \(message)"))
            case CURLE_SSL_CONNECT_ERROR where notTLSWordings.contains(where: message.contains):
                // A plain HTTP server's answer to the handshake: the same on every try.
                return .failure(TransferError(.notTLS, "TLS handshake failed: the server did not answer in TLS "
                    + "(plain HTTP on this port? then the URL is http://): \(message)"))
            case CURLE_OUT_OF_MEMORY:
                // What libcurl 7.88 says of a response head over 100 KB too: the
                // same head comes back on every try (curl does not say more).
                return .failure(TransferError(.engine,
                    "the response's headers are probably over the 100 KB libcurl accepts (libcurl: \(message))"))
            case CURLE_TOO_MANY_REDIRECTS:
                return .failure(TransferError(.tooManyRedirects, "too many redirects: \(message)"))
            case CURLE_FILESIZE_EXCEEDED:
                // (A 206's length is the rest of the file: the size is its range's total.)
                let announced = outcome.head.status == 206 ? outcome.head.contentRange?.total : outcome.head.contentLength
                return .failure(maxFileSize.map { TransferError.tooLarge(limit: $0, announced: announced) }
                    ?? TransferError(.tooLarge, "larger than the --max-filesize limit"))
            case CURLE_WRITE_ERROR:
                return .failure(TransferError(.fileSystem(errno: 0), "cannot write the body: \(message)"))
            default:
                return .failure(TransferError(.network(curlCode: outcome.curlCode), message))
            }
        }
        let status = outcome.head.status
        if (200...299).contains(status) { return .success(()) }
        var reason = outcome.head.reason.isEmpty ? "" : " \(outcome.head.reason)"
        // A redirect libcurl did not follow: "HTTP 302 Found" alone read as if it had gone somewhere.
        if [301, 302, 303, 307, 308].contains(status), outcome.head.location?.isEmpty ?? true { reason += " (with no Location to follow)" }
        return .failure(TransferError(.http(status: status), "HTTP \(status)\(reason)", retryAfter: outcome.head.retryAfter()))
    }
}

/// Runs `body` with a fresh engine and shuts it down afterwards, also on error.
@discardableResult
public func withTransferEngine<T>(
    configuration: TransferConfiguration = TransferConfiguration(),
    partialDirectory: String,
    _ body: (TransferEngine) async throws -> T
) async throws -> T {
    let engine = try TransferEngine(configuration: configuration, partialDirectory: partialDirectory)
    defer { engine.shutdown() }
    return try await body(engine)
}

/// A URL accepted for transfer: http or https with a host.
public struct RequestTarget: Sendable, Equatable {
    public let url: String
    /// `host:port`, lower-cased: the key for per-host slots.
    public let hostKey: String

    /// The scheme, as the environment's proxy variables are chosen by it
    /// (the scheme is checked to be http or https when the target is made).
    var scheme: String { Self.scheme(of: url) }

    /// `hostKey` as a person reads it: a host percent-encoded in its URL
    /// (`%62adgu.invalid:80`) decoded, as libcurl names it (`badgu.invalid:80`),
    /// when the decoded bytes are UTF-8 that a name may hold (see
    /// `isUnfitForName`: no control or format character, a bidi override
    /// say); else the key as it is. For messages only: keys stay as the URLs
    /// spell them.
    public static func readable(hostKey: String) -> String {
        // An IDN spelt in its ASCII form reads as its letters (the port after the last colon).
        let hostKey = hostKey.lastIndex(of: ":").map { HostSpelling.readable(hostKey[..<$0]) + hostKey[$0...] }
            ?? HostSpelling.readable(hostKey[...])
        guard hostKey.utf8.contains(UInt8(ascii: "%")), let decoded = hostKey.removingPercentEncoding,
              !decoded.unicodeScalars.contains(where: isUnfitForName) else { return hostKey }
        return decoded
    }

    /// Whether no host name can hold `scalar`: a control (C0, DEL, C1), an
    /// invisible format character, or a space or separator of any kind.
    private static func isUnfitForName(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .spaceSeparator, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    /// The scheme of `url`, a request target's (http or https).
    static func scheme(of url: String) -> String { url.hasPrefix("https:") ? "https" : "http" }

    /// The longest URL accepted, in bytes. Servers refuse far shorter ones
    /// (nginx: 8 KiB for the whole request line); a longer "URL" is a
    /// mistake, and quoting it whole would flood the terminal and the catalog.
    public static let maxLength = 32 * 1024

    /// What an error may quote of a URL too long to quote: its scheme and
    /// host, at most 60 characters. Nothing before the text's last `@` is
    /// shown, so no password is, even one with a `/` in it (the host is then
    /// misread, never the secret shown).
    static func schemeAndHost(of text: String) -> String {
        var rest = Substring(text)
        var shown = ""
        // A "://" after a scheme's letters only: one in the query (`u:pw@h/a?r=http://x`) is not where the host begins.
        if let separator = rest.range(of: "://"), URLPath.isScheme(rest[..<separator.lowerBound].utf8) {
            shown = String(rest[..<separator.upperBound])
            rest = rest[separator.upperBound...]
        }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        let hostEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        shown += rest[..<hostEnd]
        return String(shown.prefix(60))
    }

    /// Parses by hand rather than with URLComponents: it runs for every URL
    /// of every list. The scheme and the authority are checked here, the
    /// rest left to libcurl (which rejects what it cannot use); the whole is
    /// then spelt one way (`URLSpelling`).
    public init(_ text: String) throws(TransferError) {
        guard text.utf8.count <= Self.maxLength else {
            throw TransferError(.unsupportedURL, "URL of \(text.utf8.count) bytes is longer than the "
                + "\(Self.maxLength) accepted: \(Self.schemeAndHost(of: text))…")
        }
        // Errors quote the URL, but never its password (output redacts them
        // again, and a password may hold a space). Worded only for an
        // error: this runs for every URL of a list, and again as it starts.
        func shown() -> String {
            // A URL refused for its password's space or slash is read leniently too (`http://u:pa ss/x@h/`),
            // and so is a second URL joined to it.
            let hidden = URLPassword.hiddenLeniently(in: URLPassword.replaced(in: text, with: "***"), with: "***")
            return URLPassword.hiddenInMistypedWords(hidden, with: "***")
        }
        // Spaces and tabs around the URL are dropped (byte-wise: this runs per URL).
        var bytes = Array(text.utf8)
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes.removeLast() }
        let leading = bytes.prefix { $0 == 0x20 || $0 == 0x09 }.count
        if leading > 0 { bytes.removeFirst(leading) }
        // A URL copied with its quotes (from a shell line, a CSV field, JSON) was
        // told it had no scheme, which it has.
        // (Only an opening mark: one that ends a URL, `?a=b>`, may be its own,
        // as libcurl takes it and an earlier version fetched it.)
        if bytes.first.map({ [UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: "<")].contains($0) }) ?? false
            || bytes.starts(with: Array("\u{201C}".utf8)) || bytes.starts(with: Array("\u{2018}".utf8))
            || bytes.starts(with: Array("\u{AB}".utf8)) {
            throw TransferError(.unsupportedURL, "not a URL, it is in \(bytes.first == UInt8(ascii: "<") ? "angle brackets" : "quotes") "
                + "(write it without them): \(shown())")
        }
        // `example.com/a.jpg`, `localhost:8080/a.jpg`: a host and no scheme, which curl would take as http.
        func noScheme() -> String { "not a URL, it has no scheme (write http:// or https:// before it): \(shown())" }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0,
              URLPath.isScheme(bytes[0..<colon]) else {
            throw TransferError(.unsupportedURL, Self.opensWithAHost(bytes) ? noScheme() : "not a URL: \(shown())")
        }
        let isHTTPS: Bool
        switch colon {
        case 4 where Self.equalsIgnoringCase(bytes[0..<4], "http"): isHTTPS = false
        case 5 where Self.equalsIgnoringCase(bytes[0..<5], "https"): isHTTPS = true
        default:
            let port = bytes[(colon + 1)...].prefix { (0x30...0x39).contains($0) }
            if (1...5).contains(port.count), port.endIndex == bytes.endIndex || [0x2F, 0x3F, 0x23].contains(bytes[port.endIndex]) {
                throw TransferError(.unsupportedURL, noScheme())
            }
            let scheme = String(decoding: bytes[0..<colon], as: UTF8.self).lowercased()
            throw TransferError(.unsupportedURL, "unsupported scheme '\(scheme)' (only http and https): \(shown())")
        }
        guard bytes.count >= colon + 3, bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/") else {
            throw TransferError(.unsupportedURL, "not a URL: \(shown())")
        }
        // C1 controls (U+0080 to U+009F, NEL among them) too: as escapes in the path they made a second URL part of the first.
        if let blankAt = bytes.indices.first(where: { index in
            bytes[index] <= 0x20 || bytes[index] == 0x7f
                || bytes[index] == 0xC2 && index + 1 < bytes.count && (0x80...0x9F).contains(bytes[index + 1])
        }) {
            // Said, not just refused: "not a URL" for a URL with a space in it read as a bug.
            // (%20 mends a path or a password, not a host name: "exa mple.com" is a slip.)
            let endsAuthority = { (byte: UInt8) in byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") }
            let authorityEnd = bytes[(colon + 3)...].firstIndex(where: endsAuthority) ?? bytes.endIndex
            let inHost = blankAt < authorityEnd && !bytes[blankAt..<authorityEnd].contains(UInt8(ascii: "@"))
            // Two URLs on a line (or in one argument) were told to write the space between them as %20.
            let after = bytes[blankAt...].drop { $0 == 0x20 || $0 == 0x09 }
            let anotherFollows = Self.startsWithHTTPScheme(after)
            let what = anotherFollows ? "it holds two (one URL a line, or an argument each)"
                : bytes[blankAt] != 0x20 ? "it holds a control character"
                : inHost ? "its host name holds a space" : "it holds a space (write it as %20)"
            throw TransferError(.unsupportedURL, "not a URL, \(what): \(shown())")
        }
        let authorityStart = colon + 3
        let authorityEnd = bytes[authorityStart...].firstIndex(where: {
            $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
        }) ?? bytes.count
        // A second URL joined to this one by what a URL may hold (`a.jpg,http://u:pw@h/b.jpg`, a
        // no-break space) was fetched as its path, and that URL's password stored and shown with it.
        if Self.holdsAURLWithAPassword(bytes[authorityEnd...]) {
            throw TransferError(.unsupportedURL, "not a URL, it holds a second one, with a password "
                + "(one URL a line, or an argument each; an @ in a URL is written %40): \(shown())")
        }
        var authority = bytes[authorityStart..<authorityEnd]
        // The first '@' ends the userinfo, as libcurl reads it: an unencoded '@'
        // in a password leaves one in the host, which is refused below.
        if let at = authority.firstIndex(of: UInt8(ascii: "@")) { authority = authority[(at + 1)...] }
        var host = authority
        var portText: ArraySlice<UInt8> = []
        if authority.first == UInt8(ascii: "[") {
            // An IPv6 literal: the port follows the closing bracket.
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else {
                throw TransferError(.unsupportedURL, "not a URL: \(shown())")
            }
            host = authority[authority.startIndex...close]
            let after = authority[(close + 1)...]
            if after.first == UInt8(ascii: ":") { portText = after.dropFirst() } else if !after.isEmpty {
                throw TransferError(.unsupportedURL, "not a URL: \(shown())")
            }
        } else if let portColon = authority.lastIndex(of: UInt8(ascii: ":")) {
            host = authority[..<portColon]
            portText = authority[(portColon + 1)...]
        }
        guard !host.isEmpty else { throw TransferError(.unsupportedURL, "no host in URL: \(shown())") }
        // What libcurl would refuse once the list is under way (and the run
        // then ends as if an item failed): refused here, before anything is fetched.
        guard Self.isUsableHost(host) else {
            // `u:p@ss@host`: the first '@' ended the password, and the rest is no host.
            let why = host.contains(UInt8(ascii: "@")) ? " (an @ in a user name or password is written %40)" : ""
            throw TransferError(.unsupportedURL, "bad host in URL: \(shown())\(why)")
        }
        var port = isHTTPS ? 443 : 80
        if !portText.isEmpty {
            // Leading zeros are allowed (RFC 3986), as libcurl allows them.
            let significant = portText.drop { $0 == UInt8(ascii: "0") }
            guard portText.allSatisfy({ (48...57).contains($0) }), significant.count <= 5,
                  let number = Int(String(decoding: significant, as: UTF8.self)), (1...65535).contains(number) else {
                throw TransferError(.unsupportedURL, "bad port in URL: \(shown())")
            }
            port = number
        }
        // One spelling per resource, so the catalog knows it whichever way it
        // is written (see `URLSpelling`: the fragment, which is never sent,
        // dropped; the scheme and the host in small letters, ASCII letters
        // only; the path's dot segments resolved and its percent-encodings
        // spelt one way; the query as written).
        self.url = URLSpelling.normalized(leading == 0 && bytes.count == text.utf8.count ? text : String(decoding: bytes, as: UTF8.self))
        // The host as the URL spells it (`127.1` is `127.0.0.1`, an IDN its
        // ASCII form), so that one host has one key whichever way it is written;
        // an IDN left as written is lower-cased as Unicode text.
        let spelt = HostSpelling.key(host)
        if spelt.allSatisfy({ $0 < 0x80 }) {
            var key = spelt
            key.append(UInt8(ascii: ":"))
            key.append(contentsOf: String(port).utf8)
            self.hostKey = String(decoding: key, as: UTF8.self)
        } else {
            self.hostKey = "\(String(decoding: spelt, as: UTF8.self).lowercased()):\(port)"
        }
    }

    /// Whether `bytes`, a URL without a scheme, begin with what reads as a
    /// host: a dotted name or address, or one with a port, up to the path.
    private static func opensWithAHost(_ bytes: [UInt8]) -> Bool {
        let first = bytes.prefix { ![UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")].contains($0) }
        guard !first.isEmpty, first.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        return first.contains(UInt8(ascii: ".")) || first.contains(UInt8(ascii: ":"))
            || String(decoding: first, as: UTF8.self).lowercased() == "localhost"
    }

    /// A host libcurl 7.88 takes (checked against curl itself): an IPv6
    /// address in brackets (`inet_pton`), with a zone after `%` or `%25`; or
    /// a name that, with its valid `%XX` decoded, has no control byte, none
    /// of the characters libcurl's URL parser refuses in a name
    /// (`http://a<b/`, `http://h:80:80/`, `http://a%00b/`), and only valid
    /// UTF-8 beyond ASCII (an IDN). An invalid escape (`%zz`) is left as it is, as libcurl leaves it.
    /// Nor any character no host name can hold, which libcurl takes and then
    /// fails on, as an item, after retries or as a bad format: DEL, which the
    /// lookup was retried for (`a%7Fb`), a C1 control, an invisible format
    /// character (a bidi override) or a space of another kind.
    private static func isUsableHost(_ host: ArraySlice<UInt8>) -> Bool {
        if host.first == UInt8(ascii: "[") {
            guard host.last == UInt8(ascii: "]") else { return false }
            var address = host.dropFirst().dropLast()
            if let percent = address.firstIndex(of: UInt8(ascii: "%")) {
                var zone = address[(percent + 1)...]
                if zone.starts(with: Array("25".utf8)), zone.count > 2 { zone = zone.dropFirst(2) }
                guard !zone.isEmpty, zone.count <= 15 else { return false }
                address = address[..<percent]
            }
            var parsed = in6_addr()
            return String(decoding: address, as: UTF8.self).withCString { inet_pton(AF_INET6, $0, &parsed) } == 1
        }
        var refused = false
        var beyondASCII = false
        forEachDecodedByte(of: host) { byte in
            if byte < 0x20 || byte == 0x7F || isRefusedInHostName(byte) { refused = true }
            if byte >= 0x80 { beyondASCII = true }
        }
        guard !refused else { return false }
        guard beyondASCII else { return true }
        // An IDN: libcurl converts it, and only valid UTF-8 converts.
        var decoded: [UInt8] = []
        forEachDecodedByte(of: host) { decoded.append($0) }
        guard let name = String(validating: decoded, as: UTF8.self) else { return false }
        return !name.unicodeScalars.contains(where: isUnfitForName)
    }

    /// Calls `body` with each byte of `text`, a valid `%XX` as the byte it stands for.
    private static func forEachDecodedByte(of text: ArraySlice<UInt8>, _ body: (UInt8) -> Void) {
        var index = text.startIndex
        while index < text.endIndex {
            if text[index] == UInt8(ascii: "%"), index + 2 < text.endIndex,
               let high = URLSpelling.hexValue(text[index + 1]), let low = URLSpelling.hexValue(text[index + 2]) {
                body(high << 4 | low)
                index += 3
            } else {
                body(text[index])
                index += 1
            }
        }
    }

    /// Whether libcurl 7.88's `hostname_check` refuses `byte` in a (decoded)
    /// host name: a switch, not a set, since it is asked of every byte of every host.
    private static func isRefusedInHostName(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: " "), UInt8(ascii: "/"), UInt8(ascii: ":"), UInt8(ascii: "#"), UInt8(ascii: "?"),
             UInt8(ascii: "!"), UInt8(ascii: "@"), UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "["),
             UInt8(ascii: "]"), UInt8(ascii: "\\"), UInt8(ascii: "$"), UInt8(ascii: "'"), UInt8(ascii: "\""),
             UInt8(ascii: "^"), UInt8(ascii: "`"), UInt8(ascii: "*"), UInt8(ascii: "<"), UInt8(ascii: ">"),
             UInt8(ascii: "="), UInt8(ascii: ";"), UInt8(ascii: ","), UInt8(ascii: "+"), UInt8(ascii: "&"),
             UInt8(ascii: "("), UInt8(ascii: ")"):
            true
        default:
            false
        }
    }

    /// Whether `bytes` (a URL's path and query; its fragment, dropped
    /// when it is spelt, is not looked at) hold a URL with a password, as
    /// `URLPassword.lenientRanges` finds one (`?to=http://localhost:3000&hint=a@b.org`
    /// is a port and two parameters, not a password; `?t=ftp://anon:@h/` holds none).
    private static func holdsAURLWithAPassword(_ bytes: ArraySlice<UInt8>) -> Bool {
        // Cheap way out first: this runs for every URL of every list.
        guard bytes.contains(UInt8(ascii: "@")) else { return false }
        let beforeFragment = bytes.prefix { $0 != UInt8(ascii: "#") }
        return !URLPassword.lenientRanges(in: String(decoding: beforeFragment, as: UTF8.self)).isEmpty
    }

    /// Whether `bytes` begin with `http://` or `https://`, whatever their case.
    public static func startsWithHTTPScheme(_ bytes: ArraySlice<UInt8>) -> Bool {
        equalsIgnoringCase(bytes.prefix(7), "http://") || equalsIgnoringCase(bytes.prefix(8), "https://")
    }

    /// Whether `bytes` spell `lowercase` (ASCII letters), whatever their case.
    private static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ lowercase: StaticString) -> Bool {
        lowercase.withUTF8Buffer { expected in
            bytes.count == expected.count && zip(bytes, expected).allSatisfy { URLSpelling.lowered($0) == $1 }
        }
    }
}

/// Carries work to a Dispatch thread and its result back.
/// `@unchecked Sendable`: the task hands it over, one Dispatch thread runs it,
/// and the task reads it again only after the continuation resumed.
private final class HandOff<T>: @unchecked Sendable {
    private let work: () throws(TransferError) -> T
    var value: Result<T, TransferError> = .failure(.cancelled)

    init(_ work: @escaping () throws(TransferError) -> T) {
        self.work = work
    }

    func run() {
        do {
            value = .success(try work())
        } catch {
            value = .failure(error)
        }
    }
}

/// The thread `TransferEngine.warmUp` starts, as pthread_create takes it.
private func warmUpThreadMain(_: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    TransferEngine.runWarmUp()
    return nil
}
