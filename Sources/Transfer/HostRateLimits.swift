/// Pauses a host that answers 429 Too Many Requests, as a whole, for as long
/// as it asks, and gives it up when it keeps asking for longer than
/// mediafetch waits.
///
/// Each URL honoured its own 429's `Retry-After` (using up no retry for it),
/// but the host's other URLs went on asking in turn, and were sent away in
/// turn: against a server answering 429 for a few seconds after each request
/// it served, 60 URLs made 231 requests, 171 of them answered 429. And a host
/// that answered 429 to everything held each of its URLs through waits of up
/// to `maxRetryAfter` (10 min) apiece, `--per-host` at a time: hours for a
/// list of hundreds.
///
/// A 429 (not one after a redirect to another host: that is the target's)
/// pauses its host. No transfer of it starts until the wait it asked for is
/// over (`Retry-After`, at least `firstWait`; without one, a backoff from
/// `firstWait` that doubles each time the transfer that went alone is refused
/// again, up to `maxWait`: the 429s of a burst, transfers asked before the
/// first came back, count once); transfers already running go on. Then one
/// more starts, alone (those begun before the pause may still run: they do
/// not hold it back), and the host's other transfers follow as soon as its
/// response head says anything but 429, not when its body ends. One that ends
/// with no answer (a reset, a stop) passes its turn to the next. A 429 to any
/// transfer pauses the host again. A host that has asked to wait for longer
/// than `longest` since it last served a transfer (counting the wait it asks
/// for now), or that asks for longer at once, is given up for the rest of the
/// run: its URLs fail at once, saying so.
///
/// Owned by the engine's loop thread, like `SlotQueue`: no locks. While no
/// host is paused, an answer costs one `isEmpty` check.
struct HostRateLimits {
    /// The longest a host may keep its URLs waiting (`--retries`' longest `Retry-After`).
    let longest: Duration
    /// The shortest pause, and the first one of a 429 without `Retry-After`.
    let firstWait: Duration
    /// The longest pause a 429 without `Retry-After` brings.
    let maxWait: Duration

    private struct Pause {
        /// When the host's transfers may go again (one first).
        var until: ContinuousClock.Instant
        /// The spell's first 429: the host has served nothing asked for since.
        let since: ContinuousClock.Instant
        /// The last 429 that began a pause (not one of a burst): a transfer
        /// started before it says nothing new by its answer.
        var lastAsked: ContinuousClock.Instant
        /// 429s without `Retry-After` in this spell (the backoff's step).
        var unscheduled = 0
        /// Whether the pause is over and one transfer goes alone.
        var trying = false
    }

    private var paused: [String: Pause] = [:]
    private var givenUp: [String: TransferError] = [:]
    /// The last pause's `lastAsked` of each host whose pause ended: a 429 to
    /// a transfer started before it is a late one of that pause's burst.
    private var lastPauseAsked: [String: ContinuousClock.Instant] = [:]

    /// What a 429 does to its host.
    enum Change: Equatable {
        /// Its transfers wait `seconds` (from now); `begins` when this 429
        /// begins a pause (to tell of): the host was not paused, or this was
        /// the answer to a transfer started since the 429 that began its
        /// pause. Not for the rest of that burst, transfers asked before then,
        /// whose 429s make the pause longer where they ask for more.
        case pause(seconds: Double, begins: Bool)
        /// A late 429 of the burst of a pause that has ended (the host has
        /// served a transfer asked since): it says nothing new.
        case stale
        /// It is given up: its URLs end with this error.
        case giveUp(TransferError)
    }

    init(longest: Duration = .seconds(600), firstWait: Duration = .milliseconds(500), maxWait: Duration = .seconds(30)) {
        self.longest = longest
        self.firstWait = firstWait
        self.maxWait = max(firstWait, maxWait)
    }

    /// `host` answered 429 to a transfer started at `started`, asking to
    /// wait `retryAfter` seconds (nil when it did not say).
    mutating func askedToWait(_ host: String, retryAfter: Double?, started: ContinuousClock.Instant? = nil,
                              at now: ContinuousClock.Instant) -> Change {
        if let refusal = givenUp[host] { return .giveUp(refusal) }
        let existing = paused[host]
        if existing == nil, let ended = lastPauseAsked[host], (started ?? now) < ended { return .stale }
        // A transfer asked before the host's last 429 came back is of the same burst: its 429 is
        // no new refusal (8 of them at once doubled a pause without Retry-After from 0.5 s to 30 s).
        let inBurst = existing.map { (started ?? now) < $0.lastAsked } ?? false
        var pause = existing ?? Pause(until: now, since: now, lastAsked: now)
        let wait: Duration
        if let retryAfter {
            guard retryAfter <= longest.seconds else {
                let (asked, limit) = NumberText.distinctWaits(retryAfter, longest.seconds)
                return giveUp(host, "answered 429 Too Many Requests and asked to wait \(asked)", limit: limit)
            }
            wait = max(firstWait, .milliseconds(Int(retryAfter * 1000)))
        } else {
            // (One of a burst asks for nothing the first did not: the pause stays as it is.)
            if !inBurst { pause.unscheduled += 1 }
            let doubled = firstWait.seconds * Double(1 << min(max(pause.unscheduled, 1) - 1, 20))
            wait = inBurst ? .zero : min(maxWait, .milliseconds(Int(doubled * 1000)))
        }
        let until = max(pause.until, now + wait)
        guard until - pause.since <= longest else {
            let (spell, limit) = NumberText.distinctWaits((now - pause.since).seconds.rounded(.down), longest.seconds)
            return giveUp(host, "answered only 429 Too Many Requests for \(spell), and asks to wait "
                + NumberText.wait((until - now).seconds.rounded(.up)) + " more", limit: limit)
        }
        pause.until = until
        if !inBurst {
            pause.lastAsked = now
            pause.trying = false
        }
        paused[host] = pause
        return .pause(seconds: (until - now).seconds, begins: !inBurst)
    }

    /// Ends `host`'s spell and keeps the reason its URLs fail with.
    private mutating func giveUp(_ host: String, _ what: String, limit: String) -> Change {
        paused[host] = nil
        let refusal = TransferError(.hostGivenUp, "given up: \(host) \(what) (mediafetch waits "
            + "\(limit) at most); its URLs fail at once")
        givenUp[host] = refusal
        return .giveUp(refusal)
    }

    /// A transfer of `host` started at `started` was answered with a status
    /// other than 429. Returns true when that ends the host's pause: it
    /// started after the last 429 (a transfer asked for before then may
    /// have been counted by the host before it began to refuse).
    mutating func answered(_ host: String, started: ContinuousClock.Instant) -> Bool {
        guard !paused.isEmpty, let pause = paused[host], started >= pause.lastAsked else { return false }
        paused[host] = nil
        lastPauseAsked[host] = pause.lastAsked
        return true
    }

    /// A transfer of `host` started at `started` ended without an answer (a
    /// failure to connect, a reset, a stop, or it never ran). Returns true
    /// when it was the one going alone after the pause (nothing else of the
    /// host has started since the 429 that began it) and its turn passes to
    /// the next transfer now; when a 429 of the burst made the pause longer
    /// meanwhile, the turn comes back with `due` once that wait is over.
    mutating func endedUnanswered(_ host: String, started: ContinuousClock.Instant, at now: ContinuousClock.Instant) -> Bool {
        guard !paused.isEmpty, let pause = paused[host], pause.trying, started >= pause.lastAsked else { return false }
        guard pause.until <= now else {
            paused[host]?.trying = false
            return false
        }
        return true
    }

    /// Whether any host is paused: while none is, answers need not be looked at.
    var anyPaused: Bool { !paused.isEmpty }

    /// The paused hosts whose wait is over at `now`: each lets one transfer
    /// go alone from now until it is answered.
    mutating func due(at now: ContinuousClock.Instant) -> [String] {
        guard !paused.isEmpty else { return [] }
        var due: [String] = []
        for (host, pause) in paused where !pause.trying && pause.until <= now {
            paused[host]?.trying = true
            due.append(host)
        }
        return due
    }

    /// What the attempts at `host` end with, it being given up; nil when it is not.
    func refusal(for host: String) -> TransferError? {
        givenUp.isEmpty ? nil : givenUp[host]
    }

    /// Whether `host` is paused now (waiting, or trying one transfer).
    func isPaused(_ host: String) -> Bool { !paused.isEmpty && paused[host] != nil }
}
