import Foundation

/// Identifies one logical transfer (all its attempts) in events.
public struct TransferID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public var description: String { "#\(rawValue)" }
}

/// One running transfer as seen at a progress tick.
public struct TransferSnapshot: Sendable {
    public let id: TransferID
    public let url: String
    /// Bytes of the body held so far, including a resumed prefix.
    public let bytesReceived: Int64
    /// The full size when the server said it.
    public let bytesExpected: Int64?
    /// Whole seconds since a byte of it last arrived (or its request went
    /// out, or `--limit-rate` last held it back), 0 while it is paused for the disk: a stalled transfer shows so
    /// rather than an estimate of time left. Whole, so that a snapshot
    /// differs from the last only when what is shown of it does.
    public let secondsWithoutData: Int
    /// Its own rate over its attempt so far, its waits for the disk left out,
    /// once it has run a second: one slow transfer beside fast ones makes the
    /// time left its own, which the rate of them all hid.
    public let bytesPerSecond: Double?

    public init(id: TransferID, url: String, bytesReceived: Int64, bytesExpected: Int64?, secondsWithoutData: Int = 0,
                bytesPerSecond: Double? = nil) {
        self.id = id
        self.url = url
        self.bytesReceived = bytesReceived
        self.bytesExpected = bytesExpected
        self.secondsWithoutData = secondsWithoutData
        self.bytesPerSecond = bytesPerSecond
    }
}

extension TransferSnapshot: Equatable {
    /// What is shown of it, its rate aside: the rate moves on every tick
    /// (during a stall too), and progress unchanged but for it is not passed
    /// on again (`--progress json` wrote four lines a second where one was due).
    public static func == (lhs: TransferSnapshot, rhs: TransferSnapshot) -> Bool {
        lhs.id == rhs.id && lhs.url == rhs.url && lhs.bytesReceived == rhs.bytesReceived
            && lhs.bytesExpected == rhs.bytesExpected && lhs.secondsWithoutData == rhs.secondsWithoutData
    }
}

/// A host whose attempts have failed without an answer for a while, not
/// given up (yet): while its URLs wait to retry, the status line says so
/// ("2 waiting to retry" for 30 s said nothing of a host that was down).
public struct FailingHost: Sendable, Equatable {
    /// As messages name it (`127.0.0.1:1`, `photos.example`).
    public let host: String
    /// Whether any of the failed attempts connected: the host is there and does not answer.
    public let connected: Bool
    /// Whole seconds since its first failed attempt began.
    public let seconds: Int
    /// How many hosts fail so, this one among them (the one failing longest).
    public let hosts: Int

    public init(host: String, connected: Bool, seconds: Int, hosts: Int) {
        (self.host, self.connected, self.seconds, self.hosts) = (host, connected, seconds, hosts)
    }
}

/// The engine as a whole at a progress tick.
public struct EngineSnapshot: Sendable, Equatable {
    /// Transfers handed to libcurl right now.
    public let active: [TransferSnapshot]
    /// Transfers waiting for a free slot.
    public let queued: Int
    /// Body bytes received over the network since the engine started (resumed prefixes excluded).
    public let bytesReceived: Int64
    /// Bytes held from an earlier attempt or run that answers went on from
    /// since the engine started, each body's furthest: also of bodies not
    /// finished (yet), which `DownloadedBody.resumedBytes` never tells.
    public var bytesResumed: Int64 = 0
    /// The host failing without an answer the longest, once for 3 s or more.
    public var failingHost: FailingHost?
    /// Download rate in bytes a second over the last 5 seconds, or longer
    /// under a low `--limit-rate` (see `CurlLoop.rateWindowSpan`).
    public let bytesPerSecond: Double
    /// Transfers sleeping before their next attempt (backoff, `Retry-After`).
    public var waitingToRetry = 0
    /// Whole seconds until the first of those wakes (rounded up).
    public var nextRetryInSeconds: Int?
    /// Items left until another process downloading the same URLs into the
    /// same cache has stored them (see `download(count:…)`'s `settledMeanwhile`).
    public var waitingForOtherProcess = 0
}

/// What the engine reports while it works. The stream always ends with one `.finished`.
public enum TransferEvent: Sendable {
    /// An attempt failed and will be tried again after `delay` seconds.
    case retrying(TransferID, url: String, attempt: Int, delay: Double, reason: TransferError)
    /// A host turned connections away while it answered others: it gets at
    /// most `connections` transfers at once while it keeps to that (below `--per-host`),
    /// trying one more now and then. Sent once a host.
    case hostLimited(host: String, connections: Int)
    /// A host answered 429 Too Many Requests: none of its transfers start
    /// for `seconds`, then one goes alone until it is answered (see
    /// `HostRateLimits`). Sent when a pause begins, not when a 429 during
    /// it makes it longer.
    case hostPaused(host: String, seconds: Double)
    /// Throttled progress, sent on the engine's clock even when no bytes arrive.
    case progress(EngineSnapshot)
    /// The engine shut down; nothing follows.
    case finished
}
