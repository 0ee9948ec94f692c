/// The receive rate over the last few seconds, as curl's "current speed"
/// is: bytes over a window, not per tick. Under `--limit-rate` libcurl lets a
/// transfer's bytes through in bursts about a second apart; a per-tick
/// average showed two to four times the limit after each burst.
struct RateWindow {
    typealias Instant = ContinuousClock.Instant

    let span: Duration
    /// Byte counts with when they were seen, oldest first; the first one is
    /// at or before the window's start, so the window covers all of `span`.
    private var samples: [(at: Instant, bytes: Int64)]

    init(span: Duration = .seconds(5), start: Instant) {
        self.span = span
        samples = [(start, 0)]
    }

    /// Notes that `bytes` had arrived in all by `now`, and returns the rate
    /// in bytes a second over the window that ends there. The window opens
    /// with the first bytes, not at `start` (a run may first spend seconds
    /// finding what is cached): until then the start moves along.
    mutating func record(_ bytes: Int64, at now: Instant) -> Double {
        if samples.count == 1, bytes == samples[0].bytes {
            samples[0].at = now
            return 0
        }
        samples.append((now, bytes))
        while samples.count > 2, now - samples[1].at >= span { samples.removeFirst() }
        let first = samples[0]
        let seconds = (now - first.at).seconds
        guard seconds > 0 else { return 0 }
        return max(0, Double(bytes - first.bytes) / seconds)
    }
}
