#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's address-space limit (`ulimit -v`, `LimitAS=`) against what
/// a run maps: the program, its libraries and the allocator's arenas, thread
/// stacks, and for each transfer libcurl's receive buffer and the writer's
/// chunks. Past the limit a thread's stack or a buffer fails to map, and a
/// run under `ulimit -v 200000` hung for ever (a thread that never started)
/// or crashed; `--version` hung under 100 MB.
public enum AddressSpace {
    /// Transfers the base need covers.
    public static let baseJobs = 16

    /// What a run of `jobs` transfers at once needs: 288 MiB up to 16 (256
    /// MiB was the peak measured, at 16 and at 64 jobs, small files and
    /// large), and 3.5 MiB more for each transfer past that (its receive
    /// buffer and chunks, and the 2 MiB stack of a name lookup's thread, see
    /// `defaultThreadStack`). Nil `jobs`: a command that downloads nothing
    /// (`list`, `stats`, `--help`), which needs 192 MiB (`--version` hung
    /// under 100 MB, and ran under 150 MB).
    /// `listBytes`: the URLs a run holds, counted twice (the list, and what
    /// the job keeps of each item: 322 MB at the peak for a list of 145 MiB),
    /// from 1 MiB on (the base was measured with lists under that).
    public static func needed(jobs: Int?, listBytes: Int64 = 0) -> Int64 {
        guard let jobs else { return 192 << 20 }
        // (Clamped: `--jobs` is checked against the limit before it is held to the open files.)
        return (288 << 20) + Int64(min(max(0, jobs - baseJobs), 1 << 20)) * (7 << 19) + (listBytes >= 1 << 20 ? 2 * listBytes : 0)
    }

    /// The stack size the executable gives threads made with default
    /// attributes (libcurl's name lookups, among others), in place of the
    /// 8 MiB of `ulimit -s`.
    public static let defaultThreadStack = 2 << 20

    /// The soft limit in bytes; nil when there is none.
    public static func limit() -> Int64? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_AS.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return Int64(clamping: limit.rlim_cur)
    }

    /// Why a run of `jobs` transfers cannot go on under the limit, in one
    /// line; nil when it can (or there is no limit). `jobs` nil: a command
    /// that downloads nothing, which needs the base.
    /// `listBytes`: see `needed`; a list of a few hundred MiB read under a
    /// limit it did not fit died of a failed allocation, a trace and all.
    /// `asked`: the `--jobs` given, where the open files hold it to fewer
    /// (`jobs`): the message named a number the user never typed.
    public static func problem(jobs: Int?, asked: Int? = nil, listBytes: Int64 = 0, limit: Int64? = limit()) -> String? {
        guard let limit else { return nil }
        let wanted = needed(jobs: jobs, listBytes: listBytes)
        guard limit < wanted else { return nil }
        let mib = { (bytes: Int64) in "\((bytes + (1 << 20) - 1) >> 20) MiB" }
        let withJobs = jobs.map { jobs in
            guard jobs > baseJobs else { return "" }
            guard let asked, asked != jobs else { return " with --jobs \(jobs)" }
            return " with --jobs \(asked) (\(jobs) at once, as many as the open files allow)"
        } ?? ""
        let withList = listBytes >= 1 << 20 ? "\(withJobs.isEmpty ? " for" : " and") a list of \(mib(listBytes))" : ""
        let fewer = (jobs ?? 0) > baseJobs ? ", or give fewer --jobs" : ""
        return "the address-space limit is \(mib(limit)) (ulimit -v, the hard limit: the soft one was raised to it), and "
            + "mediafetch needs about \(mib(wanted))\(withJobs)\(withList): raise it where it is set (limits.conf as, LimitAS=)\(fewer)"
    }
}
