import Synchronization

/// Transfers sleeping before a retry (a backoff, a `Retry-After`), with
/// when each wakes and the host it waits for.
///
/// The loop shows them with its snapshot ("1 waiting to retry (next in
/// 12 s)"), and wakes a host's sleepers when it gives the host up: they
/// would otherwise sleep out backoffs of up to 30 s before being refused,
/// holding the run's end back, and counted meanwhile as waiting to retry.
final class RetryWaits: Sendable {
    private struct Sleeper {
        let deadline: ContinuousClock.Instant
        let host: String
        /// Set once the sleeper's task waits; nil before then (a wake that
        /// comes first is kept in `woken`).
        var continuation: CheckedContinuation<Void, Never>?
        var woken = false
    }

    private let sleepers = Mutex<[TransferID: Sleeper]>([:])

    /// Sleeps for `wait` before transfer `id`'s next attempt at `host`, or
    /// until `host` is given up (`wake(host:)`). Throws when the task is
    /// cancelled meanwhile.
    func sleep(_ id: TransferID, host: String, for wait: Duration) async throws(TransferError) {
        let deadline = ContinuousClock.now + wait
        sleepers.withLock { $0[id] = Sleeper(deadline: deadline, host: host) }
        // The clock: a task of its own, so that a wake or a cancel can end the wait early.
        let timer = Task { [self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            wake(id)
        }
        defer {
            timer.cancel()
            sleepers.withLock { _ = $0.removeValue(forKey: id) }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let wokenAlready = sleepers.withLock { sleepers -> Bool in
                    guard var sleeper = sleepers[id], !sleeper.woken else { return true }
                    sleeper.continuation = continuation
                    sleepers[id] = sleeper
                    return false
                }
                if wokenAlready { continuation.resume() }
            }
        } onCancel: {
            wake(id)
        }
        if Task.isCancelled { throw .cancelled }
    }

    /// Ends transfer `id`'s sleep (its time is up, or its task is cancelled).
    private func wake(_ id: TransferID) {
        let continuation = sleepers.withLock { sleepers -> CheckedContinuation<Void, Never>? in
            guard var sleeper = sleepers[id], !sleeper.woken else { return nil }
            let continuation = sleeper.continuation
            sleeper.woken = true
            sleeper.continuation = nil
            sleepers[id] = sleeper
            return continuation
        }
        continuation?.resume()
    }

    /// Ends the sleep of every transfer waiting to retry at `host` (given
    /// up: their next attempt is refused at once, or is the one let through).
    func wake(host: String) {
        let woken = sleepers.withLock { sleepers -> [CheckedContinuation<Void, Never>] in
            var continuations: [CheckedContinuation<Void, Never>] = []
            for (id, var sleeper) in sleepers where sleeper.host == host && !sleeper.woken {
                sleeper.woken = true
                if let continuation = sleeper.continuation { continuations.append(continuation) }
                sleeper.continuation = nil
                sleepers[id] = sleeper
            }
            return continuations
        }
        for continuation in woken { continuation.resume() }
    }

    /// How many sleep before a retry, and the whole seconds from `now` until the first wakes.
    func state(at now: ContinuousClock.Instant) -> (count: Int, nextInSeconds: Int?) {
        sleepers.withLock { sleepers in
            let waiting = sleepers.values.lazy.filter { !$0.woken }
            guard let first = waiting.map(\.deadline).min() else { return (0, nil) }
            return (waiting.count, max(0, Int((first - now).seconds.rounded(.up))))
        }
    }
}
