import Testing
@testable import Transfer

@Suite struct RateWindowTests {
    /// libcurl under --limit-rate: each second's allowance in one burst, ticks every 0.25 s.
    @Test func burstsOnceASecondShowNearTheirAverage() {
        let start = ContinuousClock.now
        var window = RateWindow(span: .seconds(5), start: start)
        var received: Int64 = 0
        var shown: [Double] = []
        for tick in 1...40 {
            if tick % 4 == 1 { received += 300_000 }
            shown.append(window.record(received, at: start + .milliseconds(250 * tick)))
        }
        // Once the window is full (after 5 s), within a fifth of the true 300 kB/s.
        for rate in shown.suffix(20) { #expect(rate > 240_000 && rate < 360_000, "\(rate)") }
    }

    @Test func aSteadyRateIsShownAsItIs() {
        let start = ContinuousClock.now
        var window = RateWindow(span: .seconds(5), start: start)
        for tick in 1...12 {
            let rate = window.record(Int64(tick) * 250_000, at: start + .milliseconds(250 * tick))
            #expect(abs(rate - 1_000_000) < 1, "\(rate)")
        }
    }

    /// An average since the start would still show most of the old rate.
    @Test func aSlowerRateShowsOnceTheWindowHasPassed() {
        let start = ContinuousClock.now
        var window = RateWindow(span: .seconds(5), start: start)
        var received: Int64 = 0
        var rate = 0.0
        for tick in 1...80 {
            received += tick <= 40 ? 250_000 : 50_000
            rate = window.record(received, at: start + .milliseconds(250 * tick))
        }
        // 10 s at 1 MB/s, then 10 s at 0.2 MB/s: the last 5 s were all at 0.2 MB/s.
        #expect(abs(rate - 200_000) < 1, "\(rate)")
    }

    @Test func aStopShowsZeroOnceTheWindowHasPassed() {
        let start = ContinuousClock.now
        var window = RateWindow(span: .seconds(2), start: start)
        _ = window.record(1_000_000, at: start + .seconds(1))
        #expect(window.record(1_000_000, at: start + .seconds(2)) > 0)
        #expect(window.record(1_000_000, at: start + .seconds(4)) == 0)
    }
}
