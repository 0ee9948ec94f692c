import Testing
@testable import Transfer

/// How a host that answers 429 Too Many Requests is paused, tried again and given up.
@Suite struct HostRateLimitsTests {
    private let start = ContinuousClock.now
    private let host = "busy.test:80"

    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test func a429PausesItsHostForTheWaitItAsksThenOneTransferGoesUntilItIsAnswered() {
        let limits = Limits(HostRateLimits())
        #expect(limits.askedToWait(host, retryAfter: 2, at: at(0)) == .pause(seconds: 2, begins: true))
        #expect(limits.isPaused(host))
        #expect(!limits.isPaused("other.test:80"))
        // Not over before the wait is.
        #expect(limits.due(at: at(1_999)).isEmpty)
        #expect(limits.due(at: at(2_000)) == [host])
        // Told once: the host now tries one transfer.
        #expect(limits.due(at: at(2_100)).isEmpty)
        // An answer to a transfer that began before the 429 says nothing of the limit now.
        #expect(!limits.answered(host, started: at(-5)))
        #expect(limits.isPaused(host))
        // One begun since ends the pause.
        #expect(limits.answered(host, started: at(2_010)))
        #expect(!limits.isPaused(host))
        #expect(!limits.answered(host, started: at(2_500)))
    }

    @Test func a429OfTheSameBurstMakesThePauseLongerWithoutBeginningANewOne() {
        let limits = Limits(HostRateLimits())
        #expect(limits.askedToWait(host, retryAfter: 1, at: at(0)) == .pause(seconds: 1, begins: true))
        // A transfer that was running gets its 429 too, asking for more: the pause ends later.
        #expect(limits.askedToWait(host, retryAfter: 3, started: at(-10), at: at(500)) == .pause(seconds: 3, begins: false))
        #expect(limits.due(at: at(1_000)).isEmpty)
        // One asking for less keeps the longer wait.
        #expect(limits.askedToWait(host, retryAfter: 1, started: at(-10), at: at(600)) == .pause(seconds: 2.9, begins: false))
        #expect(limits.due(at: at(3_500)) == [host])
        // The transfer tried alone is answered 429 again: a new pause, of the same spell.
        #expect(limits.askedToWait(host, retryAfter: 1, started: at(3_510), at: at(3_600)) == .pause(seconds: 1, begins: true))
        #expect(!limits.answered(host, started: at(3_550)))
        #expect(limits.due(at: at(4_600)) == [host])
        #expect(limits.answered(host, started: at(4_650)))
        // A later 429 begins a new spell.
        #expect(limits.askedToWait(host, retryAfter: 1, at: at(9_000)) == .pause(seconds: 1, begins: true))
    }

    /// Eight transfers asked at once, all answered 429 without `Retry-After`,
    /// doubled the pause seven times: 30 s for a host that wanted a moment.
    /// A burst is one refusal: the pause doubles when the transfer tried
    /// alone is refused again.
    @Test func aBurstOf429sWithoutRetryAfterPausesForTheFirstWaitOnly() {
        let limits = Limits(HostRateLimits(firstWait: .milliseconds(500), maxWait: .seconds(30)))
        #expect(limits.askedToWait(host, retryAfter: nil, started: at(-5), at: at(0)) == .pause(seconds: 0.5, begins: true))
        for late in 1...7 {
            guard case .pause(let seconds, let begins) = limits.askedToWait(host, retryAfter: nil, started: at(-5), at: at(late)) else {
                Issue.record("given up")
                return
            }
            // Still the first pause, ending at 500 ms.
            #expect(abs(seconds - (0.5 - Double(late) / 1000)) < 1e-9 && !begins, "\(seconds) \(begins)")
        }
        #expect(limits.due(at: at(500)) == [host])
        #expect(limits.askedToWait(host, retryAfter: nil, started: at(510), at: at(520)) == .pause(seconds: 1, begins: true))
    }

    /// The transfer going alone after a pause ended with no answer (a reset,
    /// a stop, or it never ran): the host's turn passes to the next at once,
    /// or, when a late 429 of the burst made the pause longer meanwhile, once
    /// that wait is over. It stayed taken, and the host's URLs waited forever.
    @Test func aTransferGoingAloneThatEndsUnansweredPassesItsTurnOn() {
        let limits = Limits(HostRateLimits())
        #expect(limits.askedToWait(host, retryAfter: 1, at: at(0)) == .pause(seconds: 1, begins: true))
        #expect(limits.due(at: at(1_000)) == [host])
        // One begun before the pause says nothing of the turn.
        #expect(!limits.endedUnanswered(host, started: at(-10), at: at(1_050)))
        #expect(limits.endedUnanswered(host, started: at(1_010), at: at(1_100)))
        // A late 429 of the burst asks for longer while the next one goes alone.
        #expect(limits.askedToWait(host, retryAfter: 3, started: at(-10), at: at(1_200)) == .pause(seconds: 3, begins: false))
        #expect(!limits.endedUnanswered(host, started: at(1_150), at: at(1_300)))
        #expect(limits.due(at: at(4_100)).isEmpty)
        #expect(limits.due(at: at(4_200)) == [host])
    }

    /// A 429 to a transfer asked before a pause that has ended (the host
    /// served one asked since) is stale: it began a pause of its own.
    @Test func aLate429OfAPauseThatHasEndedChangesNothing() {
        let limits = Limits(HostRateLimits())
        #expect(limits.askedToWait(host, retryAfter: 1, at: at(0)) == .pause(seconds: 1, begins: true))
        #expect(limits.due(at: at(1_000)) == [host])
        #expect(limits.answered(host, started: at(1_010)))
        #expect(limits.askedToWait(host, retryAfter: 1, started: at(-10), at: at(1_100)) == .stale)
        #expect(!limits.isPaused(host))
        // One asked since is a new refusal.
        #expect(limits.askedToWait(host, retryAfter: 1, started: at(1_050), at: at(1_200)) == .pause(seconds: 1, begins: true))
    }

    @Test func withoutRetryAfterThePauseDoublesWhileTheHostKeepsAnswering429() {
        let limits = Limits(HostRateLimits(firstWait: .milliseconds(500), maxWait: .seconds(3)))
        var waits: [Double] = []
        var now = 0
        for _ in 0..<5 {
            guard case .pause(let seconds, _) = limits.askedToWait(host, retryAfter: nil, at: at(now)) else {
                Issue.record("given up")
                return
            }
            waits.append(seconds)
            now += Int(seconds * 1000)
            #expect(limits.due(at: at(now)) == [host])
        }
        #expect(waits == [0.5, 1, 2, 3, 3])
        // Served: the next spell starts from the first wait again.
        #expect(limits.answered(host, started: at(now + 1)))
        #expect(limits.askedToWait(host, retryAfter: nil, at: at(now + 100)) == .pause(seconds: 0.5, begins: true))
    }

    @Test func aRetryAfterOfZeroOrInThePastStillPausesForTheFirstWait() {
        let limits = Limits(HostRateLimits(firstWait: .milliseconds(500)))
        #expect(limits.askedToWait(host, retryAfter: 0, at: at(0)) == .pause(seconds: 0.5, begins: true))
    }

    @Test func aHostAskingForLongerThanMediafetchWaitsIsGivenUpAtOnce() {
        let limits = Limits(HostRateLimits(longest: .seconds(600)))
        guard case .giveUp(let refusal) = limits.askedToWait(host, retryAfter: 3_600, at: at(0)) else {
            Issue.record("not given up")
            return
        }
        #expect(refusal.kind == .hostGivenUp)
        #expect(refusal.message == "given up: busy.test:80 answered 429 Too Many Requests and asked to wait 60 min "
            + "(mediafetch waits 10 min at most); its URLs fail at once")
        #expect(limits.refusal(for: host) == refusal)
        #expect(limits.refusal(for: "other.test:80") == nil)
        #expect(!limits.isPaused(host))
        // For the rest of the run, whatever comes after.
        #expect(!limits.answered(host, started: at(10)))
        #expect(limits.askedToWait(host, retryAfter: 1, at: at(20)) == .giveUp(refusal))
        #expect(limits.refusal(for: host) == refusal)
    }

    @Test func aHostThatKeepsAnswering429ForLongerThanMediafetchWaitsIsGivenUp() {
        let limits = Limits(HostRateLimits(longest: .seconds(10)))
        var now = 0
        // A second at a time, each try answered 429 again: nine seconds are waited.
        for _ in 0..<9 {
            #expect(limits.askedToWait(host, retryAfter: 1, at: at(now)).isPause)
            now += 1_000
            #expect(limits.due(at: at(now)) == [host])
            now += 100
        }
        // The tenth would end past ten seconds from the first 429.
        guard case .giveUp(let refusal) = limits.askedToWait(host, retryAfter: 1, at: at(now)) else {
            Issue.record("not given up")
            return
        }
        #expect(refusal.message == "given up: busy.test:80 answered only 429 Too Many Requests for 9 s, "
            + "and asks to wait 1 s more (mediafetch waits 10 s at most); its URLs fail at once")
    }

    @Test func aServedTransferBeginsANewSpellSoAHostThatKeepsAPaceIsNeverGivenUp() {
        let limits = Limits(HostRateLimits(longest: .seconds(10)))
        var now = 0
        // A host serving a few a second and answering the rest 429, for a minute.
        for _ in 0..<60 {
            #expect(limits.askedToWait(host, retryAfter: 1, at: at(now)).isPause)
            now += 1_000
            _ = limits.due(at: at(now))
            #expect(limits.answered(host, started: at(now + 1)))
            now += 10
        }
        #expect(limits.refusal(for: host) == nil)
    }
}

/// Holds the loop's value type by reference, so that `#expect` can call its
/// mutating methods (its expansion holds the values it is given as constants).
private final class Limits {
    var value: HostRateLimits
    init(_ value: HostRateLimits) { self.value = value }
    func askedToWait(_ host: String, retryAfter: Double?, started: ContinuousClock.Instant? = nil,
                     at now: ContinuousClock.Instant) -> HostRateLimits.Change {
        value.askedToWait(host, retryAfter: retryAfter, started: started, at: now)
    }
    func answered(_ host: String, started: ContinuousClock.Instant) -> Bool { value.answered(host, started: started) }
    func endedUnanswered(_ host: String, started: ContinuousClock.Instant, at now: ContinuousClock.Instant) -> Bool {
        value.endedUnanswered(host, started: started, at: now)
    }
    func due(at now: ContinuousClock.Instant) -> [String] { value.due(at: now) }
    func refusal(for host: String) -> TransferError? { value.refusal(for: host) }
    func isPaused(_ host: String) -> Bool { value.isPaused(host) }
}

private extension HostRateLimits.Change {
    var isPause: Bool {
        if case .pause = self { return true }
        return false
    }
}
