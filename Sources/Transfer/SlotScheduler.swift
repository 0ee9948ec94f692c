import Foundation
import Synchronization

/// Hands out transfer slots: at most `total` at once, and at most `perHost`
/// against one host. A transfer reaches libcurl only with a slot, so queued
/// items never start their timers. Waiters are served first come, first
/// served, skipping those whose host is full.
public final class SlotScheduler: Sendable {
    private struct Waiter {
        let id: UInt64
        let host: String
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var running = 0
        var runningPerHost: [String: Int] = [:]
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }

    public let total: Int
    public let perHost: Int
    private let state = Mutex(State())

    public init(total: Int, perHost: Int) {
        self.total = max(1, total)
        self.perHost = max(1, perHost)
    }

    /// Waits for a slot for `host`. Throws `CancellationError` if the task is cancelled while waiting.
    public func acquire(host: String) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                state.withLock { state in
                    // Checked under the lock: a cancel handler that ran first found no waiter to remove.
                    // Waiters only ever wait for a full host or a full total, so a newcomer
                    // that fits overtakes no one.
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                    } else if Self.hasRoom(state, host: host, total: total, perHost: perHost) {
                        Self.take(&state, host: host)
                        continuation.resume()
                    } else {
                        state.waiters.append(Waiter(id: id, host: host, continuation: continuation))
                    }
                }
            }
        } onCancel: {
            let removed = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            removed?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Returns a slot taken with `acquire(host:)` and wakes the waiters that now fit.
    public func release(host: String) {
        let ready = state.withLock { state -> [Waiter] in
            state.running -= 1
            let left = (state.runningPerHost[host] ?? 1) - 1
            state.runningPerHost[host] = left > 0 ? left : nil
            var ready: [Waiter] = []
            var index = 0
            while index < state.waiters.count, state.running < total {
                let waiter = state.waiters[index]
                if Self.hasRoom(state, host: waiter.host, total: total, perHost: perHost) {
                    Self.take(&state, host: waiter.host)
                    ready.append(state.waiters.remove(at: index))
                } else {
                    index += 1
                }
            }
            return ready
        }
        for waiter in ready { waiter.continuation.resume() }
    }

    /// Slots in use and waiters, for progress and tests.
    public var usage: (running: Int, waiting: Int, perHost: [String: Int]) {
        state.withLock { ($0.running, $0.waiters.count, $0.runningPerHost) }
    }

    private static func hasRoom(_ state: State, host: String, total: Int, perHost: Int) -> Bool {
        state.running < total && (state.runningPerHost[host] ?? 0) < perHost
    }

    private static func take(_ state: inout State, host: String) {
        state.running += 1
        state.runningPerHost[host, default: 0] += 1
    }
}
