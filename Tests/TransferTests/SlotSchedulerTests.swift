import Synchronization
import Testing
@testable import Transfer

@Suite struct SlotSchedulerTests {
    /// Runs `count` holders per host that each keep a slot for a while, and
    /// returns the highest number seen running at once, overall and per host.
    private func peakUsage(total: Int, perHost: Int, hosts: [String], count: Int) async -> (Int, [String: Int]) {
        let scheduler = SlotScheduler(total: total, perHost: perHost)
        let peaks = Peaks()
        await withTaskGroup(of: Void.self) { group in
            for host in hosts {
                for _ in 0..<count {
                    group.addTask {
                        try? await scheduler.acquire(host: host)
                        let usage = scheduler.usage
                        peaks.state.withLock { peaks in
                            peaks.0 = max(peaks.0, usage.running)
                            for (name, running) in usage.perHost { peaks.1[name] = max(peaks.1[name] ?? 0, running) }
                        }
                        await Task.yield()
                        try? await Task.sleep(for: .milliseconds(2))
                        scheduler.release(host: host)
                    }
                }
            }
        }
        #expect(scheduler.usage.running == 0)
        #expect(scheduler.usage.waiting == 0)
        return peaks.state.withLock { $0 }
    }

    private final class Peaks: Sendable {
        let state = Mutex((0, [String: Int]()))
    }

    @Test func neverMoreThanTheTotal() async {
        let (total, _) = await peakUsage(total: 4, perHost: 10, hosts: ["a", "b", "c"], count: 20)
        #expect(total <= 4)
        #expect(total >= 2)
    }

    @Test func neverMoreThanPerHost() async {
        let (_, perHost) = await peakUsage(total: 16, perHost: 2, hosts: ["a", "b"], count: 20)
        #expect(perHost["a"] ?? 0 <= 2)
        #expect(perHost["b"] ?? 0 <= 2)
    }

    @Test func aFullHostDoesNotBlockAnotherHost() async throws {
        let scheduler = SlotScheduler(total: 4, perHost: 1)
        try await scheduler.acquire(host: "busy")
        // A second "busy" waiter queues...
        let waiter = Task { try await scheduler.acquire(host: "busy") }
        while scheduler.usage.waiting == 0 { await Task.yield() }
        // ...and another host still gets a slot at once.
        try await scheduler.acquire(host: "free")
        #expect(scheduler.usage.running == 2)
        scheduler.release(host: "busy")
        try await waiter.value
        #expect(scheduler.usage.perHost["busy"] == 1)
    }

    @Test func cancellingAWaiterRemovesIt() async throws {
        let scheduler = SlotScheduler(total: 1, perHost: 1)
        try await scheduler.acquire(host: "h")
        let waiter = Task { try await scheduler.acquire(host: "h") }
        while scheduler.usage.waiting == 0 { await Task.yield() }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(scheduler.usage.waiting == 0)
        #expect(scheduler.usage.running == 1)
    }
}
