import CCurl
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Transfer

/// The clock `--timeout` is kept on: an attempt's waits for the disk are not its time.
@Suite struct AttemptClockTests {
    /// A sink whose writes that may not pause take `wait` first, as one does
    /// when the writers hold every chunk (an HTTP/2 stream on a slow disk).
    private final class WaitingSink: BodySink {
        let wait: Duration
        init(wait: Duration) { self.wait = wait }
        var resumeOffset: Int64 { 0 }
        var resumeValidator: String? { nil }
        var bytesHeld: Int64 = 0
        var expectedTotal: Int64? { nil }
        func begin(_ head: ResponseHead, requestedOffset: Int64) -> TransferError? { nil }
        func write(_ bytes: UnsafeRawBufferPointer, mayPause: Bool, giveUp: () -> Bool) -> BodyWrite {
            if mayPause { return .full }
            Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18)
            bytesHeld += Int64(bytes.count)
            return .taken
        }
        func wakeWhenRoom(_ wake: @escaping @Sendable () -> Void) -> Bool { false }
        func restart() { bytesHeld = 0 }
        func attemptFailed() {}
        func attemptCancelled() {}
        func attemptSucceeded(then resume: @escaping @Sendable () -> Void) { resume() }
        func wholeBodyHeld(answeredBy head: ResponseHead) -> ResponseHead? { nil }
    }

    /// A sink that may not pause and has no room, ever: it waits until told to give up.
    private final class NeverRoomSink: BodySink {
        var resumeOffset: Int64 { 0 }
        var resumeValidator: String? { nil }
        var bytesHeld: Int64 { 0 }
        var expectedTotal: Int64? { nil }
        func begin(_ head: ResponseHead, requestedOffset: Int64) -> TransferError? { nil }
        func write(_ bytes: UnsafeRawBufferPointer, mayPause: Bool, giveUp: () -> Bool) -> BodyWrite {
            if mayPause { return .full }
            while !giveUp() { Thread.sleep(forTimeInterval: 0.01) }
            return .refused(.cancelled)
        }
        func wakeWhenRoom(_ wake: @escaping @Sendable () -> Void) -> Bool { true }
        func restart() {}
        func attemptFailed() {}
        func attemptCancelled() {}
        func attemptSucceeded(then resume: @escaping @Sendable () -> Void) { resume() }
        func wholeBodyHeld(answeredBy head: ResponseHead) -> ResponseHead? { nil }
    }

    private func attempt(statusLine: String, sink: any BodySink, counters: LoopCounters) throws -> Attempt {
        let attempt = Attempt(id: TransferID(rawValue: 1), target: try RequestTarget("http://example.test/a.flac"),
                              number: 1, sink: sink, counters: counters)
        attempt.startedAt = .now
        for line in [statusLine, "Content-Length: 10", ""] {
            let bytes = Array((line + "\r\n").utf8)
            _ = bytes.withUnsafeBytes { attempt.receiveHeader($0) }
        }
        return attempt
    }

    /// An HTTP/2 write that waits for the disk holds the loop thread: that
    /// time is left out of every attempt's clock, the writer's own and the
    /// others' (none could move meanwhile), but not of one started after it.
    @Test func theLoopsWaitsInWritesThatMayNotPauseAreNoAttemptsTime() throws {
        let counters = LoopCounters()
        let other = try attempt(statusLine: "HTTP/1.1 200 OK", sink: WaitingSink(wait: .zero), counters: counters)
        let stream = try attempt(statusLine: "HTTP/2 200", sink: WaitingSink(wait: .milliseconds(300)), counters: counters)
        let body = [UInt8](repeating: 7, count: 10)
        #expect(body.withUnsafeBytes { stream.receiveBody($0) } == 10)
        let held = counters.heldByWrites
        #expect(held >= .milliseconds(300))
        let later = try attempt(statusLine: "HTTP/1.1 200 OK", sink: WaitingSink(wait: .zero), counters: counters)
        later.heldAtStart = counters.heldByWrites

        let now = ContinuousClock.now
        #expect(stream.activeTime(at: now) == now - stream.startedAt - held)
        #expect(other.activeTime(at: now) == now - other.startedAt - held)
        #expect(later.activeTime(at: now) == now - later.startedAt)
    }

    /// An HTTP/2 write waiting for the disk asks the loop whether its own
    /// transfer is being stopped, and when it is, ends the attempt as
    /// cancelled instead of holding the loop until the disk catches up;
    /// meanwhile the loop's progress goes on.
    @Test(.timeLimit(.minutes(1)))
    func aWriteThatWaitsForTheDiskEndsWhenItsTransferIsStopped() throws {
        let counters = LoopCounters()
        let stopped = Mutex<Set<TransferID>>([])
        counters.stopRequested = { id in stopped.withLock { $0.contains(id) } }
        let reports = Atomic<Int>(0)
        counters.reportProgressWhileHeld = { reports.add(1, ordering: .relaxed) }
        // Another transfer's stop is not this one's.
        stopped.withLock { _ = $0.insert(TransferID(rawValue: 2)) }
        let stream = try attempt(statusLine: "HTTP/2 200", sink: NeverRoomSink(), counters: counters)
        let answer = Mutex<Int?>(nil)
        let done = DispatchSemaphore(value: 0)
        let body = [UInt8](repeating: 7, count: 10)
        let handed = UncheckedBox(stream)
        Thread.detachNewThread {
            let count = body.withUnsafeBytes { handed.value.receiveBody($0) }
            answer.withLock { $0 = count }
            done.signal()
        }
        // It looks (and reports progress) again and again, and goes on waiting.
        #expect(waitUntil { reports.load(ordering: .relaxed) >= 3 })
        #expect(done.wait(timeout: .now()) == .timedOut)
        stopped.withLock { _ = $0.insert(stream.id) }
        #expect(done.wait(timeout: .now() + .seconds(30)) == .success)
        #expect(answer.withLock { $0 } == 0)
        #expect(stream.abort == .cancelled)
    }

    /// What the loop's inbox says of a transfer: stopped by a cancel of it
    /// or by the shutdown, not by another transfer's cancel.
    @Test func theInboxStopsATransferForItsOwnCancelOrTheShutdown() {
        var inbox = CurlLoop.Inbox()
        #expect(!inbox.stops(TransferID(rawValue: 1)))
        inbox.commands = [.cancel(TransferID(rawValue: 2)), .cancel(TransferID(rawValue: 1))]
        #expect(inbox.stops(TransferID(rawValue: 1)))
        #expect(inbox.stops(TransferID(rawValue: 2)))
        #expect(!inbox.stops(TransferID(rawValue: 3)))
        inbox.commands = []
        inbox.shuttingDown = true
        #expect(inbox.stops(TransferID(rawValue: 3)))
    }

    /// A transfer paused for want of chunks (HTTP/1.1) stops its own clock
    /// while paused, and only its own.
    @Test func aPausedAttemptsClockStopsWhileItIsPaused() throws {
        let counters = LoopCounters()
        let paused = try attempt(statusLine: "HTTP/1.1 200 OK", sink: WaitingSink(wait: .zero), counters: counters)
        let body = [UInt8](repeating: 7, count: 10)
        #expect(body.withUnsafeBytes { paused.receiveBody($0) } == Int(mf_writefunc_pause))
        #expect(paused.paused)
        Thread.sleep(forTimeInterval: 0.2)
        let whilePaused = ContinuousClock.now
        // Paused since before the sleep: its clock has stood still since then.
        #expect(paused.activeTime(at: whilePaused) <= whilePaused - paused.startedAt - .milliseconds(200))
        paused.paused = false
        let resumed = ContinuousClock.now
        let stood = (resumed - paused.startedAt) - paused.activeTime(at: resumed)
        #expect(stood >= .milliseconds(200))
        // Running again: the clock goes on from where it stood.
        let later = resumed + .seconds(1)
        #expect(paused.activeTime(at: later) == later - paused.startedAt - stood)
        #expect(counters.heldByWrites == .zero)
    }

    /// An attempt whose request just went out, and when it did.
    private func connectedAttempt() throws -> (Attempt, ContinuousClock.Instant) {
        let attempt = Attempt(id: TransferID(rawValue: 1), target: try RequestTarget("http://example.test/a.zip"),
                              number: 1, sink: WaitingSink(wait: .zero), counters: LoopCounters())
        attempt.connectionReady()
        return (attempt, attempt.requestSentAt)
    }

    /// Why `attempt` is stalled at `instant` under a 30 s limit, its last byte having come then.
    private func quietStallReason(_ attempt: Attempt, at instant: ContinuousClock.Instant) -> String? {
        attempt.lastActivity = instant
        return attempt.stallReason(at: instant, limit: .seconds(30), connectLimit: .seconds(10), bytesPerSecond: nil)
    }

    /// Feeds `lines` to `attempt` as header lines.
    private func receive(_ lines: [String], _ attempt: Attempt) {
        for line in lines {
            let bytes = Array((line + "\r\n").utf8)
            _ = bytes.withUnsafeBytes { attempt.receiveHeader($0) }
        }
    }

    /// Interim answers are judged by the head rule alone (ten times the
    /// stall timeout): 28 bytes every 20 s were "under 1 byte a second" at
    /// 34 s, long before. The final head is owed within the timeout of its
    /// own status line, not of the request: after a minute of 102s, a 200
    /// whose lines came in two reads failed at once.
    @Test func interimAnswersHaveTenTimesTheStallTimeout() throws {
        let limit = Duration.seconds(30)
        let (attempt, sent) = try connectedAttempt()
        func check(_ after: Duration) -> String? {
            attempt.stallReason(at: sent + after, limit: limit, connectLimit: .seconds(10), bytesPerSecond: nil)
        }
        // A 102 every 20 s, checked four times a second in between.
        var time = Duration.zero
        while time < .seconds(280) {
            if time.components.seconds % 20 == 0, time.components.attoseconds == 0 {
                receive(["HTTP/1.1 102 Processing", ""], attempt)
                attempt.lastActivity = sent + time
            }
            #expect(check(time) == nil, "\(time)")
            time += .milliseconds(250)
        }
        // The 200's status line at 280 s, its other lines not yet.
        receive(["HTTP/1.1 200 OK"], attempt)
        attempt.lastActivity = sent + .seconds(280)
        attempt.headStartedAt = sent + .seconds(280)
        #expect(check(.seconds(290)) == nil)
        // A header line now and then, never the end of the head.
        receive(["X-Wait: 1"], attempt)
        attempt.lastActivity = sent + .seconds(305)
        #expect(check(.seconds(311)) == "no complete response header in 30 s")
    }

    /// A header line that repeats the status line is no new response: it
    /// moved the head's clock, and, sent every 29 s, held a slot for ever.
    @Test func aRepeatedStatusLineIsNoNewHead() throws {
        let (attempt, sent) = try connectedAttempt()
        receive(["HTTP/1.1 200 OK"], attempt)
        let started = attempt.headStartedAt
        receive(["HTTP/1.1 200 OK"], attempt)
        #expect(attempt.headStartedAt == started)
        #expect(quietStallReason(attempt, at: sent + .seconds(29)) == nil)
        #expect(quietStallReason(attempt, at: sent + .seconds(31))
                == "no complete response header in 30 s")
    }

    /// An interim answer is owed whole within the limit of its status line
    /// too: a 103 whose `Link` lines came a second apart, never ended, had
    /// ten times the limit.
    @Test func anInterimHeadThatNeverEndsHasTheLimitOnly() throws {
        let (attempt, sent) = try connectedAttempt()
        receive(["HTTP/1.1 103 Early Hints", "Link: </a.css>; rel=preload"], attempt)
        attempt.headStartedAt = sent
        #expect(quietStallReason(attempt, at: sent + .seconds(30)) == nil)
        #expect(quietStallReason(attempt, at: sent + .seconds(31))
                == "no complete response header in 30 s")
    }

    /// Only interim answers, past ten times the limit: no final answer.
    @Test func endlessInterimAnswersEndAfterTenTimesTheStallTimeout() throws {
        let (attempt, sent) = try connectedAttempt()
        receive(["HTTP/1.1 103 Early Hints", "Link: </a.css>; rel=preload", ""], attempt)
        #expect(quietStallReason(attempt, at: sent + .seconds(299)) == nil)
        #expect(quietStallReason(attempt, at: sent + .seconds(301))
                == "no final answer in 5 min (only interim ones, 1xx)")
    }

    /// A transfer is quiet, for the marks that tell another process it is
    /// alive (see `PartialFile.markAlive`), as its stall clock counts
    /// silence: not while `--limit-rate` holds it back (a holder at 10K left
    /// its partial unmarked between libcurl's bursts, and a waiting process
    /// fetched the URL again), nor while it connects.
    @Test func aTransferHeldBackByTheRateLimitIsNotQuiet() throws {
        let (attempt, sent) = try connectedAttempt()
        receive(["HTTP/1.1 200 OK", "Content-Length: 1000000", ""], attempt)
        // 100 KiB came in a burst at the start; at 10 KB/s the limiter holds it back for 10 s.
        attempt.startedAt = sent
        attempt.receivedThisAttempt = 100_000
        attempt.lastActivity = sent
        func quiet(since after: Duration, rate: Int64?) -> Bool {
            attempt.isQuiet(since: sent + after, connectLimit: .seconds(10), bytesPerSecond: rate)
        }
        #expect(!quiet(since: .seconds(5), rate: 10_000))
        #expect(quiet(since: .seconds(11), rate: 10_000))
        #expect(quiet(since: .seconds(5), rate: nil))
        // Nor one still connecting, within the connect timeout.
        let connecting = Attempt(id: TransferID(rawValue: 2), target: try RequestTarget("http://example.test/b.zip"),
                                 number: 1, sink: WaitingSink(wait: .zero), counters: LoopCounters())
        #expect(!connecting.isQuiet(since: .now + .seconds(5), connectLimit: .seconds(10), bytesPerSecond: nil))
        #expect(connecting.isQuiet(since: .now + .seconds(11), connectLimit: .seconds(10), bytesPerSecond: nil))
    }

    /// Time the loop was held by a write is left out of the stall clocks:
    /// a disk that stopped for longer than the stall timeout failed the
    /// other streams of the connection as stalled.
    @Test func theLoopsHoldIsNoServersSilence() throws {
        let counters = LoopCounters()
        let attempt = try attempt(statusLine: "HTTP/2 200", sink: WaitingSink(wait: .zero), counters: counters)
        attempt.connectionReady()
        let quietFrom = attempt.lastActivity
        let limit = Duration.seconds(30)
        // 40 s later, 35 s of which the loop was held: 5 s of silence.
        attempt.loopWasHeld(for: .seconds(35), at: quietFrom + .seconds(40))
        #expect(attempt.stallReason(at: quietFrom + .seconds(40), limit: limit, connectLimit: .seconds(10), bytesPerSecond: nil) == nil)
        #expect(attempt.stallReason(at: quietFrom + .seconds(66), limit: limit, connectLimit: .seconds(10), bytesPerSecond: nil)
                == "no data for 30 s")
    }
}

/// Hands a loop-thread object to the one other thread a test plays the loop on.
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
