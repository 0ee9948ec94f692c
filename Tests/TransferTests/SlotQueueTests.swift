import Testing
import TestSupport
@testable import Transfer

/// The loop's slot queue: limits overall and per host, order, cancellation.
@Suite struct SlotQueueTests {
    /// Takes every element that fits now.
    private func drain(_ queue: inout SlotQueue<String>, at now: ContinuousClock.Instant = .now) -> [String] {
        var started: [String] = []
        while let (element, _) = queue.next(at: now) { started.append(element) }
        return started
    }

    @Test func neverMoreThanTheTotal() {
        var queue = SlotQueue<String>(total: 4, perHost: 10)
        for index in 0..<10 { queue.enqueue("a\(index)", host: index % 2 == 0 ? "a" : "b") }
        #expect(drain(&queue).count == 4)
        #expect(queue.running == 4)
        #expect(queue.waitingCount == 6)
        queue.release(host: "a")
        #expect(drain(&queue).count == 1)
        #expect(queue.running == 4)
    }

    @Test func neverMoreThanPerHostAndAFullHostDoesNotBlockAnother() {
        var queue = SlotQueue<String>(total: 16, perHost: 2)
        for index in 0..<5 { queue.enqueue("busy\(index)", host: "busy") }
        queue.enqueue("free0", host: "free")
        // The fifth waiter on the busy host must not hold back the free host.
        #expect(drain(&queue) == ["busy0", "busy1", "free0"])
        #expect(queue.runningPerHost == ["busy": 2, "free": 1])
        queue.release(host: "busy")
        #expect(drain(&queue) == ["busy2"])
        #expect(queue.runningPerHost["busy"] == 2)
    }

    @Test func aHostWithALimitOfItsOwnKeepsToItAndTheOthersToPerHost() {
        var queue = SlotQueue<String>(total: 16, perHost: 4)
        for index in 0..<6 { queue.enqueue("small\(index)", host: "small") }
        for index in 0..<6 { queue.enqueue("big\(index)", host: "big") }
        queue.setLimit(2, for: "small")
        _ = drain(&queue)
        #expect(queue.runningPerHost == ["small": 2, "big": 4])
        // Back at `perHost` or over: the host has no limit of its own.
        queue.setLimit(9, for: "small")
        _ = drain(&queue)
        #expect(queue.runningPerHost == ["small": 4, "big": 4])
    }

    @Test func aPausedHostStartsNothingThenOneThenAllWhileOthersGoOn() {
        var queue = SlotQueue<String>(total: 16, perHost: 4)
        for index in 0..<2 { queue.enqueue("before\(index)", host: "paused") }
        _ = drain(&queue)
        for index in 0..<6 { queue.enqueue("paused\(index)", host: "paused") }
        queue.enqueue("free0", host: "free")
        queue.setLimit(3, for: "paused")
        // Paused: none of its transfers start, the other host's do.
        queue.setHold(0, for: "paused")
        #expect(drain(&queue) == ["free0"])
        // Its wait over: one goes alone, though two begun before the pause still run.
        queue.setHold(1, for: "paused")
        #expect(drain(&queue) == ["paused0"])
        // One start, not a cap: slots freed meanwhile start nothing more.
        queue.release(host: "paused")
        queue.release(host: "paused")
        #expect(drain(&queue).isEmpty)
        #expect(queue.runningPerHost["paused"] == 1)
        // Answered: back to its own limit (3 of --per-host 4).
        queue.setHold(nil, for: "paused")
        #expect(drain(&queue) == ["paused1", "paused2"])
        #expect(queue.runningPerHost["paused"] == 3)
    }

    @Test func anHTTPSHostRunsOneTransferUntilItsConnectionAnswers() {
        var queue = SlotQueue<String>(total: 16, perHost: 8)
        for index in 0..<4 { queue.enqueue("tls\(index)", host: "tls", probeFirst: true) }
        for index in 0..<2 { queue.enqueue("plain\(index)", host: "plain") }
        // The probing host's others wait; a plain host is not held back by it.
        #expect(drain(&queue) == ["tls0", "plain0", "plain1"])
        #expect(queue.isProbing("tls"))
        queue.answered(host: "tls")
        #expect(!queue.isProbing("tls"))
        #expect(drain(&queue) == ["tls1", "tls2", "tls3"])
        // Answered once is enough: later transfers to it start at once.
        queue.enqueue("tls4", host: "tls", probeFirst: true)
        #expect(drain(&queue) == ["tls4"])
        #expect(queue.runningPerHost["tls"] == 5)
    }

    @Test func aFirstTransferThatEndsUnansweredLetsTheOthersTryTogether() {
        var queue = SlotQueue<String>(total: 16, perHost: 8)
        for index in 0..<4 { queue.enqueue("dead\(index)", host: "dead", probeFirst: true) }
        #expect(drain(&queue) == ["dead0"])
        // A refused connection or a TLS failure: no answer, but no reason to go one by one.
        queue.release(host: "dead")
        #expect(drain(&queue) == ["dead1", "dead2", "dead3"])
    }

    /// A failing host (its attempts fail without an answer) runs one
    /// transfer while another host can take the slot, and up to its limit
    /// when none can: two dead hosts at the head of a list held all 16
    /// slots, and the live URLs behind them waited a minute.
    @Test func aFailingHostTakesOneSlotWhileOthersWait() {
        var queue = SlotQueue<String>(total: 4, perHost: 4)
        for index in 0..<4 { queue.enqueue("dead\(index)", host: "dead") }
        queue.setFailing("dead", true)
        for index in 0..<5 { queue.enqueue("live\(index)", host: "live") }
        #expect(drain(&queue) == ["dead0", "live0", "live1", "live2"])
        queue.release(host: "live")
        #expect(drain(&queue) == ["live3"])
        // A slot no other host takes goes to the failing host: it is tried as fast as before.
        queue.release(host: "live")
        queue.release(host: "live")
        #expect(drain(&queue) == ["live4", "dead1"])
        queue.release(host: "dead")
        #expect(drain(&queue) == ["dead2"])
        // An answer ends it: back to its own limit, in arrival order with the others.
        queue.answered(host: "dead")
        #expect(!queue.isFailing("dead"))
        queue.enqueue("live5", host: "live")
        queue.release(host: "live")
        queue.release(host: "live")
        #expect(drain(&queue) == ["dead3", "live5"])
    }

    /// Failing hosts take half the slots at most, even when nothing else
    /// waits: the slots are held a whole stall, and others may come.
    @Test func failingHostsTakeHalfTheSlotsAtMost() {
        var queue = SlotQueue<String>(total: 8, perHost: 8)
        for index in 0..<6 { queue.enqueue("a\(index)", host: "a") }
        for index in 0..<6 { queue.enqueue("b\(index)", host: "b") }
        queue.setFailing("a", true)
        queue.setFailing("b", true)
        #expect(drain(&queue) == ["a0", "b0", "a1", "a2"])
        queue.enqueue("live0", host: "live")
        #expect(drain(&queue) == ["live0"])
    }

    /// Hosts not yet answered take half the slots at most while an
    /// answered host waits: each may be a host that takes connections and
    /// never answers, holding its slot a whole stall.
    @Test func unansweredHostsTakeHalfTheSlotsWhileAnAnsweredHostWaits() {
        var queue = SlotQueue<String>(total: 2, perHost: 8, answeredGrace: .seconds(1))
        let start = ContinuousClock.now
        for index in 0..<3 {
            queue.enqueue("silent\(index)", host: "silent\(index)", probeFirst: true)
            queue.enqueue("live\(index)", host: "live", probeFirst: true)
        }
        #expect(drain(&queue, at: start) == ["silent0", "live0"])
        queue.answered(host: "live")
        queue.release(host: "live")
        // silent1 waited longer, but the answered host takes the slot the probes may not.
        #expect(drain(&queue, at: start) == ["live1"])
        queue.release(host: "live")
        #expect(drain(&queue, at: start) == ["live2"])
        // Nothing answered waits: the slot is kept a moment for the live host's next one,
        queue.release(host: "live")
        #expect(drain(&queue, at: start + .milliseconds(999)).isEmpty)
        // which may take it,
        queue.enqueue("live3", host: "live")
        #expect(drain(&queue, at: start + .milliseconds(999)) == ["live3"])
        queue.release(host: "live")
        // else, once the moment is over, the next probe does.
        #expect(drain(&queue, at: start + .seconds(2)) == ["silent1"])
        // A probe that ends (unanswered) gives its share back.
        queue.release(host: "silent0")
        queue.release(host: "silent1")
        queue.enqueue("live4", host: "live")
        #expect(drain(&queue, at: start + .seconds(2)) == ["silent2", "live4"])
    }

    /// The share only yields to an answered host that can start: past its
    /// own limit, the slots go to the probes and none stays idle.
    @Test func unansweredHostsTakeTheSlotsAnAnsweredHostCannot() {
        var queue = SlotQueue<String>(total: 4, perHost: 1)
        queue.enqueue("live0", host: "live", probeFirst: true)
        #expect(drain(&queue) == ["live0"])
        queue.answered(host: "live")
        queue.enqueue("live1", host: "live")
        for index in 0..<4 { queue.enqueue("silent\(index)", host: "silent\(index)", probeFirst: true) }
        #expect(drain(&queue) == ["silent0", "silent1", "silent2"])
        queue.release(host: "live")
        #expect(drain(&queue) == ["live1"])
    }

    /// A probe that took a slot past the probes' share, as nothing answered
    /// waited, gives it back when an answered host's transfer comes; not for
    /// a failing host's, which would likely hold it as long.
    @Test func aProbePastTheShareGivesItsSlotBackToAnAnsweredHost() {
        var queue = SlotQueue<String>(total: 2, perHost: 8)
        queue.enqueue("silent0", host: "silent0", probeFirst: true)
        queue.enqueue("live0", host: "live", probeFirst: true)
        #expect(drain(&queue) == ["silent0", "live0"])
        queue.answered(host: "live")
        queue.release(host: "live")
        queue.enqueue("silent1", host: "silent1", probeFirst: true)
        #expect(drain(&queue) == ["silent1"])
        #expect(!queue.probeShouldYield)

        queue.enqueue("live1", host: "live")
        #expect(queue.probeShouldYield)
        queue.putBack("silent1", host: "silent1")
        #expect(drain(&queue) == ["live1"])
        #expect(!queue.probeShouldYield)
        #expect(queue.isProbing("silent1") && queue.waitingCount == 1)

        queue.release(host: "live")
        queue.setFailing("live", true)
        #expect(drain(&queue, at: .now + .seconds(2)) == ["silent1"])
        queue.enqueue("live2", host: "live")
        #expect(!queue.probeShouldYield)
        #expect(queue.inconsistency == nil)
    }

    /// Hosts with one URL each are all probes: no answered host starts
    /// anything, and they keep every slot.
    @Test func hostsOfOneURLEachTakeEverySlot() {
        var queue = SlotQueue<String>(total: 4, perHost: 8)
        for index in 0..<8 { queue.enqueue("only\(index)", host: "only\(index)", probeFirst: true) }
        #expect(drain(&queue) == ["only0", "only1", "only2", "only3"])
        queue.answered(host: "only0")
        queue.release(host: "only0")
        #expect(drain(&queue) == ["only4"])
    }

    /// Random turns of events: no more than the slots run, every waiter
    /// starts once, a host runs no more than `perHost`, and the counts kept
    /// as sums add up at every step.
    @Test(arguments: 0..<200)
    func randomTurnsKeepTheLimitsAndTheCounts(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let total = Int.random(in: 1...8, using: &random)
        let perHost = Int.random(in: 1...4, using: &random)
        var queue = SlotQueue<Int>(total: total, perHost: perHost, answeredGrace: .milliseconds(Int.random(in: 0...2, using: &random)))
        let start = ContinuousClock.now
        var running: [(element: Int, host: String)] = []
        var started: Set<Int> = []
        var cancelled = 0
        var enqueued = 0
        for step in 0..<2_000 {
            let host = "h\(Int.random(in: 0..<6, using: &random))"
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                queue.enqueue(enqueued, host: host, probeFirst: Bool.random(using: &random))
                enqueued += 1
            case 4..<7 where !running.isEmpty:
                let ended = running.remove(at: Int.random(in: 0..<running.count, using: &random))
                queue.release(host: ended.host, endingProbe: Bool.random(using: &random))
            case 7: queue.answered(host: host)
            case 8: queue.setFailing(host, Bool.random(using: &random))
            default:
                if queue.removeWaiting(where: { _ in true }) != nil { cancelled += 1 }
            }
            while let (element, host) = queue.next(at: start + .milliseconds(step)) {
                #expect(started.insert(element).inserted, "seed \(seed): \(element) started twice")
                running.append((element, host))
            }
            if queue.probeShouldYield, let probe = running.lastIndex(where: { queue.isProbing($0.host) }) {
                let (element, host) = running.remove(at: probe)
                queue.putBack(element, host: host)
                started.remove(element)
                let next = queue.next(at: start + .milliseconds(step))
                #expect(next != nil && !queue.isProbing(next?.host ?? ""), "seed \(seed): the slot given back went to \(String(describing: next))")
                if let next {
                    #expect(started.insert(next.element).inserted, "seed \(seed): \(next.element) started twice")
                    running.append(next)
                }
            }
            #expect(running.count <= total && Dictionary(grouping: running, by: \.host).values.allSatisfy { $0.count <= perHost },
                    "seed \(seed): past a limit")
            if let problem = queue.inconsistency {
                Issue.record("seed \(seed): \(problem)")
                return
            }
        }
        #expect(started.count + cancelled + queue.waitingCount == enqueued, "seed \(seed)")
        // And every waiter starts in the end, once the others end.
        for round in 0..<enqueued where queue.waitingCount > 0 {
            for ended in running { queue.release(host: ended.host) }
            running.removeAll()
            while let (element, host) = queue.next(at: start + .seconds(3_600 + round)) {
                #expect(started.insert(element).inserted, "seed \(seed): \(element) started twice")
                running.append((element, host))
            }
            if running.isEmpty { break }
        }
        #expect(queue.waitingCount == 0, "seed \(seed): \(queue.waitingCount) left waiting with every slot free")
    }

    @Test func aCancelledFirstTransferLeavesTheNextToProbe() {
        var queue = SlotQueue<String>(total: 16, perHost: 8)
        for index in 0..<3 { queue.enqueue("tls\(index)", host: "tls", probeFirst: true) }
        #expect(drain(&queue) == ["tls0"])
        // Cancelled before its connection said anything: still one at a time.
        queue.release(host: "tls", endingProbe: false)
        #expect(queue.isProbing("tls"))
        #expect(drain(&queue) == ["tls1"])
        queue.answered(host: "tls")
        #expect(drain(&queue) == ["tls2"])
    }

    @Test func waitersStartInArrivalOrderAcrossHosts() {
        var queue = SlotQueue<String>(total: 1, perHost: 1)
        let order = [("x1", "x"), ("y1", "y"), ("x2", "x"), ("z1", "z"), ("y2", "y")]
        for (element, host) in order { queue.enqueue(element, host: host) }
        var started: [String] = []
        while let (element, host) = queue.next() {
            started.append(element)
            queue.release(host: host)
        }
        #expect(started == order.map(\.0))
        #expect(queue.running == 0)
        #expect(queue.runningPerHost.isEmpty)
    }

    @Test func aCancelledWaiterIsRemovedAndTheRestKeepTheirOrder() {
        var queue = SlotQueue<String>(total: 1, perHost: 1)
        for element in ["a", "b", "c", "d"] { queue.enqueue(element, host: "h") }
        #expect(queue.next()?.element == "a")
        #expect(queue.removeWaiting { $0 == "c" } == "c")
        #expect(queue.removeWaiting { $0 == "c" } == nil)
        #expect(queue.waitingCount == 2)
        queue.release(host: "h")
        #expect(queue.next()?.element == "b")
        queue.release(host: "h")
        #expect(queue.next()?.element == "d")
        #expect(queue.removeAllWaiting().isEmpty)
    }

    @Test func shuttingDownReturnsEveryWaiterOldestFirst() {
        var queue = SlotQueue<String>(total: 1, perHost: 1)
        for (index, host) in ["p", "q", "p", "r"].enumerated() { queue.enqueue("\(index)", host: host) }
        #expect(queue.next()?.element == "0")
        #expect(queue.removeAllWaiting() == ["1", "2", "3"])
        #expect(queue.waitingCount == 0)
        #expect(queue.next() == nil)
    }

    @Test func aLongQueueCompactsWithoutLosingOrReorderingAnything() {
        var queue = SlotQueue<String>(total: 3, perHost: 3)
        for index in 0..<1000 { queue.enqueue("\(index)", host: "h") }
        var started: [String] = []
        while let (element, host) = queue.next() {
            started.append(element)
            queue.release(host: host)
        }
        #expect(started == (0..<1000).map { "\($0)" })
    }

    @Test func aGivenUpHostsWaitersAreTakenOutTogether() {
        var queue = SlotQueue<String>(total: 1, perHost: 1)
        queue.enqueue("other0", host: "other")
        for index in 0..<3 { queue.enqueue("dead\(index)", host: "dead") }
        queue.enqueue("other1", host: "other")
        #expect(drain(&queue) == ["other0"])
        #expect(queue.removeAllWaiting(host: "dead") == ["dead0", "dead1", "dead2"])
        #expect(queue.waitingCount == 1)
        #expect(queue.removeAllWaiting(host: "dead").isEmpty)
        queue.release(host: "other")
        #expect(drain(&queue) == ["other1"])
    }
}
