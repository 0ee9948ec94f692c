import CCurl
import CFileSync
import Foundation
import Synchronization

/// One attempt at one URL, handed to the loop thread.
///
/// `@unchecked Sendable`: the submitting side fills it in before `submit`, the
/// loop thread alone touches it while libcurl runs it, and the submitter
/// reads it again only once `onEnd` was called, which orders the accesses.
final class Attempt: @unchecked Sendable {
    let id: TransferID
    let url: String
    /// `host:port`: the key for per-host slots.
    let host: String
    let number: Int
    let sink: any BodySink
    /// The bytes held that the attempt goes on from (0: it asks for the whole body).
    let requestedOffset: Int64
    /// Where its `Range` starts: a little before `requestedOffset`, so that
    /// the last bytes held come again and are compared (see `FileSink.prepareResume`).
    let rangeStart: Int64
    /// Sent as `If-Range` with a range request.
    let validator: String?
    let counters: LoopCounters

    var head = ResponseHead()
    var begun = false
    /// Whether this is its host's first transfer, which says when the
    /// connection has answered (see `SlotQueue`).
    var isProbe = false
    /// A probe may end once its connection is made (TLS done, the protocol
    /// chosen): the others need not wait for its response, which a slow
    /// server may take seconds to give (a whole host waited 8 s behind one
    /// such URL). Not where more than 100 may run against the host: see
    /// `connectionAnswered`.
    var probeEndsWhenConnected = false

    /// The connection has said what it speaks: called when the response head
    /// is complete. Not earlier, when the request goes out: an HTTP/2
    /// connection's limit on streams is the server's SETTINGS frame, and
    /// until libcurl has read it, it assumes 100; a host's other transfers
    /// started then (at `--per-host` above 100) opened connections of their
    /// own past the hundredth (seen once in CI: 120 transfers on 21 connections).
    func connectionAnswered() {
        connected = true
        guard isProbe else { return }
        isProbe = false
        counters.answeredHosts.append(host)
    }
    /// Set when the sink refused the body; the transfer is aborted.
    var abort: TransferError?
    /// libcurl holds this transfer's last bytes until the sink has room for
    /// them: a wait for the disk, not for the server, so the stall clock
    /// stops, and the time does not count against `--timeout`.
    var paused = false {
        didSet {
            guard paused != oldValue else { return }
            let now = ContinuousClock.now
            if paused {
                pausedSince = now
            } else if let since = pausedSince {
                pausedFor += now - since
                pausedSince = nil
            }
        }
    }
    /// Time spent paused (see `paused`), and when the current pause began.
    private var pausedFor: Duration = .zero
    private var pausedSince: ContinuousClock.Instant?

    /// `counters.heldByWrites` when the attempt started.
    var heldAtStart: Duration = .zero

    /// How long the attempt has run, its waits for the disk left out: its
    /// own pauses, and the time the loop thread was held by writes that may
    /// not pause (see `receiveBody`), when no transfer could move.
    func activeTime(at now: ContinuousClock.Instant) -> Duration {
        now - startedAt - pausedFor - (pausedSince.map { now - $0 } ?? .zero) - (counters.heldByWrites - heldAtStart)
    }

    /// What an attempt stopped by `--timeout` (`limit` seconds) had got:
    /// the bytes of this response, of its length when known; for one that
    /// resumed, how far the whole file got (a 206's length is the rest
    /// only: "1179648 of 6160384" read as wrong for an 8 MiB file).
    func timedOut(after limit: Double) -> String {
        let time = NumberText.seconds(limit)
        guard begun else { return "timed out: no answer in \(time)" }
        if head.status == 206, requestedOffset > 0 {
            let total = expectedSize.map { " of \($0)" } ?? ""
            return "timed out: \(receivedThisAttempt) bytes received in \(time), \(max(requestedOffset, rangeStart + receivedThisAttempt))\(total) so far"
        }
        let total = head.contentLength.map { " of \($0)" } ?? ""
        return "timed out: \(receivedThisAttempt)\(total) bytes received in \(time)"
    }
    /// Called once with the outcome: on the loop thread, or on the body's
    /// writer thread when the body arrived whole (see `AttemptOutcome.sealed`).
    var onEnd: (@Sendable (AttemptOutcome) -> Void)?

    /// `onEnd`, taken so it is called once at most.
    func takeOnEnd() -> (@Sendable (AttemptOutcome) -> Void)? {
        defer { onEnd = nil }
        return onEnd
    }
    /// When a header or body byte last arrived (or the attempt started, or
    /// its connection was made): the stall clock.
    var lastActivity = ContinuousClock.now
    /// Whether the attempt has been silent since `instant` as its stall clock
    /// counts silence (see `silenceCounts(connectLimit:bytesPerSecond:)`), and not paused.
    func isQuiet(since instant: ContinuousClock.Instant, connectLimit: Duration, bytesPerSecond: Int64?) -> Bool {
        !paused && silenceCounts(connectLimit: connectLimit, bytesPerSecond: bytesPerSecond).from < instant
    }

    /// Whole seconds since the attempt last had a byte, or was last held
    /// back by `--limit-rate` (`bytesPerSecond`); 0 while it is paused for
    /// the disk. The limiter's pauses are none of the server's: at 10K the
    /// status line said "no data for 9 s" for most of every 10 s.
    func secondsWithoutData(at now: ContinuousClock.Instant, bytesPerSecond: Int64?) -> Int {
        guard !paused else { return 0 }
        let heard = max(lastActivity, allowedAgain(bytesPerSecond: bytesPerSecond) ?? lastActivity)
        return max(0, Int((now - heard).seconds))
    }

    /// When `--limit-rate` (`bytesPerSecond`) lets the attempt go on: as
    /// libcurl's limiter keeps its average, once the bytes it has had fit the rate.
    private func allowedAgain(bytesPerSecond: Int64?) -> ContinuousClock.Instant? {
        bytesPerSecond.flatMap { rate in rate > 0 ? startedAt + .seconds(Double(receivedThisAttempt) / Double(rate)) : nil }
    }

    /// From when a silence counts against the attempt: its last byte, or
    /// later while it connects (libcurl's connect timeout rules then) or
    /// while `--limit-rate` holds it back (`allowedAgain`: when the limiter
    /// lets it go on, under a rate limit).
    private func silenceCounts(connectLimit: Duration, bytesPerSecond: Int64?)
        -> (from: ContinuousClock.Instant, allowedAgain: ContinuousClock.Instant?) {
        var from = lastActivity
        if !connected, connectingSince + connectLimit > from { from = connectingSince + connectLimit }
        let allowedAgain = allowedAgain(bytesPerSecond: bytesPerSecond)
        if let allowedAgain, allowedAgain > from { from = allowedAgain }
        return (from, allowedAgain)
    }
    /// The connection is made (and its TLS set up): until then the connect
    /// timeout is what limits the attempt, not the stall clock. Cleared when
    /// libcurl follows a redirect, which may need a new connection.
    var connected = false
    /// A redirect's head came, and libcurl has not followed it yet: it is
    /// reading that redirect's body on the connection it has, and the stall
    /// clock judges it (a redirect's body that stopped took the connect
    /// timeout and the stall timeout both, and was said to be a wait for a connection).
    private(set) var redirectPending = false
    /// Redirect heads this attempt has seen: libcurl's count of redirects
    /// followed once it follows the last.
    private var redirectHeads = 0

    /// Told by the loop's clock how many redirects libcurl has followed:
    /// once it follows the pending one, it is connecting again.
    func noteRedirectsFollowed(_ count: Int, at now: ContinuousClock.Instant) {
        guard redirectPending, count >= redirectHeads else { return }
        redirectPending = false
        connected = false
        connectingSince = now
    }
    /// When the attempt was made, to wait for a slot (see `HostReachability`).
    let queuedAt: ContinuousClock.Instant
    /// Requests libcurl sent for the attempt: one, one more a redirect, and
    /// one more each time it sent the request again on a fresh connection
    /// (a reused one the server had closed meanwhile).
    var requestsSent = 0
    /// When the attempt began to connect (its start, or the last redirect).
    var connectingSince = ContinuousClock.now
    /// When the request went out (see `connectionReady`): the final
    /// response's head is owed within ten times the stall timeout of it.
    var requestSentAt = ContinuousClock.now
    /// When the last status line arrived (a 1xx's, a redirect's, the final one's).
    var headStartedAt = ContinuousClock.now

    /// The loop thread was held for `held` by a write that may not pause
    /// (see `receiveBody`): no transfer could move meanwhile, so the stall
    /// clocks leave that time out, as `--timeout` does (a disk that stopped
    /// for longer than the stall timeout failed every other stream of the
    /// connection as stalled).
    func loopWasHeld(for held: Duration, at now: ContinuousClock.Instant) {
        lastActivity = min(now, lastActivity + held)
        requestSentAt = min(now, requestSentAt + held)
        headStartedAt = min(now, headStartedAt + held)
        connectingSince = min(now, connectingSince + held)
        speedWindow.leaveOut(held, at: now)
    }

    /// Called by libcurl once the connection is made, just before the
    /// request goes out (CURLOPT_PREREQFUNCTION): the stall clock starts here.
    func connectionReady() {
        // (A redirect followed between two ticks of the clock: its request is out.)
        redirectPending = false
        requestsSent += 1
        lastActivity = .now
        requestSentAt = lastActivity
        connected = true
        speedWindow.restart(at: lastActivity)
        if probeEndsWhenConnected { connectionAnswered() }
    }
    /// The header and body bytes of the last stall timeout (see `stallReason`).
    var speedWindow = LowSpeedWindow(at: .now)
    /// When libcurl took the attempt, and the body bytes it has received
    /// since: under `--limit-rate` they say how long libcurl may hold it back.
    var startedAt = ContinuousClock.now
    var receivedThisAttempt: Int64 = 0
    /// The first response's head is in, a redirect's included (see `receiveHeader`).
    var hostAnswered = false

    /// Whether nothing has arrived for longer than `limit`. Under a rate limit
    /// libcurl pauses a transfer that got ahead of the rate until the average
    /// is back under it (after a burst, for as long as the burst was worth):
    /// that silence is the limit at work, not a stalled server, so the stall
    /// clock starts only when the limiter would let the transfer go on.
    /// While connecting, libcurl's connect timeout (`connectLimit`) rules: a
    /// hung connect said "stalled" after `--stall-timeout` when that was the
    /// shorter. Past it, the stall clock is a safety net.
    ///
    /// Nor may a server hold a slot by trickling: once connected, the last
    /// `limit` (a sliding window, `LowSpeedWindow`) with fewer bytes than one a second (libcurl's
    /// low-speed rule, which this clock replaced; half the rate limit under
    /// a limit below 2 bytes a second) is a stall too. A byte every 29 s
    /// kept a 30 s stall clock from ever running out. Nor by answering
    /// without end: a 1xx after another, or header lines a few bytes at a
    /// time, never reach the final head, and held a run without
    /// `--timeout` for ever; each head, interim ones too, is owed whole
    /// within `limit` of its status line, and the final head within ten
    /// times that of the request.
    /// Returns why the attempt counts as stalled, or nil; moves the
    /// low-speed window on (a check is one step of it).
    func stallReason(at now: ContinuousClock.Instant, limit: Duration, connectLimit: Duration, bytesPerSecond: Int64?) -> String? {
        if paused {
            speedWindow.restart(at: now)
            return nil
        }
        let (quietSince, allowedAgain) = silenceCounts(connectLimit: connectLimit, bytesPerSecond: bytesPerSecond)
        if now - quietSince > limit { return "no data for \(NumberText.seconds(limit.seconds))" }
        // A head, once its status line came, is owed within `limit` (a header line at a
        // time held a run for ever); a server still at work may say so with interim
        // answers (`102 Processing`), each whole, for ten times as long (5 min by default),
        // and the whole head is owed within that too.
        if connected, !head.isComplete {
            if !head.awaitsStatusLine, now - headStartedAt > limit {
                return "no complete response header in \(NumberText.seconds(limit.seconds))"
            }
            if now - requestSentAt > limit * 10 {
                let waited = NumberText.wait((limit * 10).seconds)
                return (100...199).contains(head.status) ? "no final answer in \(waited) (only interim ones, 1xx)"
                    : "no complete response header in \(waited)"
            }
        }
        if let allowedAgain, allowedAgain > speedWindow.partStart {
            // The limiter held it back in this window: the window starts when it lets go.
            speedWindow.restart(at: min(now, allowedAgain))
            return nil
        }
        // Before the head is whole, the rules above judge: 1xx answers of 28 bytes, one
        // every 20 s, were "under 1 byte a second" long before their ten times the limit.
        guard connected, head.isComplete else { return nil }
        let least = min(1, bytesPerSecond.map { Double($0) / 2 } ?? 1)
        guard speedWindow.isUnder(least, over: limit, at: now) else { return nil }
        return "under 1 byte a second for \(NumberText.seconds(limit.seconds))"
    }
    var headerList: UnsafeMutablePointer<curl_slist>?

    /// `asksWhole`: no `Range`, whatever the sink holds (which it keeps until a
    /// whole body begins). Readies the sink for the resume it asks (see
    /// `FileSink.prepareResume`): made before the loop thread takes it.
    init(id: TransferID, target: RequestTarget, number: Int, sink: any BodySink, counters: LoopCounters, asksWhole: Bool = false) {
        self.id = id
        self.url = target.url
        self.host = target.hostKey
        self.number = number
        self.sink = sink
        self.requestedOffset = asksWhole ? 0 : sink.resumeOffset
        self.rangeStart = requestedOffset > 0 ? requestedOffset - sink.prepareResume() : 0
        self.validator = requestedOffset > 0 ? sink.resumeValidator : nil
        self.counters = counters
        queuedAt = .now
    }

    private init(again attempt: Attempt) {
        id = attempt.id
        url = attempt.url
        host = attempt.host
        number = attempt.number
        sink = attempt.sink
        requestedOffset = attempt.requestedOffset
        rangeStart = attempt.rangeStart
        validator = attempt.validator
        counters = attempt.counters
        queuedAt = attempt.queuedAt
        onEnd = attempt.takeOnEnd()
    }

    /// The same attempt as it was before libcurl took it, to queue again:
    /// one that had no answer, so nothing of it reached the sink.
    func afresh() -> Attempt { Attempt(again: self) }

    /// Recovers the attempt from libcurl's user-data pointer. The loop's
    /// `running` table holds the strong reference while libcurl may call back.
    static func from(userdata: UnsafeMutableRawPointer) -> Attempt {
        Unmanaged<Attempt>.fromOpaque(userdata).takeUnretainedValue()
    }

    func receiveHeader(_ line: UnsafeRawBufferPointer) -> Bool {
        lastActivity = .now
        speedWindow.add(line.count)
        if head.awaitsStatusLine, line.starts(with: "HTTP/".utf8) { headStartedAt = lastActivity }
        head.consume(bytes: line)
        if !hostAnswered, head.isComplete || head.endedInRedirect {
            // A paused host goes on from the head of the first response, not
            // from the end of its body (see `HostRateLimits`). Not from a
            // redirect's: the next head may be the host's own 429 (a `/get?id=`
            // link to the file), or another host's; `finish` tells which.
            hostAnswered = true
            if head.isComplete, counters.watchingRateLimits, head.status != 429 { counters.rateLimitAnswers.append((host, startedAt)) }
            if head.isComplete, counters.watchingFailingHosts, !isProbe { counters.answeredHosts.append(host) }
        }
        if head.endedInRedirect {
            // libcurl reads its body, then follows it, maybe to another host
            // (connecting again): the loop's clock sees when (`noteRedirectsFollowed`).
            redirectHeads += 1
            redirectPending = true
        }
        if head.isComplete {
            connectionAnswered()
            // The body's pace is judged from here: the head's own bytes paid for none of it.
            if !begun {
                speedWindow.restart(at: lastActivity)
                return beginBody()
            }
        }
        return true
    }

    /// Body bytes from libcurl; returns the write callback's answer: the
    /// count taken, 0 to abort, or `mf_writefunc_pause` when the sink is
    /// full (libcurl keeps the bytes, and the loop unpauses the transfer when
    /// the sink has room).
    ///
    /// An HTTP/2 stream is never paused: libcurl 7.88 goes on reading its
    /// connection for the other streams and keeps a paused stream's bytes
    /// in memory, up to the 32 MiB it lets the server send ahead, and fails
    /// the transfer as out of memory past 64 MiB (seen: 600 MiB to 2.4 GB
    /// peak with 16 to 117 streams on a slow disk, and failed downloads).
    /// The sink waits for room instead, which holds up the loop thread and
    /// with it the connection: the disk's pace, as before pausing. A stop
    /// (Ctrl-C, a cancel, the engine shutting down) ends that wait within a
    /// tenth of a second: the transfer is aborted as cancelled, and the
    /// loop goes on to the other stops (it took seconds before, as long as
    /// the writers needed to free room, a quarter of the chunk budget then).
    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        lastActivity = .now
        if !begun, !beginBody() { return 0 }
        let mayPause = head.majorVersion < 2
        let heldSince = mayPause ? nil : ContinuousClock.now
        let answer = sink.write(bytes, mayPause: mayPause, giveUp: { [counters, id] in
            // Asked every tenth of a second while the write waits: progress goes on meanwhile.
            counters.reportProgressWhileHeld()
            return counters.stopRequested(id)
        })
        if let heldSince { counters.heldByWrites += .now - heldSince }
        switch answer {
        case .taken:
            if resumeUncounted { countResumeIfConfirmed() }
            receivedThisAttempt += Int64(bytes.count)
            speedWindow.add(bytes.count)
            if (200...299).contains(head.status) { counters.bytesReceived += Int64(bytes.count) }
            return bytes.count
        case .full:
            paused = true
            counters.newlyPaused.append(self)
            return mf_writefunc_pause
        case .refused(let error):
            abort = error
            return 0
        }
    }

    /// Lets the sink look at the final head once, before any body byte.
    func beginBody() -> Bool {
        begun = true
        if (200...299).contains(head.status), head.lengthsDisagree {
            // Where the body ends is a guess, for every sink: keeping it would keep a guess.
            abort = TransferError(.protocolViolation,
                                  "the server gave two different lengths (Content-Length: \(head.fields["content-length"] ?? ""))")
            return false
        }
        if (200...299).contains(head.status), head.lengthIsNoCount {
            abort = TransferError(.protocolViolation,
                                  "the server gave a length that is no count of bytes (Content-Length: \(head.fields["content-length"] ?? ""))")
            return false
        }
        if let error = sink.begin(head, requestedOffset: requestedOffset) {
            abort = error
            return false
        }
        if head.status == 206, requestedOffset > 0, sink.bytesHeld == requestedOffset {
            resumeUncounted = true
            countResumeIfConfirmed()
        }
        return true
    }

    /// A 206 went on from the bytes held, and they are not counted as
    /// resumed yet: its first bytes have not shown it yet (see `BodySink.confirmedResume`).
    private var resumeUncounted = false

    /// Counts the resumed bytes once the sink has confirmed the resume.
    private func countResumeIfConfirmed() {
        guard let resumed = sink.confirmedResume(upTo: requestedOffset) else { return }
        resumeUncounted = false
        counters.bytesResumed.add(resumed, ordering: .relaxed)
    }

    var expectedSize: Int64? {
        Self.expectedSize(contentLength: head.contentLength, status: head.status, requestedOffset: rangeStart)
    }

    /// The whole body's size as the response announces it: a 206 carries the
    /// rest after `requestedOffset`. Nil when unknown, when the sum does
    /// not fit (a server's number, read on every progress tick), or when the
    /// response is not a body's (a redirect, or an error page: its length set
    /// against a resumed prefix showed 10 MB of 512 bytes).
    static func expectedSize(contentLength: Int64?, status: Int, requestedOffset: Int64) -> Int64? {
        guard let length = contentLength, (200...299).contains(status) else { return nil }
        guard status == 206 else { return length }
        let (sum, overflow) = length.addingReportingOverflow(requestedOffset)
        return overflow ? nil : sum
    }
}

/// What libcurl said when an attempt ended.
struct AttemptOutcome: Sendable {
    /// `CURLcode` as an integer; 0 is success.
    var curlCode: Int
    /// The error buffer's text when libcurl failed.
    var curlMessage: String
    var head: ResponseHead
    var abort: TransferError?
    var effectiveURL: String?
    /// Redirects libcurl followed (the effective URL differs without one:
    /// libcurl writes `http://h` as `http://h/`).
    var redirects = 0
    var cancelled = false
    /// The attempt ended without an answer for want of the host (its name
    /// did not resolve, nothing took the connection, or the connection
    /// stalled without a word: not a close or a reset, which come at once),
    /// with none of the host's transfers answered meanwhile, in an outage
    /// (other URLs of the host fail too, or it answered earlier in the run:
    /// see `HostReachability.isOutage`).
    var hostUnreachable = false
    /// The attempt ended without an answer because it could not reach its
    /// host (no address, no connection, or one that stalled without a word),
    /// whether or not other URLs of the host have seen it too: the first
    /// URL of a dead host is not `hostUnreachable` yet.
    var hostNotReached = false
    /// The attempt was turned away while its host served others, and the host
    /// is held to fewer transfers now: for want of room at the host, which
    /// its retry is not charged for (see `HostConcurrency.wasForWantOfRoom`).
    var turnedAwayWhileServing = false
    /// The attempt was answered 429, which paused its host (see `HostRateLimits`).
    var pausedHost = false
    /// The whole body arrived and the sink sealed it: its digest is ready,
    /// and `onEnd` runs on the writer thread that computed it.
    var sealed = false
    /// Body bytes the sink held when the attempt ended, before a cut-off one
    /// dropped its last partial block (see `FileSink.attemptFailed`).
    var bodyBytes: Int64 = 0
    /// The name the attempt failed to resolve, and whose it is (the host's
    /// asked for or redirected to, or a proxy's), when it failed so.
    var unresolvedName: UnresolvedName?
}

extension AttemptOutcome {
    /// An attempt stopped by a cancel, or never started because of one.
    static func cancelled(head: ResponseHead = ResponseHead()) -> AttemptOutcome {
        AttemptOutcome(curlCode: Int(CURLE_ABORTED_BY_CALLBACK.rawValue), curlMessage: "cancelled",
                       head: head, abort: nil, effectiveURL: nil, cancelled: true)
    }
}

/// Counters only the loop thread touches.
final class LoopCounters: @unchecked Sendable {
    // @unchecked: mutated and read on the loop thread only, but for the atomic `bytesResumed`.
    var bytesReceived: Int64 = 0
    /// Bytes held from an earlier attempt or run that answers went on from,
    /// each body's furthest (see `BodySink.newlyResumed`): counted when the
    /// answer comes, so that a run stopped before such a body is whole says
    /// it resumed. Atomic: the engine counts a 416 showing every byte held.
    let bytesResumed = Atomic<Int64>(0)
    /// Hosts whose probing transfer's connection has answered since the loop
    /// last looked (see `SlotQueue` and `Attempt.connectionAnswered`), and,
    /// while `watchingFailingHosts`, hosts any transfer of which had its head.
    var answeredHosts: [String] = []
    /// Whether a host is marked failing in the slot queue: only then does
    /// every response head note its host in `answeredHosts` (a transfer
    /// started before its host was marked, answered, ends the one at a time).
    var watchingFailingHosts = false
    /// Whether a host is paused for a 429 (see `HostRateLimits`): only then
    /// do response heads note their host in `rateLimitAnswers`.
    var watchingRateLimits = false
    /// Hosts whose transfer (started then) had a response head other than
    /// 429 since the loop last looked, while `watchingRateLimits`.
    var rateLimitAnswers: [(host: String, started: ContinuousClock.Instant)] = []
    /// Transfers whose sink was full since the loop last looked (see `Attempt.receiveBody`).
    var newlyPaused: [Attempt] = []
    /// Time the loop thread spent in body writes that may not pause (HTTP/2),
    /// which wait for the disk when the chunks run out: no transfer could
    /// move meanwhile, so none is charged for it against `--timeout`.
    var heldByWrites: Duration = .zero
    /// Whether transfer `id` is being stopped: a cancel of it, or the loop's
    /// shutdown, waits in the inbox. Asked (on the loop thread) by a body
    /// write that waits for the disk, which holds the loop up meanwhile.
    var stopRequested: @Sendable (TransferID) -> Bool = { _ in false }
    /// Sends the progress snapshot when one is due, from within a body write
    /// that holds the loop while it waits for the disk (the loop's own tick
    /// cannot run then): the status line and the JSON lines go on.
    var reportProgressWhileHeld: () -> Void = {}
}

/// The thread that owns the `CURLM` and every easy handle. It waits in
/// `curl_multi_poll`; other threads post commands into `inbox` and wake it
/// with `curl_multi_wakeup`. Attempts wait in its `SlotQueue` until a slot
/// is free, so a finished transfer's slot goes to the next one at once.
final class CurlLoop: Sendable {
    /// Transfers sleeping before a retry: not the loop's, but shown with its
    /// snapshot, and woken when their host is given up.
    let retryWaits = RetryWaits()
    /// Items that wait for another process downloading the same URL into
    /// the same cache (see `DownloadBatch`): shown with the loop's snapshot.
    let waitingForOtherProcess = Atomic<Int>(0)

    /// What other threads ask of the loop (internal for tests).
    enum Command {
        case start(Attempt)
        case cancel(TransferID)
    }

    /// Commands waiting for the loop, and what else it must look at (internal for tests).
    struct Inbox {
        var commands: [Command] = []
        var shuttingDown = false
        /// A wake-up was sent that the loop has not answered yet: further
        /// commands need none (one per command cost a syscall and a wake each).
        var wakePending = false
        /// A chunk pool has room again for a paused transfer.
        var roomReturned = false

        /// Whether transfer `id` is being stopped: a cancel of it, or the shutdown, waits here.
        func stops(_ id: TransferID) -> Bool {
            shuttingDown || commands.contains { command in
                if case .cancel(id) = command { return true }
                return false
            }
        }
    }

    private let multi: CurlMulti
    private let configuration: TransferConfiguration
    /// Whether the CA directory libcurl was built with (Debian's
    /// `/etc/ssl/certs`) is left out when the CA file in use is the bundle
    /// it was built with (the same certificates, made from that directory):
    /// with a directory set, libcurl 7.88 builds the certificate store anew
    /// from the file for every connection (33 ms for the system bundle's 140
    /// certificates, on the loop thread), where from its cache it takes 2 ms.
    private let leavesOutCADirectory: Bool
    /// Whether transfers to one host may share an HTTP/2 connection (see `init`).
    private var multiplexes: Bool { configuration.maxBytesPerSecond == nil }
    private let inbox = SleepingLock(Inbox())
    private let events: AsyncStream<TransferEvent>.Continuation
    private let finished = Mutex(false)
    private let exited = DispatchSemaphore(value: 0)
    let counters = LoopCounters()
    /// The engine's partial directory (see `init`).
    private let partialDirectory: String
    /// What the resolver said of names that did not resolve (see `HostNames`).
    private let names: NameVerdicts
    /// The environment's proxies, whose names libcurl may fail to resolve.
    private let proxies: ProxyEnvironment

    /// `maxConnections`: the size of libcurl's cache of connections, in use
    /// and kept for reuse (`DescriptorBudget.connections`; libcurl may open
    /// one more per running transfer past it, and closes the extra ones as
    /// the transfers end).
    /// `partialDirectory`: where the engine's partials are, which the loop marks alive (see `PartialFile.markAlive`).
    /// `names`: the engine's verdicts on names that did not resolve; a host
    /// whose name was found not to exist is given up at its next failure, and
    /// a failure on a proxy's such name is not held against the host.
    /// `proxies`: the environment's, to tell whose name libcurl could not
    /// resolve and to name a proxy that is down when its URLs' host is given up.
    init(configuration: TransferConfiguration, maxConnections: Int, partialDirectory: String,
         names: NameVerdicts, proxies: ProxyEnvironment, events: AsyncStream<TransferEvent>.Continuation) throws {
        self.multi = try CurlMulti()
        self.partialDirectory = partialDirectory
        self.names = names
        self.proxies = proxies
        self.configuration = configuration
        self.events = events
        let builtInCAFile = (try? CurlEasy())?.string(CURLINFO_CAINFO)
        leavesOutCADirectory = builtInCAFile.map { builtIn in
            let inUse = configuration.caCertificates ?? builtIn
            return access(inUse, R_OK) == 0 && Self.sameFile(inUse, builtIn)
        } ?? false
        // Connections are reused from the multi handle's cache; HTTP/2 streams
        // share a connection where the server offers it (the slot queue lets
        // a host's first transfer find out first). Not under --limit-rate:
        // libcurl 7.88 limits a stream by not reading its connection, and
        // the other streams on it then starve (seen: one advancing, the rest
        // silent until it ended, and retried as stalled).
        multi.set(CURLMOPT_PIPELINING, Int(multiplexes ? CURLPIPE_MULTIPLEX : CURLPIPE_NOTHING))
        // No CURLMOPT_MAX_HOST_CONNECTIONS: the slot queue limits per host of
        // the URL; a libcurl-side limit would park redirected transfers where
        // the stall clock would count their wait as a stall.
        multi.set(CURLMOPT_MAXCONNECTS, max(maxConnections, 8))
        // libcurl puts at most 100 streams on a connection and opens a new
        // connection for each transfer past that: let --per-host decide (the
        // server's own limit still applies).
        multi.set(CURLMOPT_MAX_CONCURRENT_STREAMS, max(100, configuration.maxTransfersPerHost))
        counters.stopRequested = { [weak self] id in self?.inbox.withLock { $0.stops(id) } ?? true }
        let thread = Thread { [self] in
            mf_name_this_thread("mf-curl")
            _ = mf_lower_thread_priority(0) // at the process's level at least (see the helper)
            self.run()
        }
        // Room for libcurl and TLS, short of the 8 MiB default a `ulimit -v` counts.
        thread.stackSize = 2 << 20
        thread.start()
    }

    /// Whether the paths `a` and `b` name one file (through links, as
    /// `$CURL_CA_BUNDLE` may name the system bundle).
    private static func sameFile(_ a: String, _ b: String) -> Bool {
        var first = stat(), second = stat()
        return stat(a, &first) == 0 && stat(b, &second) == 0 && first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }

    /// Queues an attempt. Returns false, without queueing, when the current task
    /// is already cancelled (checked under the inbox lock, see `cancel`).
    func submit(_ attempt: Attempt) -> Bool {
        let (accepted, wake) = inbox.withLock { inbox -> (Bool, Bool) in
            guard !Task.isCancelled, !inbox.shuttingDown else { return (false, false) }
            inbox.commands.append(.start(attempt))
            return (true, Self.claimWake(&inbox))
        }
        if wake { multi.wakeup() }
        return accepted
    }

    /// Stops an attempt, running or waiting for a slot. Posted under the same
    /// lock as `submit`, so a cancel racing a submit is either seen by
    /// `submit` or queued after it.
    func cancel(_ id: TransferID) {
        let wake = inbox.withLock { inbox -> Bool in
            inbox.commands.append(.cancel(id))
            return Self.claimWake(&inbox)
        }
        if wake { multi.wakeup() }
    }

    /// Whether the caller must wake the loop: only the first command since
    /// the loop last took its inbox does.
    private static func claimWake(_ inbox: inout Inbox) -> Bool {
        defer { inbox.wakePending = true }
        return !inbox.wakePending
    }

    /// A pool has room again for a paused transfer: the loop unpauses them.
    private func roomReturned() {
        let wake = inbox.withLock { inbox -> Bool in
            inbox.roomReturned = true
            return Self.claimWake(&inbox)
        }
        if wake { multi.wakeup() }
    }

    /// Stops the loop: running attempts end as cancelled, the thread exits,
    /// the event stream gets `.finished`. Idempotent; waits for the thread.
    func shutdown() {
        let first = finished.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else { return }
        inbox.withLock { $0.shuttingDown = true }
        multi.wakeup()
        exited.wait()
    }

    // MARK: - Loop thread

    private func run() {
        var running: [UnsafeMutableRawPointer: Attempt] = [:]
        var byID: [TransferID: UnsafeMutableRawPointer] = [:]
        var spareHandles: [CurlEasy] = []
        var handles: [UnsafeMutableRawPointer: CurlEasy] = [:]
        /// Transfers paused for a full sink, oldest first (see `resumePaused`).
        var paused: [Attempt] = []
        var resumeAtOnce = false
        var lastTick = ContinuousClock.now
        /// When the shared partials held were last marked alive (see `PartialFile.markAlive`).
        var lastMarkedAlive = lastTick
        /// `counters.heldByWrites` at the last tick (see `Attempt.loopWasHeld`).
        var heldAtLastTick: Duration = .zero
        /// When the last progress snapshot went out: a write that holds the
        /// loop may send one between ticks, which must not put off the
        /// tick's own checks (stalls, `--timeout`, paused transfers).
        var lastReport = lastTick
        var rateWindow = RateWindow(span: Self.rateWindowSpan(bytesPerSecond: configuration.maxBytesPerSecond), start: lastTick)
        var slots = SlotQueue<Attempt>(total: configuration.maxConcurrentTransfers,
                                       perHost: configuration.maxTransfersPerHost)
        var concurrency = HostConcurrency(ceiling: configuration.maxTransfersPerHost)
        /// Failed attempts turned away while others of their host ran, before
        /// the host was seen to serve any: their ends wait to be told whether
        /// it was for want of room (see `settleVerdicts`).
        var pendingVerdicts: [PendingVerdict] = []
        // (Clamped: a library caller's huge or infinite wait would trap in the conversion.)
        var rateLimits = HostRateLimits(longest: .milliseconds(Int(min(max(0, configuration.retry.maxRetryAfter), 1e9) * 1000)))
        var reachability = configuration.unreachableHostPatience.map {
            HostReachability(patience: .milliseconds(Int($0 * 1000)),
                             trialInterval: configuration.unreachableHostTrialInterval.map { .milliseconds(Int($0 * 1000)) })
        }
        let tickInterval = Duration.milliseconds(Int(configuration.progressInterval * 1000))
        let stallLimit = Duration.milliseconds(Int(configuration.stallTimeout * 1000))
        let connectLimit = Duration.milliseconds(Int(configuration.connectTimeout * 1000))
        // `--timeout` is kept on this clock, not libcurl's (CURLOPT_TIMEOUT),
        // which counts the time a transfer is paused for the disk: on a slow
        // disk, transfers failed as timed out for waiting on our own writes.
        let attemptLimit = configuration.attemptTimeout.map { (seconds: $0, duration: Duration.milliseconds(max(1, Int($0 * 1000)))) }

        func finish(_ handle: UnsafeMutableRawPointer, code: CURLcode, cancelled: Bool) {
            guard let attempt = running.removeValue(forKey: handle), let easy = handles.removeValue(forKey: handle) else { return }
            // A write that stopped waiting for the disk because of a stop ends the attempt as that stop would.
            let cancelled = cancelled || attempt.abort?.kind == .cancelled
            byID[attempt.id] = nil
            let wasPaused = attempt.paused
            if wasPaused {
                attempt.paused = false
                paused.removeAll { $0 === attempt }
            }
            // A cancelled first transfer says nothing of the host: the next one probes it.
            slots.release(host: attempt.host, endingProbe: !cancelled)
            curl_multi_remove_handle(multi.handle, handle)
            if code == CURLE_OK, attempt.abort == nil, !cancelled, !attempt.head.isComplete {
                // libcurl 7.88 ends a response whose connection closed inside
                // its head as if it were whole: a resume's 206 cut there was
                // stored as the file, its bytes held alone (a prefix).
                let status = attempt.head.status > 0 ? " (HTTP \(attempt.head.status))" : ""
                attempt.abort = TransferError(.protocolViolation, "the connection closed inside the response's head\(status)")
            }
            if code == CURLE_OK, !attempt.begun, attempt.head.isComplete, attempt.abort == nil {
                _ = attempt.beginBody() // an empty body never calls the write callback
            }
            let sink = attempt.sink
            if code == CURLE_OK, attempt.abort == nil, (200...299).contains(attempt.head.status) {
                // Nothing to store (a cached empty file would never be fetched
                // again): never sealed, so the writer stays open for a retry.
                attempt.abort = sink.bodyEnded() ?? (sink.bytesHeld == 0 ? TransferEngine.emptyBody(attempt.head) : nil)
            }
            let whole = code == CURLE_OK && attempt.abort == nil && (200...299).contains(attempt.head.status)
                && (sink.expectedTotal.map { $0 == sink.bytesHeld } ?? true)
            var ended = AttemptOutcome(
                curlCode: Int(code.rawValue),
                curlMessage: code == CURLE_OK ? "" : CurlError(code, detail: easy.errorText).message,
                head: attempt.head,
                abort: attempt.abort,
                effectiveURL: easy.string(CURLINFO_EFFECTIVE_URL),
                redirects: easy.long(CURLINFO_REDIRECT_COUNT),
                cancelled: cancelled,
                sealed: whole,
                bodyBytes: sink.bytesHeld)
            if !cancelled, attempt.abort == nil { ended.unresolvedName = unresolvedName(of: attempt, ended, code: code) }
            ended.hostUnreachable = noteReachability(of: attempt, ended, code: code, cancelled: cancelled)
            ended.hostNotReached = !cancelled && attempt.head.status == 0 && ended.redirects == 0
                && HostReachability.neverReached(code: code, abort: attempt.abort, madeConnection: attempt.connected)
            var turnAway: HostConcurrency.TurnAway?
            if !cancelled {
                (ended.turnedAwayWhileServing, turnAway) = noteConcurrency(of: attempt, redirected: ended.redirects > 0, code: code)
            }
            noteRateLimit(of: attempt, &ended, cancelled: cancelled)
            let outcome = ended
            if let list = attempt.headerList { curl_slist_free_all(list) }
            attempt.headerList = nil
            easy.prepareForReuse()
            // A handle ended while paused may still hold the bytes it kept: not reused.
            // Nor one whose request libcurl sent again on a fresh connection: the handle
            // counts those retries for good, gives up after five, and a reset would
            // clear the options set once; past five, every later such race failed its
            // URL (a server closing each connection unannounced failed 1 URL in 7).
            let retriedWithin = attempt.requestsSent > 1 + ended.redirects
            if !wasPaused, !retriedWithin, spareHandles.count < configuration.maxConcurrentTransfers { spareHandles.append(easy) }
            let onEnd = attempt.takeOnEnd()
            if whole {
                // The last chunk and the digest go to the writer from here,
                // and the writer hands the outcome on: one hand-over per body.
                sink.attemptSucceeded { onEnd?(outcome) }
            } else {
                // The last bytes go to the writer now, so a transfer waiting
                // to retry holds no chunk; a cancelled one keeps only what
                // follows on from the disk (see `FileSink.attemptCancelled`).
                if cancelled { sink.attemptCancelled() } else { sink.attemptFailed() }
                if let turnAway, !outcome.turnedAwayWhileServing, !outcome.hostUnreachable,
                   running.values.contains(where: { $0.host == attempt.host }) {
                    // Turned away while others of the host ran, before the host was seen to
                    // serve them or to take fewer (the first turn-away of a burst counts for
                    // nothing alone): in a moment the others' answers, and the burst's later
                    // turn-aways, may show this one was sent away for want of room. Under load
                    // the refusals came first, and under `--retries 0` their URLs failed.
                    // A stray one waits as long as the others, 2 s at most. (Not one the
                    // host's outage ended: its late end would mark the host down again.)
                    pendingVerdicts.append(PendingVerdict(id: attempt.id, host: attempt.host, started: attempt.startedAt,
                                                          how: turnAway, ended: .now, outcome: outcome, onEnd: onEnd))
                } else {
                    onEnd?(outcome)
                }
            }
        }

        /// Whether a running transfer of `host` has an answer (a 2xx head):
        /// the host serves others, so a 503 beside it is no outage.
        func servesOthers(_ host: String) -> Bool {
            running.values.contains { $0.host == host && (200...299).contains($0.head.status) }
        }

        /// Ends the attempts whose verdict waited (see `pendingVerdicts`): as
        /// turned away for want of room once the host shows it serves others
        /// and takes fewer, as they are once none of the host's transfers that
        /// ran beside it is left, or it waited `verdictPatience`; all of them,
        /// with `all`, or the one of `id`.
        func settleVerdicts(at now: ContinuousClock.Instant, all: Bool = false, id: TransferID? = nil) {
            guard !pendingVerdicts.isEmpty else { return }
            pendingVerdicts.removeAll { pending in
                let serving = pending.how == .busy && servesOthers(pending.host)
                var outcome = pending.outcome
                outcome.turnedAwayWhileServing = concurrency.wasForWantOfRoom(pending.host, how: pending.how, started: pending.started,
                                                                              otherServing: serving)
                let othersLeft = running.values.contains { $0.host == pending.host && $0.startedAt <= pending.ended }
                guard outcome.turnedAwayWhileServing || !othersLeft || all || id == pending.id
                        || now - pending.ended >= Self.verdictPatience else { return false }
                pending.onEnd?(outcome)
                return true
            }
        }

        func start(_ attempt: Attempt) {
            do {
                let easy = try spareHandles.popLast() ?? CurlEasy()
                try configure(easy, for: attempt)
                let code = curl_multi_add_handle(multi.handle, easy.handle)
                guard code == CURLM_OK else { throw CurlError(CURLE_FAILED_INIT, detail: String(cString: curl_multi_strerror(code))) }
                attempt.lastActivity = .now
                attempt.startedAt = attempt.lastActivity
                attempt.heldAtStart = counters.heldByWrites
                attempt.connectingSince = attempt.lastActivity
                running[easy.handle] = attempt
                handles[easy.handle] = easy
                byID[attempt.id] = easy.handle
            } catch {
                releaseUnstarted(attempt.host)
                reachability?.endedWithoutAnswer(attempt.host, transfer: attempt.id, at: .now)
                if let list = attempt.headerList { curl_slist_free_all(list) }
                attempt.headerList = nil
                // A set-up failure (an option this libcurl lacks, no memory) will not pass on retry.
                attempt.takeOnEnd()?(AttemptOutcome(
                    curlCode: Int(CURLE_FAILED_INIT.rawValue), curlMessage: "\(error)",
                    head: attempt.head, abort: TransferError(.engine, "cannot set up the transfer: \(error)"),
                    effectiveURL: nil))
            }
        }

        /// Tells `reachability` what an attempt at its host found: an
        /// answer (a response began, or a redirect to elsewhere), or none.
        /// A failure while another transfer of the host has its answer says
        /// only that the host takes fewer connections (a firewall's limit).
        /// Returns true when the attempt failed for want of the host, in an
        /// outage (`HostReachability.isOutage`), in a way that uses up no
        /// retry: not connecting, a stall or a timeout (not a close or reset).
        func noteReachability(of attempt: Attempt, _ outcome: AttemptOutcome, code: CURLcode, cancelled: Bool) -> Bool {
            guard reachability != nil else { return false }
            // The slots keep a failing host to one transfer while others can use them.
            defer {
                slots.setFailing(attempt.host, reachability?.isFailing(attempt.host) == true)
                counters.watchingFailingHosts = slots.anyFailing
            }
            let now = ContinuousClock.now
            if attempt.head.status != 0 || outcome.redirects > 0 || hasAnswer(attempt.host) {
                takeBack(attempt.host)
            } else if !cancelled, code != CURLE_OK,
                      HostReachability.failedForWantOfHost(code: code, abort: attempt.abort, madeConnection: attempt.connected) {
                let unresolved = outcome.unresolvedName
                let noSuchName = unresolved.map { names.knownNotToExist($0.name) } == true
                if noSuchName, unresolved?.owner != .host {
                    // The proxy's name does not exist, not the host's: held against the host, its
                    // URLs went one at a time and it was given up after its patience, blamed.
                    takeBack(attempt.host)
                    return false
                }
                // A proxy that is down is named, as in its URLs' own failures.
                let proxy = outcome.abort == nil
                    ? proxies.unreached(in: outcome.curlMessage, scheme: RequestTarget.scheme(of: attempt.url)) : nil
                let gaveUp = reachability?.failedWithoutAnswer(attempt.host, transfer: attempt.id,
                                                               reason: outcome.abort?.message ?? outcome.curlMessage,
                                                               through: proxy?.described,
                                                               madeConnection: attempt.connected,
                                                               noSuchName: noSuchName,
                                                               started: attempt.startedAt, queued: attempt.queuedAt,
                                                               at: now) == true
                if gaveUp, let refusal = reachability?.givenUpRefusal(for: attempt.host) {
                    // Its attempts waiting for a slot end now, not one slot at a time.
                    for waiting in slots.removeAllWaiting(host: attempt.host) { Self.endRefused(waiting, refusal) }
                }
                let outage = reachability?.isOutage(attempt.host) == true
                // Those sleeping before a retry wake to be refused, not at the end of their
                // backoff (a host that never answered, given up by one URL alone, leaves that URL its retries).
                if outage, reachability?.isGivenUp(attempt.host) == true { retryWaits.giveUp(attempt.host) }
                // A close or reset after a connection counts toward the give-up, but uses up
                // its URL's retry: it comes within milliseconds, and retries free for the
                // patience tried a server that reset everything 13 to 15 times a URL, not 5.
                // A failure to connect, or a stall (30 s a try), is free.
                return outage && HostReachability.neverReached(code: code, abort: attempt.abort, madeConnection: attempt.connected)
            } else {
                reachability?.endedWithoutAnswer(attempt.host, transfer: attempt.id, at: now)
            }
            return false
        }

        /// The name `attempt` (which ended as `outcome` with `code`) failed to
        /// resolve, and whose it is, where it failed: after a redirect, the
        /// redirect target's host, and its scheme choosing the proxy.
        func unresolvedName(of attempt: Attempt, _ outcome: AttemptOutcome, code: CURLcode) -> UnresolvedName? {
            guard code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_RESOLVE_PROXY else { return nil }
            let scheme = RequestTarget.scheme(of: attempt.url)
            guard outcome.redirects > 0 else {
                return UnresolvedName(code: code, message: outcome.curlMessage, hostKey: attempt.host, scheme: scheme, proxies: proxies)
            }
            let target = outcome.effectiveURL.flatMap { try? RequestTarget($0) }
            return UnresolvedName(code: code, message: outcome.curlMessage, hostKey: target?.hostKey,
                                  scheme: target?.scheme ?? scheme, proxies: proxies)
        }

        /// Tells `concurrency` what an attempt found of how many transfers its
        /// host takes at once: it was turned away while others ran, or it was
        /// answered (see `HostConcurrency`); the slot queue keeps to the limit.
        /// Returns whether it was turned away for want of room (while the
        /// host served others, and the host is held to fewer transfers now),
        /// and how it was turned away, if it was.
        func noteConcurrency(of attempt: Attempt, redirected: Bool, code: CURLcode) -> (forWantOfRoom: Bool, turnAway: HostConcurrency.TurnAway?) {
            let host = attempt.host, status = attempt.head.status
            let how: HostConcurrency.TurnAway
            var serving = false
            if status == 503, !redirected {
                // (A redirect's target is another host: its answers say nothing of this one's limit.)
                how = .busy
                serving = servesOthers(host)
            } else if status != 0 || redirected {
                guard code == CURLE_OK, status != 503, status != 429 else { return (false, nil) }
                apply(concurrency.answered(host, started: attempt.startedAt, at: .now), to: host)
                return (false, nil)
            } else if HostConcurrency.wasTurnedAway(code: code, abort: attempt.abort, madeConnection: attempt.connected) {
                how = .connection
            } else {
                return (false, nil)
            }
            apply(concurrency.turnedAway(host, how: how, started: attempt.startedAt, othersRunning: slots.runningPerHost[host] ?? 0,
                                         otherServing: serving, at: .now), to: host)
            return (concurrency.wasForWantOfRoom(host, how: how, started: attempt.startedAt, otherServing: serving), how)
        }

        /// Tells `rateLimits` what an attempt's end says of its host's pace:
        /// a 429 pauses the host (`outcome.pausedHost`) or gives it up (the
        /// attempt then ends as the host's other URLs do), any other answer to a
        /// transfer started since ends its pause (one whose head came is
        /// already counted: see `receiveHeader`), and an attempt that goes
        /// alone after a pause and ends with no answer passes its turn on.
        func noteRateLimit(of attempt: Attempt, _ outcome: inout AttemptOutcome, cancelled: Bool) {
            // (Interim answers alone are no answer: a stream of 103s says nothing of the host's pace.)
            let host = attempt.host, status = (100...199).contains(attempt.head.status) ? 0 : attempt.head.status
            defer { counters.watchingRateLimits = rateLimits.anyPaused }
            // (A stop after a 429's head still counts the 429.)
            guard status != 0, !cancelled || status == 429 else {
                passTurn(of: host, started: attempt.startedAt)
                return
            }
            // A redirect's 429 is its target's: this host's only where it redirected to itself.
            guard status == 429, outcome.redirects == 0 || outcome.effectiveURL.flatMap({ try? RequestTarget($0).hostKey }) == host else {
                endPause(of: host, answeredSince: attempt.startedAt)
                return
            }
            switch rateLimits.askedToWait(host, retryAfter: attempt.head.retryAfter(), started: attempt.startedAt, at: .now) {
            case .pause(let seconds, let begins):
                outcome.pausedHost = true
                guard begins else { return }
                slots.setHold(0, for: host)
                events.yield(.hostPaused(host: host, seconds: seconds))
            case .stale:
                break
            case .giveUp(let refusal):
                // Counted with the host's other URLs: its 429 gave the host up, or came in the same burst.
                outcome.abort = refusal
                slots.setHold(nil, for: host)
                // Its attempts waiting for a slot end now, and those sleeping before a retry wake to be refused.
                for waiting in slots.removeAllWaiting(host: host) { Self.endRefused(waiting, refusal) }
                retryWaits.giveUp(host)
            }
        }

        /// A transfer of `host` started at `started` was answered with
        /// anything but 429: the host's pause ends if it started since.
        func endPause(of host: String, answeredSince started: ContinuousClock.Instant) {
            if rateLimits.answered(host, started: started) { slots.setHold(nil, for: host) }
        }

        /// An attempt of `host` started at `started` ended with no answer, or
        /// never ran: if it was the one going alone after a pause, the next goes.
        func passTurn(of host: String, started: ContinuousClock.Instant) {
            if rateLimits.endedUnanswered(host, started: started, at: .now) { slots.setHold(1, for: host) }
        }

        /// Gives back the slot `slots.next()` gave an attempt that will not run.
        func releaseUnstarted(_ host: String) {
            slots.release(host: host)
            passTurn(of: host, started: .now)
        }

        /// Holds `host` to a limit `concurrency` changed, and tells of it where it says to.
        func apply(_ change: HostConcurrency.Change?, to host: String) {
            guard let change else { return }
            slots.setLimit(change.limit, for: host)
            if change.tell { events.yield(.hostLimited(host: host, connections: change.limit)) }
        }

        /// `host` answered: it is no longer failing, nor given up.
        func takeBack(_ host: String) {
            if reachability?.isGivenUp(host) == true { retryWaits.takeBack(host) }
            reachability?.answered(host)
        }

        /// Whether a running transfer of `host` has its answer (a response began).
        func hasAnswer(_ host: String) -> Bool {
            running.values.contains { $0.host == host && $0.head.status != 0 }
        }

        /// What `attempt` ends with instead of running, its host being given
        /// up; nil when it may go: the host is not given up, a transfer of it
        /// has been answered since (which takes it back), or this attempt is the
        /// one let through (see `HostReachability`).
        func refusalInstead(of attempt: Attempt) -> TransferError? {
            if let refusal = rateLimits.refusal(for: attempt.host) { return refusal }
            guard reachability?.isGivenUp(attempt.host) == true else { return nil }
            if hasAnswer(attempt.host) {
                takeBack(attempt.host)
                return nil
            }
            return reachability?.refusal(for: attempt.host, transfer: attempt.id, at: .now)
        }

        /// Hands every waiting attempt that now has a slot to libcurl; one
        /// whose host was given up ends at once instead.
        func startReady() {
            for host in counters.answeredHosts { slots.answered(host: host) }
            counters.answeredHosts.removeAll(keepingCapacity: true)
            counters.watchingFailingHosts = slots.anyFailing
            if !counters.rateLimitAnswers.isEmpty {
                for (host, started) in counters.rateLimitAnswers { endPause(of: host, answeredSince: started) }
                counters.rateLimitAnswers.removeAll(keepingCapacity: true)
                counters.watchingRateLimits = rateLimits.anyPaused
            }
            let now = ContinuousClock.now
            startWithSlots(at: now)
            while slots.probeShouldYield, putBackNewestProbe() { startWithSlots(at: now) }
        }

        /// Hands every waiting attempt that has a slot to libcurl (see `startReady`).
        func startWithSlots(at now: ContinuousClock.Instant) {
            while let (attempt, host) = slots.next(at: now) {
                if let refusal = refusalInstead(of: attempt) {
                    releaseUnstarted(host)
                    Self.endRefused(attempt, refusal)
                    continue
                }
                // (A failing host's answer is noted from any of its transfers' heads:
                // see `LoopCounters.watchingFailingHosts`.)
                attempt.isProbe = slots.isProbing(host)
                // A TLS connection made is a server there; a plain TCP one is not (the
                // kernel completes it for a server that never reads): that probe waits for its head.
                // A failing host's does not either: a TLS front end whose backend hangs
                // makes connections and never answers, and took every slot again each round.
                attempt.probeEndsWhenConnected = attempt.isProbe && !slots.isFailing(host)
                    && configuration.maxTransfersPerHost <= 100 && attempt.url.utf8.starts(with: "https:".utf8)
                start(attempt)
            }
        }

        /// Takes the probe started last that has had no answer off libcurl
        /// and queues it again, as it was (see `SlotQueue.probeShouldYield`);
        /// false when every probe running has had its answer. Its connection
        /// is closed: a silent host's probe only starts over later.
        func putBackNewestProbe() -> Bool {
            var newest: (handle: UnsafeMutableRawPointer, attempt: Attempt)?
            for (handle, attempt) in running
            where attempt.isProbe && slots.isProbing(attempt.host) && attempt.head.status == 0 && !attempt.begun && !attempt.paused {
                if newest.map({ attempt.startedAt > $0.attempt.startedAt }) ?? true { newest = (handle, attempt) }
            }
            guard let (handle, attempt) = newest, let easy = handles.removeValue(forKey: handle) else { return false }
            running[handle] = nil
            byID[attempt.id] = nil
            curl_multi_remove_handle(multi.handle, handle)
            if let list = attempt.headerList { curl_slist_free_all(list) }
            attempt.headerList = nil
            easy.prepareForReuse()
            if attempt.requestsSent <= 1, spareHandles.count < configuration.maxConcurrentTransfers { spareHandles.append(easy) }
            slots.putBack(attempt.afresh(), host: attempt.host)
            return true
        }

        /// Unpauses transfers paused for a full sink, longest paused first,
        /// until one finds it full again: that one goes to the back, and the
        /// rest wait for the next wake-up. So the disk's pace is shared in
        /// turn, and no transfer waits so long that its server gives up on
        /// it. libcurl offers each its kept bytes again before
        /// `mf_easy_unpause` returns.
        func resumePaused() {
            while let attempt = paused.first {
                guard attempt.paused, let handle = byID[attempt.id] else {
                    paused.removeFirst()
                    continue
                }
                attempt.paused = false
                attempt.lastActivity = .now
                attempt.speedWindow.restart(at: attempt.lastActivity)
                let code = mf_easy_unpause(handle)
                if code != CURLE_OK {
                    // The sink refused the bytes (the attempt says why), or libcurl failed: libcurl does not end it.
                    attempt.paused = true // so the handle, which may keep bytes, is not reused
                    finish(handle, code: code, cancelled: false)
                    continue
                }
                paused.removeFirst()
                if attempt.paused {
                    paused.append(attempt)
                    break
                }
            }
        }

        /// Asks the sinks of transfers paused since the last look to wake the
        /// loop when they have room. Returns true when one has room now.
        func awaitRoom() -> Bool {
            var roomNow = false
            for attempt in counters.newlyPaused where attempt.paused && byID[attempt.id] != nil {
                if !paused.contains(where: { $0 === attempt }) { paused.append(attempt) }
                if !attempt.sink.wakeWhenRoom({ [weak self] in self?.roomReturned() }) { roomNow = true }
            }
            counters.newlyPaused.removeAll(keepingCapacity: true)
            return roomNow
        }

        /// The progress snapshot: every tick, and while a write holds the loop.
        func reportProgress(at now: ContinuousClock.Instant) {
            let rate = rateWindow.record(counters.bytesReceived, at: now)
            lastReport = now
            let active = running.values.sorted { $0.id.rawValue < $1.id.rawValue }.map { attempt in
                let time = attempt.activeTime(at: now).seconds
                return TransferSnapshot(id: attempt.id, url: attempt.url, bytesReceived: attempt.sink.bytesHeld,
                                        bytesExpected: attempt.expectedSize,
                                        secondsWithoutData: attempt.secondsWithoutData(at: now, bytesPerSecond: configuration.maxBytesPerSecond),
                                        bytesPerSecond: time >= 1 ? Double(attempt.receivedThisAttempt) / time : nil)
            }
            var snapshot = EngineSnapshot(active: active, queued: slots.waitingCount,
                                          bytesReceived: counters.bytesReceived, bytesPerSecond: rate)
            (snapshot.waitingToRetry, snapshot.nextRetryInSeconds) = retryWaits.state(at: now)
            snapshot.waitingForOtherProcess = waitingForOtherProcess.load(ordering: .relaxed)
            snapshot.bytesResumed = counters.bytesResumed.load(ordering: .relaxed)
            snapshot.failingHost = reachability?.longestFailing(at: now, atLeast: .seconds(3), hasWork: { host in
                running.values.contains { $0.host == host } || slots.hasWaiting(of: host) || retryWaits.hasSleeper(of: host)
            }, lastFailedForGood: retryWaits.lastFailedForGood)
            events.yield(.progress(snapshot))
        }
        // Only reads what the loop holds (no libcurl call), so it may run inside a libcurl callback.
        counters.reportProgressWhileHeld = {
            let now = ContinuousClock.now
            if now - lastReport >= tickInterval { reportProgress(at: now) }
        }

        while true {
            let (commands, stopping, room) = inbox.withLock { inbox in
                defer {
                    inbox.commands.removeAll(keepingCapacity: true)
                    inbox.wakePending = false
                    inbox.roomReturned = false
                }
                return (inbox.commands, inbox.shuttingDown, inbox.roomReturned)
            }
            if stopping {
                // Attempts posted just before the shutdown end as cancelled, like the rest.
                for case .start(let attempt) in commands { Self.endCancelled(attempt) }
                break
            }
            for command in commands {
                switch command {
                case .start(let attempt):
                    // A given-up host's attempt ends here, not once it has a slot: with every
                    // slot busy on other hosts' long bodies, it waited for them to end. The one
                    // let through holds that turn from here until it ends.
                    if let refusal = refusalInstead(of: attempt) {
                        Self.endRefused(attempt, refusal)
                        continue
                    }
                    // A host's first transfer goes alone, until the host shows it is there (and, over
                    // HTTPS, whether it speaks HTTP/2): see `SlotQueue`.
                    slots.enqueue(attempt, host: attempt.host, probeFirst: true)
                case .cancel(let id):
                    settleVerdicts(at: .now, id: id)
                    if let handle = byID[id] {
                        finish(handle, code: CURLE_ABORTED_BY_CALLBACK, cancelled: true)
                    } else if let waiting = slots.removeWaiting(where: { $0.id == id }) {
                        // If it was the one let through to a given-up host, the next may go in its turn.
                        reachability?.endedWithoutAnswer(waiting.host, transfer: waiting.id, at: .now)
                        Self.endCancelled(waiting)
                    }
                }
            }
            if room || resumeAtOnce { resumePaused() }
            startReady()

            var stillRunning: Int32 = 0
            _ = curl_multi_perform(multi.handle, &stillRunning)
            var pending: Int32 = 0
            while let message = curl_multi_info_read(multi.handle, &pending) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
                finish(handle, code: mf_msg_result(message), cancelled: false)
            }
            settleVerdicts(at: .now)
            // Freed slots go to waiting attempts now; libcurl starts them
            // without waiting in poll (a new handle is due at once).
            startReady()
            resumeAtOnce = awaitRoom()

            let now = ContinuousClock.now
            if now - lastTick >= tickInterval {
                lastTick = now
                if !paused.isEmpty {
                    // A safety net for the wake-ups (the transfer that was to
                    // register the next one may have ended meanwhile): paused
                    // transfers are tried again every tick.
                    resumePaused()
                    if awaitRoom() { resumeAtOnce = true }
                }
                // Time the loop was held by a write is no server's silence.
                let held = counters.heldByWrites - heldAtLastTick
                heldAtLastTick = counters.heldByWrites
                if held > .zero { for attempt in running.values { attempt.loopWasHeld(for: held, at: now) } }
                for (handle, attempt) in running where attempt.redirectPending {
                    attempt.noteRedirectsFollowed(handles[handle]?.long(CURLINFO_REDIRECT_COUNT) ?? 0, at: now)
                }
                let stalled = running.compactMap { handle, attempt in
                    attempt.stallReason(at: now, limit: stallLimit, connectLimit: connectLimit,
                                        bytesPerSecond: configuration.maxBytesPerSecond).map { (handle, attempt, $0) }
                }
                for (handle, attempt, reason) in stalled {
                    attempt.abort = TransferError(.timeout, "stalled: \(reason)")
                    finish(handle, code: CURLE_OPERATION_TIMEDOUT, cancelled: false)
                }
                if let attemptLimit {
                    for (handle, attempt) in running where attempt.activeTime(at: now) > attemptLimit.duration {
                        attempt.abort = TransferError(.timeout, attempt.timedOut(after: attemptLimit.seconds))
                        finish(handle, code: CURLE_OPERATION_TIMEDOUT, cancelled: false)
                    }
                }
                // A paused host whose wait is over tries one transfer, now rather than a tick later;
                // and slots kept from probes a moment are theirs once it is over (see `SlotQueue`).
                for host in rateLimits.due(at: now) { slots.setHold(1, for: host) }
                settleVerdicts(at: now)
                startReady()
                reportProgress(at: now)
                if now - lastMarkedAlive >= PartialFile.aliveInterval {
                    // From this thread, so that a loop that is stuck marks nothing; the file work off it.
                    let quiet = Set(running.values.compactMap { attempt in
                        attempt.isQuiet(since: lastMarkedAlive, connectLimit: connectLimit,
                                        bytesPerSecond: configuration.maxBytesPerSecond) ? attempt.sink.partialPath : nil
                    })
                    lastMarkedAlive = now
                    PartialFile.markAliveInBackground(in: partialDirectory, except: quiet)
                }
            }

            let untilTick = tickInterval - (ContinuousClock.now - lastTick)
            let waitMs = resumeAtOnce ? 0 : max(1, min(1000, Int32(untilTick.components.seconds * 1000 + untilTick.components.attoseconds / 1_000_000_000_000_000)))
            _ = curl_multi_poll(multi.handle, nil, 0, waitMs, nil)
        }

        // Nothing holds the loop any more; the closure held the loop's state (and the loop).
        counters.reportProgressWhileHeld = {}
        for handle in Array(running.keys) { finish(handle, code: CURLE_ABORTED_BY_CALLBACK, cancelled: true) }
        settleVerdicts(at: .now, all: true)
        // Attempts still waiting for a slot, or posted after the last drain, end as cancelled too.
        for attempt in slots.removeAllWaiting() { Self.endCancelled(attempt) }
        let leftovers = inbox.withLock { inbox in
            defer { inbox.commands.removeAll() }
            return inbox.commands
        }
        for case .start(let attempt) in leftovers { Self.endCancelled(attempt) }
        spareHandles.removeAll()
        // The last word on the counts: nothing runs or waits any more, and
        // every byte is counted (the last tick may be up to a tick old). The
        // rate is still the window's: a last frame of "3.0 MiB at 0 B/s" read
        // as a stall.
        let rate = rateWindow.record(counters.bytesReceived, at: .now)
        var last = EngineSnapshot(active: [], queued: 0, bytesReceived: counters.bytesReceived, bytesPerSecond: rate)
        last.bytesResumed = counters.bytesResumed.load(ordering: .relaxed)
        events.yield(.progress(last))
        events.yield(.finished)
        events.finish()
        exited.signal()
    }

    /// Ends an attempt that never reached libcurl as cancelled.
    private static func endCancelled(_ attempt: Attempt) {
        attempt.takeOnEnd()?(.cancelled(head: attempt.head))
    }

    /// Ends `attempt`, which never started, as its given-up host's `refusal` says.
    private static func endRefused(_ attempt: Attempt, _ refusal: TransferError) {
        attempt.takeOnEnd()?(AttemptOutcome(
            curlCode: Int(CURLE_COULDNT_CONNECT.rawValue), curlMessage: refusal.message,
            head: attempt.head, abort: refusal, effectiveURL: nil))
    }

    private func configure(_ easy: CurlEasy, for attempt: Attempt) throws {
        if !easy.hasSharedOptions {
            try setSharedOptions(easy)
            easy.hasSharedOptions = true
        }
        let context = Unmanaged.passUnretained(attempt).toOpaque()
        try easy.set(CURLOPT_URL, attempt.url)
        try easy.set(CURLOPT_WRITEDATA, pointer: context)
        easy.setConnectionReadyData(context)
        try easy.set(CURLOPT_HEADERDATA, pointer: context)
        if attempt.requestedOffset > 0 {
            // CURLOPT_RANGE, not RESUME_FROM: a 200 answer to If-Range must be accepted, not failed.
            try easy.set(CURLOPT_RANGE, "\(attempt.rangeStart)-")
            if let validator = attempt.validator {
                let list = curl_slist_append(nil, "If-Range: \(validator)")
                attempt.headerList = list
                try easy.set(CURLOPT_HTTPHEADER, list: list)
            }
        }
    }

    /// libcurl's receive buffer: 256 KiB, or under a rate limit a thousandth
    /// of a second's worth (1 KiB, libcurl's least, to 256 KiB). libcurl
    /// checks the limit only between its rounds of reading, and one round
    /// reads up to 100 buffers: with 256 KiB buffers `--limit-rate 1M` let
    /// 26 MB through in the first second and then sat silent for 25 s; with
    /// a hundredth, each second's allowance came in one burst. A thousandth
    /// keeps a round to a tenth of a second of the rate (below 1000K, to
    /// 100 KiB).
    static func receiveBufferSize(bytesPerSecond: Int64?) -> Int {
        let largest = 256 * 1024
        guard let bytesPerSecond, bytesPerSecond > 0 else { return largest }
        return Int(min(Int64(largest), max(1024, bytesPerSecond / 1000)))
    }

    /// How long the end of an attempt turned away waits for the others of
    /// its host to show whether the host serves them (see `settleVerdicts`;
    /// it is looked at each turn of the loop, a second apart at most):
    /// their answers' heads come within moments, unless the host is slow to
    /// start, and then the turn-away is no sign of a limit.
    static let verdictPatience = Duration.seconds(2)

    /// A failed attempt's end held back for its verdict (see `settleVerdicts`).
    private struct PendingVerdict {
        let id: TransferID
        let host: String
        let started: ContinuousClock.Instant
        let how: HostConcurrency.TurnAway
        let ended: ContinuousClock.Instant
        let outcome: AttemptOutcome
        let onEnd: (@Sendable (AttemptOutcome) -> Void)?
    }

    /// How far back the rate shown looks: 5 seconds, or under a low rate
    /// limit two of libcurl's bursts (100 buffers each), so that the figure
    /// does not swing between twice the rate and nothing (at 10K a burst
    /// comes every 10 s); two minutes at most, so the samples stay few.
    static func rateWindowSpan(bytesPerSecond: Int64?) -> Duration {
        guard let bytesPerSecond, bytesPerSecond > 0 else { return .seconds(5) }
        let burst = Double(100 * receiveBufferSize(bytesPerSecond: bytesPerSecond)) / Double(bytesPerSecond)
        return .milliseconds(Int(min(120, max(5, 2 * burst)) * 1000))
    }

    /// The options every transfer of this loop shares, set once per easy
    /// handle (`prepareForReuse` leaves them in place).
    private func setSharedOptions(_ easy: CurlEasy) throws {
        try easy.set(CURLOPT_NOSIGNAL, 1)
        try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(easy.errorBuffer))
        try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        try easy.set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        // A proxy's "200 Connection established" must not look like the response.
        try easy.set(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        try easy.set(CURLOPT_FOLLOWLOCATION, 1)
        try easy.set(CURLOPT_MAXREDIRS, configuration.maxRedirects)
        try easy.set(CURLOPT_USERAGENT, configuration.userAgent)
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, Int(configuration.connectTimeout * 1000))
        // Stalls and `--timeout` are watched on the loop's own clock (see the
        // progress tick): libcurl's low-speed check averages over a window and
        // reacts seconds late, and its CURLOPT_TIMEOUT counts paused time.
        // `--max-filesize` is the body sink's to hold (by the final response's
        // length, and by the bytes as they come): libcurl's own check judged
        // a redirect's body too, and refused a 500-byte file behind a 2 KB page.
        if let rate = configuration.maxBytesPerSecond {
            try easy.set(CURLOPT_MAX_RECV_SPEED_LARGE, large: rate)
        }
        try easy.set(CURLOPT_BUFFERSIZE, Self.receiveBufferSize(bytesPerSecond: configuration.maxBytesPerSecond))
        if let caCertificates = configuration.caCertificates {
            try easy.set(CURLOPT_CAINFO, caCertificates)
        }
        if leavesOutCADirectory { try easy.set(CURLOPT_CAPATH, pointer: nil) }
        try easy.set(CURLOPT_TCP_KEEPALIVE, 1)
        // Removing a handle whose name lookup runs waited for the resolver's
        // thread, on the loop thread: a stop during lookups that time out
        // (20 s under `RES_OPTIONS=timeout:20`) took 16.5 s to exit, and a
        // cancel or a connect timeout during one held every transfer up. The
        // thread is left to end on its own (with its socket pair) instead.
        easy.setQuickExit()
        try easy.set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        try easy.set(CURLOPT_WRITEFUNCTION, callback: { data, size, count, userdata in
            guard let userdata else { return 0 }
            let length = size * count
            return Attempt.from(userdata: userdata).receiveBody(UnsafeRawBufferPointer(start: data, count: length))
        })
        // The stall clock counts from here: the connection is made.
        _ = easy.setConnectionReady { clientp, _, _, _, _ in
            if let clientp { Attempt.from(userdata: clientp).connectionReady() }
            return 0 // CURL_PREREQFUNC_OK
        }
        try easy.set(CURLOPT_HEADERFUNCTION, callback: { data, size, count, userdata in
            guard let userdata else { return 0 }
            let length = size * count
            let attempt = Attempt.from(userdata: userdata)
            return attempt.receiveHeader(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
        })
    }
}
