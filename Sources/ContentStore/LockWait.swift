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
    /// Set for a write that should not wait at all (see `Catalog.touch`);
    /// only while the connection runs that write, so no other write of
    /// this process can be affected.
    let impatient = Atomic(false)
    /// Set when the process is stopping: a wait in progress ends at its next
    /// try, and later writes do not wait.
    let stopped = Atomic(false)

    init(limit: Duration, noticeAfter: Duration, onLongWait: (@Sendable () -> Void)?) {
        self.limit = limit
        self.noticeAfter = noticeAfter
        self.onLongWait = onLongWait
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
        if stopped.load(ordering: .relaxed) || impatient.load(ordering: .relaxed) { return false }
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
