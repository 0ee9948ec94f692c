/// What a file's first bytes say it is: an image, or a sound in a format
/// libsndfile reads. Judged from the opening alone (the first bytes of a
/// body, kept as they arrive), so it costs no read of the file.
public enum MediaSignature {
    /// The image format `bytes` begin as (`jpeg`, `png`, `gif`, `webp`,
    /// `tiff`, `bmp`, `heif`, `avif`, `jxl`), or nil.
    public static func image(_ bytes: [UInt8]) -> String? {
        func at(_ offset: Int, _ ascii: StaticString) -> Bool { has(ascii, at: offset, in: bytes) }
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return "jpeg" }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "png" }
        if at(0, "GIF87a") || at(0, "GIF89a") { return "gif" }
        if at(0, "RIFF"), at(8, "WEBP") { return "webp" }
        if bytes.starts(with: [0x49, 0x49, 0x2A, 0x00]) || bytes.starts(with: [0x4D, 0x4D, 0x00, 0x2A]) { return "tiff" }
        // BMP's two letters alone are common text: its header's own size field (40, 108 or 124) too.
        if at(0, "BM"), bytes.count >= 18, [40, 108, 124].contains(bytes[14]), bytes[15] == 0, bytes[16] == 0, bytes[17] == 0 {
            return "bmp"
        }
        if at(4, "ftyp") {
            if at(8, "avif") || at(8, "avis") { return "avif" }
            for brand: StaticString in ["heic", "heix", "hevc", "heim", "heis", "mif1", "msf1"] where at(8, brand) { return "heif" }
        }
        if bytes.starts(with: [0xFF, 0x0A]) || bytes.starts(with: [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) {
            return "jxl"
        }
        return nil
    }

    /// Whether `bytes` begin as a file in one of libsndfile's own formats
    /// does, beyond doubt: RIFF WAVE, RF64 (or BW64), Wave64, AIFF or
    /// AIFF-C, AU, CAF, FLAC, or Ogg whose first stream is Vorbis, Opus or
    /// FLAC (not Theora's video). Such a file that libsndfile cannot decode
    /// is damaged, unless what it holds is whole in a form libsndfile does
    /// not read (see `SoundFileError.unsupported`).
    public static func soundContainer(_ bytes: [UInt8]) -> Bool {
        func at(_ offset: Int, _ ascii: StaticString) -> Bool { has(ascii, at: offset, in: bytes) }
        if at(0, "RIFF") || at(0, "RIFX") || at(0, "RF64") || at(0, "BW64") { return at(8, "WAVE") }
        if at(0, "FORM") { return at(8, "AIFF") || at(8, "AIFC") }
        if at(0, "riff"), bytes.count >= 16, bytes[4] == 0x2E, bytes[5] == 0x91 { return true } // Wave64's GUID
        if at(0, ".snd") || at(0, "caff") || at(0, "fLaC") { return true }
        if at(0, "OggS"), bytes.count > 27 {
            // The first packet follows the page's 27-byte header and its table of segment sizes.
            let packet = 27 + Int(bytes[26])
            // (Speex is no format of libsndfile's.)
            let codec = packet < bytes.count ? OggCodec(identification: Array(bytes[packet...])) : nil
            return codec != nil && codec != .speex
        }
        return false
    }

    /// Whether `bytes` may be a sound libsndfile reads: `soundContainer`'s,
    /// or an MP3 behind an ID3 tag (a tag may also front AAC or FLAC). With
    /// `bareFrames`, an MPEG audio frame's sync word too: an MP3 without a tag
    /// opens with one, but so does one binary file in a few thousand, so only
    /// where a sound was asked for.
    public static func readableSound(_ bytes: [UInt8], bareFrames: Bool = false) -> Bool {
        if soundContainer(bytes) || has("ID3", at: 0, in: bytes) { return true }
        return bareFrames && bytes.count >= 2 && bytes[0] == 0xFF && bytes[1] & 0xE0 == 0xE0 && bytes[1] & 0x06 != 0
    }

    /// Whether `bytes` hold `ascii` from `offset` on. (Compared in place:
    /// this runs for every body `get` stores.)
    private static func has(_ ascii: StaticString, at offset: Int, in bytes: [UInt8]) -> Bool {
        ascii.withUTF8Buffer { expected in
            bytes.count >= offset + expected.count && bytes[offset..<offset + expected.count].elementsEqual(expected)
        }
    }
}
