import CSndFile

/// What a sound is, as libsndfile decoded it: the facts `list` shows for a
/// sound (`durationSeconds`, `sampleRate`, `channels`, `format`).
public struct SoundFacts: Sendable, Equatable {
    /// The format by its usual short name: `wav`, `aiff`, `flac`, `ogg`
    /// (Vorbis), `opus`, `mp3`…
    public var format: String
    public var sampleRate: Int
    public var channels: Int
    /// The frames that decoded (what plays: a cut-off MP3 or Ogg decodes
    /// fewer than its header may announce).
    public var frames: Int64

    public init(format: String, sampleRate: Int, channels: Int, frames: Int64) {
        self.format = format
        self.sampleRate = sampleRate
        self.channels = channels
        self.frames = frames
    }

    /// How long it plays, to the millisecond.
    public var durationSeconds: Double {
        guard sampleRate > 0 else { return 0 }
        return (Double(frames) / Double(sampleRate) * 1000).rounded() / 1000
    }

    /// The short name of libsndfile's format `major` with encoding
    /// `encoding`; for the formats without one here, the first word of
    /// libsndfile's own name for it (`libsndfileName`: "VOC (Creative Labs)" → `voc`).
    static func formatName(major: Int32, encoding: Int32, libsndfileName: String?) -> String {
        switch Int(major) {
        case SF_FORMAT_WAV, SF_FORMAT_WAVEX: return "wav"
        case SF_FORMAT_RF64: return "rf64"
        case SF_FORMAT_W64: return "w64"
        case SF_FORMAT_AIFF: return "aiff"
        case SF_FORMAT_AU: return "au"
        case SF_FORMAT_CAF: return "caf"
        case SF_FORMAT_FLAC: return "flac"
        case SF_FORMAT_OGG: return Int(encoding) == SF_FORMAT_OPUS ? "opus" : "ogg"
        case SF_FORMAT_MPEG:
            switch Int(encoding) {
            case SF_FORMAT_MPEG_LAYER_I: return "mp1"
            case SF_FORMAT_MPEG_LAYER_II: return "mp2"
            default: return "mp3"
            }
        default:
            let word = (libsndfileName ?? "").prefix { $0 != " " }
            return word.isEmpty ? "other" : word.lowercased()
        }
    }
}

/// Checks that a file is a sound libsndfile reads, by decoding all of it.
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
        let name = SoundFacts.formatName(major: file.majorFormat, encoding: file.encoding,
                                         libsndfileName: file.formatName(major: file.majorFormat))
        return SoundFacts(format: name,
                          sampleRate: file.sampleRate, channels: file.channels, frames: frames)
    }
}
