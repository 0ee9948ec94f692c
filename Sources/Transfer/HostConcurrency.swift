import CCurl

/// Learns how many transfers at once a host takes when it takes fewer than
/// `--per-host`, and keeps to that many.
///
/// A server with a limit per client (a worker pool, a firewall's connection
/// limit) answers the connections it took and refuses, closes or resets the
/// rest. Each of those used up a retry of its URL, and the retries came back
/// as many at once, to be turned away again: a server taking 3 connections
/// at 0.5 s a request failed 261 of 300 URLs at `--per-host 8`.
///
/// A connection turned away at once (refused, or closed or reset before a
/// response; not a timeout, which a slow start looks like) while other
/// transfers of the host run says that the host takes no more than those
/// others: the host's limit goes down to their number at once, as a guess.
/// It stands when the host answers one of the transfers that ran meanwhile
/// (the host is up, and took those), and is dropped when the host answers a
/// transfer started after the last one turned away without another being
/// turned away (the failures were an outage, such as a restart, that the
/// others ended in too). Where another transfer of the host already had its
/// answer, it stands at once.
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

    private var hosts: [String: Entry] = [:]
    /// Hosts a limit has stood for in this run (each is told of once).
    private var limited: Set<String> = []

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

    /// A change of a host's limit for the slot queue, and whether it is the
    /// first limit to stand for that host (worth telling the user once).
    struct Change: Equatable {
        let limit: Int
        let firstToStand: Bool
    }

    init(ceiling: Int, firstAnswersToRaise: Int = 8, maxAnswersToRaise: Int = 512) {
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

    /// An attempt at `host` was turned away at once (see the type) while
    /// `othersRunning` of its transfers ran, of which at least one had its
    /// answer when `othersAnswered`. Returns the host's new limit when it changed.
    mutating func turnedAway(_ host: String, othersRunning: Int, othersAnswered: Bool,
                             at now: ContinuousClock.Instant) -> Change? {
        guard othersRunning > 0 else { return nil } // alone: says nothing of how many it takes
        var entry = hosts[host] ?? Entry(limit: ceiling, answersToRaise: firstAnswersToRaise)
        let before = entry.effective
        let lowered = max(1, min(before, othersRunning))
        entry.answers = 0
        var change: Change?
        if othersAnswered {
            change = stand(lowered, in: &entry, host: host)
        } else {
            entry.guess = (lowered, now)
            if lowered != before { change = Change(limit: lowered, firstToStand: false) }
        }
        hosts[host] = entry
        return change
    }

    /// An attempt at `host` that started at `started` got its answer and
    /// ended without a fault of the connection (a failed one may have been
    /// cut off by the trouble that turned the others away). Returns the
    /// host's new limit when it changed.
    mutating func answered(_ host: String, started: ContinuousClock.Instant) -> Change? {
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
                if entry.effective != before { change = Change(limit: entry.effective, firstToStand: false) }
            }
        } else if entry.limit < ceiling {
            entry.answers += 1
            if entry.answers >= entry.answersToRaise {
                entry.raisedFrom = entry.limit
                entry.limit += 1
                entry.answers = 0
                change = Change(limit: entry.limit, firstToStand: false)
            }
        }
        if entry.limit >= ceiling, entry.guess == nil {
            hosts[host] = nil // back to `--per-host`: nothing kept
            return change.map { _ in Change(limit: ceiling, firstToStand: false) }
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
        let first = entry.limit < ceiling && limited.insert(host).inserted
        return entry.effective == before && !first ? nil : Change(limit: entry.effective, firstToStand: first)
    }
}
