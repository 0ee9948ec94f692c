/// Whether a sound file that libsndfile does not open or decode is laid
/// out whole, as its container has it. libsndfile 1.2 leaves whole files
/// of its own containers unopened: a BW64 file (RF64 by another name), a
/// WAV with two `data` chunks or its `fmt ` chunk after its `data`, a CAF
/// written to a pipe (its `data` chunk's length -1, "to the end"), FLAC in
/// Ogg; and it does not decode some whole files it opens (an AIFF-C of
/// QDesign's codec). Such a file shows no damage, and is stored as it
/// came; one whose layout runs off its end, breaks off, or holds no
/// format and audio a sound has, is refused.
enum ContainerLayout {
    /// What the layout shows.
    enum Verdict: Equatable {
        /// Laid out whole: its format as the container has one, its
        /// audio, and its end where the container says.
        case whole
        /// A container this knows, not laid out whole: cut short, broken
        /// off, or without a format or audio a sound has.
        case broken
        /// Not a container this knows, or not one it can judge (another
        /// codec in Ogg, more chunks than any sound has: see
        /// `ContainerLength.chunksAtMost`).
        case unknown
    }

    /// The verdict on the file `head` was read from: a WAVE (RIFF, RIFX,
    /// RF64 or BW64), AIFF or AIFF-C file is whole where its chunks end
    /// where its header says it ends (or the file, where the header gives
    /// a placeholder), with a format chunk that names channels and a rate,
    /// and an audio chunk; a CAF where its chunks end with the file, `desc`
    /// first (a known format, channels, a rate), `data` among them (linear
    /// PCM filling whole packets); an Ogg file where its pages run whole to
    /// the file's end (see `OggPages`; those of `oggPages` where its pages
    /// were walked already), each stream an audio codec's with audio in it.
    static func verdict(_ head: ContainerLength.Head, oggPages: OggPages? = nil) -> Verdict {
        let bytes = head.bytes
        func text(_ offset: Int) -> String? {
            offset + 4 <= bytes.count ? String(decoding: bytes[offset..<offset + 4], as: UTF8.self) : nil
        }
        let magic = text(0)
        if magic == "OggS" { return ogg(oggPages ?? OggPages(path: head.path, size: head.size)) }
        guard magic == "caff" || ["RIFF", "RIFX", "RF64", "BW64", "FORM"].contains(magic) else { return .unknown }
        guard var reader = FileReader(path: head.path) else { return .unknown }
        defer { reader.close() }
        switch (magic, text(8)) {
        case ("RIFF", "WAVE"), ("RIFX", "WAVE"), ("RF64", "WAVE"), ("BW64", "WAVE"):
            return wave(&reader, size: head.size, bigEndian: magic == "RIFX", ds64: text(12) == "ds64")
        case ("FORM", "AIFF"), ("FORM", "AIFC"):
            guard reader.skip(4), let length = reader.number(4, bigEndian: true), reader.skip(4) else { return .broken }
            guard length <= head.size - 8 else { return .broken } // it says there is more than arrived
            return chunks(&reader, end: 8 + length, bigEndian: true, format: "COMM", audio: "SSND",
                          formatIsSound: aiffFormatIsSound) { _, length in length }
        case ("caff", _):
            return caf(&reader, size: head.size)
        default:
            return .unknown
        }
    }

    /// A WAVE file's chunks, after its 12-byte header, up to the end its
    /// header gives (RF64's and BW64's in their `ds64` chunk, which also
    /// holds the `data` chunk's length); a placeholder (see
    /// `ContainerLength.given`) says "to the end of the file".
    private static func wave(_ reader: inout FileReader, size: Int64, bigEndian: Bool, ds64: Bool) -> Verdict {
        guard reader.skip(4), let length = reader.number(4, bigEndian: bigEndian), reader.skip(4) else { return .broken }
        var dataLength: Int64?
        var end = ContainerLength.given(length, bits: 32).map { 8 + $0 } ?? size
        if length == 0xFFFF_FFFF, ds64 {
            // RF64 and BW64: the lengths of the whole and of the data, 64 bits each, in the `ds64` chunk that comes first.
            guard reader.skip(4), let stated = reader.number(4, bigEndian: false), stated >= 16, stated <= size - reader.position,
                  let whole = reader.number(8, bigEndian: false), let data = reader.number(8, bigEndian: false),
                  reader.skip(stated - 16 + (stated & 1)) else { return .broken }
            end = ContainerLength.given(whole, bits: 64).map { $0 <= size - 8 ? 8 + $0 : Int64.max } ?? size
            dataLength = ContainerLength.given(data, bits: 64)
        }
        guard end <= size else { return .broken } // it says there is more than arrived
        return chunks(&reader, end: end, bigEndian: bigEndian, format: "fmt ", audio: "data",
                      formatIsSound: { waveFormatIsSound(&$0, length: $1, bigEndian: bigEndian) }) { name, length in
            guard name == "data" else { return length }
            // RF64's `data` length is in `ds64`; a placeholder runs to the end.
            return length == 0xFFFF_FFFF && ds64 ? dataLength : ContainerLength.given(length, bits: 32)
        }
    }

    /// Walks RIFF-style chunks (a 4-letter name, a 32-bit length, the bytes,
    /// a pad byte after an odd length) from the reader's position to
    /// `end`: whole when the last chunk ends there (its pad byte may be
    /// missing at the end), the `format` chunk is one `formatIsSound` says
    /// is a sound's (given the chunk's length, it reads its start), and the
    /// `audio` chunk is there. `length` gives a chunk's real length from its
    /// name and stated length, nil for "to the end".
    private static func chunks(_ reader: inout FileReader, end: Int64, bigEndian: Bool, format: String, audio: String,
                               formatIsSound: (inout FileReader, Int64) -> Bool,
                               length: (String, Int64) -> Int64?) -> Verdict {
        var sawFormat = false, sawAudio = false
        var count = 0
        while reader.position < end {
            count += 1
            guard count <= ContainerLength.chunksAtMost else { return .unknown }
            guard end - reader.position >= 8, let name = reader.fourCharacters(),
                  let stated = reader.number(4, bigEndian: bigEndian) else { return .broken }
            let start = reader.position, left = end - start
            let chunk = length(name, stated) ?? left
            // A chunk that runs past the end: cut short.
            guard chunk <= left else { return .broken }
            if name == format {
                guard formatIsSound(&reader, chunk) else { return .broken }
                sawFormat = true
            }
            if name == audio { sawAudio = true }
            // The last chunk may end without its pad byte.
            let next = chunk == left ? end : start + chunk + (chunk & 1)
            guard next <= end, reader.skip(next - reader.position) else { return .broken }
        }
        return sawFormat && sawAudio ? .whole : .broken
    }

    /// Whether a WAVE `fmt ` chunk of `length` bytes, read from its start,
    /// names a format (not 0), channels, a rate and a block's bytes.
    private static func waveFormatIsSound(_ reader: inout FileReader, length: Int64, bigEndian: Bool) -> Bool {
        guard length >= 16, let tag = reader.number(2, bigEndian: bigEndian), let channels = reader.number(2, bigEndian: bigEndian),
              let rate = reader.number(4, bigEndian: bigEndian), reader.skip(4),
              let blockAlign = reader.number(2, bigEndian: bigEndian) else { return false }
        return tag != 0 && channels > 0 && rate > 0 && blockAlign > 0
    }

    /// Whether an AIFF `COMM` chunk of `length` bytes, read from its start,
    /// names channels, a sample size and a rate (an 80-bit float from 1 Hz
    /// to 4 GHz).
    private static func aiffFormatIsSound(_ reader: inout FileReader, length: Int64) -> Bool {
        guard length >= 18, let channels = reader.number(2, bigEndian: true), reader.skip(4),
              let sampleSize = reader.number(2, bigEndian: true), let exponent = reader.number(2, bigEndian: true),
              let mantissaHigh = reader.byte() else { return false }
        return channels > 0 && sampleSize > 0 && (0x3FFF...0x401F).contains(exponent) && mantissaHigh & 0x80 != 0
    }

    /// A CAF file's chunks (a 4-letter type and a signed 64-bit length),
    /// after its 8-byte header (`caff`, version 1): `desc` first, naming a
    /// known format, a rate and channels; `data` among them (its length -1
    /// where it runs to the file's end, as a writer to a pipe leaves it:
    /// such a file cut between two packets cannot be told from a whole
    /// one), the last chunk ending with the file. Linear PCM must fill
    /// whole packets.
    private static func caf(_ reader: inout FileReader, size: Int64) -> Verdict {
        guard reader.skip(4), reader.number(2, bigEndian: true) == 1, reader.skip(2) else { return .broken }
        var bytesPerPacket: Int64 = 0
        var sawData = false
        var count = 0
        while reader.position < size {
            count += 1
            guard count <= ContainerLength.chunksAtMost else { return .unknown }
            guard size - reader.position >= 12, let type = reader.fourCharacters(),
                  let length = reader.number(8, bigEndian: true) else { return .broken }
            let left = size - reader.position
            // Only `data` may run to the end; no chunk past it.
            guard (length >= 0 && length <= left) || (length == -1 && type == "data") else { return .broken }
            guard count > 1 || type == "desc" else { return .broken }
            let start = reader.position
            if type == "desc" {
                // Sample rate (a 64-bit float), format, flags, bytes per packet, frames per packet, channels, bits.
                guard length == 32, let rateBits = reader.number(8, bigEndian: true), let format = reader.fourCharacters(),
                      reader.skip(4), let packet = reader.number(4, bigEndian: true), reader.skip(4),
                      let channels = reader.number(4, bigEndian: true) else { return .broken }
                let rate = Double(bitPattern: UInt64(bitPattern: rateBits))
                guard rate.isFinite, rate > 0, channels > 0, cafFormats.contains(format) else { return .broken }
                if format == "lpcm" { bytesPerPacket = packet }
            }
            if type == "data" {
                sawData = true
                // Its first 4 bytes count edits; the audio follows.
                let audio = (length == -1 ? left : length) - 4
                guard audio >= 0, bytesPerPacket == 0 || audio % bytesPerPacket == 0 else { return .broken }
                if length == -1 { return .whole }
            }
            guard reader.skip(start + length - reader.position) else { return .broken }
        }
        return sawData ? .whole : .broken
    }

    /// The formats a CAF file's `desc` names (Core Audio's format IDs).
    private static let cafFormats: Set<String> = [
        "lpcm", "ima4", "aac ", "aach", "aacl", "aace", "aacf", "aacg", "aacp", "aacs", "usac", "MAC3", "MAC6", "ulaw", "alaw",
        ".mp1", ".mp2", ".mp3", "alac", "flac", "opus", "ilbc", "QDMC", "QDM2", "Qclp", "agsm", "samr", "sawb", "ac-3", "ec-3",
    ]

    /// An Ogg file whose pages were walked (nil: none): whole where they
    /// run whole (a stream's last page may be missing, see `OggPages`), and each stream is Vorbis, Opus, FLAC or Speex with audio
    /// in it (its last page's granule past 0); another codec's stream is
    /// not judged.
    private static func ogg(_ pages: OggPages?) -> Verdict {
        guard let pages else { return .broken }
        switch pages.ending {
        case .whole, .withoutAStreamsEnd: break
        case .notJudged: return .unknown
        // Cut short or damaged, whatever its codec.
        case .insideAPage, .checksumFails, .brokenOff, .ofNoStreamBegun: return .broken
        }
        for stream in pages.streams {
            guard OggCodec(identification: stream.header) != nil else { return .unknown }
            guard stream.lastGranule > 0 else { return .broken }
        }
        return .whole
    }
}
