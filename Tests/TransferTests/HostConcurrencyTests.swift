import CCurl
import Testing
@testable import Transfer

/// How many transfers at once a host that turns connections away is given.
@Suite struct HostConcurrencyTests {
    private let start = ContinuousClock.now
    private let host = "small.test:80"

    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test func aTurnAwayWhileAnotherIsServedStandsAtOnceAndIsToldAtTheNextAnswer() {
        var concurrency = HostConcurrency(ceiling: 8)
        #expect(concurrency.turnedAway(host, how: .connection, started: at(0), othersRunning: 3, otherServed: true, at: at(0))
                == HostConcurrency.Change(limit: 3))
        #expect(concurrency.limit(for: host) == 3)
        // The rest of the burst: one more turned away with two others running.
        #expect(concurrency.turnedAway(host, how: .connection, started: at(1), othersRunning: 2, otherServed: true, at: at(1))
                == HostConcurrency.Change(limit: 2))
        // The next answer tells the limit the burst left, once.
        #expect(concurrency.answered(host, started: at(0), at: at(50)) == HostConcurrency.Change(limit: 2, tell: true))
        #expect(concurrency.answered(host, started: at(0), at: at(51)) == nil)
        #expect(concurrency.turnedAway(host, how: .connection, started: at(60), othersRunning: 1, otherServed: true, at: at(61))
                == HostConcurrency.Change(limit: 1))
        #expect(concurrency.answered(host, started: at(60), at: at(70)) == nil)
        #expect(concurrency.limit(for: "other.test:80") == nil)
    }

    @Test func aTurnAwayWithNoOtherTransferRunningSaysNothing() {
        var concurrency = HostConcurrency(ceiling: 8)
        #expect(concurrency.turnedAway(host, how: .connection, started: at(0), othersRunning: 0, otherServed: false, at: at(0)) == nil)
        #expect(concurrency.limit(for: host) == nil)
    }

    @Test func aGuessStandsWhenATransferThatRanMeanwhileIsAnswered() {
        var concurrency = HostConcurrency(ceiling: 8)
        // Seven start together; five are reset before any answer, one by one.
        for (index, others) in [6, 5, 4, 3, 2].enumerated() {
            let change = concurrency.turnedAway(host, how: .connection, started: at(index), othersRunning: others, otherServed: false, at: at(index))
            #expect(change == HostConcurrency.Change(limit: others))
        }
        #expect(concurrency.limit(for: host) == 2)
        // One of the two that started with them is answered: the guess stands, and is told.
        #expect(concurrency.answered(host, started: at(0), at: at(50)) == HostConcurrency.Change(limit: 2, tell: true))
        #expect(concurrency.limit(for: host) == 2)
    }

    @Test func aGuessIsDroppedWhenATransferStartedAfterItIsAnswered() {
        var concurrency = HostConcurrency(ceiling: 8)
        // A restart: the running transfers and the new ones all fail, then the server is back.
        _ = concurrency.turnedAway(host, how: .connection, started: at(0), othersRunning: 3, otherServed: false, at: at(0))
        _ = concurrency.turnedAway(host, how: .connection, started: at(10), othersRunning: 1, otherServed: false, at: at(10))
        #expect(concurrency.limit(for: host) == 1)
        #expect(concurrency.answered(host, started: at(20), at: at(70)) == HostConcurrency.Change(limit: 8))
        #expect(concurrency.limit(for: host) == nil)
    }

    @Test func oneMoreIsTriedAfterEnoughAnswersAndAFailedTryWaitsTwiceAsLong() {
        var concurrency = HostConcurrency(ceiling: 8, firstAnswersToRaise: 4, maxAnswersToRaise: 16)
        _ = concurrency.turnedAway(host, how: .connection, started: at(0), othersRunning: 2, otherServed: true, at: at(0))
        #expect(concurrency.answered(host, started: at(0), at: at(1)) == HostConcurrency.Change(limit: 2, tell: true))
        /// Answers until the limit changes; how many it took.
        func answersToChange() -> Int? {
            for count in 1...100 where concurrency.answered(host, started: at(1), at: at(51)) != nil { return count }
            return nil
        }
        #expect(answersToChange() == 4)
        #expect(concurrency.limit(for: host) == 3)
        // The third is turned away while two have their answers: back to 2, and the next try waits longer.
        #expect(concurrency.turnedAway(host, how: .connection, started: at(2), othersRunning: 2, otherServed: true, at: at(2))
                == HostConcurrency.Change(limit: 2))
        #expect(answersToChange() == 8)
        _ = concurrency.turnedAway(host, how: .connection, started: at(3), othersRunning: 2, otherServed: true, at: at(3))
        #expect(answersToChange() == 16)
        _ = concurrency.turnedAway(host, how: .connection, started: at(4), othersRunning: 2, otherServed: true, at: at(4))
        #expect(answersToChange() == 16) // the most
        // A try that holds (no turn-away at 3) goes on to 4 after as many answers again.
        #expect(concurrency.limit(for: host) == 3)
        #expect(answersToChange() == 16)
        #expect(concurrency.limit(for: host) == 4)
    }

    @Test func aHostBackAtPerHostKeepsNothing() {
        var concurrency = HostConcurrency(ceiling: 3, firstAnswersToRaise: 1)
        _ = concurrency.turnedAway(host, how: .connection, started: at(0), othersRunning: 2, otherServed: true, at: at(0))
        #expect(concurrency.answered(host, started: at(1), at: at(51)) == HostConcurrency.Change(limit: 2, tell: true))
        #expect(concurrency.answered(host, started: at(1), at: at(52)) == HostConcurrency.Change(limit: 3))
        #expect(concurrency.limit(for: host) == nil)
        // Turned away again later: a new limit, not told a second time.
        #expect(concurrency.turnedAway(host, how: .connection, started: at(60), othersRunning: 1, otherServed: true, at: at(60))
                == HostConcurrency.Change(limit: 1))
        #expect(concurrency.answered(host, started: at(60), at: at(70)) == HostConcurrency.Change(limit: 2))
    }

    @Test func aBusyAnswerLowersTheLimitOnlyWhileTheHostServesOthers() {
        var concurrency = HostConcurrency(ceiling: 8)
        // nginx's limit_conn: 503 to the fourth while three are served.
        #expect(concurrency.turnedAway(host, how: .busy, started: at(0), othersRunning: 3, otherServed: true, at: at(5))
                == HostConcurrency.Change(limit: 3))
        // A host that answers everything 503 is down, not full: no guess, nothing lowered.
        var down = HostConcurrency(ceiling: 8)
        for index in 0..<8 {
            #expect(down.turnedAway(host, how: .busy, started: at(index), othersRunning: 7 - index, otherServed: false,
                                    at: at(index + 1)) == nil)
        }
        #expect(down.limit(for: host) == nil)
    }

    @Test func aTransferServedAfterTheTurnedAwayOneBeganCountsAsServedMeanwhile() {
        var concurrency = HostConcurrency(ceiling: 8)
        // Small bodies: the served one ended before the turned-away one did.
        _ = concurrency.answered(host, started: at(0), at: at(10))
        #expect(concurrency.turnedAway(host, how: .busy, started: at(5), othersRunning: 2, otherServed: false, at: at(12))
                == HostConcurrency.Change(limit: 2))
        // One that ended before it began makes it a guess only, while the host served one lately.
        var earlier = HostConcurrency(ceiling: 8, busyMemory: .seconds(10))
        _ = earlier.answered(host, started: at(0), at: at(10))
        #expect(earlier.turnedAway(host, how: .busy, started: at(11), othersRunning: 2, otherServed: false, at: at(12))
                == HostConcurrency.Change(limit: 2))
        // Busy again with nothing served for longer than that: the guess goes.
        #expect(earlier.turnedAway(host, how: .busy, started: at(20_000), othersRunning: 1, otherServed: false, at: at(20_001))
                == HostConcurrency.Change(limit: 8))
        #expect(earlier.limit(for: host) == nil)
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
