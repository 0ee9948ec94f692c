import CSndFile
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A failure reported by libsndfile, in its own words (`sf_strerror`), or
/// found by `SoundCheck`.
public struct SoundFileError: Error, CustomStringConvertible, Equatable {
    public var description: String
    /// Where it failed: libsndfile did not read the file as a sound at all,
    /// or read it and could not decode it to its end, or the file is shorter
    /// than its header says, or its own checks fail (an Ogg page's
    /// checksum); or the decode was asked to stop.
    public var stage: Stage
    /// The check could not run (libsndfile could not be loaded, or no
    /// thread could start): nothing is known of the file.
    public var unavailable = false
    /// The seconds of audio that decoded before the decoder failed.
    public var decodedSeconds: Double?
    /// Whether the file says how long its audio is, so that its decoder
    /// stops there: not an MP3 without a frame count in its first frame
    /// (see `ContainerLength.Head.mpegAnnouncesFrames`), whose decoder reads on
    /// into what follows the audio (a Lyrics3 tag, padding) and may fail
    /// there on a whole file.
    public var announcesLength = true
    /// libsndfile knows the file's format but not what is in it: an
    /// encoding it does not decode (ALAC as ffmpeg writes it in CAF), a
    /// variant it has not implemented (32-bit FLAC), or a layout it does not
    /// open in a container whole to its end (BW64, a WAV with two `data`
    /// chunks, a CAF from a pipe, FLAC in Ogg: see `ContainerLayout`). No
    /// damage is shown: such a sound is stored as it came, as an M4A is.
    public var unsupported = false

    public enum Stage: Sendable, Equatable {
        case opening, decoding, length, integrity, stopped
    }

    public init(description: String, stage: Stage = .opening, unavailable: Bool = false, decodedSeconds: Double? = nil) {
        self.description = description
        self.stage = stage
        self.unavailable = unavailable
        self.decodedSeconds = decodedSeconds
    }

    /// Whether the failure itself proves the file a damaged sound, whatever
    /// its name and first bytes said: its header announces more audio than
    /// it holds (or its Ogg pages break off), its own checks fail (an Ogg
    /// page's checksum), or its decoder failed after a second of audio or more
    /// before the end its header announces (an MP3 broken mid-way). A
    /// decoder that fails at once may have been given another codec's
    /// frames (AAC behind an ID3 tag), and one that read on past the audio
    /// (`announcesLength` false) may have met a tag: no damage.
    public var provesDamage: Bool {
        !unavailable && (stage == .length || stage == .integrity || (stage == .decoding && announcesLength && (decodedSeconds ?? 0) >= 1))
    }

    /// A decode given up because it was asked to stop (the run was interrupted).
    public static let stopped = SoundFileError(description: "stopped", stage: .stopped)
}

/// A sound file open for reading through libsndfile: owns the `SNDFILE*`
/// that `sf_open(path, SFM_READ)` returns, closed by `sf_close` in `deinit`.
/// Not thread-safe: one thread reads it (libsndfile keeps a position), and
/// releases it: on a quiet thread (`QuietThread`) its descriptor is in that
/// thread's own table.
public final class SoundFile {
    private let library: LibSndFile
    private let handle: OpaquePointer
    /// What `sf_open` read from the header: frames, rate, channels, format.
    private let info: SF_INFO

    /// The file libsndfile reads from an offset (see `init(reading:from:)`),
    /// kept while it reads.
    private let source: FileFromOffset?

    /// Opens `path`; throws libsndfile's reason when it is no sound it reads
    /// ("Format not recognised", "Error in WAV file…"), or when libsndfile
    /// cannot be loaded (`unavailable`).
    public init(reading path: String) throws(SoundFileError) {
        library = try LibSndFile.get()
        var info = SF_INFO()
        let library = library
        let handle = try Self.opened(in: library) { library.open(path, Int32(SFM_READ), &info) }
        self.handle = handle
        self.info = info
        source = nil
    }

    /// Opens the part of the file at `path` from `offset` on, as if it
    /// were the whole file (`sf_open_virtual`): an MP3 whose first frame
    /// does not follow its ID3 tag at once (bytes between the two; a v2.4
    /// tag's footer), which libsndfile knows by content only where a frame
    /// comes first, and otherwise by a name ending `.mp3`, which a body
    /// being stored has not. Throws as `init(reading:)` does.
    public init(reading path: String, from offset: Int64) throws(SoundFileError) {
        library = try LibSndFile.get()
        guard let source = FileFromOffset(path: path, offset: offset) else {
            throw SoundFileError(description: "cannot open \(path)")
        }
        var io = SF_VIRTUAL_IO(get_filelen: FileFromOffset.length, seek: FileFromOffset.seek, read: FileFromOffset.read,
                               write: FileFromOffset.write, tell: FileFromOffset.tell)
        var info = SF_INFO()
        // libsndfile copies the functions; the source stays for as long as the handle.
        let library = library
        let handle = try Self.opened(in: library) { library.openVirtual(&io, Int32(SFM_READ), &info, Unmanaged.passUnretained(source).toOpaque()) }
        self.handle = handle
        self.info = info
        self.source = source
    }

    deinit { _ = library.close(handle) }

    /// Held while libsndfile opens a file and its failure is read: it keeps
    /// the last failed open's error in one place for the whole process
    /// (`sf_strerror(NULL)`), and checks run on several threads at once, so
    /// one check could report another's reason, or take a damaged file for
    /// one libsndfile does not support.
    private static let opening = Mutex(())

    /// The handle `open` returns, `library`'s reason where it returns none,
    /// both under `opening`.
    private static func opened(in library: LibSndFile, _ open: () -> OpaquePointer?) throws(SoundFileError) -> OpaquePointer {
        // (A handle crosses the lock as its address: a pointer is not Sendable.)
        let result = opening.withLock { _ -> Result<UInt, SoundFileError> in
            guard let handle = open() else { return .failure(reported(by: nil, in: library)) }
            return .success(UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle))))
        }
        guard let handle = OpaquePointer(bitPattern: try result.get()) else { throw SoundFileError(description: "unknown error") }
        return handle
    }

    /// libsndfile's words (`sf_strerror`) for `file`'s last error, or for
    /// the last failed `sf_open` when `file` is nil, without their full stop.
    private static func reported(by file: OpaquePointer?, in library: LibSndFile) -> SoundFileError {
        let words = library.errorText(file).map { String(cString: $0) } ?? "unknown error"
        var error = SoundFileError(description: words.hasSuffix(".") ? String(words.dropLast()) : words,
                                   stage: file == nil ? .opening : .decoding)
        // SF_ERR_UNSUPPORTED_ENCODING, and libsndfile's own "unimplemented format" (no public code).
        error.unsupported = file == nil && (Int(library.error(nil)) == SF_ERR_UNSUPPORTED_ENCODING || words.contains("unimplemented format"))
        return error
    }

    /// libsndfile's major format (`SF_FORMAT_WAV`, `SF_FORMAT_FLAC`…).
    public var majorFormat: Int32 { info.format & Int32(SF_FORMAT_TYPEMASK) }
    /// libsndfile's encoding (`SF_FORMAT_PCM_16`, `SF_FORMAT_VORBIS`…).
    var encoding: Int32 { info.format & Int32(SF_FORMAT_SUBMASK) }
    public var sampleRate: Int { Int(info.samplerate) }
    public var channels: Int { Int(info.channels) }
    /// The frames the header announces; nil when libsndfile cannot tell
    /// (an Ogg stream whose end it did not find says `SF_COUNT_MAX`).
    public var announcedFrames: Int64? {
        info.frames >= 0 && info.frames < Int64.max ? Int64(info.frames) : nil
    }

    /// Whether every frame is stored as it plays (PCM, float, µ-law or
    /// A-law samples; FLAC, whose encodings are named so too, is
    /// compressed): nothing to decode that could fail, and the frames are
    /// what the header announces, as many as the file holds (libsndfile
    /// counts no more than there are bytes for).
    var holdsPlainSamples: Bool {
        let plain = [SF_FORMAT_PCM_S8, SF_FORMAT_PCM_16, SF_FORMAT_PCM_24, SF_FORMAT_PCM_32, SF_FORMAT_PCM_U8,
                     SF_FORMAT_FLOAT, SF_FORMAT_DOUBLE, SF_FORMAT_ULAW, SF_FORMAT_ALAW]
        return plain.contains(Int(encoding)) && Int(majorFormat) != SF_FORMAT_FLAC
    }

    /// The bytes of one frame of plain samples (all channels), or nil when
    /// the samples are not plain (see `holdsPlainSamples`).
    var plainFrameBytes: Int? {
        guard holdsPlainSamples else { return nil }
        let sampleBytes = switch Int(encoding) {
        case SF_FORMAT_PCM_16: 2
        case SF_FORMAT_PCM_24: 3
        case SF_FORMAT_PCM_32, SF_FORMAT_FLOAT: 4
        case SF_FORMAT_DOUBLE: 8
        default: 1 // 8-bit PCM, µ-law, A-law
        }
        return sampleBytes * max(1, channels)
    }

    /// The format by its usual short name (`SoundFacts.format`): `wav`,
    /// `aiff`, `flac`, `ogg` (Vorbis), `opus`, `mp3`…; for the others, the
    /// first word of libsndfile's own name for it (`SFC_GET_FORMAT_INFO`:
    /// "VOC (Creative Labs)" is `voc`).
    var shortFormatName: String {
        switch Int(majorFormat) {
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
            var format = SF_FORMAT_INFO()
            format.format = majorFormat
            guard library.command(nil, Int32(SFC_GET_FORMAT_INFO), &format, Int32(MemoryLayout<SF_FORMAT_INFO>.size)) == 0,
                  let name = format.name else { return "other" }
            let word = String(cString: name).prefix { $0 != " " }
            return word.isEmpty ? "other" : word.lowercased()
        }
    }

    /// Decodes the sound from where it is to its end, 4096 frames at a time
    /// into one buffer (memory stays flat however long the sound), and
    /// returns how many frames decoded. Throws libsndfile's reason when the
    /// decoder failed on the way, with the audio that decoded before ("Error :
    /// flac decoder lost sync after 1.2 s of audio"), or
    /// `SoundFileError.stopped` when `stop` said so between two blocks.
    public func decodeToEnd(stop: () -> Bool = { false }) throws(SoundFileError) -> Int64 {
        let blockFrames = 4096
        var block = [Float](repeating: 0, count: blockFrames * max(1, channels))
        var decoded: Int64 = 0
        while true {
            if stop() { throw SoundFileError.stopped }
            let read = block.withUnsafeMutableBufferPointer { library.readFrames(handle, $0.baseAddress, sf_count_t(blockFrames)) }
            if read <= 0 { break }
            decoded += Int64(read)
        }
        guard Int(library.error(handle)) == SF_ERR_NO_ERROR else {
            var error = Self.reported(by: handle, in: library)
            if decoded > 0, sampleRate > 0 {
                let seconds = Double(decoded) / Double(sampleRate)
                error.decodedSeconds = seconds
                error.description += " after \((seconds * 10).rounded() / 10) s of audio"
            }
            throw error
        }
        return decoded
    }
}

/// A file read from an offset on, as if that were its start: libsndfile's
/// virtual I/O (`SF_VIRTUAL_IO`) over a descriptor this owns, closed when
/// it goes. Read by the one thread that reads its `SoundFile`.
final class FileFromOffset {
    private let descriptor: Int32
    private let offset: Int64
    private let length: Int64
    private var position: Int64 = 0

    init?(path: String, offset: Int64) {
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        var status = stat()
        guard fstat(descriptor, &status) == 0, offset >= 0, offset <= Int64(status.st_size) else {
            close(descriptor)
            return nil
        }
        self.offset = offset
        length = Int64(status.st_size) - offset
    }

    deinit { close(descriptor) }

    private static func from(_ context: UnsafeMutableRawPointer?) -> FileFromOffset? {
        context.map { Unmanaged<FileFromOffset>.fromOpaque($0).takeUnretainedValue() }
    }

    /// `sf_vio_get_filelen`: the bytes from the offset on.
    static let length: @convention(c) (UnsafeMutableRawPointer?) -> sf_count_t = { context in
        from(context)?.length ?? -1
    }

    /// `sf_vio_seek`: moves within the bytes from the offset on; the new position.
    static let seek: @convention(c) (sf_count_t, Int32, UnsafeMutableRawPointer?) -> sf_count_t = { distance, whence, context in
        guard let file = from(context) else { return -1 }
        let base: Int64 = switch whence {
        case SEEK_CUR: file.position
        case SEEK_END: file.length
        default: 0
        }
        let (target, overflow) = base.addingReportingOverflow(distance)
        guard !overflow, target >= 0 else { return -1 }
        file.position = target
        return target
    }

    /// `sf_vio_read`: up to `count` bytes at the position; how many were read.
    static let read: @convention(c) (UnsafeMutableRawPointer?, sf_count_t, UnsafeMutableRawPointer?) -> sf_count_t = { buffer, count, context in
        guard let file = from(context), let buffer, count > 0 else { return 0 }
        var read: Int
        repeat {
            read = pread(file.descriptor, buffer, Int(count), off_t(file.offset + file.position))
        } while read < 0 && errno == EINTR
        guard read > 0 else { return 0 }
        file.position += Int64(read)
        return sf_count_t(read)
    }

    /// `sf_vio_write`: nothing is written through it.
    static let write: @convention(c) (UnsafeRawPointer?, sf_count_t, UnsafeMutableRawPointer?) -> sf_count_t = { _, _, _ in 0 }

    /// `sf_vio_tell`: the position.
    static let tell: @convention(c) (UnsafeMutableRawPointer?) -> sf_count_t = { context in
        from(context)?.position ?? -1
    }
}
