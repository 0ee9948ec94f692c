import ContentStore
import Foundation
import Synchronization

/// Moves finished bodies into the store and records them in the catalog in
/// groups: whatever finished while the previous group was being committed
/// goes into the next one, so a thousand small files cost a handful of
/// `syncfs` calls and transactions instead of a thousand.
///
/// Runs on a thread of its own because `syncfs` and SQLite writes block.
final class Ingestor: Sendable {
    private struct Pending {
        var blob: StagedBlob?
        var record: IngestRecord
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Queue {
        var pending: [Pending] = []
        var failures: [FailureRecord] = []
        var stopping = false
    }

    private let cache: MediaCache
    private let queue = Mutex(Queue())
    private let wake = DispatchSemaphore(value: 0)
    private let exited = DispatchSemaphore(value: 0)

    init(cache: MediaCache) {
        self.cache = cache
        let thread = Thread { [self] in self.run() }
        thread.name = "mediafetch.ingest"
        thread.start()
    }

    /// Stores `blob` and records `record`; returns once both are durable.
    /// With no blob, only the record is written (the object is stored already).
    func ingest(_ blob: StagedBlob?, _ record: IngestRecord) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            queue.withLock { $0.pending.append(Pending(blob: blob, record: record, continuation: continuation)) }
            wake.signal()
        }
    }

    /// Remembers a failed URL with the next group.
    func noteFailure(_ failure: FailureRecord) {
        queue.withLock { $0.failures.append(failure) }
        wake.signal()
    }

    /// Commits what is queued and stops the thread.
    func finish() {
        queue.withLock { $0.stopping = true }
        wake.signal()
        exited.wait()
    }

    /// Pause after a wake-up, so one group gathers what finishes meanwhile:
    /// fewer, larger groups mean fewer filesystem flushes.
    private static let gatherDelay: useconds_t = 20_000

    private func run() {
        while true {
            wake.wait()
            if !queue.withLock({ $0.stopping }) { usleep(Self.gatherDelay) }
            let (group, failures, stopping) = queue.withLock { queue in
                defer {
                    queue.pending.removeAll(keepingCapacity: true)
                    queue.failures.removeAll(keepingCapacity: true)
                }
                return (queue.pending, queue.failures, queue.stopping)
            }
            if !group.isEmpty || !failures.isEmpty { commit(group, failures) }
            if stopping {
                // Anything queued after the drain above still gets committed.
                let late = queue.withLock { queue in
                    defer { queue.pending.removeAll(); queue.failures.removeAll() }
                    return (queue.pending, queue.failures)
                }
                if !late.0.isEmpty || !late.1.isEmpty { commit(late.0, late.1) }
                break
            }
        }
        exited.signal()
    }

    private func commit(_ group: [Pending], _ failures: [FailureRecord]) {
        do {
            _ = try cache.store.commit(group.compactMap(\.blob))
            try cache.catalog.record(group.map(\.record), failures: failures)
            for entry in group { entry.continuation.resume() }
        } catch {
            for entry in group {
                if let blob = entry.blob { _ = unlink(blob.path) }
                entry.continuation.resume(throwing: CacheError("cannot store \(entry.record.url): \(error)"))
            }
        }
    }
}
