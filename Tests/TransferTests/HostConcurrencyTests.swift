import CCurl
import Testing
@testable import Transfer

/// How many transfers at once a host that turns connections away is given.
@Suite struct HostConcurrencyTests {
    private let start = ContinuousClock.now
    private let host = "small.test:80"

    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    /// A limit of `limit` that stands and has been told of: the host served
    /// a transfer, then turned one away while `limit` others ran.
    private func limited(to limit: Int, ceiling: Int = 8, firstAnswersToRaise: Int = 8,
                         maxAnswersToRaise: Int = 512) -> HostConcurrency {
        var concurrency = HostConcurrency(ceiling: ceiling, firstAnswersToRaise: firstAnswersToRaise,
                                          maxAnswersToRaise: maxAnswersToRaise)
        _ = concurrency.answered(host, started: at(0), at: at(2))
        _ = concurrency.turnedAway(host, how: .connection, started: at(1), othersRunning: limit, at: at(3))
        _ = concurrency.answered(host, started: at(1), at: at(4))
        return concurrency
    }

    @Test func aTurnAwayWhileTheHostServedAnotherStandsAndIsToldAtTheNextAnswer() {
        var concurrency = HostConcurrency(ceiling: 8)
        _ = concurrency.answered(host, started: at(0), at: at(10))
        #expect(concurrency.turnedAway(host, how: .connection, started: at(5), othersRunning: 3, at: at(12))
                == HostConcurrency.Change(limit: 3))
        // The rest of the burst: one more turned away with two others running.
        #expect(concurrency.turnedAway(host, how: .connection, started: at(6), othersRunning: 2, at: at(13))
                == HostConcurrency.Change(limit: 2))
        // More running than the limit (stragglers of the burst): nothing new.
        #expect(concurrency.turnedAway(host, how: .connection, started: at(7), othersRunning: 3, at: at(14)) == nil)
        // The next answer tells the limit the burst left, once.
        #expect(concurrency.answered(host, started: at(5), at: at(50)) == HostConcurrency.Change(limit: 2, tell: true))
        #expect(concurrency.answered(host, started: at(5), at: at(51)) == nil)
        #expect(concurrency.turnedAway(host, how: .connection, started: at(50), othersRunning: 1, at: at(61))
                == HostConcurrency.Change(limit: 1))
        #expect(concurrency.answered(host, started: at(60), at: at(70)) == nil)
        #expect(concurrency.limit(for: host) == 1)
        #expect(concurrency.limit(for: "other.test:80") == nil)
    }

    @Test func aTurnAwayWithNoOtherTransferRunningSaysNothing() {
        var concurrency = HostConcurrency(ceiling: 8)
        #expect(concurrency.turnedAway(host, how: .connection, started: at(0), othersRunning: 0, at: at(0)) == nil)
        #expect(concurrency.limit(for: host) == nil)
    }

    @Test func aGuessStandsWhenATransferThatRanMeanwhileIsAnswered() {
        var concurrency = HostConcurrency(ceiling: 8)
        // Seven start together; five are reset before any answer, one by one.
        for (index, others) in [6, 5, 4, 3, 2].enumerated() {
            let change = concurrency.turnedAway(host, how: .connection, started: at(0), othersRunning: others, at: at(index + 1))
            #expect(change == HostConcurrency.Change(limit: others))
        }
        #expect(concurrency.limit(for: host) == 2)
        // One of the two that started with them is answered: the guess stands, told at the next answer.
        #expect(concurrency.answered(host, started: at(0), at: at(50)) == nil)
        #expect(concurrency.limit(for: host) == 2)
        #expect(concurrency.answered(host, started: at(0), at: at(51)) == HostConcurrency.Change(limit: 2, tell: true))
    }

    @Test func aGuessIsDroppedWhenATransferStartedAfterItIsAnswered() {
        var concurrency = HostConcurrency(ceiling: 8)
        // A restart: the running transfers end reset (some of them with their
        // successes under way), the new ones are refused, then the server is back.
        _ = concurrency.answered(host, started: at(0), at: at(1))
        _ = concurrency.turnedAway(host, how: .connection, started: at(2), othersRunning: 3, otherServing: true, at: at(5))
        _ = concurrency.turnedAway(host, how: .connection, started: at(3), othersRunning: 1, otherServing: true, at: at(6))
        #expect(concurrency.limit(for: host) == 1)
        #expect(concurrency.answered(host, started: at(20), at: at(70)) == HostConcurrency.Change(limit: 8))
        #expect(concurrency.limit(for: host) == nil)
    }

    @Test func oneMoreIsTriedAfterEnoughAnswersAndATryTurnedAwayInItsFirstRoundWaitsTwiceAsLong() {
        var concurrency = limited(to: 2, firstAnswersToRaise: 4, maxAnswersToRaise: 16)
        var clock = 100
        /// Answers `count` times; the changes of limit that came of them.
        func answer(_ count: Int) -> [HostConcurrency.Change] {
            (0..<count).compactMap { _ in
                clock += 1
                return concurrency.answered(host, started: at(clock), at: at(clock))
            }
        }
        /// Answers until the limit changes; how many it took.
        func answersToChange() -> Int? {
            for count in 1...100 where !answer(1).isEmpty { return count }
            return nil
        }
        /// The host turns one away while `others` run (having served one just now).
        func turnedAway(others: Int) -> HostConcurrency.Change? {
            clock += 1
            return concurrency.turnedAway(host, how: .connection, started: at(clock - 1), othersRunning: others, at: at(clock))
        }
        #expect(answersToChange() == 4)
        #expect(concurrency.limit(for: host) == 3)
        // The third is turned away at once: back to 2, and the next try waits longer.
        #expect(turnedAway(others: 2) == HostConcurrency.Change(limit: 2))
        #expect(answersToChange() == 8)
        #expect(turnedAway(others: 2) == HostConcurrency.Change(limit: 2))
        #expect(answersToChange() == 16)
        #expect(turnedAway(others: 2) == HostConcurrency.Change(limit: 2))
        #expect(answersToChange() == 16) // the most
        // A try that held for a round (3 answers at 3) is not failed by a later turn-away.
        #expect(answer(3).isEmpty)
        #expect(turnedAway(others: 2) == HostConcurrency.Change(limit: 2))
        var shorter = limited(to: 2, firstAnswersToRaise: 4, maxAnswersToRaise: 64)
        for _ in 0..<4 { _ = shorter.answered(host, started: at(200), at: at(200)) }
        #expect(shorter.limit(for: host) == 3)
        for _ in 0..<3 { _ = shorter.answered(host, started: at(201), at: at(201)) }
        _ = shorter.turnedAway(host, how: .connection, started: at(201), othersRunning: 2, at: at(202))
        var count = 0
        while shorter.limit(for: host) == 2, count < 100 {
            count += 1
            _ = shorter.answered(host, started: at(203), at: at(203))
        }
        #expect(count == 4)
    }

    @Test func strayBusyAnswersOfAHostWithoutALimitDoNotWearItDown() {
        // A cache in front of the host fails one fetch in 50 from its backend with a 503.
        var concurrency = HostConcurrency(ceiling: 8)
        var lowest = 8
        for request in 1...2_000 {
            let now = at(request)
            let limit = concurrency.limit(for: host) ?? 8
            if request % 50 == 0 {
                _ = concurrency.turnedAway(host, how: .busy, started: now, othersRunning: limit - 1, otherServing: true, at: now)
            } else {
                _ = concurrency.answered(host, started: now, at: now)
            }
            lowest = min(lowest, concurrency.limit(for: host) ?? 8)
        }
        #expect(lowest == 7)
    }

    @Test func aHostBackAtPerHostKeepsNothingAndIsNotToldOfTwice() {
        var concurrency = limited(to: 2, ceiling: 3, firstAnswersToRaise: 1)
        #expect(concurrency.answered(host, started: at(10), at: at(10)) == HostConcurrency.Change(limit: 3))
        // Kept for a round at the new limit (a turn-away in it would be a failed try), then dropped.
        #expect(concurrency.limit(for: host) == 3)
        for _ in 0..<3 { #expect(concurrency.answered(host, started: at(11), at: at(11)) == nil) }
        #expect(concurrency.limit(for: host) == nil)
        // Turned away again later: a new limit, not told a second time.
        #expect(concurrency.turnedAway(host, how: .connection, started: at(10), othersRunning: 1, at: at(20))
                == HostConcurrency.Change(limit: 1))
        #expect(concurrency.answered(host, started: at(20), at: at(30)) == HostConcurrency.Change(limit: 2))
    }

    @Test func aBusyAnswerLowersTheLimitWhileTheHostServesOthersAndNeverForAHostThatServesNone() {
        var concurrency = HostConcurrency(ceiling: 8)
        // nginx's limit_conn: 503 to the fourth while three are served.
        #expect(concurrency.turnedAway(host, how: .busy, started: at(0), othersRunning: 3, otherServing: true, at: at(5))
                == HostConcurrency.Change(limit: 3))
        // A host that answers everything 503 is down, not full: no guess, nothing lowered.
        var down = HostConcurrency(ceiling: 8)
        for index in 0..<8 {
            #expect(down.turnedAway(host, how: .busy, started: at(index), othersRunning: 7 - index, at: at(index + 1)) == nil)
        }
        #expect(down.limit(for: host) == nil)
    }

    @Test func aBusyAnswerSoonAfterTheHostServedOneIsAGuessThatGoesWhenItServesNoneForLong() {
        var concurrency = HostConcurrency(ceiling: 8, busyMemory: .seconds(10))
        // Small bodies: the served one ended before the turned-away one began.
        _ = concurrency.answered(host, started: at(0), at: at(10))
        #expect(concurrency.turnedAway(host, how: .busy, started: at(11), othersRunning: 2, at: at(12))
                == HostConcurrency.Change(limit: 2))
        // Busy again with nothing served for longer than that: the guess goes.
        #expect(concurrency.turnedAway(host, how: .busy, started: at(20_000), othersRunning: 1, at: at(20_001))
                == HostConcurrency.Change(limit: 8))
        #expect(concurrency.limit(for: host) == nil)
    }

    @Test func onlyARefusalOrACloseOrResetWithoutAWordIsATurnAway() {
        #expect(HostConcurrency.wasTurnedAway(code: CURLE_COULDNT_CONNECT, abort: nil, madeConnection: false))
        #expect(HostConcurrency.wasTurnedAway(code: CURLE_GOT_NOTHING, abort: nil, madeConnection: true))
        #expect(HostConcurrency.wasTurnedAway(code: CURLE_RECV_ERROR, abort: nil, madeConnection: true))
        #expect(HostConcurrency.wasTurnedAway(code: CURLE_SEND_ERROR, abort: nil, madeConnection: true))
        // A name that does not resolve, a timeout (a slow start looks the same) or our own stop are not.
        #expect(!HostConcurrency.wasTurnedAway(code: CURLE_COULDNT_RESOLVE_HOST, abort: nil, madeConnection: false))
        #expect(!HostConcurrency.wasTurnedAway(code: CURLE_OPERATION_TIMEDOUT, abort: nil, madeConnection: true))
        #expect(!HostConcurrency.wasTurnedAway(code: CURLE_RECV_ERROR, abort: TransferError(.timeout, "stalled"),
                                               madeConnection: true))
    }
}
