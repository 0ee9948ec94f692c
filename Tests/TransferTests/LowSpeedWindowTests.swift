import Testing
@testable import Transfer

/// The low-speed rule's window slides: a trickle is caught one stall timeout
/// (and a part) after it began, not at the end of the window after.
@Suite struct LowSpeedWindowTests {
    private let start = ContinuousClock.now

    /// Checks every quarter second from `from` to `to` (seconds), adding
    /// `bytes(t)` before each; returns the first second at which the window
    /// was under a byte a second over `limit`, or nil.
    private func firstStall(_ window: inout LowSpeedWindow, limit: Duration, from: Double, to: Double,
                            bytes: (Double) -> Int) -> Double? {
        var time = from
        while time <= to {
            window.add(bytes(time))
            if window.isUnder(1, over: limit, at: start + .milliseconds(Int(time * 1000))) { return time }
            time += 0.25
        }
        return nil
    }

    @Test func aTrickleAfterTheHeadIsCaughtOneTimeoutLater() throws {
        var window = LowSpeedWindow(at: start)
        // The head's 200 bytes come at once; then a byte every 3 s, under a 10 s timeout.
        let stalled = firstStall(&window, limit: .seconds(10), from: 0, to: 40) { time in
            time == 0 ? 200 : (time.truncatingRemainder(dividingBy: 3) == 0 ? 1 : 0)
        }
        // Counted in whole windows it was caught at 20 s: the head's window, then the trickle's.
        let caught = try #require(stalled)
        #expect(caught > 10 && caught <= 10 + 1.25 + 0.25, "\(caught)")
    }

    @Test func aSteadyByteASecondOrMoreIsNoStall() {
        var window = LowSpeedWindow(at: start)
        #expect(firstStall(&window, limit: .seconds(10), from: 0, to: 60) { $0.truncatingRemainder(dividingBy: 1) == 0 ? 1 : 0 } == nil)
        var silentThenFast = LowSpeedWindow(at: start)
        #expect(firstStall(&silentThenFast, limit: .seconds(4), from: 0, to: 60) { _ in 100 } == nil)
    }

    /// A hold of the loop (any HTTP/2 write holds it a few microseconds) is
    /// left out of the window, not a restart of it: restarted every tick,
    /// the window never covered a limit, and no trickle was caught.
    @Test func aShortHoldEveryTickKeepsWhatWasCounted() throws {
        var window = LowSpeedWindow(at: start)
        var time = 0.0
        var caught: Double?
        while time <= 30, caught == nil {
            let now = start + .milliseconds(Int(time * 1000))
            window.leaveOut(.microseconds(10), at: now)
            if time.truncatingRemainder(dividingBy: 3) == 0 { window.add(1) }
            if window.isUnder(1, over: .seconds(10), at: now) { caught = time }
            time += 0.25
        }
        let at = try #require(caught)
        #expect(at >= 10 && at <= 11.5, "\(at)")
    }

    /// Bytes that come in bursts, a byte a second or more on the whole, are
    /// no stall: 5 bytes every 4 s under a 5 s limit were judged over a
    /// window a part longer than the limit, and failed.
    @Test func burstsAtAByteASecondOrMoreAreNoStall() {
        var window = LowSpeedWindow(at: start)
        #expect(firstStall(&window, limit: .seconds(5), from: 0, to: 60) { time in
            time.truncatingRemainder(dividingBy: 4) == 0 ? 5 : 0
        } == nil)
        var steady = LowSpeedWindow(at: start)
        // 1.3 bytes a second, as whole bytes: one every 0.75 s, under a 3 s limit.
        #expect(firstStall(&steady, limit: .seconds(3), from: 0, to: 60) { time in
            time.truncatingRemainder(dividingBy: 0.75) == 0 ? 1 : 0
        } == nil)
    }

    @Test func aRestartForgetsWhatWasCounted() {
        var window = LowSpeedWindow(at: start)
        // Nine quiet seconds, then a restart (a pause ended): no stall before 10 s after it.
        #expect(firstStall(&window, limit: .seconds(10), from: 0, to: 9) { _ in 0 } == nil)
        window.restart(at: start + .seconds(9))
        let stalled = firstStall(&window, limit: .seconds(10), from: 9.25, to: 30) { _ in 0 }
        #expect(stalled.map { $0 >= 19 } == true, "\(String(describing: stalled))")
    }
}
