import Foundation

/// The version reported in `User-Agent: mediafetch/<version>`.
public let mediafetchVersion = "0.1.0"

/// How the engine treats remote hosts: concurrency, timeouts, limits, retries.
public struct TransferConfiguration: Sendable, Equatable {
    /// How far a batch reads its list ahead, in places (see
    /// `DownloadBatch.lookaheadPerPlace`); tests shorten it.
    var batchLookaheadPerPlace = DownloadBatch.lookaheadPerPlace
    /// Transfers running at once, across all hosts (`--jobs`).
    public var maxConcurrentTransfers: Int = 16
    /// Transfers running at once against one host (`--per-host`).
    public var maxTransfersPerHost: Int = 8
    /// What is retried, how often, and how long to wait in between.
    public var retry = RetryPolicy()
    /// Seconds allowed to establish a connection.
    public var connectTimeout: Double = 15
    /// A connected transfer that receives nothing for this many seconds, or
    /// less than one byte a second over that long, is stalled (and retried).
    public var stallTimeout: Double = 30
    /// Seconds one attempt may take in total (`--timeout`); nil for no limit.
    public var attemptTimeout: Double?
    /// Largest body accepted (`--max-filesize`); nil for no limit.
    public var maxFileSize: Int64?
    /// Per-transfer rate limit in bytes a second (`--limit-rate`); nil for none.
    public var maxBytesPerSecond: Int64?
    /// A file of CA certificates (PEM) to trust instead of the system's, for
    /// servers behind a private or corporate CA; nil trusts the system's.
    public var caCertificates: String?
    /// Redirects followed before giving up.
    public var maxRedirects: Int = 10
    /// Sent as `User-Agent`.
    public var userAgent: String = "mediafetch/\(mediafetchVersion)"
    /// Seconds between progress snapshots; the engine's own clock drives them,
    /// so a stalled transfer still reports.
    public var progressInterval: Double = 0.25
    /// Bodies at least this large (or of unknown length) keep their validator
    /// beside the partial file, so a later run can resume them.
    public var resumableThreshold: Int64 = 256 * 1024
    /// Finished bodies that may keep their partial file's descriptor (and
    /// lock) open until the caller has stored them; beyond this many, a
    /// finished body is renamed to a private name instead, which costs a
    /// rename but no descriptor.
    public var maxHeldFinishedBodies: Int = TransferConfiguration.descriptorsToSpare()
    /// Write bodies past the page cache (`O_DIRECT`) where the filesystem
    /// allows it: no copy into the page cache and no writeback left for the
    /// store's flush. Off, every byte goes through the page cache.
    public var directIO = true
    /// Seconds in which every attempt at a host (five at least) must have
    /// failed without an answer before its other URLs end untried (see
    /// `HostReachability`); nil tries every URL in full, however dead its host.
    public var unreachableHostPatience: Double? = 30
    /// How often a given-up host lets an attempt through, in seconds; nil
    /// for every 5 s or the patience, if shorter (internal: tests set it).
    var unreachableHostTrialInterval: Double?

    public init() {}

    /// A quarter of the process's descriptor limit (less the descriptors it
    /// was started with), between 16 and 1024: a
    /// group commit of many small files fits, and plenty is left for sockets
    /// and the partials of the items in flight.
    static func descriptorsToSpare() -> Int {
        min(1024, max(16, (descriptorLimit() - DescriptorBudget.inheritedAtStart.load(ordering: .relaxed)) / 4))
    }

    /// The process's soft limit on open files (1024 when it cannot be read).
    static func descriptorLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        // RLIM_INFINITY is all ones; clamping turns it (and any huge limit) into Int.max.
        return Int(clamping: limit.rlim_cur)
    }
}

/// When and how a failed attempt is tried again: exponential backoff with
/// jitter (half of each wait fixed, half random), and `Retry-After`
/// honoured when the server sends it.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts after the first (`--retries`).
    public var maxRetries: Int = 4
    /// Delay before the first retry; it doubles with each further one.
    public var baseDelay: Double = 0.5
    /// Longest computed backoff.
    public var maxDelay: Double = 30
    /// Longest `Retry-After` that is waited for; a server asking for more fails the item.
    public var maxRetryAfter: Double = 600

    public init(maxRetries: Int = 4, baseDelay: Double = 0.5, maxDelay: Double = 30, maxRetryAfter: Double = 600) {
        self.maxRetries = maxRetries
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxRetryAfter = maxRetryAfter
    }

    /// Seconds to wait before retry number `retry` (1-based) after `error`, or
    /// nil when the error is final or the retries are used up.
    /// `random` returns a value in 0..<1 (injectable so tests are deterministic).
    public func delay(beforeRetry retry: Int, after error: TransferError,
                      random: () -> Double = { Double.random(in: 0..<1) }) -> Double? {
        guard error.isRetryable, retry <= maxRetries else { return nil }
        let ceiling = min(maxDelay, baseDelay * pow(2, Double(retry - 1)))
        // Half fixed, half random: spreads clients apart without collapsing to zero.
        let backoff = ceiling / 2 + random() * ceiling / 2
        if let retryAfter = error.retryAfter {
            guard retryAfter <= maxRetryAfter else { return nil }
            // Spread by up to a tenth of the wait (a second at most): the items
            // one 429 sent away came back in the same instant, and were sent away again.
            let spread = random() * min(1, max(0, retryAfter) / 10)
            // Never sooner than the backoff: `Retry-After: 0`, a negative number
            // or a date gone by spent every retry within milliseconds.
            return max(retryAfter + spread, backoff)
        }
        return backoff
    }

    /// The wait a server asked for (`Retry-After`) when that is why
    /// `delay(beforeRetry:after:)` gave up: longer than `maxRetryAfter`
    /// while retries were left. Nil when the item failed for another reason.
    public func refusedWait(before retry: Int, after error: TransferError) -> Double? {
        guard error.isRetryable, retry <= maxRetries, let asked = error.retryAfter, asked > maxRetryAfter else { return nil }
        return asked
    }
}
