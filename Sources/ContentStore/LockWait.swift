import Foundation
import GRDB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How the catalog waits for another process's lock: short sleeps that grow
/// to 100 ms, as SQLite's own busy handler sleeps, until `limit` (by default
/// `Catalog.busySeconds`) has passed; once the wait is longer than `noticeAfter`, `onLongWait` is
/// called (once), so that a person is not left looking at a silent minute.
final class LockWait: Sendable {
    /// Milliseconds slept before each try: SQLite's own schedule, then 100 ms a try.
    private static let delays = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100]

    let limit: Duration
    let noticeAfter: Duration
    let onLongWait: (@Sendable () -> Void)?
    private let noticed = Mutex(false)
    /// How many waits ended at `limit` with the lock still held.
    let givenUp = Atomic(0)
    /// Runs `body` (a write, on the writer connection's thread) with lock
    /// waits that give up at once (see `Catalog.touch`). Marked on the
    /// thread, not the catalog: the busy handler runs on the thread of the
    /// connection that waits, so readers of this process, on their own
    /// threads, still wait as usual.
    static func withoutWaiting<T>(_ body: () throws -> T) rethrows -> T {
        Thread.current.threadDictionary[impatientKey] = true
        defer { Thread.current.threadDictionary.removeObject(forKey: impatientKey) }
        return try body()
    }

    private static let impatientKey = "mediafetch.catalog.noLockWait"
    /// When the process is stopping, how long waits may still last: a wait
    /// in progress ends by then, and so does any later one.
    private let stopDeadline = Mutex<ContinuousClock.Instant?>(nil)

    /// Ends waits `grace` from now (see `stopDeadline`). A grace, not zero:
    /// another process's ordinary commit takes milliseconds, and the last
    /// groups of an interrupted run should still be recorded past it.
    func stop(grace: Duration) {
        stopDeadline.withLock { deadline in
            let new = ContinuousClock.now + grace
            deadline = min(deadline ?? new, new)
        }
    }

    /// Asked before each try: true ends the wait at once (see `Catalog.init`).
    private let givesUp: (@Sendable () -> Bool)?

    init(limit: Duration, noticeAfter: Duration, onLongWait: (@Sendable () -> Void)?,
         givesUp: (@Sendable () -> Bool)? = nil) {
        self.limit = limit
        self.noticeAfter = noticeAfter
        self.onLongWait = onLongWait
        self.givesUp = givesUp
    }

    /// How long a connection has slept by its try number `tries` (SQLite
    /// counts the tries of each wait from 0): the sleeps are known, so the wait
    /// is measured without a clock per connection.
    static func waited(beforeTry tries: Int) -> Duration {
        let scheduled = delays.prefix(tries).reduce(0, +)
        let beyond = max(0, tries - delays.count) * 100
        return .milliseconds(scheduled + beyond)
    }

    /// The busy handler: true to try again after a sleep, false to give up
    /// (the statement then fails with SQLITE_BUSY).
    func shouldTryAgain(tries: Int) -> Bool {
        if Thread.current.threadDictionary[Self.impatientKey] != nil { return false }
        if let givesUp, givesUp() { return false }
        if let deadline = stopDeadline.withLock({ $0 }), ContinuousClock.now >= deadline { return false }
        let waited = Self.waited(beforeTry: tries)
        if waited >= limit {
            givenUp.add(1, ordering: .relaxed)
            return false
        }
        if waited >= noticeAfter, let onLongWait, noticed.withLock({ seen in defer { seen = true }; return !seen }) {
            onLongWait()
        }
        let delay = tries < Self.delays.count ? Self.delays[tries] : 100
        usleep(useconds_t(delay * 1000))
        return true
    }
}
