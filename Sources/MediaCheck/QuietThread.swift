import CFileSync

/// Runs work on threads whose standard output and error go nowhere (see
/// `mf_start_quiet_thread`): libsndfile's MP3 decoder, libmpg123, prints
/// its notes on a damaged stream to stderr, which would land in the
/// terminal's progress line. A thread per call: a sound takes milliseconds
/// to seconds to decode, against about 0.1 ms to start a thread.
enum QuietThread {
    /// Starts `work` on a new quiet thread named `name`; false when no
    /// thread could start (`work` did not run).
    static func start(named name: String, _ work: @escaping @Sendable () -> Void) -> Bool {
        let box = Unmanaged.passRetained(Work(work)).toOpaque()
        // The box is released by the thread, or here when there is none.
        let result = mf_start_quiet_thread({ context in
            guard let context else { return }
            Unmanaged<Work>.fromOpaque(context).takeRetainedValue().run()
        }, box, name)
        if result != 0 { Unmanaged<Work>.fromOpaque(box).release() }
        return result == 0
    }

    private final class Work: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}

extension SoundCheck {
    /// `facts(of:stop:)` on a quiet thread of its own (see `QuietThread`),
    /// with `completion` called there; where no thread can start, on the
    /// caller's, whose stderr then takes any decoder's notes.
    public static func start(_ path: String, stop: @escaping @Sendable () -> Bool = { false },
                             completion: @escaping @Sendable (Result<SoundFacts, SoundFileError>) -> Void) {
        let check: @Sendable () -> Void = {
            completion(Result { () throws(SoundFileError) -> SoundFacts in try facts(of: path, stop: stop) })
        }
        if !QuietThread.start(named: "mf-sound-check", check) { check() }
    }
}
