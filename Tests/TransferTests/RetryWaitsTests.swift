import Testing
import TestSupport
@testable import Transfer

/// Sleeps before a retry: counted while they last, ended by a cancel, and
/// by their host being given up, which keeps further ones from sleeping
/// until the host answers again.
@Suite struct RetryWaitsTests {
    private let one = TransferID(rawValue: 1), two = TransferID(rawValue: 2), three = TransferID(rawValue: 3)

    @Test func aSleepIsCountedWhileItLasts() async throws {
        let waits = RetryWaits()
        let started = ContinuousClock.now
        let sleeper = Task { try await waits.sleep(one, host: "h:80", for: .seconds(60)) }
        #expect(await waitUntil { waits.state(at: .now).count == 1 })
        // Whole seconds left, rounded up: what is left of the 60 since it began (a busy machine may take seconds to look).
        let now = ContinuousClock.now
        let next = waits.state(at: now).nextInSeconds ?? 0
        let elapsed = Double((now - started).components.seconds) + Double((now - started).components.attoseconds) / 1e18
        #expect(next <= 60 && Double(next) >= 60 - elapsed, "\(next) s left after \(elapsed) s")
        sleeper.cancel()
        await #expect(throws: TransferError.cancelled) { try await sleeper.value }
        #expect(waits.state(at: .now).count == 0)
        // A short one ends by itself.
        try await waits.sleep(two, host: "h:80", for: .milliseconds(10))
        #expect(waits.state(at: .now).count == 0)
    }

    @Test func givingAHostUpWakesItsSleepersAndKeepsMoreFromSleepingUntilItIsTakenBack() async throws {
        let waits = RetryWaits()
        let started = ContinuousClock.now
        let onHost = Task { try await waits.sleep(one, host: "dead:80", for: .seconds(3600)) }
        let elsewhere = Task { try await waits.sleep(two, host: "live:80", for: .seconds(3600)) }
        #expect(await waitUntil { waits.state(at: .now).count == 2 })

        waits.giveUp("dead:80")
        // The host's sleeper wakes, long before its time (an hour: a loaded CI run's tests held the
        // cooperative threads for over a minute, and a sleep of 60 s looked slept out); the other host's sleeps on.
        try await onHost.value
        #expect(ContinuousClock.now - started < .seconds(3600))
        #expect(waits.state(at: .now).count == 1)
        // A retry of the given-up host does not sleep at all.
        try await waits.sleep(three, host: "dead:80", for: .seconds(3600))
        #expect(ContinuousClock.now - started < .seconds(3600))

        // Taken back: its retries sleep their time again.
        waits.takeBack("dead:80")
        let again = Task { try await waits.sleep(three, host: "dead:80", for: .seconds(3600)) }
        #expect(await waitUntil { waits.state(at: .now).count == 2 })
        again.cancel()
        elsewhere.cancel()
        await #expect(throws: TransferError.cancelled) { try await again.value }
        await #expect(throws: TransferError.cancelled) { try await elsewhere.value }
        #expect(waits.state(at: .now).count == 0)
    }

    @Test func aCancelEndsASleepEvenBeforeItBegins() async throws {
        let waits = RetryWaits()
        let sleeper = Task {
            // Cancelled before it asks to sleep.
            withUnsafeCurrentTask { $0?.cancel() }
            try await waits.sleep(one, host: "h:80", for: .seconds(60))
        }
        await #expect(throws: TransferError.cancelled) { try await sleeper.value }
        #expect(waits.state(at: .now).count == 0)
    }
}
