import Synchronization

/// Transfers sleeping before a retry (a backoff, a `Retry-After`), with
/// when each wakes and the host it waits for; and the hosts given up in an
/// outage, whose retries do not sleep at all.
///
/// The loop shows the sleepers with its snapshot ("1 waiting to retry
/// (next in 12 s)"), and when it gives a host up, wakes the host's
/// sleepers and keeps any more from sleeping until the host answers
/// again: their next attempt is refused at once (or is the one let
/// through). They slept out backoffs of up to 30 s first, holding the
/// run's end back, counted meanwhile as waiting to retry; and one that
/// began its sleep just after the give-up (its failure was handled with
/// it) later became the attempt let through, again and again, through all
/// its retries.
final class RetryWaits: Sendable {
    private struct Sleeper {
        /// This sleep's own number: a transfer keeps its ID from one sleep
        /// to the next, and a late timer of the last must not end this one.
        let token: UInt64
        let deadline: ContinuousClock.Instant
        let host: String
        /// Set once the sleeper's task waits; nil before then (a wake that
        /// comes first is kept in `woken`).
        var continuation: CheckedContinuation<Void, Never>?
        var woken = false
    }

    private struct State {
        var sleepers: [TransferID: Sleeper] = [:]
        var givenUp: Set<String> = []
        var nextToken: UInt64 = 0
        /// When a URL of each host last failed for good (see `failedForGood`).
        var lastFailedForGood: [String: ContinuousClock.Instant] = [:]
    }

    private let state = Mutex(State())

    /// Sleeps for `wait` before transfer `id`'s next attempt at `host`;
    /// not at all while `host` is given up, and only until it is
    /// (`giveUp(_:)`). Throws when the task is cancelled meanwhile.
    func sleep(_ id: TransferID, host: String, for wait: Duration) async throws(TransferError) {
        let deadline = ContinuousClock.now + wait
        let token = state.withLock { state -> UInt64? in
            guard !state.givenUp.contains(host) else { return nil }
            state.nextToken += 1
            state.sleepers[id] = Sleeper(token: state.nextToken, deadline: deadline, host: host)
            return state.nextToken
        }
        guard let token else {
            if Task.isCancelled { throw .cancelled }
            return
        }
        // The clock: a task of its own, so that a wake or a cancel can end the wait early.
        let timer = Task { [self] in
            guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil else { return }
            wake(id, token: token)
        }
        defer {
            timer.cancel()
            state.withLock { state in
                if state.sleepers[id]?.token == token { state.sleepers[id] = nil }
            }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let wokenAlready = state.withLock { state -> Bool in
                    guard var sleeper = state.sleepers[id], sleeper.token == token, !sleeper.woken else { return true }
                    sleeper.continuation = continuation
                    state.sleepers[id] = sleeper
                    return false
                }
                if wokenAlready { continuation.resume() }
            }
        } onCancel: {
            wake(id, token: token)
        }
        if Task.isCancelled { throw .cancelled }
    }

    /// Ends sleep `token` of transfer `id` (its time is up, or its task is cancelled).
    private func wake(_ id: TransferID, token: UInt64) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard var sleeper = state.sleepers[id], sleeper.token == token, !sleeper.woken else { return nil }
            let continuation = sleeper.continuation
            sleeper.woken = true
            sleeper.continuation = nil
            state.sleepers[id] = sleeper
            return continuation
        }
        continuation?.resume()
    }

    /// `host` is given up in an outage: its sleepers wake, and its retries
    /// do not sleep until `takeBack(_:)`.
    func giveUp(_ host: String) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard state.givenUp.insert(host).inserted else { return [] }
            var continuations: [CheckedContinuation<Void, Never>] = []
            for (id, var sleeper) in state.sleepers where sleeper.host == host && !sleeper.woken {
                sleeper.woken = true
                if let continuation = sleeper.continuation { continuations.append(continuation) }
                sleeper.continuation = nil
                state.sleepers[id] = sleeper
            }
            return continuations
        }
        for continuation in woken { continuation.resume() }
    }

    /// Whether `host` is given up in an outage: a retry at it will not sleep.
    func isGivenUp(_ host: String) -> Bool {
        state.withLock { !$0.givenUp.isEmpty && $0.givenUp.contains(host) }
    }

    /// `host` answered again: its retries sleep their backoffs as before.
    func takeBack(_ host: String) {
        state.withLock { _ = $0.givenUp.remove(host) }
    }

    /// A URL of `host` failed for good: no retry of it is on its way. A
    /// host failing without an answer is named for a second after its last
    /// failure only while a retry may still be (see
    /// `HostReachability.longestFailing`): the status line named a dead host
    /// for two seconds after its only URL had failed.
    func failedForGood(host: String, at now: ContinuousClock.Instant = .now) {
        state.withLock { $0.lastFailedForGood[host] = now }
    }

    /// When a URL of `host` last failed for good, if one has.
    func lastFailedForGood(_ host: String) -> ContinuousClock.Instant? {
        state.withLock { $0.lastFailedForGood[host] }
    }

    /// Whether a transfer of `host` sleeps before a retry.
    func hasSleeper(of host: String) -> Bool {
        state.withLock { state in state.sleepers.values.contains { $0.host == host && !$0.woken } }
    }

    /// How many sleep before a retry, and the whole seconds from `now` until the first wakes.
    func state(at now: ContinuousClock.Instant) -> (count: Int, nextInSeconds: Int?) {
        state.withLock { state in
            let waiting = state.sleepers.values.lazy.filter { !$0.woken }
            guard let first = waiting.map(\.deadline).min() else { return (0, nil) }
            return (waiting.count, max(0, Int((first - now).seconds.rounded(.up))))
        }
    }
}
