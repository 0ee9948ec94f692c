import CCurl

/// Notices a host that cannot be reached at all, and gives it up for the
/// rest of the run.
///
/// Each URL retries a failed connection on its own (`RetryPolicy`), as it
/// should for a passing fault. But when a name does not resolve (the machine
/// is offline) or a server is gone, every URL of that host runs through all
/// its attempts in turn: 300 URLs of a name that did not resolve took five
/// minutes, so a list of 10,000 would have taken hours to say the same thing
/// 10,000 times. Once every attempt at a host has failed to connect for
/// `patience`, and at least `leastFailures` of them, the host's other
/// attempts end at once, without a request, and say why; what they had
/// downloaded before stays for the next run. Any connection made to the host
/// (an attempt still running when it was given up, say) takes it back.
///
/// Owned by the engine's loop thread, like `SlotQueue`: no locks.
struct HostReachability {
    /// How long every attempt at a host must have failed to connect.
    let patience: Duration
    /// How many attempts must have failed in that time (one URL's default tries).
    let leastFailures: Int

    /// Hosts whose attempts have failed to connect since their last connection.
    private var failing: [String: Streak] = [:]
    /// Hosts given up, and what their attempts end with.
    private var givenUp: [String: TransferError] = [:]

    private struct Streak {
        let since: ContinuousClock.Instant
        var failures: Int
    }

    init(patience: Duration = .seconds(30), leastFailures: Int = 5) {
        self.patience = patience
        self.leastFailures = max(1, leastFailures)
    }

    /// What an attempt at `host` ends with instead of a request, when the host was given up.
    func refusal(for host: String) -> TransferError? {
        givenUp[host]
    }

    /// An attempt at `host` made a connection (or got any answer): the host is reachable.
    mutating func connected(_ host: String) {
        failing[host] = nil
        givenUp[host] = nil
    }

    /// An attempt at `host` could not connect (`reason`, libcurl's words).
    /// Returns true when this gives the host up.
    @discardableResult
    mutating func failedToConnect(_ host: String, reason: String, at now: ContinuousClock.Instant) -> Bool {
        guard givenUp[host] == nil else { return false }
        var streak = failing[host] ?? Streak(since: now, failures: 0)
        streak.failures += 1
        failing[host] = streak
        let tried = now - streak.since
        guard streak.failures >= leastFailures, tried >= patience else { return false }
        givenUp[host] = TransferError(.hostUnreachable,
            "given up: no connection to \(host) in \(NumberText.wait(tried.seconds.rounded(.down))) "
            + "of trying (\(reason)); the host's other URLs are not tried in this run")
        return true
    }

    /// Whether an attempt that ended with `code` (libcurl's result) or
    /// `abort` (the loop's own, such as its connect timeout), without any
    /// connection made, failed for want of the host: its name did not
    /// resolve, or nothing answered the connection. A TLS failure or a
    /// certificate says the host is there.
    static func isUnreachable(code: CURLcode, abort: TransferError?) -> Bool {
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT, CURLE_OPERATION_TIMEDOUT:
            return true
        default:
            return abort?.kind == .timeout
        }
    }
}
