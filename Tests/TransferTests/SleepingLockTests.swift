import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import Transfer

/// The lock the hot shared state uses instead of `Mutex`.
@Suite struct SleepingLockTests {
    @Test(.timeLimit(.minutes(1)))
    func threadsThatUpdateTheValueTogetherLoseNoUpdate() {
        // A read-modify-write spread over two steps with a yield between
        // them, on threads of their own: without mutual exclusion the
        // threads would interleave inside and overwrite each other's increments.
        let lock = SleepingLock((count: 0, inside: 0, overlapped: false))
        let threads = 6, rounds = 300
        let start = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        for _ in 0..<threads {
            done.enter()
            Thread {
                start.wait()
                for _ in 0..<rounds {
                    lock.withLock { state in
                        state.inside += 1
                        if state.inside > 1 { state.overlapped = true }
                        let before = state.count
                        sched_yield()
                        state.count = before + 1
                        state.inside -= 1
                    }
                }
                done.leave()
            }.start()
        }
        for _ in 0..<threads { start.signal() }
        done.wait()
        let final = lock.withLock { $0 }
        #expect(final.count == threads * rounds)
        #expect(!final.overlapped)
    }

    @Test(.timeLimit(.minutes(1)))
    func anErrorThrownInsideLeavesTheLockFree() {
        struct Refused: Error {}
        let lock = SleepingLock(1)
        #expect(throws: Refused.self) {
            try lock.withLock { (value: inout Int) throws(Refused) in
                value = 2
                throw Refused()
            }
        }
        // Taken again on the same thread: a lock left held would hang here.
        #expect(lock.withLock { $0 } == 2)
    }
}
