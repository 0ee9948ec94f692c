import Foundation

/// Polls `condition` every 10 ms until it holds or `limit` has passed, and
/// returns whether it held: for a test that must see another thread reach a
/// state (a write waiting, asking again and again) before it goes on, without
/// guessing how long that takes on a loaded machine.
@discardableResult
public func waitUntil(atMost limit: Duration = .seconds(30), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        usleep(10_000)
    }
    return true
}

/// `waitUntil` for async tests: sleeps between looks instead of blocking a
/// thread of the concurrency pool (two on a two-core machine), which the
/// work being waited for may need.
@discardableResult
public func waitUntil(atMost limit: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}
