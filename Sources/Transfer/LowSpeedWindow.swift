/// The bytes an attempt received over the last stall timeout, for the rule
/// that a transfer getting under a byte a second over that long is stalled.
/// Counted in parts of an eighth of the timeout, so that the window slides:
/// counted in whole windows, a trickle that began inside one (after the
/// head's bytes, or a burst) was caught only at the end of the next, after
/// twice the timeout (a byte every 3 s under `--stall-timeout 10` failed
/// after 20 s). Not thread-safe: the loop thread's.
struct LowSpeedWindow {
    /// When the part being counted began, and its bytes so far.
    private(set) var partStart: ContinuousClock.Instant
    private var partBytes: Int64 = 0
    /// The parts counted before it, oldest first: bytes and length.
    private var parts: [(bytes: Int64, length: Duration)] = []

    init(at now: ContinuousClock.Instant) {
        partStart = now
    }

    /// Counts bytes that arrived.
    mutating func add(_ count: Int) {
        partBytes += Int64(count)
    }

    /// Forgets what was counted: the window starts again at `now` (after a
    /// pause, or a wait the rate limit imposed, neither of which is a stall).
    mutating func restart(at now: ContinuousClock.Instant) {
        partStart = now
        partBytes = 0
        parts.removeAll(keepingCapacity: true)
    }

    /// Leaves `held` out of the part being counted (the loop thread was
    /// held by a write, a few microseconds for any HTTP/2 write): what was
    /// counted stays. (Restarted, the window never covered a whole limit
    /// while any HTTP/2 stream wrote, and no trickle was caught.)
    mutating func leaveOut(_ held: Duration, at now: ContinuousClock.Instant) {
        partStart = min(now, partStart + held)
    }

    /// Whether, at `now`, the last `limit` (at least, and less than a part
    /// more) brought fewer bytes than `bytesPerSecond` over `limit`. Checked on the loop's ticks:
    /// a part ends at the first check an eighth of `limit` after it began.
    mutating func isUnder(_ bytesPerSecond: Double, over limit: Duration, at now: ContinuousClock.Instant) -> Bool {
        guard now - partStart >= limit / 8 else { return false }
        parts.append((partBytes, now - partStart))
        partStart = now
        partBytes = 0
        var length = parts.reduce(Duration.zero) { $0 + $1.length }
        // The oldest parts go once the rest still span the limit.
        while let oldest = parts.first, length - oldest.length >= limit {
            length -= oldest.length
            parts.removeFirst()
        }
        guard length >= limit else { return false }
        let bytes = parts.reduce(Int64(0)) { $0 + $1.bytes }
        // Against the limit, not the window's length (up to a part longer): 5 bytes every
        // 4 s under a 5 s limit, 1.25 a second, were judged over 5.6 s and failed.
        return Double(bytes) < bytesPerSecond * limit.seconds
    }
}
