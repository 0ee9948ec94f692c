#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The calling thread's nice value (on Linux a thread's own), for tests of
/// threads that run below the rest of the process.
public func niceOfThisThread() -> Int32 { nice(of: 0) }

/// The process's nice value: its main thread's on Linux, which is what
/// lowered threads count from (a test's own thread may have inherited a
/// lowered one's).
public func niceOfTheProcess() -> Int32 { nice(of: id_t(getpid())) }

private func nice(of who: id_t) -> Int32 {
    #if canImport(Glibc)
    getpriority(__priority_which_t(PRIO_PROCESS.rawValue), who)
    #else
    getpriority(PRIO_PROCESS, who)
    #endif
}

/// The calling thread's name as the system shows it (`top -H`, `perf`):
/// /proc/thread-self/comm on Linux; empty where it cannot be read.
public func nameOfThisThread() -> String {
    guard let file = fopen("/proc/thread-self/comm", "r") else { return "" }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 64)
    guard fgets(&line, Int32(line.count), file) != nil else { return "" }
    return String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
