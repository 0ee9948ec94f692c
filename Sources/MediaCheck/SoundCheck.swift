import CSndFile
import Synchronization

/// Checks that a file is a sound libsndfile reads.
public enum SoundCheck {
    /// Opens `path` with libsndfile and decodes it to the end (a file of
    /// plain samples, WAV or AIFF PCM, is only opened: see
    /// `SoundFile.holdsPlainSamples`); the facts of the sound (a chained
    /// Ogg file's links counted by its pages, see `OggPages`), or
    /// libsndfile's reason it is none (it does not open, or its decoder
    /// failed on the way, or nothing in it decodes; `unsupported` where it
    /// does not open a container laid out whole: see `ContainerLayout`), or
    /// that it is cut short or damaged: shorter than its header says (a
    /// WAV, AIFF, CAF, AU or MP3 file that libsndfile opens, or one that
    /// ends inside its ID3 tag: see `ContainerLength`, asked before the
    /// decode, which would play what is there), an Ogg file whose pages
    /// end inside one or fail their checksum (whatever its codec), or a
    /// FLAC whose decoder stopped more than 1% short of the samples its
    /// STREAMINFO counts. `stop` is asked between blocks (a long sound, a
    /// run interrupted).
    public static func facts(of path: String, stop: () -> Bool = { false }) throws(SoundFileError) -> SoundFacts {
        // Read once for every look at the headers below.
        let head = ContainerLength.Head(path: path)
        // Asked before the decode, which would play what is there.
        let cut = head?.shortfall.map {
            SoundFileError(description: "its header announces \($0.announced) bytes of audio, \($0.present) are there", stage: .length)
        }
        let file: SoundFile
        do {
            do {
                file = try SoundFile(reading: path)
            } catch where head.map({ $0.audioStart > 0 }) == true {
                // An MP3 whose first frame does not follow its ID3 tag at once (or opens with zeros):
                // libsndfile knows it by content from that frame on.
                file = try SoundFile(reading: path, from: head?.audioStart ?? 0)
            }
        } catch {
            throw notOpened(path, error: error, head: head, cut: cut, stop: stop)
        }
        if let cut { throw cut }
        // An Ogg file gives libsndfile no length to read: its pages say whether it is whole.
        let oggPages = file.majorFormat == Int32(SF_FORMAT_OGG) ? head.flatMap { OggPages(path: path, size: $0.size, stop: stop) } : nil
        if oggPages?.ending == .notJudged, stop() { throw SoundFileError.stopped }
        if let ending = oggPages?.ending, let damage = damage(endingSo: ending) { throw damage }
        let frames: Int64
        if file.holdsPlainSamples {
            // Plain samples need no decoding (reading back 3.4 MB of WAV from the disk, where the
            // body went past the page cache, took as long as decoding a FLAC of the same sound).
            // A stream's header that gave no length (0) has them all the same: counted by their bytes.
            frames = file.announcedFrames.flatMap { $0 > 0 ? $0 : nil } ?? framesOfUnannouncedSamples(in: file, head: head)
        } else {
            var decoded: Int64
            do {
                decoded = try file.decodeToEnd(stop: stop)
            } catch var error where error.stage == .decoding && file.majorFormat == Int32(SF_FORMAT_MPEG) {
                error.announcesLength = head?.mpegAnnouncesFrames == true
                throw error
            }
            // An MP3 without a frame count is read only as far as libsndfile's estimate of its
            // length (from its first frame's bitrate): its frames' own headers count it.
            if file.majorFormat == Int32(SF_FORMAT_MPEG), let head, !head.mpegAnnouncesFrames, let walked = head.mpegSamples,
               walked > decoded {
                decoded = walked
            }
            // libsndfile decodes a chained Ogg file's first link only: the pages count the others.
            if let oggPages, oggPages.streams.count > 1, let chained = oggPages.chainedFrames(sampleRate: file.sampleRate),
               chained > decoded {
                decoded = chained
            }
            frames = decoded
            // FLAC's STREAMINFO counts its samples exactly (0: not known); libFLAC ends
            // a stream cut on a frame's end, or inside one of some encoders', without a word.
            // (More than 1% short, as an MP3 must be: an encoder that could not seek back leaves its estimate.)
            if file.majorFormat == Int32(SF_FORMAT_FLAC), let announced = file.announcedFrames, announced > 0,
               announced - frames > announced / 100 {
                throw SoundFileError(description: "its header announces \(announced) frames of audio, \(frames) decode", stage: .length)
            }
        }
        guard frames > 0 else { throw SoundFileError(description: "no audio in it decodes", stage: .decoding) }
        return SoundFacts(format: file.shortFormatName, sampleRate: file.sampleRate, channels: file.channels, frames: frames)
    }

    /// Why the file at `path` is no sound libsndfile opened, where it
    /// failed with `error`: that it is cut short (`cut`, where it ends inside
    /// its ID3 tag; an Ogg file's pages), damaged (its pages), or
    /// libsndfile's reason, `unsupported` as its layout says (see
    /// `ContainerLayout`).
    private static func notOpened(_ path: String, error: SoundFileError, head: ContainerLength.Head?, cut: SoundFileError?,
                                  stop: () -> Bool) -> SoundFileError {
        // A file that ends inside its ID3 tag holds no audio for libsndfile to open: its tag
        // says it is cut. Other headers count only where libsndfile reads the file as a sound.
        if let cut, head?.endsInsideItsID3Tag == true { return cut }
        // An Ogg file cut short or damaged says so by its pages, whatever its codec (a Skeleton stream first).
        let pages = head.flatMap { $0.bytes.starts(with: OggPages.capturePattern) ? OggPages(path: path, size: $0.size, stop: stop) : nil }
        if pages?.ending == .notJudged, stop() { return .stopped }
        if let damage = pages.flatMap({ damage(endingSo: $0.ending) }) { return damage }
        // A container laid out whole, in a form libsndfile does not open (or holding what it does
        // not decode), shows no damage; one that is not is no sound stored as it came.
        var error = error
        if !error.unavailable, let head {
            switch ContainerLayout.verdict(head, oggPages: pages) {
            case .whole: error.unsupported = true
            case .broken: error.unsupported = false
            case .unknown: break
            }
        }
        return error
    }

    /// What an Ogg file's pages that end so say of it: nil when whole.
    private static func damage(endingSo ending: OggPages.Ending) -> SoundFileError? {
        switch ending {
        case .whole, .withoutAStreamsEnd, .notJudged: nil
        case .insideAPage: SoundFileError(description: "it ends inside an Ogg page", stage: .length)
        case .checksumFails(let page): SoundFileError(description: "its Ogg page \(page) fails its checksum", stage: .integrity)
        case .brokenOff(let page): SoundFileError(description: "its Ogg page \(page) is not where the page before ends", stage: .integrity)
        case .ofNoStreamBegun(let page):
            SoundFileError(description: "its Ogg page \(page) belongs to no stream begun before it", stage: .integrity)
        }
    }

    /// The frames of plain samples in a file whose header gives no length
    /// (a stream's): its audio bytes over the bytes of a frame; 0 where
    /// either is not known.
    private static func framesOfUnannouncedSamples(in file: SoundFile, head: ContainerLength.Head?) -> Int64 {
        guard let frameBytes = file.plainFrameBytes, let data = head?.audioData,
              data.announced == nil else { return 0 }
        return data.present / Int64(frameBytes)
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
