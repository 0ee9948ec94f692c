import CCurl

/// Learns how many transfers at once a host takes when it takes fewer than
/// `--per-host`, and keeps to that many.
///
/// A server with a limit per client (a worker pool, a firewall's connection
/// limit, nginx's `limit_conn`) serves the connections it took and refuses,
/// closes or resets the rest, or answers them 503. Each of those used up a
/// retry of its URL, and the retries came back as many at once, to be turned
/// away again: a server taking 3 connections at 0.5 s a request failed 261
/// of 300 URLs at `--per-host 8`, and nginx's `limit_conn 3` 256 of 300.
///
/// An attempt turned away (see `TurnAway`; not a timeout, which a slow start
/// looks like) while other transfers of the host run, fewer than its limit,
/// within a round of answers (as many as the limit) after another one was,
/// says that the host takes fewer, once the host is seen to serve them: the
/// host's limit goes down by one. (One turned away alone may be a stray: a
/// cache in front of the host that failed one fetch.) A burst of them, as
/// when a list starts against a host that takes 2, takes it down step by
/// step. It
/// stands at once when the host served a transfer meanwhile; otherwise it
/// is a guess, which stands when the host answers one of the transfers that
/// ran meanwhile (the host is up, and took those), and is dropped when it
/// answers a transfer started after the last one turned away (the failures
/// were an outage, such as a restart, that the others ended in too). A host
/// that answers 503 and has served nothing for `busyMemory` is down, not
/// full: its busy answers lower nothing.
///
/// After `answersToRaise` answers at its limit, one more transfer is tried.
/// When the host turns that many away again before a round of answers at
/// the new limit, the host waits twice as many answers before the next try
/// (up to `maxAnswersToRaise`), so a server with a fixed limit turns away a
/// handful of connections in a long list; a try that holds for a round
/// brings the wait back to the first, so one whose limit was for a busy
/// spell gets its transfers back. Two tries turned away in a row show a
/// limit the host keeps to: the user is told of it then, once.
///
/// Owned by the engine's loop thread, like `SlotQueue`: no locks. An
/// answered transfer costs one write (when its host last served one); the
/// rest is looked up only while some host has a limit or turned one away
/// lately. Kept for the run: some tens of bytes a host.
struct HostConcurrency {
    /// `--per-host`: no host goes above it.
    let ceiling: Int
    let firstAnswersToRaise: Int
    let maxAnswersToRaise: Int
    /// How long after it last served a transfer a host's busy answers still
    /// lower its limit (as a guess).
    let busyMemory: Duration

    private var hosts: [String: Entry] = [:]
    /// When each host last ended an answered transfer (see `turnedAway`).
    private var lastServed: [String: ContinuousClock.Instant] = [:]
    /// Hosts whose limit has been told of (once a run).
    private var told: Set<String> = []

    private struct Entry {
        /// The limit that stands (the ceiling until one does).
        var limit: Int
        /// A lower limit guessed from an attempt turned away before the host
        /// was seen to serve the others, and when the last such one ended.
        var guess: (limit: Int, lastTurnedAway: ContinuousClock.Instant)?
        /// Answers since the limit last changed.
        var answers = 0
        var answersToRaise: Int
        /// The limit before the last raise, until a round of answers at the
        /// raised limit: a turn-away back down to it before then means the
        /// try failed.
        var raisedFrom: Int?
        /// Tries turned away in a row.
        var failedTries = 0
        /// Answers since the host last turned an attempt away (nil: none yet).
        var sinceTurnAway: Int?

        var effective: Int { min(limit, guess?.limit ?? limit) }
    }

    /// A change of a host's limit for the slot queue, and whether to tell
    /// the user of it (once a host: see `turnedAway`).
    struct Change: Equatable {
        let limit: Int
        var tell = false
    }

    /// How an attempt was turned away.
    enum TurnAway {
        /// The connection was refused, or closed or reset before a word
        /// (see `wasTurnedAway`).
        case connection
        /// The host answered 503 (nginx's `limit_conn` does). Not 429: a
        /// rate limit, which fewer transfers at once do not meet, and which
        /// `Retry-After` schedules.
        case busy
    }

    init(ceiling: Int, firstAnswersToRaise: Int = 8, maxAnswersToRaise: Int = 512, busyMemory: Duration = .seconds(10)) {
        self.ceiling = max(1, ceiling)
        self.firstAnswersToRaise = max(1, firstAnswersToRaise)
        self.maxAnswersToRaise = max(self.firstAnswersToRaise, maxAnswersToRaise)
        self.busyMemory = busyMemory
    }

    /// Whether an attempt that ended with `code` (libcurl's result) or
    /// `abort` (the loop's own), before any response began, was turned away
    /// at once: the connection was refused, or closed or reset without a
    /// word. Not a name that did not resolve, nor a timeout (a server slow to
    /// start looks the same as one that is full), nor a TLS handshake cut
    /// off (`madeConnection` is set once TLS is through).
    static func wasTurnedAway(code: CURLcode, abort: TransferError?, madeConnection: Bool) -> Bool {
        switch code {
        case CURLE_COULDNT_CONNECT: !madeConnection
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR: madeConnection && abort == nil
        default: false
        }
    }

    /// The number of transfers `host` may run at once, when it has a limit of
    /// its own (the slot queue learns it from each `Change`).
    func limit(for host: String) -> Int? {
        hosts.isEmpty ? nil : hosts[host]?.effective
    }

    /// An attempt at `host` that started at `started` was turned away
    /// (`how`) while `othersRunning` of the host's transfers ran. For a busy
    /// answer, `otherServing` says one of them has a success under way: the
    /// host serves others as it sends this one away. (Not for a connection turned
    /// away: when a server goes, transfers whose ends the loop has not yet
    /// read still show their successes.) Returns the host's new limit when
    /// it changed.
    mutating func turnedAway(_ host: String, how: TurnAway, started: ContinuousClock.Instant, othersRunning: Int,
                             otherServing: Bool = false, at now: ContinuousClock.Instant) -> Change? {
        guard othersRunning > 0 else { return nil } // alone: says nothing of how many it takes
        let servedMeanwhile = servedMeanwhile(host, how: how, started: started, otherServing: otherServing)
        if !servedMeanwhile, how == .busy, !(lastServed[host].map { now - $0 < busyMemory } ?? false) {
            // Busy, and has served nobody for a while: down, not full. A guess goes.
            guard var entry = hosts[host], entry.guess != nil else { return nil }
            let before = entry.effective
            entry.guess = nil
            hosts[host] = entry.limit >= ceiling ? nil : entry
            return entry.effective == before ? nil : Change(limit: entry.effective)
        }
        var entry = hosts[host] ?? Entry(limit: ceiling, answersToRaise: firstAnswersToRaise)
        let before = entry.effective
        // One turn-away alone may be a stray (a cache's failed fetch from its backend):
        // a limit turns them away one after another, within a round of answers.
        let corroborated = entry.sinceTurnAway.map { $0 < before } ?? false
        entry.sinceTurnAway = 0
        // A step at a time: the others running may include turn-aways of the same
        // burst the loop has not read yet, and a stray pair of a flaky host should
        // cost one transfer, not half of them. Not while more ran than the limit
        // (stragglers of a burst already counted).
        let lowered = max(1, before - 1)
        guard corroborated, othersRunning < before else {
            hosts[host] = entry
            return nil
        }
        if let raisedFrom = entry.raisedFrom, lowered <= raisedFrom {
            // The last try for one more was turned away within its first round: wait longer before the next.
            entry.answersToRaise = min(entry.answersToRaise * 2, maxAnswersToRaise)
            entry.failedTries += 1
        }
        entry.raisedFrom = nil
        entry.answers = 0
        if servedMeanwhile {
            stand(lowered, in: &entry)
        } else {
            entry.guess = (lowered, now)
        }
        hosts[host] = entry
        return Change(limit: entry.effective, tell: shouldTell(entry, host: host))
    }

    /// Whether to tell of `host`'s limit now: once it has turned two tries
    /// in a row away, a limit it keeps to, and the limit stands (once a run).
    private mutating func shouldTell(_ entry: Entry, host: String) -> Bool {
        entry.guess == nil && entry.failedTries >= 2 && entry.limit < ceiling && told.insert(host).inserted
    }

    /// Whether `host` served another transfer while an attempt that started at
    /// `started` was turned away (`how`): one that ended answered after it
    /// began, or, for a busy answer, one with a success under way
    /// (`otherServing`; see `turnedAway`).
    private func servedMeanwhile(_ host: String, how: TurnAway, started: ContinuousClock.Instant, otherServing: Bool) -> Bool {
        lastServed[host].map { $0 >= started } == true || (how == .busy && otherServing)
    }

    /// Whether an attempt `turnedAway(…)` was just told of was turned away for
    /// want of room: the host served others meanwhile, and is held to fewer
    /// transfers now (a stray 503 of a host without a limit is the URL's).
    /// That is mediafetch's own doing: its retry is not the URL's
    /// (`TransferEngine.perform`).
    func wasForWantOfRoom(_ host: String, how: TurnAway, started: ContinuousClock.Instant, otherServing: Bool) -> Bool {
        servedMeanwhile(host, how: how, started: started, otherServing: otherServing) && (limit(for: host) ?? ceiling) < ceiling
    }

    /// An attempt at `host` that started at `started` got its answer (not a
    /// busy one) and ended without a fault of the connection (a failed one
    /// may have been cut off by the trouble that turned the others away).
    /// Returns the host's new limit when it changed.
    mutating func answered(_ host: String, started: ContinuousClock.Instant, at now: ContinuousClock.Instant) -> Change? {
        lastServed[host] = now
        guard !hosts.isEmpty, var entry = hosts[host] else { return nil }
        let before = entry.effective
        entry.sinceTurnAway = entry.sinceTurnAway.map { $0 + 1 }
        if let guess = entry.guess {
            if started <= guess.lastTurnedAway {
                // It ran while the others were turned away, and was answered: the guess stands.
                stand(guess.limit, in: &entry)
            } else {
                // Started after them: they were the host's trouble, not its limit.
                entry.guess = nil
            }
        } else if entry.limit < ceiling || entry.raisedFrom != nil {
            entry.answers += 1
            if entry.raisedFrom != nil, entry.answers >= entry.limit {
                // The try held for a round: the host takes more now, and the next try comes as soon as the first.
                entry.raisedFrom = nil
                entry.failedTries = 0
                entry.answersToRaise = firstAnswersToRaise
            }
            if entry.limit < ceiling, entry.answers >= entry.answersToRaise {
                entry.raisedFrom = entry.limit
                entry.limit += 1
                entry.answers = 0
            }
        }
        if entry.limit >= ceiling, entry.guess == nil, entry.raisedFrom == nil, (entry.sinceTurnAway ?? ceiling) >= ceiling {
            hosts[host] = nil // at `--per-host`, with nothing turned away for a round: nothing kept
        } else {
            hosts[host] = entry
        }
        let tell = shouldTell(entry, host: host) // (a guess that stood)
        return entry.effective == before && !tell ? nil : Change(limit: entry.effective, tell: tell)
    }

    /// Makes `limit` the standing limit of a host.
    private func stand(_ limit: Int, in entry: inout Entry) {
        entry.limit = min(entry.limit, limit)
        entry.guess = nil
        entry.answers = 0
    }
}
