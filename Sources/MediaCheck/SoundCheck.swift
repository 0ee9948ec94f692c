import CSndFile
import Synchronization

/// Checks that a file is a sound libsndfile reads.
public enum SoundCheck {
    /// Opens `path` with libsndfile and decodes it to the end (a file of
    /// plain samples, WAV or AIFF PCM, is only opened: see
    /// `SoundFile.holdsPlainSamples`); the facts of the sound, or
    /// libsndfile's reason it is none (it does not open, or its decoder
    /// failed on the way, or nothing in it decodes), or that it is a WAV,
    /// AIFF or MP3 file cut short (see `ContainerLength`). `stop` is asked
    /// between blocks (a long sound, a run interrupted).
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
            do {
                frames = try file.decodeToEnd(stop: stop)
            } catch var error where error.stage == .decoding && file.majorFormat == Int32(SF_FORMAT_MPEG) {
                error.announcesLength = ContainerLength.mpegAnnouncesFrames(ofFileAt: path)
                throw error
            }
        }
        guard frames > 0 else { throw SoundFileError(description: "no audio in it decodes", stage: .decoding) }
        return SoundFacts(format: file.shortFormatName, sampleRate: file.sampleRate, channels: file.channels, frames: frames)
    }

    /// `facts(of:stop:)` on a quiet thread (see `QuietThread`), then
    /// `completion` with its result on an ordinary thread; at most `atOnce`
    /// at a time, the others in the order they came. Where no thread can
    /// start, `completion` is told that the check could not run
    /// (`unavailable`): the caller's thread must not wait for a decode.
    public static func start(_ path: String, stop: @escaping @Sendable () -> Bool = { false },
                             completion: @escaping @Sendable (Result<SoundFacts, SoundFileError>) -> Void) {
        let begin: @Sendable () -> Void = { run(path, stop: stop, completion: completion) }
        let now = slots.withLock { slots -> Bool in
            guard slots.running < atOnce else {
                slots.waiting.append(begin)
                return false
            }
            slots.running += 1
            return true
        }
        if now { begin() }
    }

    /// Checks that run at once, at most: decoding is work for a core (a
    /// 20-second Ogg Vorbis, 50 ms), and each check takes two threads, which
    /// count against the limit on processes (see `ThreadLimit`).
    public static let atOnce = 4
    /// The threads the checks take at most.
    public static let threadsAtMost = 2 * atOnce

    private static let slots = Mutex((running: 0, waiting: [@Sendable () -> Void]()))

    private static func run(_ path: String, stop: @escaping @Sendable () -> Bool,
                            completion: @escaping @Sendable (Result<SoundFacts, SoundFileError>) -> Void) {
        let started = QuietThread.run(named: "mf-sound-check", {
            Result { () throws(SoundFileError) -> SoundFacts in try facts(of: path, stop: stop) }
        }, then: { result in
            completion(result)
            startNext()
        })
        if !started {
            completion(.failure(SoundFileError(description: "no thread could start to decode it", unavailable: true)))
            startNext()
        }
    }

    /// Gives the slot of a check that ended to the next waiting, if any.
    private static func startNext() {
        let next = slots.withLock { slots -> (@Sendable () -> Void)? in
            guard !slots.waiting.isEmpty else {
                slots.running -= 1
                return nil
            }
            return slots.waiting.removeFirst()
        }
        next?()
    }
}
