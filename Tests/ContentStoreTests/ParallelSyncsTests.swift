import Dispatch
import Glibc
import Synchronization
import Testing
@testable import ContentStore

/// The lanes a flush file by file runs its syncs on.
@Suite struct ParallelSyncsTests {
    @Test func everyItemRunsOnceAndSeveralRunAtOnce() throws {
        let syncs = ParallelSyncs(lanes: 4)
        let ran = Mutex<[Int]>([])
        // Item 0 waits for item 1, which another lane runs: one after another,
        // item 0 would wait for good (the timeout ends the test as a failure).
        let secondStarted = DispatchSemaphore(value: 0)
        let waitedInVain = Mutex(false)
        try syncs.run(Array(0..<50)) { item throws(StoreError) in
            if item == 0, secondStarted.wait(timeout: .now() + 30) == .timedOut { waitedInVain.withLock { $0 = true } }
            if item == 1 { secondStarted.signal() }
            ran.withLock { $0.append(item) }
        }
        #expect(!waitedInVain.withLock { $0 })
        #expect(ran.withLock { $0.sorted() } == Array(0..<50))
    }

    @Test func aFailureIsThrownAfterEveryOtherItemRan() {
        let syncs = ParallelSyncs(lanes: 3)
        let ran = Mutex(0)
        #expect(throws: StoreError.self) {
            try syncs.run(Array(0..<20)) { item throws(StoreError) in
                ran.withLock { $0 += 1 }
                if item == 7 { throw StoreError("cannot flush item 7") }
            }
        }
        #expect(ran.withLock { $0 } == 20)
    }

    @Test func oneLaneOrOneItemRunsOnTheCallingThread() throws {
        let caller = pthread_self()
        let threads = Mutex<Set<pthread_t>>([])
        try ParallelSyncs(lanes: 1).run([1, 2, 3]) { _ throws(StoreError) in threads.withLock { _ = $0.insert(pthread_self()) } }
        try ParallelSyncs(lanes: 8).run([1]) { _ throws(StoreError) in threads.withLock { _ = $0.insert(pthread_self()) } }
        #expect(threads.withLock { $0 } == [caller])
    }
}
