/// Which item of a batch takes the next free place, so that the items of one
/// host cannot fill a batch while items of other hosts wait behind them.
///
/// A batch keeps `width` items in flight (see `DownloadBatch`), but a host
/// runs at most `--per-host` transfers. When the list begins with many URLs
/// of one host, they took every place, and the other hosts' URLs waited for
/// them: 100 URLs of a name whose lookups timed out held 200 URLs of a
/// working host back for 5 s (alone they took 0.1 s). So an item whose host
/// already holds `share` places is set aside (its index only: no partial
/// opened, no descriptor held) and the list is read on for items of other
/// hosts, up to `lookahead` items set aside. A set-aside item takes the next
/// place its host has room for, before any later item of the list; when the
/// lookahead is used up, or the list is read to its end, the oldest set-aside
/// item takes a free place whatever its host, so the batch stays full and a
/// list of one host keeps its order.
///
/// Except for a host in an outage (its URLs fail without an answer, see
/// `HostReachability`): its set-aside items do not count against the
/// lookahead, and take no place beyond its share until the list is read to
/// its end or the host answers again. With 20,000 URLs of a refusing port and
/// a good URL every ten lines, the dead URLs filled the lookahead, then every
/// place, and most good URLs waited 30 s for the host to be given up.
///
/// A host that has not answered yet in the batch holds at most
/// `unprovenShare` places (its `--per-host`): the engine runs one transfer
/// of it until it answers (see `SlotQueue`), so more would only wait, and
/// two hosts that never answer held every place between them, and the live
/// URLs after them waited a minute for both to be given up.
///
/// Hosts that have not answered yet hold `unprovenTotal` places at most
/// together (`DownloadBatch` leaves `--jobs` to the others): 300 hosts
/// that take connections and never answer, one URL each, every other line
/// of a list, filled every place with URLs waiting for the one slot the
/// engine gives such hosts at a time, and the live URLs between them waited
/// for them all, 30 s a stall. An item held back by that limit waits in
/// list order (`awaitingRoom`) and counts against the lookahead: the list
/// is read on for the URLs of hosts that answered. Some of those places
/// (`firstPlaceReserve`: `--jobs`, half of them at most) are kept for the
/// first place of hosts that hold none, as many as can be tried at once:
/// only one transfer of a host runs until it answers, and 10 silent hosts of
/// 8 URLs each, ahead of a live host's, held them all with URLs that could
/// not run; the live host was never tried, so never answered, and none of
/// its 300 files was stored in a minute.
///
/// An item that could not reach its host, and failed while as many items
/// as may wait to retry already do, is parked (`park(_:host:)`): it gives
/// its place back and holds no partial until its host answers or another of
/// its URLs has failed for good (`unpark(_:)`), or nothing else is left to
/// start. Such items used to keep their places while they waited: 2,000
/// URLs of 200 refused hosts mixed into 2,000 live ones filled the batch,
/// and 903 live URLs waited 31 s for the dead hosts to be given up.
///
/// An item whose partial another process holds (it is downloading the same
/// URL into the same cache) goes to the end (`deferToEnd(_:host:)`): it is
/// taken once nothing else is left to start, when the other process has
/// likely stored it.
///
/// Not thread-safe: the batch holds it under its lock.
struct BatchPlaces {
    /// Items in the list.
    let count: Int
    /// The places a host may hold while other hosts' items may be waiting
    /// (`DownloadBatch.hostShare`: less than the batch's width).
    let share: Int
    /// The places a host may hold until it has answered (`answered(_:)`).
    let unprovenShare: Int
    /// The places all hosts that have not answered may hold together.
    let unprovenTotal: Int
    /// Of those, the places only a host holding none may take (see the type).
    let firstPlaceReserve: Int
    /// The most items set aside at once: how far the list is read ahead
    /// (one at least: with none, no item of the list was ever handed out).
    let lookahead: Int
    /// The most items of hosts in an outage set aside, and items parked, at once. Past it, they
    /// take free places as at the end of the list: one 429 in a list of a
    /// million URLs of one host would otherwise read and hold the whole list.
    let outageLookahead: Int

    /// The next index of the list not yet looked at.
    private(set) var cursor = 0
    /// Places held, per host (hosts holding none are absent).
    private var placesPerHost: [String: Int] = [:]
    /// Set-aside indices per host, each in list order.
    private var setAside: [String: FIFO<Int>] = [:]
    /// Items set aside that count against the lookahead (those of hosts in an outage do not).
    private(set) var setAsideCount = 0
    /// Items set aside of hosts in an outage.
    private var outageSetAsideCount = 0
    /// Hosts in an outage.
    private var inOutage: Set<String> = []
    /// Hosts that have answered in this batch.
    private var proven: Set<String> = []
    /// Places held by items of hosts not in `proven`.
    private var heldByUnproven = 0
    /// Items held back by `unprovenTotal`, in list order (counted in
    /// `setAsideCount`), and how many of them each host has. A host's later
    /// items join them, so that its items start in list order.
    private var awaitingRoom = FIFO<(index: Int, host: String)>()
    private var awaitingPerHost: [String: Int] = [:]
    /// Parked items per host, each in the order they were parked (counted
    /// in `outageSetAsideCount`).
    private var parked: [String: FIFO<Int>] = [:]
    /// Hosts with items parked, taken in turn at the end of the list (a
    /// host may be listed again, or after its items were unparked).
    private var parkedHosts = FIFO<String>()
    /// Items sent to the end of the list, in the order they were (see the type).
    private var deferred = FIFO<(index: Int, host: String)>()

    init(count: Int, share: Int, unprovenShare: Int? = nil, unprovenTotal: Int? = nil, firstPlaceReserve: Int? = nil,
         lookahead: Int, outageLookahead: Int? = nil) {
        self.count = count
        self.share = share
        self.unprovenShare = min(share, max(1, unprovenShare ?? share))
        self.unprovenTotal = max(1, unprovenTotal ?? count)
        self.firstPlaceReserve = min(self.unprovenTotal / 2, max(0, firstPlaceReserve ?? self.unprovenTotal))
        self.lookahead = max(1, lookahead)
        self.outageLookahead = max(0, outageLookahead ?? 16 * lookahead)
    }

    /// What `next()` hands out.
    enum Next: Equatable {
        /// An item not looked at yet: parse its URL, then `place` it.
        case fresh(index: Int)
        /// A set-aside item, already holding its place.
        case setAside(index: Int, host: String)
        /// Nothing left to start.
        case none
    }

    /// The item that takes a free place: the oldest set-aside item whose host
    /// has room, else the next item of the list while the lookahead lasts,
    /// else the oldest set-aside item of a host not in an outage, else (the
    /// list read to its end, or the outage lookahead used up) the oldest
    /// set-aside item, else a parked one, else (at the end of the list) a
    /// deferred one.
    mutating func next() -> Next {
        if let taken = takeOldestSetAside(.withRoom, awaitingToo: heldByUnproven < unprovenTotal) {
            return .setAside(index: taken.index, host: taken.host)
        }
        if cursor < count, setAsideCount < lookahead, outageSetAsideCount < outageLookahead {
            defer { cursor += 1 }
            return .fresh(index: cursor)
        }
        if let taken = takeOldestSetAside(.notInOutage, awaitingToo: true) {
            return .setAside(index: taken.index, host: taken.host)
        }
        if cursor == count || outageSetAsideCount >= outageLookahead {
            if let taken = takeOldestSetAside(.any, awaitingToo: true) {
                return .setAside(index: taken.index, host: taken.host)
            }
            if let (index, host) = takeParked() { return .setAside(index: index, host: host) }
            if cursor == count, let item = deferred.removeFirst() {
                hold(item.host)
                return .setAside(index: item.index, host: item.host)
            }
        }
        return .none
    }

    /// The hosts whose set-aside items `next()` may take.
    private enum Eligible { case withRoom, notInOutage, any }

    /// Takes the oldest set-aside item of an `eligible` host, or the oldest
    /// item awaiting room if `awaitingToo` and it comes first; the item then
    /// holds a place.
    private mutating func takeOldestSetAside(_ eligible: Eligible, awaitingToo: Bool) -> (index: Int, host: String)? {
        while true {
            let setAsideHost = switch eligible {
            case .withRoom: oldestSetAside(where: hasRoom)
            case .notInOutage: oldestSetAside(where: { !inOutage.contains($0) })
            case .any: oldestSetAside(where: { _ in true })
            }
            let setAsideHead = setAsideHost.flatMap { setAside[$0]?.first }
            guard awaitingToo, let awaiting = awaitingRoom.first, setAsideHead.map({ awaiting.index < $0 }) ?? true else {
                guard let host = setAsideHost, let index = takeSetAside(of: host) else { return nil }
                return (index, host)
            }
            _ = awaitingRoom.removeFirst()
            let left = awaitingPerHost[awaiting.host, default: 1] - 1
            awaitingPerHost[awaiting.host] = left > 0 ? left : nil
            // Its host took its own share meanwhile, or all a host holding a
            // place may of the room for hosts not answered: it waits with the
            // host's others, ahead of them (its later items are still awaiting room).
            if !hasRoom(awaiting.host) {
                setAside[awaiting.host, default: FIFO()].append(awaiting.index)
                continue
            }
            setAsideCount -= 1
            hold(awaiting.host)
            return awaiting
        }
    }

    /// Whether an item of `host` may take a place now: within its share, and
    /// if it has not answered, within `unprovenTotal`, less the reserve for
    /// hosts holding none if it holds one.
    private func hasRoom(_ host: String) -> Bool {
        let held = placesPerHost[host, default: 0]
        guard held < share(of: host) else { return false }
        return proven.contains(host) || heldByUnproven < (held == 0 ? unprovenTotal : unprovenTotal - firstPlaceReserve)
    }

    /// An item of `host` takes a place.
    private mutating func hold(_ host: String) {
        placesPerHost[host, default: 0] += 1
        if !proven.contains(host) { heldByUnproven += 1 }
    }

    /// `host`'s items awaiting room wait with its set-aside ones, in list
    /// order: it answered, or is in an outage (whose items are set aside so).
    private mutating func stopAwaitingRoom(_ host: String) {
        guard awaitingPerHost.removeValue(forKey: host) != nil else { return }
        // Linear in the items awaiting room, once per host that had some.
        var kept = FIFO<(index: Int, host: String)>()
        var moved: [Int] = []
        while let item = awaitingRoom.removeFirst() {
            if item.host == host { moved.append(item.index) } else { kept.append(item) }
        }
        awaitingRoom = kept
        mergeIntoSetAside(moved, of: host)
    }

    /// Adds `indices` to `host`'s set-aside items, keeping them in list order.
    private mutating func mergeIntoSetAside(_ indices: [Int], of host: String) {
        var queue = FIFO<Int>()
        for index in ((setAside[host]?.elements ?? []) + indices).sorted() { queue.append(index) }
        setAside[host] = queue
    }

    /// Whether an item parked now would wait for another to take its place:
    /// not once the list is read to its end, nor when it would use up the
    /// outage lookahead (parked items count against it), where `next()`
    /// hands parked items out again at once.
    var mayPark: Bool { cursor < count && outageSetAsideCount + 1 < outageLookahead }

    /// The item `index` of `host`, which held a place, could not reach its
    /// host and waits without the place (see the type's notes).
    mutating func park(_ index: Int, host: String) {
        release(host: host)
        if parked[host] == nil { parkedHosts.append(host) }
        parked[host, default: FIFO()].append(index)
        outageSetAsideCount += 1
    }

    /// The item `index` of `host`, which held a place, gives it up and waits
    /// until nothing else is left to start (see the type's notes).
    mutating func deferToEnd(_ index: Int, host: String) {
        release(host: host)
        deferred.append((index, host))
    }

    /// `host`'s parked items are set aside again, in list order, to take
    /// places as its other items do: it answered, or its other URLs failed.
    mutating func unpark(_ host: String) {
        guard let items = parked.removeValue(forKey: host)?.elements else { return }
        outageSetAsideCount -= items.count
        countSetAside(items.count, of: host)
        mergeIntoSetAside(items, of: host)
    }

    /// A parked item, its hosts taken in turn, which then holds a place.
    private mutating func takeParked() -> (Int, String)? {
        while let host = parkedHosts.removeFirst() {
            guard let index = parked[host]?.removeFirst() else { continue }
            if parked[host]?.isEmpty == true { parked[host] = nil } else { parkedHosts.append(host) }
            outageSetAsideCount -= 1
            hold(host)
            return (index, host)
        }
        return nil
    }

    /// The places `host` may hold now.
    private func share(of host: String) -> Int {
        unprovenShare == share || proven.contains(host) ? share : unprovenShare
    }

    /// `host` answered (a response began): it may hold its whole share, and
    /// its places no longer count against `unprovenTotal`.
    mutating func answered(_ host: String) {
        guard proven.insert(host).inserted else { return }
        heldByUnproven -= placesPerHost[host, default: 0]
        stopAwaitingRoom(host)
    }

    /// `host`'s URLs fail without an answer in an outage: its items set aside wait
    /// without holding up the lookahead.
    mutating func outageBegan(_ host: String) {
        guard inOutage.insert(host).inserted else { return }
        stopAwaitingRoom(host)
        let waiting = setAside[host]?.count ?? 0
        setAsideCount -= waiting
        outageSetAsideCount += waiting
    }

    /// `host` answered again.
    mutating func outageEnded(_ host: String) {
        unpark(host)
        guard !inOutage.isEmpty, inOutage.remove(host) != nil else { return }
        let waiting = setAside[host]?.count ?? 0
        setAsideCount += waiting
        outageSetAsideCount -= waiting
    }

    /// A fresh item's host is known: the item takes a place (true), or is set
    /// aside (false) because its host holds its share, or has older items set
    /// aside (a place freed since `next()` handed this one out is theirs: a
    /// one-host list started items thousands of lines ahead among its first).
    /// Past the lookahead too: `next()` then hands out the oldest set-aside
    /// item, and only the items handed out meanwhile can go past it.
    mutating func place(_ index: Int, host: String) -> Bool {
        // The first place of a host held back by `unprovenTotal`: it waits in
        // list order, and so do its host's later items. (A host holding places
        // waits for room of its own, as for its share.)
        let holdsNone = placesPerHost[host] == nil
        if awaitingPerHost[host] != nil || holdsNone && !hasRoom(host) && setAside[host] == nil && !inOutage.contains(host) {
            awaitingRoom.append((index, host))
            awaitingPerHost[host, default: 0] += 1
            setAsideCount += 1
            return false
        }
        if !hasRoom(host) || setAside[host] != nil {
            setAside[host, default: FIFO()].append(index)
            countSetAside(1, of: host)
            return false
        }
        hold(host)
        return true
    }

    /// An item of `host` gave its place up (it completed, or waits to retry elsewhere).
    mutating func release(host: String) {
        assert(placesPerHost[host] != nil, "a place given back twice")
        let left = placesPerHost[host, default: 1] - 1
        placesPerHost[host] = left > 0 ? left : nil
        if !proven.contains(host) { heldByUnproven -= 1 }
    }

    /// Ends the list (a cancel): returns how many items will now never
    /// start, those not looked at and those set aside.
    mutating func abandonUnstarted() -> Int {
        let unstarted = max(0, count - cursor) + setAsideCount + outageSetAsideCount + deferred.count
        cursor = count
        deferred = FIFO()
        setAside.removeAll()
        awaitingRoom = FIFO()
        awaitingPerHost.removeAll()
        parked.removeAll()
        parkedHosts = FIFO()
        setAsideCount = 0
        outageSetAsideCount = 0
        return unstarted
    }

    /// What is wrong with the counts kept as sums, if anything (for tests):
    /// each is worked out again from what it sums.
    var inconsistency: String? {
        let unproven = placesPerHost.filter { !proven.contains($0.key) }.values.reduce(0, +)
        if unproven != heldByUnproven { return "heldByUnproven \(heldByUnproven), places of hosts not answered \(unproven)" }
        if awaitingPerHost.values.reduce(0, +) != awaitingRoom.count { return "awaitingPerHost does not add up to awaitingRoom" }
        let outageItems = setAside.filter { inOutage.contains($0.key) }.values.reduce(0) { $0 + $1.count }
            + parked.values.reduce(0) { $0 + $1.count }
        let otherItems = setAside.filter { !inOutage.contains($0.key) }.values.reduce(0) { $0 + $1.count } + awaitingRoom.count
        if outageItems != outageSetAsideCount { return "outageSetAsideCount \(outageSetAsideCount), items \(outageItems)" }
        if otherItems != setAsideCount { return "setAsideCount \(setAsideCount), items \(otherItems)" }
        if placesPerHost.values.contains(where: { $0 <= 0 }) { return "a host holds no place but is listed" }
        return nil
    }

    /// Adds `items` to the set-aside count `host`'s items go in: the
    /// lookahead's, or that of hosts in an outage.
    private mutating func countSetAside(_ items: Int, of host: String) {
        if inOutage.isEmpty || !inOutage.contains(host) { setAsideCount += items } else { outageSetAsideCount += items }
    }

    /// The host whose oldest set-aside item comes first in the list among
    /// the hosts that pass `eligible`. Linear in the hosts with items set
    /// aside: few, since a host needs a whole share in flight to have any.
    private func oldestSetAside(where eligible: (String) -> Bool) -> String? {
        guard setAsideCount + outageSetAsideCount > 0 else { return nil }
        var best: (host: String, index: Int)?
        for (host, queue) in setAside where eligible(host) {
            guard let head = queue.first else { continue }
            if best.map({ head < $0.index }) ?? true { best = (host, head) }
        }
        return best?.host
    }

    /// Takes the oldest set-aside item of `host`, which then holds a place.
    private mutating func takeSetAside(of host: String) -> Int? {
        // In place: a copy of the queue out of the dictionary would copy its storage.
        guard let index = setAside[host]?.removeFirst() else { return nil }
        if setAside[host]?.isEmpty == true { setAside[host] = nil }
        countSetAside(-1, of: host)
        hold(host)
        return index
    }
}
