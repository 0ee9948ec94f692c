/// Checks that a file is a sound libsndfile reads.
public enum SoundCheck {
    /// Opens `path` with libsndfile and decodes it to the end (a file of
    /// plain samples, WAV or AIFF PCM, is only opened: see
    /// `SoundFile.holdsPlainSamples`); the facts of the sound, or
    /// libsndfile's reason it is none (it does not open, or its decoder
    /// failed on the way, or nothing in it decodes), or that it is a WAV or
    /// AIFF file cut short (see `ContainerLength`). `stop` is asked between
    /// blocks (a long sound, a run interrupted).
    public static func facts(of path: String, stop: () -> Bool = { false }) throws(SoundFileError) -> SoundFacts {
        let file = try SoundFile(reading: path)
        // Before the decode, which would play what is there.
        if let cut = ContainerLength.shortfall(ofFileAt: path) {
            throw SoundFileError(description: "its header announces \(cut.announced) bytes of audio, \(cut.present) are there",
                                 stage: .length)
        }
        // Plain samples need no decoding (reading back 3.4 MB of WAV from the disk, where the
        // body went past the page cache, took as long as decoding a FLAC of the same sound).
        let frames: Int64
        if file.holdsPlainSamples, let announced = file.announcedFrames {
            frames = announced
        } else {
            frames = try file.decodeToEnd(stop: stop)
        }
        guard frames > 0 else { throw SoundFileError(description: "no audio in it decodes", stage: .decoding) }
        return SoundFacts(format: file.shortFormatName, sampleRate: file.sampleRate, channels: file.channels, frames: frames)
    }

    /// `facts(of:stop:)` on a quiet thread (see `QuietThread`), then
    /// `completion` with its result on an ordinary thread. Where no thread
    /// can start, `completion` is told at once that the check could not run
    /// (`unavailable`): the caller's thread must not wait for a decode.
    public static func start(_ path: String, stop: @escaping @Sendable () -> Bool = { false },
                             completion: @escaping @Sendable (Result<SoundFacts, SoundFileError>) -> Void) {
        let started = QuietThread.run(named: "mf-sound-check", {
            Result { () throws(SoundFileError) -> SoundFacts in try facts(of: path, stop: stop) }
        }, then: completion)
        if !started {
            completion(.failure(SoundFileError(description: "no thread could start to decode it", unavailable: true)))
        }
    }
}
