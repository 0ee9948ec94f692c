import CSndFile
import Foundation
import MediaCheck

/// The audio formats sample sounds are written in, each through libsndfile.
public enum SoundFormat: String, CaseIterable, Sendable {
    /// RIFF WAVE, 16-bit PCM.
    case wav
    /// Apple/SGI AIFF, 16-bit PCM.
    case aiff
    /// FLAC, 16-bit.
    case flac
    /// Ogg Vorbis.
    case ogg
    /// MP3 (MPEG-1 Layer III, through LAME), as the SoundMap's sounds are.
    case mp3

    /// libsndfile's major format and encoding for this one.
    var sndfileFormat: Int32 {
        switch self {
        case .wav: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16)
        case .aiff: Int32(SF_FORMAT_AIFF | SF_FORMAT_PCM_16)
        case .flac: Int32(SF_FORMAT_FLAC | SF_FORMAT_PCM_16)
        case .ogg: Int32(SF_FORMAT_OGG | SF_FORMAT_VORBIS)
        case .mp3: Int32(SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III)
        }
    }

    /// The format whose major type is libsndfile's `majorType`, if one of these.
    init?(majorType: Int32) {
        guard let format = Self.allCases.first(where: { $0.sndfileFormat & Int32(SF_FORMAT_TYPEMASK) == majorType }) else {
            return nil
        }
        self = format
    }
}

/// What libsndfile found in a sound file, having decoded it to the end.
public struct SoundDescription: Equatable, Sendable {
    public var format: SoundFormat
    public var sampleRate: Int
    public var channels: Int
    /// Frames the header announces; nil when libsndfile cannot tell.
    public var frames: Int64?
    /// Frames that decoded to the end.
    public var decodedFrames: Int64
}

/// Real sounds for tests and the demo, written and read through libsndfile
/// (the library the SoundMap checks use), in several formats.
public enum SampleSounds {
    /// Writes `seconds` of a sound at `path` in `format`: a chord whose
    /// loudness swells, with a little noise from `seed`, so that two seeds
    /// give other bytes and lossless formats cannot squeeze it to nothing.
    /// The samples are made and written a block at a time.
    public static func write(_ format: SoundFormat, to path: String, seconds: Double, seed: UInt64 = 1,
                             sampleRate: Int = 44_100, channels: Int = 2) throws {
        try write(sndfileFormat: format.sndfileFormat, to: path, seconds: seconds, seed: seed, sampleRate: sampleRate,
                  channels: channels)
    }

    /// The start of a FLAC of 32 bits a sample, stereo, 44.1 kHz, as ffmpeg
    /// writes one: "fLaC" and its STREAMINFO. libsndfile 1.2 does not open
    /// it ("unimplemented format"): a sound it knows the format of and does
    /// not decode.
    public static let flac32BitHeader: [UInt8] = [
        0x66, 0x4C, 0x61, 0x43, 0x00, 0x00, 0x00, 0x22, 0x04, 0x00, 0x04, 0x00, 0x00, 0x06, 0xE7, 0x00, 0x09, 0x1E, 0x0A, 0xC4,
        0x43, 0xF0, 0x00, 0x01, 0x7A, 0xFC, 0xD6, 0x4F, 0x21, 0x23, 0x8A, 0x6A, 0x59, 0x5B, 0x94, 0xD0, 0xC3, 0xCE, 0x75, 0x1A,
        0x30, 0x38,
    ]

    /// `write` in any of libsndfile's formats (`SF_FORMAT_RF64 | SF_FORMAT_PCM_16`…),
    /// at a `compression` level from 0 to 1 where given (`SFC_SET_COMPRESSION_LEVEL`:
    /// an MP3's bitrate, from high to low).
    public static func write(sndfileFormat: Int32, to path: String, seconds: Double, seed: UInt64 = 1,
                             sampleRate: Int = 44_100, channels: Int = 2, compression: Double? = nil) throws {
        var info = SF_INFO()
        info.samplerate = Int32(sampleRate)
        info.channels = Int32(channels)
        info.format = sndfileFormat
        guard let file = sf_open(path, Int32(SFM_WRITE), &info) else {
            throw SoundFileError(description: "cannot write \(path) as format 0x\(String(sndfileFormat, radix: 16)): "
                + String(cString: sf_strerror(nil)))
        }
        var closed = false
        defer { if !closed { sf_close(file) } }
        if var level = compression {
            _ = sf_command(file, Int32(SFC_SET_COMPRESSION_LEVEL), &level, Int32(MemoryLayout<Double>.size))
        }

        let totalFrames = Int(seconds * Double(sampleRate))
        let blockFrames = 4096
        var block = [Int16](repeating: 0, count: blockFrames * channels)
        var noise = seed &+ 0x9E37_79B9_7F4A_7C15
        var frame = 0
        while frame < totalFrames {
            let count = min(blockFrames, totalFrames - frame)
            for index in 0..<count {
                let time = Double(frame + index) / Double(sampleRate)
                let swell = 0.55 + 0.45 * sin(2 * Double.pi * 0.25 * time)
                let chord = sin(2 * Double.pi * 220 * time) + 0.6 * sin(2 * Double.pi * 277.18 * time)
                    + 0.4 * sin(2 * Double.pi * 329.63 * time)
                for channel in 0..<channels {
                    noise = noise &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    let hiss = Double(Int64(bitPattern: noise) >> 40) / Double(1 << 23) * 0.01
                    let pan = channel == 0 ? 1.0 : 0.8
                    block[index * channels + channel] = Int16(max(-1, min(1, 0.3 * swell * chord * pan + hiss)) * 32_000)
                }
            }
            let written = block.withUnsafeBufferPointer { sf_writef_short(file, $0.baseAddress, sf_count_t(count)) }
            guard written == sf_count_t(count) else {
                throw SoundFileError(description: "cannot write \(path): \(String(cString: sf_strerror(file)))")
            }
            frame += count
        }
        closed = true
        let result = sf_close(file)
        guard result == 0 else {
            throw SoundFileError(description: "cannot finish \(path): \(String(cString: sf_error_number(result)))")
        }
    }

    /// Opens `path` with libsndfile and decodes it to the end, a block at a
    /// time. Throws libsndfile's reason, after the path, when it is not a
    /// sound it reads (an HTML page, say) or does not decode to its end (a
    /// FLAC cut off), or when it is not one of `SoundFormat`'s formats.
    public static func describe(_ path: String) throws -> SoundDescription {
        do throws(SoundFileError) {
            let file = try SoundFile(reading: path)
            guard let format = SoundFormat(majorType: file.majorFormat) else {
                throw SoundFileError(description: "format 0x\(String(file.majorFormat, radix: 16)) is not one of the sample formats")
            }
            let decoded = try file.decodeToEnd()
            return SoundDescription(format: format, sampleRate: file.sampleRate, channels: file.channels,
                                    frames: file.announcedFrames, decodedFrames: decoded)
        } catch {
            throw SoundFileError(description: "\(path): \(error)", stage: error.stage)
        }
    }
}
