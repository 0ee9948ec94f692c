#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The calling thread's nice value (on Linux a thread's own), for tests of
/// threads that run below the rest of the process.
public func niceOfThisThread() -> Int32 {
    #if canImport(Glibc)
    getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
    #else
    getpriority(PRIO_PROCESS, 0)
    #endif
}
