#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A process's soft resource limits, raised as far as the hard ones allow.
enum SoftLimit {
    /// Raises the soft limit on `resource` (an `RLIMIT_…` number) to the
    /// hard one, or to `atMost` if that is lower; never lowers it. Best effort.
    static func raiseToHard(_ resource: Int32, atMost: rlim_t = .max) {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return }
        let wanted = min(limit.rlim_max, atMost)
        guard limit.rlim_cur < wanted else { return }
        limit.rlim_cur = wanted
        _ = setrlimit(resource, &limit)
    }
}
