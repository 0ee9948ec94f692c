import CFileSync
import Dispatch
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Transfer

/// The writer threads: per-lane order, concurrency across lanes, waiting.
@Suite struct WriterPoolTests {
    private final class Log: Sendable {
        let entries = Mutex<[Int: [Int]]>([:])
        /// Jobs of each lane running right now, and whether two ever ran at once.
        let active = Mutex<[Int: Int]>([:])
        let overlapped = Mutex(false)

        func run(lane: Int, _ value: Int) {
            let alreadyRunning = active.withLock { active -> Bool in
                active[lane, default: 0] += 1
                return active[lane] != 1
            }
            if alreadyRunning { overlapped.withLock { $0 = true } }
            // Long enough for another thread to pick up the same lane if it could.
            let until = ContinuousClock.now + .microseconds(20)
            while ContinuousClock.now < until {}
            entries.withLock { $0[lane, default: []].append(value) }
            active.withLock { $0[lane, default: 1] -= 1 }
        }
    }

    @Test func eachLaneRunsItsJobsOneAtATimeInOrderWhileLanesShareTheThreads() {
        let pool = WriterPool(threads: 3)
        let log = Log()
        let lanes = (0..<8).map { _ in pool.lane() }
        // Jobs of all lanes interleaved, as many bodies' chunks are, and posted
        // while earlier ones run, so each lane is picked up again and again.
        for step in 0..<100 {
            for (index, lane) in lanes.enumerated() {
                lane.async { log.run(lane: index, step) }
            }
            if step % 10 == 0 {
                let until = ContinuousClock.now + .microseconds(200)
                while ContinuousClock.now < until {}
            }
        }
        for lane in lanes { lane.sync() }
        let entries = log.entries.withLock { $0 }
        #expect(entries.count == 8)
        for index in 0..<8 {
            #expect(entries[index] == Array(0..<100), "lane \(index)")
        }
        #expect(!log.overlapped.withLock { $0 })
    }

    /// The writers yield the cores to the transfer thread that feeds them
    /// (see `WriterPool.niceSteps`): their nice value is five above the
    /// process's.
    @Test func theWritersRunBelowTheRestOfTheProcess() {
        let pool = WriterPool(threads: 2)
        let process = niceOfTheProcess()
        let done = DispatchSemaphore(value: 0)
        let seen = Mutex<[Int32]>([])
        let names = Mutex<Set<String>>([])
        let lanes = [pool.lane(), pool.lane()]
        for lane in lanes {
            lane.async {
                seen.withLock { $0.append(niceOfThisThread()) }
                names.withLock { _ = $0.insert(nameOfThisThread()) }
                done.signal()
            }
        }
        for _ in lanes { done.wait() }
        #if os(Linux)
        #expect(seen.withLock { $0 } == [min(19, process + WriterPool.niceSteps), min(19, process + WriterPool.niceSteps)])
        // Named, so that `top -H` and `perf` tell them apart.
        #expect(names.withLock { $0 }.isSubset(of: ["mf-writer-0", "mf-writer-1"]))
        #endif
    }

    /// Lowering by 0 puts a thread at the process's level at least (a
    /// thread that a Dispatch worker running above it started), and never
    /// raises one already below it. (Above the process only where the test
    /// may raise a thread's priority: as root.)
    @Test func aThreadIsPutAtTheProcessLevelAtLeast() {
        let process = niceOfTheProcess()
        func niceAfter(startingAt start: Int32) -> (started: Bool, after: Int32) {
            let result = Mutex<(Bool, Int32)>((false, 0))
            let done = DispatchSemaphore(value: 0)
            Thread {
                #if canImport(Glibc)
                let started = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, start) == 0
                #else
                let started = setpriority(PRIO_PROCESS, 0, start) == 0
                #endif
                _ = mf_lower_thread_priority(0)
                result.withLock { $0 = (started, niceOfThisThread()) }
                done.signal()
            }.start()
            done.wait()
            return result.withLock { $0 }
        }
        #if os(Linux)
        let below = niceAfter(startingAt: min(19, process + 3))
        #expect(below.started && below.after == min(19, process + 3))
        let above = niceAfter(startingAt: process - 3)
        if above.started { #expect(above.after == process) }
        #endif
    }

    @Test func aLaneNeverRunsTwoJobsAtOnceThoughThreadsAreFree() {
        // One busy lane and idle threads: the case where a second thread
        // could wrongly pick the lane up while its first job runs.
        let pool = WriterPool(threads: 3)
        let log = Log()
        let lane = pool.lane()
        for step in 0..<400 { lane.async { log.run(lane: 0, step) } }
        lane.sync()
        #expect(log.entries.withLock { $0[0] } == Array(0..<400))
        #expect(!log.overlapped.withLock { $0 })
    }

    @Test func syncReturnsTheResultAfterEveryEarlierJob() {
        let pool = WriterPool(threads: 2)
        let lane = pool.lane()
        let counter = Mutex(0)
        for _ in 0..<1000 { lane.async { counter.withLock { $0 += 1 } } }
        #expect(lane.sync { counter.withLock { $0 } } == 1000)
    }

    @Test func everyJobRunsWhenManyLanesBecomeReadyAtOnceFromSeveralThreads() {
        // Lanes made ready faster than three threads can take them, from four
        // posting threads at once: the case where waking only one writer (the
        // next is woken by the one that takes a lane) could strand a lane. In
        // waves, so the threads go back to sleep between them and each wave
        // has to wake them again.
        let pool = WriterPool(threads: 3)
        let lanesPerPoster = 25
        let jobsPerLane = 3
        let perWave = 4 * lanesPerPoster * jobsPerLane
        let ran = Atomic<Int>(0)
        // Not a speed limit: a stranded lane never runs, and this says so instead of hanging.
        let deadline = DispatchTime.now() + 60
        for wave in 1...40 {
            let waveRan = DispatchSemaphore(value: 0)
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                for _ in 0..<lanesPerPoster {
                    let lane = pool.lane()
                    for _ in 0..<jobsPerLane {
                        lane.async {
                            if ran.add(1, ordering: .relaxed).newValue == wave * perWave { waveRan.signal() }
                        }
                    }
                }
            }
            guard waveRan.wait(timeout: deadline) == .success else {
                Issue.record("wave \(wave): \(wave * perWave - ran.load(ordering: .relaxed)) jobs never ran")
                return
            }
        }
        #expect(ran.load(ordering: .relaxed) == 40 * perWave)
    }

    @Test func aBusyLaneDoesNotHoldUpAnother() {
        let pool = WriterPool(threads: 2)
        let slow = pool.lane()
        let gate = DispatchSemaphore(value: 0)
        let otherRan = DispatchSemaphore(value: 0)
        // One lane's job waits for a gate that the test opens only after a
        // job on another lane has run: with lanes served by different
        // threads, that job runs while the first is still busy.
        slow.async { gate.wait() }
        let other = pool.lane()
        other.async { otherRan.signal() }
        let ranWhileBusy = otherRan.wait(timeout: .now() + 30) == .success
        gate.signal()
        slow.sync()
        #expect(ranWhileBusy)
    }
}

/// The chunk pool: sizes, the budget, reuse.
@Suite struct ChunkPoolTests {
    @Test func chunksAreSizedToWhatTheBodyStillHasToSend() {
        #expect(ChunkPool.size(forRemaining: nil) == ChunkPool.largest)
        #expect(ChunkPool.size(forRemaining: 1) == 4096)
        #expect(ChunkPool.size(forRemaining: 4096) == 4096)
        #expect(ChunkPool.size(forRemaining: 4097) == 8192)
        #expect(ChunkPool.size(forRemaining: 65_536) == 65_536)
        #expect(ChunkPool.size(forRemaining: 100_000) == 131_072)
        #expect(ChunkPool.size(forRemaining: 10_000_000) == ChunkPool.largest)
    }

    @Test func theBudgetBoundsChunksInUseAndGivingBackFreesIt() throws {
        let pool = ChunkPool(byteBudget: 1 << 20)
        var taken: [Chunk] = []
        while let chunk = pool.take(size: 64 << 10) { taken.append(chunk) }
        #expect(taken.count == 16)
        #expect(pool.bytesInUse == 1 << 20)
        #expect(pool.take(size: 4096) == nil)
        let returned = taken.removeLast()
        pool.give(returned)
        let again = try #require(pool.take(size: 64 << 10))
        // The chunk given back is the one handed out again: its pages stay warm.
        #expect(again.memory.baseAddress == returned.memory.baseAddress)
        taken.append(again)
        for chunk in taken { pool.give(chunk) }
        #expect(pool.bytesInUse == 0)
        #expect(pool.take(size: ChunkPool.largest) != nil)
    }

    @Test func severalChunksAreTakenAllOrNone() throws {
        let pool = ChunkPool(byteBudget: 1 << 20)
        let first = try #require(pool.take(sizes: [ChunkPool.largest, ChunkPool.largest, 4096]))
        #expect(first.map(\.size) == [ChunkPool.largest, ChunkPool.largest, 4096])
        // 508 KiB left: two more of the largest do not fit, and neither is taken.
        #expect(pool.take(sizes: [ChunkPool.largest, ChunkPool.largest]) == nil)
        #expect(pool.bytesInUse == 2 * ChunkPool.largest + 4096)
        let second = try #require(pool.take(sizes: [ChunkPool.largest, 65_536]))
        for chunk in first + second { pool.give(chunk) }
        #expect(pool.bytesInUse == 0)
        // An empty pool grants a request larger than its budget, so that it cannot wait forever.
        let large = try #require(pool.take(sizes: Array(repeating: ChunkPool.largest, count: 5)))
        #expect(pool.take(size: 4096) == nil)
        for chunk in large { pool.give(chunk) }
    }

    @Test func aWaiterIsWokenOnceWhenALargestChunkIsFreeAgain() throws {
        let pool = ChunkPool(byteBudget: 2 << 20)
        var taken: [Chunk] = []
        while let chunk = pool.take(size: 64 << 10) { taken.append(chunk) }
        let wakes = Mutex(0)
        let waits = pool.wakeWhenRoom(for: 64 << 10) { wakes.withLock { $0 += 1 } }
        #expect(waits)
        #expect(pool.roomWaiterCount == 1)
        // Three chunks back: room for the one asked for, but not yet a largest chunk's (256 KiB, where a quarter of the budget was 512 KiB).
        for _ in 0..<3 { pool.give(taken.removeLast()) }
        #expect(wakes.withLock { $0 } == 0)
        pool.give(taken.removeLast())
        #expect(wakes.withLock { $0 } == 1)
        #expect(pool.roomWaiterCount == 0)
        // Called once: later returns do not call it again.
        pool.give(taken.removeLast())
        #expect(wakes.withLock { $0 } == 1)
        // With room now, the caller is told so and nothing waits.
        let waitsAgain = pool.wakeWhenRoom(for: 64 << 10) { wakes.withLock { $0 += 1 } }
        #expect(!waitsAgain)
        #expect(pool.roomWaiterCount == 0)
        for chunk in taken { pool.give(chunk) }
        #expect(wakes.withLock { $0 } == 1)
    }

    @Test func enginesAddTheirSharesToTheBudgetAndTakeThemBack() throws {
        let pool = ChunkPool(byteBudget: 1 << 20)
        #expect(pool.byteBudget == 1 << 20)
        pool.addShare(16 << 20)
        pool.addShare(8 << 20)
        #expect(pool.byteBudget == 24 << 20)
        // A waiter whose room comes from a share ending is woken too.
        var held: [Chunk] = []
        while let chunk = pool.take(size: ChunkPool.largest) { held.append(chunk) }
        #expect(held.count == 96)
        let woken = Mutex(false)
        let waits = pool.wakeWhenRoom(for: ChunkPool.largest) { woken.withLock { $0 = true } }
        #expect(waits)
        pool.removeShare(16 << 20)
        #expect(pool.byteBudget == 8 << 20)
        #expect(!woken.withLock { $0 })
        for chunk in held { pool.give(chunk) }
        #expect(woken.withLock { $0 })
        pool.removeShare(8 << 20)
        #expect(pool.byteBudget == 1 << 20)
    }

    @Test func aChunkIsAlignedForDirectIO() throws {
        let pool = ChunkPool(byteBudget: 1 << 20)
        for size in [4096, 65_536, ChunkPool.largest] {
            let chunk = try #require(pool.take(size: size))
            #expect(chunk.size == size)
            #expect(Int(bitPattern: chunk.memory.baseAddress) % HashingWriter.directAlignment == 0)
            pool.give(chunk)
        }
    }
}
