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
    /// with the status `--help` documents for it, not the signal's own, and
    /// says so (Ctrl-C while `get -i -` waited for the terminal ended it
    /// without a word). Only `write` and `_exit`: nothing else is safe in a
    /// signal handler, and the text is a literal, so nothing is allocated.
    /// On a terminal it starts on a line of its own, after the `^C` echoed there.
    static func exitEarly() {
        let onTerminal = isatty(STDERR_FILENO) == 1
        for number in handled {
            if onTerminal {
                signal(number) { _ in
                    let text: StaticString = "\nmediafetch: interrupted\n"
                    _ = write(STDERR_FILENO, text.utf8Start, text.utf8CodeUnitCount)
                    _exit(130)
                }
            } else {
                signal(number) { _ in
                    let text: StaticString = "mediafetch: interrupted\n"
                    _ = write(STDERR_FILENO, text.utf8Start, text.utf8CodeUnitCount)
                    _exit(130)
                }
            }
        }
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
