import CFileSync
import Synchronization

/// Runs work on a thread whose standard output and error go nowhere (see
/// `mf_run_quietly`): libsndfile's MP3 decoder, libmpg123, prints its notes
/// on a damaged stream to stderr, which would land in the terminal's
/// progress line. That thread has a descriptor table of its own, so the
/// work must close what it opens and start nothing; what follows runs on an
/// ordinary thread. New threads for each call: a sound takes milliseconds
/// to seconds to decode, against about 0.1 ms to start a thread.
enum QuietThread {
    /// Runs `work` on a quiet thread named `name`, then `then` with its
    /// result on an ordinary thread of its own; false when no thread could
    /// start (neither ran).
    static func run<Value: Sendable>(named name: String, _ work: @escaping @Sendable () -> Value,
                                     then: @escaping @Sendable (Value) -> Void) -> Bool {
        let result = ResultBox<Value>()
        let run = Run(work: { result.value.withLock { $0 = work() } }, then: {
            // `mf_run_quietly` runs the work first, always: a `then` skipped would leave its caller waiting.
            guard let value = result.value.withLock({ $0 }) else { preconditionFailure("the quiet work did not run") }
            then(value)
        })
        let box = Unmanaged.passRetained(run).toOpaque()
        // Retained until `then` has run (released there), or here when no thread started.
        let started = mf_run_quietly({ context in
            guard let context else { return }
            Unmanaged<Run>.fromOpaque(context).takeUnretainedValue().work()
        }, { context in
            guard let context else { return }
            Unmanaged<Run>.fromOpaque(context).takeRetainedValue().then()
        }, box, name)
        if started != 0 { Unmanaged<Run>.fromOpaque(box).release() }
        return started == 0
    }

    /// The two halves of a run, as the C threads call them.
    private final class Run: Sendable {
        let work: @Sendable () -> Void
        let then: @Sendable () -> Void

        init(work: @escaping @Sendable () -> Void, then: @escaping @Sendable () -> Void) {
            self.work = work
            self.then = then
        }
    }

    /// The work's result: set on the quiet thread, read once it has ended.
    private final class ResultBox<Value: Sendable>: Sendable {
        let value = Mutex<Value?>(nil)
    }
}
