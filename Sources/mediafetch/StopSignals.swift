#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SIGINT, SIGTERM and SIGHUP: what stops a run (exit 130, what finished is
/// stored). One the process was started with ignored stays ignored: under
/// `nohup`, or for a job a script put in the background, closing the
/// terminal or pressing Ctrl-C must not stop it.
enum StopSignals {
    /// The stop signals not ignored when the process started.
    static let handled: [Int32] = [SIGINT, SIGTERM, SIGHUP].filter { !isIgnored($0) }

    /// Until a run sets up its own handling, a stop signal ends the process
    /// with the status `--help` documents for it, not the signal's own.
    static func exitEarly() {
        for number in handled { signal(number) { _ in _exit(130) } }
    }

    private static func isIgnored(_ number: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(number, nil, &current) == 0 else { return false }
        #if canImport(Glibc)
        let handler = current.__sigaction_handler.sa_handler
        #else
        let handler = current.__sigaction_u.__sa_handler
        #endif
        return unsafeBitCast(handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
    }
}
