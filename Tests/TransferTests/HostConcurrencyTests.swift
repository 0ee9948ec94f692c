import CCurl
import Testing
@testable import Transfer

/// How many transfers at once a host that turns connections away is given.
@Suite struct HostConcurrencyTests {
    private let start = ContinuousClock.now
    private let host = "small.test:80"

    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test func aTurnAwayWhileAnotherHasItsAnswerStandsAtOnceAndIsToldOnce() {
        var concurrency = HostConcurrency(ceiling: 8)
        #expect(concurrency.turnedAway(host, othersRunning: 3, othersAnswered: true, at: at(0))
                == HostConcurrency.Change(limit: 3, firstToStand: true))
        #expect(concurrency.limit(for: host) == 3)
        // One more turned away with two others running: lower, not told again.
        #expect(concurrency.turnedAway(host, othersRunning: 2, othersAnswered: true, at: at(1))
                == HostConcurrency.Change(limit: 2, firstToStand: false))
        #expect(concurrency.limit(for: "other.test:80") == nil)
    }

    @Test func aTurnAwayWithNoOtherTransferRunningSaysNothing() {
        var concurrency = HostConcurrency(ceiling: 8)
        #expect(concurrency.turnedAway(host, othersRunning: 0, othersAnswered: false, at: at(0)) == nil)
        #expect(concurrency.limit(for: host) == nil)
    }

    @Test func aGuessStandsWhenATransferThatRanMeanwhileIsAnswered() {
        var concurrency = HostConcurrency(ceiling: 8)
        // Seven start together; five are reset before any answer, one by one.
        for (index, others) in [6, 5, 4, 3, 2].enumerated() {
            let change = concurrency.turnedAway(host, othersRunning: others, othersAnswered: false, at: at(index))
            #expect(change == HostConcurrency.Change(limit: others, firstToStand: false))
        }
        #expect(concurrency.limit(for: host) == 2)
        // One of the two that started with them is answered: the guess stands, and is told.
        #expect(concurrency.answered(host, started: at(0)) == HostConcurrency.Change(limit: 2, firstToStand: true))
        #expect(concurrency.limit(for: host) == 2)
    }

    @Test func aGuessIsDroppedWhenATransferStartedAfterItIsAnswered() {
        var concurrency = HostConcurrency(ceiling: 8)
        // A restart: the running transfers and the new ones all fail, then the server is back.
        _ = concurrency.turnedAway(host, othersRunning: 3, othersAnswered: false, at: at(0))
        _ = concurrency.turnedAway(host, othersRunning: 1, othersAnswered: false, at: at(10))
        #expect(concurrency.limit(for: host) == 1)
        #expect(concurrency.answered(host, started: at(20)) == HostConcurrency.Change(limit: 8, firstToStand: false))
        #expect(concurrency.limit(for: host) == nil)
    }

    @Test func oneMoreIsTriedAfterEnoughAnswersAndAFailedTryWaitsTwiceAsLong() {
        var concurrency = HostConcurrency(ceiling: 8, firstAnswersToRaise: 4, maxAnswersToRaise: 16)
        _ = concurrency.turnedAway(host, othersRunning: 2, othersAnswered: true, at: at(0))
        /// Answers until the limit changes; how many it took.
        func answersToChange() -> Int? {
            for count in 1...100 where concurrency.answered(host, started: at(1)) != nil { return count }
            return nil
        }
        #expect(answersToChange() == 4)
        #expect(concurrency.limit(for: host) == 3)
        // The third is turned away while two have their answers: back to 2, and the next try waits longer.
        #expect(concurrency.turnedAway(host, othersRunning: 2, othersAnswered: true, at: at(2))
                == HostConcurrency.Change(limit: 2, firstToStand: false))
        #expect(answersToChange() == 8)
        _ = concurrency.turnedAway(host, othersRunning: 2, othersAnswered: true, at: at(3))
        #expect(answersToChange() == 16)
        _ = concurrency.turnedAway(host, othersRunning: 2, othersAnswered: true, at: at(4))
        #expect(answersToChange() == 16) // the most
        // A try that holds (no turn-away at 3) goes on to 4 after as many answers again.
        #expect(concurrency.limit(for: host) == 3)
        #expect(answersToChange() == 16)
        #expect(concurrency.limit(for: host) == 4)
    }

    @Test func aHostBackAtPerHostKeepsNothing() {
        var concurrency = HostConcurrency(ceiling: 3, firstAnswersToRaise: 1)
        _ = concurrency.turnedAway(host, othersRunning: 2, othersAnswered: true, at: at(0))
        #expect(concurrency.answered(host, started: at(1)) == HostConcurrency.Change(limit: 3, firstToStand: false))
        #expect(concurrency.limit(for: host) == nil)
        // Turned away again later: a new limit, not told a second time.
        #expect(concurrency.turnedAway(host, othersRunning: 1, othersAnswered: true, at: at(2))
                == HostConcurrency.Change(limit: 1, firstToStand: false))
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
