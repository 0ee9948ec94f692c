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
    /// With `json` (`--progress json`, known once the options are read), the
    /// text is a JSON line, `{"event":"error","message":"interrupted"}`, as
    /// every stderr line is then: a stop while `get -i -` waited for its list
    /// gave a plain one.
    static func exitEarly(json: Bool = false) {
        // A C handler captures nothing: one per text.
        let handler: @convention(c) (Int32) -> Void = if json {
            { _ in sayAndExit("{\"event\":\"error\",\"message\":\"interrupted\"}\n") }
        } else if isatty(STDERR_FILENO) == 1 {
            { _ in sayAndExit("\nmediafetch: interrupted\n") }
        } else {
            { _ in sayAndExit("mediafetch: interrupted\n") }
        }
        for number in handled { signal(number, handler) }
    }

    /// Whether a stop signal that comes while a run is already stopping asks
    /// to quit at once (see `FetchRunner`): only Ctrl-C or SIGTERM, and only
    /// a second or more after the first stop. One action often sends two
    /// signals: a closed terminal sends SIGHUP twice within microseconds, and
    /// `timeout -s INT` signals the child and then its group. Those quit runs
    /// at once (5 closed tmux sessions in 6), leaving finished objects
    /// unrecorded and partials behind. A hang-up never does: nobody is
    /// there to be impatient.
    static func quitsAtOnce(_ number: Int32, sinceFirstStop elapsed: Duration) -> Bool {
        number != SIGHUP && elapsed >= .seconds(1)
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

/// Writes `text` to stderr and ends the process with 130, from a signal
/// handler (a free function: a C handler may call it without capturing).
private func sayAndExit(_ text: StaticString) -> Never {
    _ = write(STDERR_FILENO, text.utf8Start, text.utf8CodeUnitCount)
    _exit(130)
}
