/// What a sound is, as libsndfile found it (see `SoundCheck`): the facts
/// `list` shows for a sound (`durationSeconds`, `sampleRate`, `channels`,
/// `format`).
public struct SoundFacts: Sendable, Equatable {
    /// The format by its usual short name: `wav`, `aiff`, `flac`, `ogg`
    /// (Vorbis), `opus`, `mp3`…
    public var format: String
    public var sampleRate: Int
    public var channels: Int
    /// The frames that decoded (what plays: a cut-off Ogg decodes fewer
    /// than its header may announce); for an MP3 without a frame count,
    /// its frames' own count; for plain samples, the header's count,
    /// checked against the file's length (or their bytes' where it gives none).
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
}
