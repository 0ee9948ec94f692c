import Testing
import TestSupport
@testable import Transfer

/// Which item of a batch takes a free place: a host's share, the lookahead, order.
@Suite struct BatchPlacesTests {
    /// Starts items until `width` hold places (or none is left), as the batch
    /// does; `host` gives each index's host. Returns the indices started.
    private func fill(_ places: inout BatchPlaces, upTo width: Int, started: Int = 0,
                      host: (Int) -> String) -> [Int] {
        var order: [Int] = []
        while started + order.count < width {
            switch places.next() {
            case .none: return order
            case .fresh(let index): if places.place(index, host: host(index)) { order.append(index) }
            case .setAside(let index, _): order.append(index)
            }
        }
        return order
    }

    @Test func itemsOfOtherHostsPassAHostThatHoldsItsShare() {
        // Given a list of six items of host a, then two of host b
        var places = BatchPlaces(count: 8, share: 2, lookahead: 16)
        let host = { (index: Int) in index < 6 ? "a" : "b" }

        // When four places are filled, a takes its two and b the other two
        #expect(fill(&places, upTo: 4, host: host) == [0, 1, 6, 7])
        #expect(places.setAsideCount == 4)

        // Then a place that a gives back goes to a's oldest item set aside
        places.release(host: "a")
        #expect(places.next() == .setAside(index: 2, host: "a"))
        // and b's places, once the list is read, to the oldest item set aside whatever its host
        places.release(host: "b")
        #expect(places.next() == .setAside(index: 3, host: "a"))
    }

    /// A host that has not answered holds its `--per-host` of places, not
    /// its share: two hosts that never answer held every place between
    /// them, and a live host's items waited behind them.
    @Test func hostsThatHaveNotAnsweredHoldFewerPlaces() {
        // Given ten items each of dead hosts a and b, then a hundred of host c
        var places = BatchPlaces(count: 120, share: 8, unprovenShare: 2, lookahead: 64)
        let host = { (index: Int) in index < 10 ? "a" : index < 20 ? "b" : "c" }

        // When six places are filled, each host takes the two it may before answering
        #expect(fill(&places, upTo: 6, host: host) == [0, 1, 10, 11, 20, 21])
        // Then c, once it answered, takes the next places up to its share, before
        // the dead hosts' items waiting longer
        places.answered("c")
        #expect(fill(&places, upTo: 12, started: 6, host: host) == [22, 23, 24, 25, 26, 27])
    }

    /// Hosts that have not answered hold `unprovenTotal` places together:
    /// hosts that take connections and never answer, one URL each, every
    /// other line, filled every place, and the live URLs between them waited.
    @Test func hostsThatHaveNotAnsweredLeavePlacesToOneThatHas() {
        // Given 300 silent hosts with one item each, every other line, between a live host's items
        var places = BatchPlaces(count: 600, share: 6, unprovenTotal: 6, firstPlaceReserve: 2, lookahead: 512)
        let host = { (index: Int) in index % 2 == 0 ? "silent\(index)" : "live" }

        // When the batch of 8 places is filled (the live host, not answered
        // yet, takes a second place only while 2 of the 6 are left for hosts
        // holding none; then the list is read to its end, and the oldest items
        // take the places left),
        #expect(fill(&places, upTo: 8, host: host) == [0, 1, 2, 3, 4, 6, 5, 7])
        // the live host answers, and three of its four items complete
        places.answered("live")
        for _ in 0..<3 { places.release(host: "live") }
        // Then their places go to the oldest items until the silent hosts hold 6
        #expect(fill(&places, upTo: 3, host: host) == [8, 9, 10])
        // and from then on every place the live host frees is its own (before,
        // every other one went to a silent host, until they held them all)
        for round in 0..<5 {
            places.release(host: "live")
            #expect(fill(&places, upTo: 1, host: host) == [11 + 2 * round])
        }
    }

    /// Places of hosts not answered are kept for the first place of hosts
    /// holding none, as many as there are slots: ten silent hosts of eight
    /// URLs each, ahead of a live host's URLs, held them all, and the live
    /// host was never tried.
    @Test func aHostNotTriedYetGetsAPlaceWhileOthersHoldTheirPerHost() {
        // Given ten hosts of eight items each, then forty items of host "live",
        // in a batch of 64 places at 16 jobs (hosts not answered hold 48 together)
        var places = BatchPlaces(count: 120, share: 32, unprovenShare: 8, unprovenTotal: 48, firstPlaceReserve: 16,
                                 lookahead: 4096)
        let host = { (index: Int) in index < 80 ? "silent\(index / 8)" : "live" }

        // When the places are filled
        let started = fill(&places, upTo: 64, host: host)

        // Then, as the list is read, the first four hosts take eight places
        // each, the other six and the live host one each (before, six hosts
        // took eight each, and the rest of the batch went to the next two)
        #expect(started.prefix(39) == ArraySlice(Array(0..<32) + stride(from: 32, through: 80, by: 8)))
        #expect(started.count == 64)
        #expect(places.inconsistency == nil)
        // and once the live host answered, the places it frees are its own, as
        // are those the silent hosts free (their attempts stall and wait to retry)
        places.answered("live")
        places.release(host: "live")
        #expect(fill(&places, upTo: 1, host: host) == [81])
        places.release(host: "silent0")
        #expect(fill(&places, upTo: 1, host: host) == [82])
        #expect(places.inconsistency == nil)
    }

    /// An item another process is downloading waits until nothing else is
    /// left to start, and a cancel counts it among the items never started.
    @Test func aDeferredItemComesAfterEverythingElse() {
        // Given six items of one host with a share of two, the first two in places
        var places = BatchPlaces(count: 6, share: 2, lookahead: 8)
        #expect(fill(&places, upTo: 2) { _ in "a" } == [0, 1])

        // When the first is deferred, its place goes to the next item, and the rest follow in order
        places.deferToEnd(0, host: "a")
        var order = fill(&places, upTo: 2, started: 1) { _ in "a" }
        for _ in 0..<4 {
            places.release(host: "a")
            order += fill(&places, upTo: 2, started: 1) { _ in "a" }
        }

        // Then the deferred item is last
        #expect(order == [2, 3, 4, 5, 0])
        #expect(places.next() == .none)

        // and one deferred again is counted when the list is abandoned
        places.deferToEnd(0, host: "a")
        #expect(places.abandonUnstarted() == 1)
        #expect(places.next() == .none)
    }

    /// Random lists, limits and turns of events (items completing, hosts
    /// answering, outages, items parked, unparked and sent to the end):
    /// every item starts and completes once, and nothing is left waiting
    /// with no place to take; the counts kept as sums add up at every step.
    @Test(arguments: 0..<200)
    func randomRunsStartEveryItemOnceAndKeepTheirCounts(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let count = Int.random(in: 1...300, using: &random)
        let hostCount = Int.random(in: 1...12, using: &random)
        let hosts = (0..<count).map { _ in "h\(Int.random(in: 0..<hostCount, using: &random))" }
        let width = Int.random(in: 2...12, using: &random)
        var places = BatchPlaces(count: count, share: max(1, width / 2), unprovenShare: Int.random(in: 1...3, using: &random),
                                 unprovenTotal: Int.random(in: 1...width, using: &random),
                                 lookahead: Int.random(in: 0...20, using: &random), outageLookahead: Int.random(in: 1...20, using: &random))
        var held: [Int] = []
        var started: [Int: Int] = [:]
        var completed = 0
        // Parked or deferred: started again once each.
        var sentBack: Set<Int> = []
        while completed < count {
            fill: while held.count < width {
                let taken: Int
                switch places.next() {
                case .none: break fill
                case .fresh(let index):
                    guard places.place(index, host: hosts[index]) else { continue }
                    taken = index
                case .setAside(let index, let host):
                    #expect(host == hosts[index])
                    taken = index
                }
                if sentBack.remove(taken) == nil { started[taken, default: 0] += 1 }
                held.append(taken)
            }
            guard !held.isEmpty else {
                Issue.record("seed \(seed): \(count - completed) items left with none to start")
                return
            }
            let host = "h\(Int.random(in: 0..<hostCount, using: &random))"
            let pick = Int.random(in: 0..<held.count, using: &random)
            switch Int.random(in: 0..<12, using: &random) {
            case 0..<6:
                places.release(host: hosts[held.remove(at: pick)])
                completed += 1
            case 6: places.answered(host)
            case 7: places.outageBegan(host)
            case 8: places.outageEnded(host)
            case 9 where places.mayPark:
                let index = held.remove(at: pick)
                places.park(index, host: hosts[index])
                sentBack.insert(index)
            case 10: places.unpark(host)
            case 11:
                let index = held.remove(at: pick)
                places.deferToEnd(index, host: hosts[index])
                sentBack.insert(index)
            default: break
            }
            if let problem = places.inconsistency {
                Issue.record("seed \(seed): \(problem)")
                return
            }
        }
        #expect(started.count == count && started.values.allSatisfy { $0 == 1 }, "seed \(seed)")
        #expect(places.next() == .none)
    }

    @Test func aListOfOneHostFillsTheBatchInItsOrder() {
        // Given one host and a share a third of the batch, with a short lookahead
        var places = BatchPlaces(count: 20, share: 2, lookahead: 3)

        // When the batch of 6 places is filled, and two items complete
        var order = fill(&places, upTo: 6) { _ in "a" }
        places.release(host: "a")
        places.release(host: "a")
        order += fill(&places, upTo: 6, started: 4) { _ in "a" }

        // Then the items started in the list's order, each once, and no more
        // than the lookahead was set aside
        #expect(order == Array(0..<8))
        #expect(places.setAsideCount <= 3)
    }

    /// `next()` and `place` are two steps (the URL is parsed between them,
    /// outside the batch's lock): a place that frees in between goes to the
    /// host's older items set aside, not to the one being placed.
    @Test func aPlaceFreedWhileAnItemIsParsedGoesToTheOlderItems() {
        var places = BatchPlaces(count: 10, share: 2, lookahead: 4)
        // Items 0 and 1 take a's share, 2–5 are set aside as the list is read
        // ahead, 2 takes the third place (the lookahead used up); then 6 is handed out
        #expect(fill(&places, upTo: 3) { _ in "a" } == [0, 1, 2])
        #expect(places.next() == .fresh(index: 6))
        // and, while it is parsed, two of a's items complete.
        places.release(host: "a")
        places.release(host: "a")
        let placed = places.place(6, host: "a")
        #expect(!placed)
        #expect(places.next() == .setAside(index: 3, host: "a"))
    }

    @Test func theLookaheadBoundsHowFarTheListIsReadPastAFullHost() {
        // Given a list of twenty items of host a, then one of b, and a lookahead of 4
        var places = BatchPlaces(count: 21, share: 2, lookahead: 4)
        let host = { (index: Int) in index < 20 ? "a" : "b" }

        // When the batch fills eight places
        let order = fill(&places, upTo: 8, host: host)

        // Then the places went to a in order, the items after them were read
        // and set aside only as far as the lookahead (items 8–10: the fourth
        // is read when a place is next asked for), and b's item is not read yet
        #expect(order == Array(0..<8))
        #expect(places.setAsideCount == 3)
        #expect(places.cursor == 11)
    }

    @Test func aHostInAnOutageDoesNotUseUpTheLookahead() {
        // Given a list of twelve items of host a with one of b at the end, a
        // lookahead of 2, and a in an outage once it holds its share
        var places = BatchPlaces(count: 13, share: 2, lookahead: 2)
        let host = { (index: Int) in index < 12 ? "a" : "b" }
        #expect(fill(&places, upTo: 2, host: host) == [0, 1])
        places.outageBegan("a")

        // When two more places are filled, b's item is reached past all of a's
        // set aside (which do not count against the lookahead), and then, the
        // list read to its end, a's oldest set-aside item takes the other place
        #expect(fill(&places, upTo: 4, started: 2, host: host) == [12, 2])
        #expect(places.setAsideCount == 0)
        #expect(places.next() == .setAside(index: 3, host: "a"))

        // Then once a answers again, its set-aside items count against the lookahead again
        places.outageEnded("a")
        #expect(places.setAsideCount == 8)
        #expect(places.abandonUnstarted() == 8)
    }

    @Test func theListIsReadPastAHostInAnOutageOnlyAsFarAsTheOutageLookahead() {
        // Given a long list of one host, in an outage once it holds its share,
        // and room for 5 of its items set aside
        var places = BatchPlaces(count: 1_000, share: 2, lookahead: 2, outageLookahead: 5)
        #expect(fill(&places, upTo: 2) { _ in "a" } == [0, 1])
        places.outageBegan("a")

        // When two more places are filled, the list is read no further than
        // 5 items set aside, and the oldest of them take the places
        #expect(fill(&places, upTo: 4, started: 2) { _ in "a" } == [2, 3])
        #expect(places.cursor == 8)

        // Then the list goes on in its order, reading one item for each taken
        places.release(host: "a")
        #expect(fill(&places, upTo: 4, started: 3) { _ in "a" } == [4])
        #expect(places.cursor == 9)
        #expect(places.abandonUnstarted() == 1_000 - 5)
    }

    @Test func parkedItemsWaitForTheEndOfTheList() {
        // Given two items of host a, in an outage, then four of host b, and two places
        var places = BatchPlaces(count: 6, share: 2, lookahead: 8)
        let host = { (index: Int) in index < 2 ? "a" : "b" }
        #expect(fill(&places, upTo: 2, host: host) == [0, 1])
        places.outageBegan("a")

        // When both of a's items fail and are parked
        #expect(places.mayPark)
        places.park(0, host: "a")
        places.park(1, host: "a")

        // Then b's items take the places, though a has room again
        #expect(fill(&places, upTo: 2, host: host) == [2, 3])
        places.release(host: "b")
        places.release(host: "b")
        #expect(fill(&places, upTo: 2, host: host) == [4, 5])
        // and a's take them only once the list is read to its end, when
        // parking more would only hand them out again
        #expect(!places.mayPark)
        places.release(host: "b")
        #expect(places.next() == .setAside(index: 0, host: "a"))
        #expect(places.next() == .setAside(index: 1, host: "a"))
        #expect(places.next() == .none)
    }

    @Test func parkedItemsTakePlacesAgainInListOrderOnceTheirHostAnswers() {
        // Given five items of host a, which holds one place, in an outage, then five of b
        var places = BatchPlaces(count: 10, share: 1, lookahead: 8)
        let host = { (index: Int) in index < 5 ? "a" : "b" }
        #expect(fill(&places, upTo: 2, host: host) == [0, 5])
        places.outageBegan("a")

        // When a's first two items fail in turn and are parked
        places.park(0, host: "a")
        #expect(places.next() == .setAside(index: 1, host: "a"))
        places.park(1, host: "a")

        // Then once a answers they go before its items set aside, in list order
        places.outageEnded("a")
        #expect(places.next() == .setAside(index: 0, host: "a"))
        places.release(host: "a")
        #expect(places.next() == .setAside(index: 1, host: "a"))
        places.release(host: "a")
        #expect(places.next() == .setAside(index: 2, host: "a"))
    }

    @Test func aCancelCountsParkedItems() {
        var places = BatchPlaces(count: 10, share: 1, lookahead: 8)
        #expect(fill(&places, upTo: 2) { index in index < 5 ? "a" : "b" } == [0, 5])
        places.outageBegan("a")
        places.park(0, host: "a")
        // Item 0 parked, 1–4 and 6–9 set aside.
        #expect(places.abandonUnstarted() == 9)
        #expect(places.next() == .none)
    }

    @Test func aCancelCountsTheItemsSetAsideAndThoseNotRead() {
        var places = BatchPlaces(count: 10, share: 1, lookahead: 8)
        #expect(fill(&places, upTo: 2) { index in index < 5 ? "a" : "b" } == [0, 5])
        // Items 1–4 are set aside, 6–9 not read yet.
        #expect(places.abandonUnstarted() == 8)
        #expect(places.next() == .none)
    }

    @Test func aHostsShareLeavesEverySlotsWorthOfPlacesToOtherHosts() {
        // Four times --per-host, when that leaves --jobs places to the others
        #expect(DownloadBatch.hostShare(width: 64, jobs: 16, perHost: 8) == 32)
        // and never more: --per-host as large as --jobs, or larger
        #expect(DownloadBatch.hostShare(width: 64, jobs: 16, perHost: 16) == 48)
        #expect(DownloadBatch.hostShare(width: 8, jobs: 2, perHost: 100) == 6)
        // The batch at its narrowest (twice --jobs) still counts hosts
        #expect(DownloadBatch.hostShare(width: 32, jobs: 16, perHost: 16) == 16)
        #expect(DownloadBatch.hostShare(width: 8, jobs: 1, perHost: 1) == 4)
    }
}
