import CFileSync
import Foundation
import Synchronization

/// Threads of their own for hashing and writing bodies.
///
/// Writing blocks (a direct write waits for the device), and hashing is the
/// heaviest CPU work per body. On Dispatch's shared threads that work would
/// sit in front of the Swift tasks waiting to be resumed, and on a small
/// machine the tasks that feed the transfer loop would starve. A fixed set of
/// threads keeps the two apart and bounds how many run at once.
///
/// Each body gets a `Lane`: its jobs run one at a time in the order given, on
/// whichever pool thread is free; lanes with work take turns.
final class WriterPool: Sendable {
    /// The pool every writer uses. A direct write sleeps until the device has
    /// the bytes, so the threads are mostly waiting, not computing, and the
    /// next download of a batch is set up by the thread that finished the
    /// last one: with too few threads, bodies wait for a writer while
    /// transfer slots stand empty. 2000 bodies of 64 KiB on 2 cores, median
    /// wall: 1 thread 0.53 s, 2 threads 0.42 s, 4 threads 0.385 s; with 4
    /// threads 6–9 of the 16 slots were busy on average, with 8 (and a batch
    /// of 4 x --jobs) 11–14, though the wall time then hardly moved (0.37 to
    /// 0.34 s: the two cores are the limit). Twice the cores, eight at
    /// least, sixteen at most.
    static let shared = WriterPool(threads: max(8, min(16, 2 * ProcessInfo.processInfo.activeProcessorCount)))

    /// A serial queue of jobs on the pool.
    final class Lane: @unchecked Sendable {
        // @unchecked: `jobs` and `scheduled` are guarded by the pool's lock.
        fileprivate var jobs: [@Sendable () -> Void] = []
        /// In the ready queue or running on a thread.
        fileprivate var scheduled = false
        fileprivate let pool: WriterPool

        fileprivate init(pool: WriterPool) { self.pool = pool }

        /// Runs `job` after every job given before it.
        func async(_ job: @escaping @Sendable () -> Void) {
            pool.enqueue(job, on: self)
        }

        /// Waits until every job given so far has run. Never call it from a
        /// job of the same lane. An idle lane returns at once: waiting must not
        /// need a free pool thread (a pool thread doing file work for a new
        /// body, say, would otherwise wait for one, and four such would wait forever).
        func sync() {
            guard !pool.isIdle(self) else { return }
            let done = DispatchSemaphore(value: 0)
            async { done.signal() }
            done.wait()
        }

        /// Runs `work` after every job given so far and returns its result
        /// (on the calling thread when the lane is idle).
        func sync<T: Sendable>(_ work: @escaping @Sendable () -> T) -> T {
            if pool.isIdle(self) { return work() }
            let box = ResultBox<T>()
            let done = DispatchSemaphore(value: 0)
            async {
                box.value.withLock { $0 = work() }
                done.signal()
            }
            done.wait()
            return box.value.withLock { $0! }
        }
    }

    private final class ResultBox<T: Sendable>: Sendable {
        let value = Mutex<T?>(nil)
    }

    private struct State {
        var ready = FIFO<Lane>()
        /// Threads waiting (or about to wait) for `wakeups`.
        var sleeping = 0
        /// Threads woken to take a ready lane that have not taken one yet.
        var searching = 0

        /// Whether a sleeping thread should be woken for the ready lanes:
        /// only when none is on its way already. The thread that takes a lane
        /// wakes the next one if more wait, so the cost of waking threads falls
        /// on the writers rather than on whoever enqueues (the loop thread, whose
        /// time bounds the whole download). Marks the woken thread as searching.
        mutating func shouldWakeOne() -> Bool {
            guard !ready.isEmpty, searching == 0, sleeping > 0 else { return false }
            sleeping -= 1
            searching += 1
            return true
        }
    }

    private let state = SleepingLock(State())
    /// Signalled once per thread woken (see `State.shouldWakeOne`).
    private let wakeups = DispatchSemaphore(value: 0)
    let threadCount: Int

    /// How many nice levels the writer threads run below the rest of the
    /// process. Every body passes through the one transfer thread, and with
    /// eight writers runnable the scheduler gave it no more of the cores than
    /// each of them while they hashed: downloads waited for it. Below it, the
    /// writers take what it leaves, and their work waits in the chunks
    /// meanwhile (bounded: a full pool pauses the transfers). 2000 bodies of
    /// 64 KiB on 2 cores, one build run with and without it in turn (the
    /// order alternating): 0.221 s against 0.236 s by the medians of 15
    /// runs each, 11 of the 15 pairs won; 8 of 64 MiB within the noise. Five
    /// levels (a third of the share) leave them a fair part of a machine
    /// busy with other work.
    static let niceSteps = Int32(MF_BACKGROUND_NICE_STEPS)

    /// Starts `threads` threads, which live as long as the process (like Dispatch's).
    init(threads: Int) {
        threadCount = max(1, threads)
        for index in 0..<threadCount {
            let thread = Thread { [self] in
                mf_name_this_thread("mf-writer-\(index)")
                run()
            }
            // Hashing and writing go deep into no call chain: a small stack
            // spares the 8 MiB of address space each a `ulimit -v` counts.
            thread.stackSize = 512 << 10
            thread.start()
        }
    }

    /// A new lane for one body.
    func lane() -> Lane { Lane(pool: self) }

    /// Whether `lane` has no job waiting or running.
    fileprivate func isIdle(_ lane: Lane) -> Bool {
        state.withLock { _ in !lane.scheduled && lane.jobs.isEmpty }
    }

    private func enqueue(_ job: @escaping @Sendable () -> Void, on lane: Lane) {
        let wake = state.withLock { state -> Bool in
            lane.jobs.append(job)
            guard !lane.scheduled else { return false }
            lane.scheduled = true
            state.ready.append(lane)
            return state.shouldWakeOne()
        }
        if wake { wakeups.signal() }
    }

    private func run() {
        _ = mf_lower_thread_priority(Self.niceSteps)
        var woken = false
        while true {
            let (taken, wakeNext) = state.withLock { state -> ((Lane, [@Sendable () -> Void])?, Bool) in
                if woken { state.searching -= 1 }
                guard let lane = state.ready.removeFirst() else {
                    state.sleeping += 1
                    return (nil, false)
                }
                defer { lane.jobs.removeAll(keepingCapacity: true) }
                return ((lane, lane.jobs), state.shouldWakeOne())
            }
            if wakeNext { wakeups.signal() }
            guard let (lane, jobs) = taken else {
                wakeups.wait()
                woken = true
                continue
            }
            woken = false
            for job in jobs { job() }
            state.withLock { state in
                if lane.jobs.isEmpty {
                    lane.scheduled = false
                } else {
                    // More arrived meanwhile: back of the line, so other lanes get a turn.
                    state.ready.append(lane)
                }
            }
            // Then around again: a thread that just worked looks for more before it sleeps.
        }
    }
}
