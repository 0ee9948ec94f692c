import CCurl

/// Learns how many transfers at once a host takes when it takes fewer than
/// `--per-host`, and keeps to that many.
///
/// A server with a limit per client (a worker pool, a firewall's connection
/// limit, nginx's `limit_conn`) answers the connections it took and refuses,
/// closes or resets the rest, or answers them 503. Each of those used up a retry of its URL, and the retries came back
/// as many at once, to be turned away again: a server taking 3 connections
/// at 0.5 s a request failed 261 of 300 URLs at `--per-host 8`.
///
/// An attempt turned away (see `TurnAway`; not a timeout, which a slow start
/// looks like) while other transfers of the host run says that the host
/// takes no more than those others, when the host served one of them
/// meanwhile: the host's limit goes down to their number. A connection
/// turned away before any of them is served lowers it at once as a guess,
/// which stands when the host answers one of the transfers that ran
/// meanwhile (the host is up, and took those), and is dropped when it
/// answers a transfer started after the last one turned away (the failures
/// were an outage, such as a restart, that the others ended in too).
///
/// After `answersToRaise` answers at its limit, one more transfer is tried;
/// when that one is turned away too, the host waits twice as many answers
/// before the next try (up to `maxAnswersToRaise`), so a server with a fixed
/// limit turns away a handful of connections in a long list, and one whose
/// limit was for a busy spell gets its transfers back.
///
/// Owned by the engine's loop thread, like `SlotQueue`: no locks. Nothing
/// is looked up while no host has a limit of its own (the loop asks about
/// every answered transfer).
struct HostConcurrency {
    /// `--per-host`: no host goes above it.
    let ceiling: Int
    let firstAnswersToRaise: Int
    let maxAnswersToRaise: Int
    /// How long after it last served a transfer a host's busy answers still
    /// lower its limit before one stands.
    let busyMemory: Duration

    private var hosts: [String: Entry] = [:]
    /// When each host last ended an answered transfer (see `turnedAway`).
    private var lastServed: [String: ContinuousClock.Instant] = [:]
    /// Hosts whose limit has been told of (once a run), and hosts whose
    /// limit stood and is told of at their next answer: the first to stand
    /// is often a step on the way down, as the rest of a burst is turned away.
    private var told: Set<String> = []
    private var untold: Set<String> = []

    private struct Entry {
        /// The limit that stands (the ceiling until one does).
        var limit: Int
        /// A lower limit guessed from a connection turned away while others
        /// ran, and when the last such one ended.
        var guess: (limit: Int, lastTurnedAway: ContinuousClock.Instant)?
        /// Answers since the limit last changed.
        var answers = 0
        var answersToRaise: Int
        /// The limit before the last raise: a turn-away back down to it means the try failed.
        var raisedFrom: Int?

        var effective: Int { min(limit, guess?.limit ?? limit) }
    }

    /// A change of a host's limit for the slot queue, and whether to tell
    /// the user of it: the host's first limit that held through an answer
    /// (once a host).
    struct Change: Equatable {
        let limit: Int
        var tell = false
    }

    init(ceiling: Int, firstAnswersToRaise: Int = 8, maxAnswersToRaise: Int = 512, busyMemory: Duration = .seconds(10)) {
        self.busyMemory = busyMemory
        self.ceiling = max(1, ceiling)
        self.firstAnswersToRaise = max(1, firstAnswersToRaise)
        self.maxAnswersToRaise = max(self.firstAnswersToRaise, maxAnswersToRaise)
    }

    /// Whether an attempt that ended with `code` (libcurl's result) or
    /// `abort` (the loop's own), before any response began, was turned away
    /// at once: the connection was refused, or closed or reset without a
    /// word. Not a name that did not resolve, nor a timeout (a server slow to
    /// start looks the same as one that is full).
    static func wasTurnedAway(code: CURLcode, abort: TransferError?, madeConnection: Bool) -> Bool {
        switch code {
        case CURLE_COULDNT_CONNECT: !madeConnection
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR: madeConnection && abort == nil
        default: false
        }
    }

    /// The number of transfers `host` may run at once, when it has a limit of its own.
    func limit(for host: String) -> Int? {
        hosts.isEmpty ? nil : hosts[host]?.effective
    }

    /// How an attempt was turned away.
    enum TurnAway {
        /// The connection was refused, or closed or reset before a word
        /// (see `wasTurnedAway`).
        case connection
        /// The server answered 503 or 429 (nginx's `limit_conn` answers 503).
        case busy
    }

    /// An attempt at `host` that started at `started` was turned away
    /// (`how`) while `othersRunning` of the host's transfers ran, one of
    /// them with a success under way when `otherServed`. Returns the host's
    /// new limit when it changed.
    ///
    /// It stands at once when the host served another transfer meanwhile:
    /// one running with a success, or one that ended with its answer after
    /// this attempt began. Otherwise it is a guess (see the type), for a busy
    /// answer only while the host has served a transfer within `busyMemory`:
    /// a host that answers every request 503 is not full but down, and one
    /// at a time would only make it slower to say so. (A busy answer comes
    /// at once, often before the transfers the host took have their answers.)
    mutating func turnedAway(_ host: String, how: TurnAway, started: ContinuousClock.Instant, othersRunning: Int,
                             otherServed: Bool, at now: ContinuousClock.Instant) -> Change? {
        guard othersRunning > 0 else { return nil } // alone: says nothing of how many it takes
        let served = otherServed || lastServed[host].map { $0 >= started } == true
        if !served, how == .busy, !(lastServed[host].map { now - $0 < busyMemory } ?? false) {
            // Busy, and has served nobody for a while: down, not full. A guess goes.
            guard var entry = hosts[host], entry.guess != nil else { return nil }
            let before = entry.effective
            entry.guess = nil
            hosts[host] = entry.limit >= ceiling ? nil : entry
            return entry.effective == before ? nil : Change(limit: entry.effective)
        }
        var entry = hosts[host] ?? Entry(limit: ceiling, answersToRaise: firstAnswersToRaise)
        let before = entry.effective
        let lowered = max(1, min(before, othersRunning))
        entry.answers = 0
        var change: Change?
        if served {
            change = stand(lowered, in: &entry, host: host)
        } else {
            entry.guess = (lowered, now)
            if lowered != before { change = Change(limit: lowered) }
        }
        hosts[host] = entry
        return change
    }

    /// An attempt at `host` that started at `started` got its answer (not a
    /// busy one) and ended without a fault of the connection (a failed one
    /// may have been cut off by the trouble that turned the others away).
    /// Returns the host's new limit when it changed.
    mutating func answered(_ host: String, started: ContinuousClock.Instant, at now: ContinuousClock.Instant) -> Change? {
        lastServed[host] = now
        guard !hosts.isEmpty, var entry = hosts[host] else { return nil }
        let before = entry.effective
        var change: Change?
        if let guess = entry.guess {
            if started <= guess.lastTurnedAway {
                // It ran while the others were turned away, and was answered: the guess stands.
                change = stand(guess.limit, in: &entry, host: host)
            } else {
                // Started after them: they were the host's trouble, not its limit.
                entry.guess = nil
                if entry.effective != before { change = Change(limit: entry.effective) }
            }
        }
        if entry.guess == nil, entry.limit < ceiling, !untold.isEmpty, untold.remove(host) != nil {
            // The limit held through an answer: the burst that set it is over.
            told.insert(host)
            hosts[host] = entry
            return Change(limit: entry.effective, tell: true)
        }
        if change == nil, entry.limit < ceiling {
            entry.answers += 1
            if entry.answers >= entry.answersToRaise {
                entry.raisedFrom = entry.limit
                entry.limit += 1
                entry.answers = 0
                change = Change(limit: entry.limit)
            }
        }
        if entry.limit >= ceiling, entry.guess == nil {
            hosts[host] = nil // back to `--per-host`: nothing kept
            untold.remove(host)
            return change.map { _ in Change(limit: ceiling) }
        }
        hosts[host] = entry
        return change
    }

    /// Makes `limit` the standing limit of `host`.
    private mutating func stand(_ limit: Int, in entry: inout Entry, host: String) -> Change? {
        let before = entry.effective
        if let raisedFrom = entry.raisedFrom, limit <= raisedFrom {
            // The last try for one more was turned away: wait longer before the next.
            entry.answersToRaise = min(entry.answersToRaise * 2, maxAnswersToRaise)
        }
        entry.raisedFrom = nil
        entry.limit = min(entry.limit, limit)
        entry.guess = nil
        entry.answers = 0
        if entry.limit < ceiling, !told.contains(host) { untold.insert(host) }
        return entry.effective == before ? nil : Change(limit: entry.effective)
    }
}
