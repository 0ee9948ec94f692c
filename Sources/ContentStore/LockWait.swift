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
    /// Ends the waits early once its owner stops them.
    private let stop: LockWaitStop

    init(limit: Duration, noticeAfter: Duration, onLongWait: (@Sendable () -> Void)?, stop: LockWaitStop) {
        self.limit = limit
        self.noticeAfter = noticeAfter
        self.onLongWait = onLongWait
        self.stop = stop
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
        if stop.hasPassed { return false }
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

/// When waits for another process's catalog lock end early: made by the
/// catalog's owner, possibly before the catalog is open (it may wait for a
/// lock while it opens), and shared with the catalog's waits.
public final class LockWaitStop: Sendable {
    /// How long waits may still last: a wait in progress ends by then, and
    /// so does any later one.
    private let deadline = Mutex<ContinuousClock.Instant?>(nil)

    public init() {}

    /// Ends waits `grace` from now (never later than an earlier stop said).
    /// A run being interrupted gives a second: another process's ordinary
    /// commit takes milliseconds, and its last groups should still be
    /// recorded past it. An owner done with the catalog gives none.
    public func stop(grace: Duration) {
        deadline.withLock { deadline in
            let new = ContinuousClock.now + grace
            deadline = min(deadline ?? new, new)
        }
    }

    /// Whether waits are to end now.
    var hasPassed: Bool {
        guard let deadline = deadline.withLock({ $0 }) else { return false }
        return ContinuousClock.now >= deadline
    }
}
