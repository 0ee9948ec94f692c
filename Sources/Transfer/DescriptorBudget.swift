import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How the process's limit on open files is shared out among what an engine
/// keeps open: each running transfer's socket and a cached connection, the
/// partial of each item in flight and of each item waiting to retry, and the
/// finished bodies held until they are stored; `reserved` are kept back for
/// the rest (the catalog, the store's directories, the standard streams, the
/// resolver). Asking for more transfers than the limit allows made items
/// fail with "Too many open files"; the engine runs at most `maxJobs`.
public struct DescriptorBudget: Sendable, Equatable {
    /// Kept back for descriptors that are not per item.
    public static let reserved = 64
    /// Descriptors a download needs free, beside those the process was
    /// started with (see `inherited`): about 20 are the run's own (the
    /// catalog's connections, the store's directories, libcurl's, the
    /// standard streams), and one transfer's worst case is 28 (its
    /// connections, 8 items in flight, 2 waiting to retry, 16 finished bodies
    /// held until stored). Under a limit of 64, 301 items retrying on 429s
    /// were all stored with 52 free, and failed by the hundred with "Too many
    /// open files" with 48; 56 leaves a few to spare. Running short is worse
    /// than failed items: libdispatch aborts the process (SIGILL) when it
    /// cannot open a file of its own (its thread pool's monitor reads
    /// /proc), so a run with fewer free is refused.
    public static let minimumFree = 56

    /// Whether the limit leaves under `minimumFree` beside the descriptors
    /// the process was started with.
    public var isTooLow: Bool { free < Self.minimumFree }

    /// What the limit leaves beside the descriptors the process was started with.
    private var free: Int { limit - inherited }

    /// The least limit that would do with the descriptors the process was started with.
    public var leastLimitNeeded: Int { inherited + Self.minimumFree }

    /// The least free descriptors any command runs with: libdispatch, which
    /// every command uses, aborts the process (SIGILL) when it cannot open
    /// its own two (`--version` died so under a limit of 4), and SQLite
    /// needs a few for the catalog (`list` and `stats` could not open it
    /// under 12).
    public static let leastFreeForAnyCommand = 16

    /// Why no command can run under this limit, if none can (see `leastFreeForAnyCommand`).
    public var problemForAnyCommand: String? {
        guard free < Self.leastFreeForAnyCommand else { return nil }
        return tooLow(for: "mediafetch", needing: inherited + Self.leastFreeForAnyCommand)
    }

    /// One line: the limit is too low for `what`, which needs a limit of
    /// `least`, and what to do about it. The soft limit was raised to the
    /// hard one already (see `TransferEngine.prepareProcess`): only whoever
    /// set that can raise it.
    public func tooLow(for what: String, needing least: Int) -> String {
        "the limit on open files is \(limit) (the hard limit, ulimit -Hn\(inheritedShare("; "))), and \(what) needs at least "
            + "\(least): \(inherited > 0 ? "close those or " : "")raise it \(Self.whereToRaise)"
    }

    /// Where a hard limit on open files is set, to raise it.
    public static let whereToRaise = "where it is set (limits.conf, LimitNOFILE=, docker --ulimit)"

    /// What of the limit the descriptors the process was started with take,
    /// between `opening` and `closing` (nothing when there are none).
    public func inheritedShare(_ opening: String, _ closing: String = "") -> String {
        guard inherited > 0 else { return "" }
        return "\(opening)\(inherited) of them taken by descriptors mediafetch was started with\(closing)"
    }

    /// What one running transfer needs at the least: its socket and a cached
    /// connection, two items in flight and two waiting to retry.
    static let leastPerJob = 6

    /// The limit on open files shared out.
    public let limit: Int
    /// Finished bodies that may hold their descriptor until stored.
    public let heldFinishedBodies: Int
    /// Descriptors the process was started with beyond the standard three
    /// (see `countInherited`): they count against the limit too.
    public let inherited: Int

    public init(limit: Int, heldFinishedBodies: Int, inherited: Int = 0) {
        self.limit = limit
        self.heldFinishedBodies = heldFinishedBodies
        self.inherited = inherited
    }

    /// The budget of this process, as the engine would use it.
    public static func current(heldFinishedBodies: Int) -> DescriptorBudget {
        DescriptorBudget(limit: TransferConfiguration.descriptorLimit(), heldFinishedBodies: heldFinishedBodies,
                         inherited: inheritedAtStart.load(ordering: .relaxed))
    }

    /// Descriptors left for transfers, items in flight and items waiting to retry.
    private var available: Int { max(0, free - Self.reserved - heldFinishedBodies) }

    /// What `countInherited` found at start-up (see `TransferEngine.prepareProcess`); 0 until then.
    static let inheritedAtStart = Atomic(0)

    /// Counts the descriptors open beyond the standard three: a shell, a CI
    /// runner or a parent program may leave some open in the processes it
    /// starts, and each takes a number under the limit. Left out of the
    /// budget, 20 of them under a limit of 64 made 240 of 301 items fail
    /// with "Too many open files", and 40 made libdispatch abort the process.
    /// Only numbers under `limit` count: the limit is on numbers, and one
    /// above it takes none of them. Where /dev/fd cannot be read, each number
    /// is asked (up to 65,536); where it cannot be opened for want of a free
    /// number, every one is taken.
    static func countInherited(limit: Int = TransferConfiguration.descriptorLimit()) -> Int {
        let numbers = min(limit, 65_536)
        guard let directory = opendir("/dev/fd") else {
            if errno == EMFILE { return max(0, numbers - 3) }
            return (3..<max(3, numbers)).count { fcntl(Int32($0), F_GETFD) != -1 }
        }
        defer { closedir(directory) }
        let own = dirfd(directory)
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let fd = Int(name), fd > 2, fd < numbers, fd != Int(own) { count += 1 }
        }
        return count
    }

    /// The most transfers at once the limit allows (at least one).
    public var maxJobs: Int { max(1, available / Self.leastPerJob) }

    /// Room for items in flight and items waiting to retry, at `jobs` transfers.
    private func itemRoom(jobs: Int) -> Int { max(0, available - 2 * jobs) / 2 }

    /// Items in flight at once: four times the transfers, fewer when the
    /// limit is tight, never fewer than twice (or eight).
    func batchWidth(jobs: Int) -> Int {
        max(8, 2 * jobs, min(4 * jobs, itemRoom(jobs: jobs)))
    }

    /// Connections libcurl may hold open at `jobs` transfers, those in use
    /// and those kept for reuse: at least two a transfer, and up to 256 more
    /// from what the items leave of the limit. With two a transfer, a list
    /// that went round more hosts than that (50 hosts at `--jobs 16`) had
    /// each new connection push out another host's, and nearly every URL
    /// paid for a new connection and TLS handshake (8.1 s against 2.3 s for
    /// the same 5,000 HTTPS URLs in host order).
    ///
    /// This is libcurl's cache size (CURLMOPT_MAXCONNECTS), which it holds
    /// to only when a transfer gives its connection back: with the cache
    /// full, every running transfer may open one more. So the extra comes
    /// from what is left after that `jobs` too.
    func connections(jobs: Int) -> Int {
        let spare = available - 3 * jobs - batchWidth(jobs: jobs) - retryWaiting(jobs: jobs)
        return 2 * jobs + min(Self.extraConnections, max(0, spare))
    }

    /// The most connections kept beyond two a transfer.
    static let extraConnections = 256

    /// Items that may wait to retry beside those in flight (each holds its
    /// partial): 64 times the transfers and `leastRetryWaiting` at least
    /// (1,024 at 16, where the limit allows: a few hundred under a limit of
    /// 1,024), fewer when the limit is tight, never fewer than twice the
    /// transfers. Past it, items that fail keep their places in the batch
    /// while they wait: with 64, two dead hosts' URLs filled every place, and
    /// the good URLs after them waited 30 s, with nothing running, for those
    /// hosts to be given up.
    func retryWaiting(jobs: Int) -> Int {
        max(2 * jobs, min(max(64 * jobs, Self.leastRetryWaiting), itemRoom(jobs: jobs)))
    }

    /// Items waiting to retry are held to this many at least, whatever
    /// `--jobs`: a waiting item needs no slot, and the hosts of those waiting
    /// are the ones whose patience runs (see `HostReachability`). Held to 128
    /// at `--jobs 2`, 2,000 refused hosts of 3 URLs each went through their
    /// 30 s of patience a few dozen at a time: a run whose 600 good URLs
    /// were stored in a second took 644 s to end (126 s now).
    static let leastRetryWaiting = 1024
}
