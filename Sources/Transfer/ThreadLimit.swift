import CFileSync
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The limits on processes that threads count against (`ulimit -u`,
/// `LimitNPROC=`, and a container's `pids.max`) against the threads a
/// command starts. Past them a thread fails to start, and the run did not
/// say so: under `ulimit -u 2` or `3` even `get` with a bad URL hung for
/// ever (libdispatch waiting to start a thread), and a download needs its
/// writers, its transfer thread and the store's.
public enum ThreadLimit {
    /// Threads any command starts (the runtime's and Dispatch's).
    static let base = 8

    /// Threads a run of `jobs` transfers starts: 18 at the peak measured
    /// (2000 small files, and 8 large at `--jobs 64`: 17), and room for a
    /// name lookup's thread per transfer, and `besides` (the caller's own,
    /// such as checks of what was downloaded). Nil `jobs`: a command that
    /// downloads nothing.
    public static func needed(jobs: Int?, besides: Int = 0) -> Int {
        guard let jobs else { return base }
        return 24 + max(0, jobs) + besides
    }

    /// Why a command that starts `needed(jobs:besides:)` threads cannot, in
    /// one line; nil when it can, or when the limits are too high to matter.
    public static func problem(jobs: Int?, besides: Int = 0) -> String? {
        let wanted = needed(jobs: jobs, besides: besides)
        let threads = jobs.map { "about \(wanted) threads for \($0) transfers at once" } ?? "about \(wanted) threads"
        let fewer = (jobs ?? 0) > 1 ? ", or give fewer --jobs" : ""
        if let (limit, inUse) = userLimit(), limit - inUse < wanted {
            return "the limit on processes is \(limit) (ulimit -u, the hard limit: the soft one was raised to it), "
                + "\(inUse) of them taken by this user's other processes, and mediafetch starts \(threads): raise it where it is set "
                + "(limits.conf nproc, LimitNPROC=)\(fewer)"
        }
        if let (limit, inUse, path) = containerLimit(), limit - inUse < wanted {
            return "the limit on processes of this container or service is \(limit) (\(path)), \(inUse) of them taken by its other processes, "
                + "and mediafetch starts \(threads): raise it (docker run --pids-limit, TasksMax=)\(fewer)"
        }
        return nil
    }

    /// Below this the user's processes are counted: a limit as high is
    /// not the reason a thread fails (reading every process's status on a
    /// busy desktop would cost milliseconds a run).
    static let countedBelow = 1024

    /// `ulimit -u` and the threads this user's other processes run now, when
    /// the limit is low enough to matter and applies (root's processes are
    /// not held to it).
    private static func userLimit() -> (limit: Int, inUse: Int)? {
        var limit = rlimit()
        guard getrlimit(mf_rlimit_nproc(), &limit) == 0, limit.rlim_cur != rlim_t.max,
              limit.rlim_cur < rlim_t(countedBelow), geteuid() != 0 else { return nil }
        return (Int(limit.rlim_cur), threadsRunning(asUser: getuid()))
    }

    /// The threads of every other process whose real user is `user` (what
    /// the kernel counts against `ulimit -u`), from `/proc`. This process's
    /// own are left out: `needed` counts them all.
    private static func threadsRunning(asUser user: uid_t) -> Int {
        let own = "\(getpid())"
        guard let directory = opendir("/proc") else { return 0 }
        defer { closedir(directory) }
        var total = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let first = name.utf8.first, (48...57).contains(first), name != own,
                  let status = readSmallFile("/proc/\(name)/status") else { continue }
            var uid: uid_t?
            var threads = 1
            for line in status.split(separator: "\n") {
                if line.hasPrefix("Uid:") {
                    uid = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap { uid_t($0) }
                } else if line.hasPrefix("Threads:") {
                    threads = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap { Int($0) } ?? 1
                }
            }
            if uid == user { total += threads }
        }
        return total
    }

    /// The pids controller's limit on this process's cgroup (v2, else v1), what its
    /// other processes run in it now (this one's threads are left out, as
    /// `needed` counts them), and the file that holds the limit; nil without one.
    private static func containerLimit() -> (limit: Int, inUse: Int, path: String)? {
        guard let cgroups = readSmallFile("/proc/self/cgroup") else { return nil }
        let lines = cgroups.split(separator: "\n")
        // v1 names its controller ("8:pids:/docker/…"); v2 has one hierarchy ("0::/…").
        let directory: String
        if let line = lines.first(where: { $0.split(separator: ":", maxSplits: 2).dropFirst().first == "pids" }),
           let path = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).last {
            directory = "/sys/fs/cgroup/pids" + (path == "/" ? "" : String(path))
        } else if let line = lines.first(where: { $0.hasPrefix("0::") }) {
            directory = "/sys/fs/cgroup" + (line.dropFirst(3) == "/" ? "" : String(line.dropFirst(3)))
        } else {
            return nil
        }
        // "max" when there is no limit: not a number.
        let number = { (text: String) in text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } }
        guard let maximum = readSmallFile(directory + "/pids.max").flatMap(number),
              let current = readSmallFile(directory + "/pids.current").flatMap(number) else { return nil }
        let own = readSmallFile("/proc/self/status")?.split(separator: "\n").first { $0.hasPrefix("Threads:") }
            .flatMap { $0.split(whereSeparator: \.isWhitespace).dropFirst().first }.flatMap { Int($0) } ?? 1
        return (maximum, max(0, current - own), directory + "/pids.max")
    }

    /// A file of `/proc` or `/sys` as text; nil when it cannot be read.
    private static func readSmallFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = read(descriptor, &bytes, bytes.count)
        guard count > 0 else { return nil }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }
}
