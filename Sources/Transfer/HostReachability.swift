import CCurl

/// Notices a host that cannot be reached at all, or that takes connections
/// and never answers, and holds its attempts back until it answers.
///
/// Each URL retries a failed connection on its own (`RetryPolicy`), as it
/// should for a passing fault. But when a name does not resolve (the machine
/// is offline) or a server is gone, every URL of that host runs through all
/// its attempts in turn: 300 URLs of a name that did not resolve took five
/// minutes, so a list of 10,000 would have taken hours to say the same thing
/// 10,000 times. A host that accepts connections and never answers (a
/// server whose workers are all stuck, a tarpit) is as dead, and slower to
/// say so: each attempt held its slot until the stall timeout, so 100 URLs
/// of one kept 8 slots busy for half an hour. Once every attempt at a host
/// has failed without an answer (no connection, or a connection that
/// timed out, closed or reset before a response began) for `patience`, at
/// least `leastFailures` of them, with no answer from the host meanwhile
/// (not even to a transfer still running), the host is given up:
/// its attempts end at once, without a request, and say why; what they had
/// downloaded stays for the next run. One attempt every `trialInterval` is
/// still let through, so a host that comes back (the network did) is found
/// again, and any answer from it takes it back. A connection alone does
/// not: a server with a full accept queue completes one now and then, and
/// each restarted the count. An attempt that connected and heard nothing
/// counts its time from when it ended, not when it began: one round of
/// stalls (30 s each, as long as the patience) would otherwise give up a
/// working server whose backend froze for 35 s; it takes two now. Until
/// then, failures to connect, stalls and timeouts use up no retry of their
/// URL (see `TransferEngine.perform`; a close or a reset does, as it comes
/// within milliseconds): the host's patience is their budget, so a server
/// that restarts for 20 s no longer fails every URL that tried it meanwhile.
///
/// Owned by the engine's loop thread, like `SlotQueue`: no locks.
struct HostReachability {
    /// How long every attempt at a host must have failed without an answer before it is given up.
    let patience: Duration
    /// How many attempts must have failed in that time (one URL's default tries).
    let leastFailures: Int
    /// How often a given-up host lets one attempt through.
    let trialInterval: Duration

    /// Hosts whose attempts have failed without an answer since their last answer.
    private var failing: [String: Streak] = [:]
    /// Hosts given up.
    private var givenUp: [String: GivenUp] = [:]
    /// Hosts that have answered an attempt in this run (see `isOutage`), by
    /// their keys' hash values: 8 bytes a host over a run of a million
    /// hosts, not the key's string. A collision only gives a host that never
    /// answered its URLs' patience.
    private var answeredOnce: Set<Int> = []

    private struct Streak {
        /// When the streak's time counts from: when its first failed attempt
        /// began, or ended for one that connected (see the type's notes).
        var since: ContinuousClock.Instant
        /// When the first failed attempt began: the time the message says.
        var began: ContinuousClock.Instant
        /// When the last one ended.
        var last: ContinuousClock.Instant
        var failures: Int
        /// The transfer (URL) of the first failure, and whether another one failed too.
        var firstTransfer: TransferID
        var otherTransfers = false
        /// Whether any of the failed attempts made a connection: the host is
        /// there, and does not answer.
        var connections = false
    }

    private struct GivenUp {
        /// What the attempts held back end with.
        let refusal: TransferError
        /// When the next attempt may go through, unless one is on its way.
        var nextTrial: ContinuousClock.Instant
        /// The transfer whose attempt was let through and has not ended yet.
        var trial: TransferID?
        /// The URL whose failure gave the host up, and whether other URLs failed too.
        let firstTransfer: TransferID
        var otherTransfers: Bool
    }

    init(patience: Duration = .seconds(30), leastFailures: Int = 5, trialInterval: Duration? = nil) {
        self.patience = patience
        self.leastFailures = max(1, leastFailures)
        // Often enough that a host back after an outage is found while its URLs are still being tried.
        self.trialInterval = trialInterval ?? min(patience, .seconds(5))
    }

    /// What an attempt of `transfer` at `host`, about to start (or to wait
    /// for a slot), ends with instead: nil when it may go (the host is not
    /// given up; or it is time to see whether the host is back, and this
    /// attempt is the one let through, every `trialInterval`, until it ends).
    mutating func refusal(for host: String, transfer: TransferID, at now: ContinuousClock.Instant) -> TransferError? {
        guard var entry = givenUp[host] else { return nil }
        if let trial = entry.trial { return trial == transfer ? nil : entry.refusal }
        guard now < entry.nextTrial else {
            entry.trial = transfer
            givenUp[host] = entry
            return nil
        }
        return entry.refusal
    }

    /// What the attempts at `host` end with while it is given up, without
    /// letting one through (attempts waiting when the host is given up).
    func givenUpRefusal(for host: String) -> TransferError? {
        givenUp.isEmpty ? nil : givenUp[host]?.refusal
    }

    /// The host whose attempts have failed without an answer the longest
    /// (given up or answered since, it is no longer failing), once for
    /// `atLeast`, and how many have so, among those with URLs not done
    /// (`hasWork`: a host whose one URL had failed was "1 more host" until
    /// its patience ran out) or a failure in the last second (its URL on its
    /// way to a retry wait), unless a URL of the host failed for good since
    /// (`lastFailedForGood`: no retry is on its way).
    func longestFailing(at now: ContinuousClock.Instant, atLeast: Duration, hasWork: (String) -> Bool,
                        lastFailedForGood: (String) -> ContinuousClock.Instant? = { _ in nil }) -> FailingHost? {
        // One pass, nothing copied: this runs on every progress tick, inside libcurl's callbacks too.
        var longest: (host: String, streak: Streak)?
        var hosts = 0
        func retryMayBeOnItsWay(_ host: String, _ streak: Streak) -> Bool {
            now - streak.last < .seconds(1) && !(lastFailedForGood(host).map { $0 >= streak.last } ?? false)
        }
        for (host, streak) in failing where now - streak.began >= atLeast && (retryMayBeOnItsWay(host, streak) || hasWork(host)) {
            hosts += 1
            if longest.map({ streak.began < $0.streak.began }) ?? true { longest = (host, streak) }
        }
        guard let (host, streak) = longest else { return nil }
        return FailingHost(host: RequestTarget.readable(hostKey: host), connected: streak.connections,
                           seconds: Int((now - streak.began).seconds), hosts: hosts)
    }

    /// Whether `host`'s attempts have failed without an answer since its
    /// last answer, and it is not given up (yet).
    func isFailing(_ host: String) -> Bool { !failing.isEmpty && failing[host] != nil }

    /// Whether `host` is given up. No hashing while no host is (the loop
    /// asks once per transfer it starts).
    func isGivenUp(_ host: String) -> Bool { !givenUp.isEmpty && givenUp[host] != nil }

    /// An attempt at `host` got an answer (a response began): the host is
    /// reachable, and has answered in this run (see `isOutage`). Nothing more
    /// to do while no host is failing (the loop says so for every transfer
    /// that ends).
    mutating func answered(_ host: String) {
        answeredOnce.insert(host.hashValue)
        guard !failing.isEmpty || !givenUp.isEmpty else { return }
        failing[host] = nil
        givenUp[host] = nil
    }

    /// Whether the host is out: failing without an answer since its last
    /// answer (given up or not), for several of its transfers, or for one
    /// where it answered earlier in the run. Their failures to connect,
    /// stalls and timeouts then use up no retry (see `TransferEngine.perform`
    /// and the loop's `noteReachability`). A server that stops answering for
    /// a restart while the last of its URLs (a long file) downloads is out
    /// as much as one with many URLs waiting: that URL spent its five
    /// attempts in five seconds and failed. A host that has not answered yet
    /// and fails for one URL alone is that URL's trouble, which fails in
    /// seconds (a port mistyped), not in the patience; and a name that took
    /// seconds to fail to resolve gave its only URL up after its five
    /// attempts, which then went on to nine.
    func isOutage(_ host: String) -> Bool {
        if let entry = givenUp[host] { return entry.otherTransfers || answeredOnce.contains(host.hashValue) }
        guard let streak = failing[host] else { return false }
        return streak.otherTransfers || answeredOnce.contains(host.hashValue)
    }

    /// An attempt of `transfer` at `host` that began at `started` ended
    /// without an answer (`reason`, libcurl's words or the stall clock's):
    /// it could not connect, or `madeConnection` and heard nothing back.
    /// Returns true when this gives the host up.
    /// `queued`: when the attempt began to wait for a slot (`started` when
    /// not given). Its wait is not a pause between failures: a failing host
    /// runs one attempt at a time while other hosts use the slots (see
    /// `SlotQueue`), and with more such hosts than slots each waited longer
    /// than the patience, so its streak began again every time, and it was
    /// never given up (40 silent hosts at 16 slots: 21 min).
    /// `noSuchName`: its name is one the resolver says does not exist (see
    /// `HostNames`): the host is given up at once, whatever the patience.
    /// `proxy`: the proxy the attempt could not connect to (`the proxy
    /// HOST:PORT, from $VARIABLE`), which the give-up names as the one that
    /// is down: the host's URLs go nowhere else.
    @discardableResult
    mutating func failedWithoutAnswer(_ host: String, transfer: TransferID, reason: String, through proxy: String? = nil,
                                      madeConnection: Bool = false, noSuchName: Bool = false,
                                      started: ContinuousClock.Instant, queued: ContinuousClock.Instant? = nil,
                                      at now: ContinuousClock.Instant) -> Bool {
        if givenUp[host] != nil {
            if givenUp[host]?.firstTransfer != transfer { givenUp[host]?.otherTransfers = true }
            endedWithoutAnswer(host, transfer: transfer, at: now)
            return false
        }
        let counted = madeConnection ? now : started
        let fresh = Streak(since: counted, began: started, last: now, failures: 0, firstTransfer: transfer)
        var streak = failing[host] ?? fresh
        // Failures further apart than the patience (from one's end to the next
        // one's start) are not one outage: the streak starts again.
        if min(queued ?? started, started) - streak.last > patience { streak = fresh }
        if transfer != streak.firstTransfer { streak.otherTransfers = true }
        if madeConnection { streak.connections = true }
        streak.since = min(streak.since, counted)
        streak.began = min(streak.began, started)
        streak.failures += 1
        streak.last = max(streak.last, now)
        failing[host] = streak
        guard noSuchName || (streak.failures >= leastFailures && now - streak.since >= patience) else { return false }
        let tried = now - streak.began
        failing[host] = nil
        let every = NumberText.wait(trialInterval.seconds)
        let what = streak.connections ? "no answer from" : "no connection to"
        let how = proxy.map { " through \($0)," } ?? ""
        let shown = RequestTarget.readable(hostKey: host)
        let why = noSuchName ? "\(shown) has no such name"
            : "\(what) \(shown)\(how) in \(NumberText.wait(tried.seconds.rounded(.down))) of trying"
        let until = noSuchName ? "the name resolves" : proxy == nil ? "it answers again" : "the proxy answers again"
        givenUp[host] = GivenUp(
            refusal: TransferError(.hostGivenUp,
                "given up: \(why) (\(reason)); its URLs fail at once until \(until) (one is let through every \(every))"),
            nextTrial: now + trialInterval, firstTransfer: streak.firstTransfer, otherTransfers: streak.otherTransfers)
        return true
    }

    /// An attempt of `transfer` at a given-up `host` ended with no answer,
    /// for whatever reason (or was cancelled before it ran): if it was the
    /// one let through, the next may go a `trialInterval` from now. Another
    /// attempt's end (one that was connecting when the host was given up)
    /// leaves the turn with the one let through.
    mutating func endedWithoutAnswer(_ host: String, transfer: TransferID, at now: ContinuousClock.Instant) {
        guard !givenUp.isEmpty, var entry = givenUp[host], entry.trial == transfer else { return }
        entry.trial = nil
        entry.nextTrial = now + trialInterval
        givenUp[host] = entry
    }

    /// Whether an attempt that ended with `code` (libcurl's result) or
    /// `abort` (the loop's own, such as its stall clock), before any
    /// response began, failed for want of the host. Without a connection
    /// (`madeConnection` false): its name did not resolve, or nothing took
    /// the connection. With one: it timed out, or the server closed or
    /// reset it, without a word. A TLS failure or a certificate says the
    /// host is there and speaks.
    static func failedForWantOfHost(code: CURLcode, abort: TransferError?, madeConnection: Bool) -> Bool {
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT:
            return !madeConnection
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR:
            return madeConnection && abort == nil
        default:
            return isTimeout(code: code, abort: abort)
        }
    }

    /// Whether an attempt ended without reaching its host: for want of it
    /// (`failedForWantOfHost`), with no connection made or one that timed
    /// out without a word (not a close or a reset, which come at once).
    static func neverReached(code: CURLcode, abort: TransferError?, madeConnection: Bool) -> Bool {
        failedForWantOfHost(code: code, abort: abort, madeConnection: madeConnection)
            && (!madeConnection || isTimeout(code: code, abort: abort))
    }

    /// Whether an attempt ended for want of time: libcurl's timeout, or the
    /// loop's own (the stall clock, `--timeout`).
    static func isTimeout(code: CURLcode, abort: TransferError?) -> Bool {
        code == CURLE_OPERATION_TIMEDOUT || abort?.kind == .timeout
    }
}
