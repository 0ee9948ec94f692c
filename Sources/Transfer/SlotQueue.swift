/// Decides which waiting transfers may start: at most `total` at once and at
/// most `perHost` against one host, first come first served, a full host
/// skipped rather than blocking the others. A transfer reaches libcurl only
/// with a slot, so queued items never start their timers.
///
/// A host queued with `probeFirst` (every host the engine sees) gets one
/// transfer until it has shown it is there and what it speaks (`answered`:
/// its TLS connection is made, or a response came) or that transfer ended:
/// then the rest start together, and libcurl puts them on that connection
/// as HTTP/2 streams, or opens connections for HTTP/1.1. Starting them all
/// at once would open a connection each; letting libcurl hold them back
/// (`CURLOPT_PIPEWAIT`) makes them wait inside libcurl, where a host that
/// never finishes its TLS handshake fails them one connect timeout after
/// another, with the stall clock running. And a host that never answers (a
/// name whose lookups time out, a server that takes connections and says
/// nothing) holds one slot, not `perHost`: two such hosts at the head of a
/// list held all 16 slots, and every live URL behind them waited 60 s.
///
/// A host `failing` (its attempts fail without an answer: see
/// `HostReachability`) runs one transfer at a time while a slot it would
/// take can go to another host, and up to its limit when none can, within
/// half the slots for all failing hosts together: its stalls do not hold
/// slots that live hosts need, and it is still tried about as fast as
/// before when nothing else waits, so it is given up about as soon.
///
/// Hosts not yet answered take half the slots at most while a host that has
/// answered has a transfer waiting that fits, or started one within
/// `answeredGrace` (its next one is on its way: the slot it freed must not
/// go to a probe meanwhile), and all of them otherwise: a host's first
/// transfer holds its slot a whole stall if the host takes connections and
/// never answers, and 300 such hosts in a list with one live host, at
/// `--jobs 2`, let 2 of its URLs through in a minute. (A list of hosts with
/// one URL each starts no answered host's transfer, and keeps every slot.)
///
/// Probes past that share took their slots when nothing answered waited;
/// should an answered host's transfer come while they hold every slot, one
/// of them gives its slot back (`probeShouldYield`, `putBack`): a host's
/// first transfer ends before its next is handed to the loop, and the slot
/// it freed went to a silent host's probe; at `--jobs 2` the live host's
/// other URLs then waited a whole stall.
///
/// Owned by the engine's loop thread: no locks and no suspension, so the slot
/// of a transfer that just finished goes to the next one in the same turn of
/// the loop, without a round trip through the task that waited for it.
struct SlotQueue<Element> {
    let total: Int
    let perHost: Int
    /// How long after an answered host's transfer started probes keep to
    /// half the slots though nothing else waits (see the type).
    let answeredGrace: Duration
    /// Slots in use, overall and per host (hosts with none are absent).
    private(set) var running = 0
    private(set) var runningPerHost: [String: Int] = [:]
    /// Elements waiting for a slot.
    private(set) var waitingCount = 0
    /// Whether an element of `host` waits for a slot.
    func hasWaiting(of host: String) -> Bool { waitingCount > 0 && waiting[host].map { $0.count > 0 } == true }

    /// Waiting elements per host, each in arrival order.
    private var waiting: [String: FIFO<(sequence: UInt64, element: Element)>] = [:]
    private var nextSequence: UInt64 = 0
    /// Hosts held to one transfer until their connection answers, and hosts
    /// whose connection has answered (or whose first transfer ended).
    private var probing: Set<String> = []
    private var probed: Set<String> = []
    /// Transfers running against hosts in `probing` (kept as a sum: the set may be large).
    private var runningOfProbingHosts = 0
    /// When a transfer of a host not in `probing` last started.
    private var answeredStartedAt: ContinuousClock.Instant?
    /// Hosts whose attempts fail without an answer (see the type).
    private var failing: Set<String> = []
    /// Hosts held below `perHost` (see `HostConcurrency`).
    private var limits: [String: Int] = [:]
    /// Hosts paused: how many more transfers each may start (0 while it is
    /// paused, 1 when one goes alone after a pause), however many of its
    /// transfers run already, within its other limits (see `HostRateLimits`).
    /// A start, not a cap: transfers begun before the pause may run on
    /// without keeping the one that goes alone from starting.
    private var holds: [String: Int] = [:]

    init(total: Int, perHost: Int, answeredGrace: Duration = .seconds(1)) {
        self.total = max(1, total)
        self.perHost = max(1, perHost)
        self.answeredGrace = answeredGrace
    }

    /// Queues `element` for a slot against `host`. With `probeFirst`, a host
    /// not seen before runs one transfer until `answered(host:)` (see the type).
    mutating func enqueue(_ element: Element, host: String, probeFirst: Bool = false) {
        if probeFirst, !probed.contains(host), runningPerHost[host] == nil { probing.insert(host) }
        nextSequence += 1
        waiting[host, default: FIFO()].append((nextSequence, element))
        waitingCount += 1
    }

    /// Takes a slot for the element that waited longest among the hosts with
    /// room, or returns nil when nothing waiting fits (or the slots left are
    /// kept from probes a moment: see the type; call again later).
    mutating func next(at now: ContinuousClock.Instant = .now) -> (element: Element, host: String)? {
        guard running < total, waitingCount > 0 else { return nil }
        // A failing host past its one transfer only when no other host takes the slot,
        // and failing hosts so in half the slots at most: the slots they take are held a
        // whole stall, and other hosts' transfers may come meanwhile (two silent hosts
        // took all 16 at an instant nothing else waited, and held them 30 s).
        // Hosts not yet answered past half the slots only when no answered host
        // takes the slot, nor started one a moment ago.
        let probesAtTheirShare = runningOfProbingHosts >= max(1, total / 2)
        let answeredMayCome = probesAtTheirShare && answeredStartedAt.map { now - $0 < answeredGrace } ?? false
        guard let host = (probesAtTheirShare ? bestHost(failingToTheirLimit: false, probingToo: false) : nil)
                ?? (answeredMayCome ? nil : bestHost(failingToTheirLimit: false))
                ?? (answeredMayCome || failing.isEmpty || runningOfFailingHosts >= max(1, total / 2) ? nil : bestHost(failingToTheirLimit: true)),
              let taken = waiting[host]?.removeFirst() else { return nil }
        if waiting[host]?.isEmpty == true { waiting[host] = nil }
        waitingCount -= 1
        running += 1
        runningPerHost[host, default: 0] += 1
        if probing.contains(host) {
            runningOfProbingHosts += 1
        } else if failing.isEmpty || !failing.contains(host) {
            answeredStartedAt = now
        }
        if !holds.isEmpty, let allowed = holds[host] { holds[host] = allowed - 1 }
        return (taken.element, host)
    }

    /// Whether a probe should give its slot back to a waiting transfer of
    /// a host that has answered (see the type): every slot is taken, probes
    /// hold more than their share, and such a transfer fits (not a failing
    /// host's: it would likely stall as well).
    var probeShouldYield: Bool {
        running >= total && runningOfProbingHosts > max(1, total / 2)
            && bestHost(failingToTheirLimit: false, probingToo: false, failingToo: false) != nil
    }

    /// Gives back the slot of `element`, a probe that has had no answer,
    /// and queues it again first of its host's (its host is still probed).
    mutating func putBack(_ element: Element, host: String) {
        release(host: host, endingProbe: false)
        // (Its start is given back too, should its host be held to a few.)
        if !holds.isEmpty, let allowed = holds[host] { holds[host] = allowed + 1 }
        nextSequence += 1
        waiting[host, default: FIFO()].prepend((nextSequence, element))
        waitingCount += 1
    }

    /// The host with room whose waiting element waited longest. A failing
    /// host has room for one transfer, unless `failingToTheirLimit`, and
    /// none unless `failingToo`; a host not yet answered for one, and for
    /// none unless `probingToo`.
    private func bestHost(failingToTheirLimit: Bool, probingToo: Bool = true, failingToo: Bool = true) -> String? {
        var best: (host: String, sequence: UInt64)?
        // Linear in the number of hosts with waiters: a handful in practice.
        for (host, queue) in waiting {
            let isProbing = probing.contains(host)
            if isProbing, !probingToo { continue }
            if !failingToo, !failing.isEmpty, failing.contains(host) { continue }
            let oneAtATime = isProbing || !failingToTheirLimit && !failing.isEmpty && failing.contains(host)
            let limit = oneAtATime ? 1 : limits.isEmpty ? perHost : limits[host] ?? perHost
            if !holds.isEmpty, let allowed = holds[host], allowed <= 0 { continue }
            guard let head = queue.first, runningPerHost[host, default: 0] < limit else { continue }
            if best.map({ head.sequence < $0.sequence }) ?? true { best = (host, head.sequence) }
        }
        return best?.host
    }

    /// Marks `host` as failing, or no longer (see the type).
    mutating func setFailing(_ host: String, _ isFailing: Bool) {
        if isFailing { failing.insert(host) } else if !failing.isEmpty { failing.remove(host) }
    }

    /// Whether `host` is marked failing.
    func isFailing(_ host: String) -> Bool { !failing.isEmpty && failing.contains(host) }

    /// Whether any host is marked failing.
    var anyFailing: Bool { !failing.isEmpty }

    /// Transfers of failing hosts running now.
    private var runningOfFailingHosts: Int { failing.reduce(0) { $0 + runningPerHost[$1, default: 0] } }

    /// Holds `host` to `limit` transfers at once (`perHost` or more: no limit of its own).
    mutating func setLimit(_ limit: Int, for host: String) {
        limits[host] = limit < perHost ? max(1, limit) : nil
    }

    /// Lets `host` start `starts` more transfers and no more (0: none), within
    /// its other limits, whatever of it runs already; nil ends the hold.
    mutating func setHold(_ starts: Int?, for host: String) {
        holds[host] = starts.map { max(0, $0) }
    }

    /// Whether `host` runs one transfer until its connection answers.
    func isProbing(_ host: String) -> Bool { probing.contains(host) }

    /// The first connection to `host` answered: its other transfers may
    /// start, and it is not failing (the loop marks it again should it be).
    mutating func answered(host: String) {
        endProbe(of: host)
        setFailing(host, false)
    }

    /// `host`'s other transfers may start.
    private mutating func endProbe(of host: String) {
        guard probing.remove(host) != nil else { return }
        probed.insert(host)
        runningOfProbingHosts -= runningPerHost[host, default: 0]
    }

    /// Gives back a slot taken by `next()`. A host's first transfer that ends
    /// without an answer (a refused connection, a TLS failure) ends its probe
    /// too, unless `endingProbe` is false (it was cancelled): the others try
    /// connections of their own at once, in parallel.
    mutating func release(host: String, endingProbe: Bool = true) {
        running -= 1
        let left = runningPerHost[host, default: 1] - 1
        runningPerHost[host] = left > 0 ? left : nil
        if probing.contains(host) { runningOfProbingHosts -= 1 }
        if endingProbe { endProbe(of: host) }
    }

    /// What is wrong with the counts kept as sums, if anything (for tests).
    var inconsistency: String? {
        let probes = probing.reduce(0) { $0 + runningPerHost[$1, default: 0] }
        if probes != runningOfProbingHosts { return "runningOfProbingHosts \(runningOfProbingHosts), transfers of probing hosts \(probes)" }
        if runningPerHost.values.reduce(0, +) != running { return "runningPerHost does not add up to running" }
        if waiting.values.reduce(0, { $0 + $1.count }) != waitingCount { return "waiting does not add up to waitingCount" }
        if running > total { return "\(running) running of \(total) slots" }
        return nil
    }

    /// Removes and returns the first waiting element that matches (a cancelled transfer).
    mutating func removeWaiting(where matches: (Element) -> Bool) -> Element? {
        for (host, var queue) in waiting {
            guard let removed = queue.remove(where: { matches($0.element) }) else { continue }
            waiting[host] = queue.isEmpty ? nil : queue
            waitingCount -= 1
            return removed.element
        }
        return nil
    }

    /// Removes and returns every element waiting for `host`, oldest first (a host given up).
    mutating func removeAllWaiting(host: String) -> [Element] {
        guard let queue = waiting.removeValue(forKey: host) else { return [] }
        let elements = queue.elements.map(\.element)
        waitingCount -= elements.count
        return elements
    }

    /// Removes and returns every waiting element (shutting down).
    mutating func removeAllWaiting() -> [Element] {
        let all = waiting.values.flatMap { $0.elements }.sorted { $0.sequence < $1.sequence }.map(\.element)
        waiting.removeAll()
        waitingCount = 0
        return all
    }
}

/// A first-in first-out queue on an array: appends at the end, takes from a
/// moving head (clearing the taken place, so nothing taken is kept alive),
/// and compacts once the taken part outweighs the rest.
struct FIFO<Element> {
    private var storage: [Element?] = []
    private var head = 0

    var isEmpty: Bool { head == storage.count }
    var count: Int { storage.count - head }
    var first: Element? { isEmpty ? nil : storage[head] }
    /// The elements still queued, oldest first.
    var elements: [Element] { storage[head...].compactMap { $0 } }

    mutating func append(_ element: Element) {
        storage.append(element)
    }

    /// Puts `element` at the head of the queue.
    mutating func prepend(_ element: Element) {
        if head > 0 {
            head -= 1
            storage[head] = element
        } else {
            storage.insert(element, at: 0)
        }
    }

    mutating func removeFirst() -> Element? {
        guard !isEmpty else { return nil }
        let element = storage[head]
        storage[head] = nil
        head += 1
        if head >= 32, head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }

    mutating func remove(where matches: (Element) -> Bool) -> Element? {
        guard let index = storage[head...].firstIndex(where: { $0.map(matches) ?? false }) else { return nil }
        return storage.remove(at: index)
    }
}
