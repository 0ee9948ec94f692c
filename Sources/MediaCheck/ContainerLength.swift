#if canImport(Glibc)
import Glibc
#endif

/// Whether a sound file is shorter than its header says. libsndfile plays
/// such a file to where it ends and says nothing (its log has "data :
/// 3528000 (should be 1763978)"; libmpg123 warns "Xing stream size off"),
/// so a recording a server cut in half would be stored as a sound half as
/// long. WAV and AIFF say their audio's length in their chunks; an MP3 in
/// the Xing, Info or VBRI header its encoder wrote in its first frame.
/// FLAC's decoder reports it itself; Ogg has no length to compare.
enum ContainerLength {
    /// The audio bytes the header of the file at `path` announces and the
    /// bytes there are, when it announces more than there are; nil when it
    /// does not, or says no length (a stream's 0 or 0xFFFFFFFF), or is no
    /// RIFF WAVE, AIFF or MP3 file with such a header. Reads 64 KiB at most
    /// (after an MP3's ID3 tag, which may hold pictures); opens and closes
    /// its descriptor itself (it runs on the check's quiet thread).
    static func shortfall(ofFileAt path: String) -> (announced: Int64, present: Int64)? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        func bytes(at offset: Int64, count: Int) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            let read = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
            return Array(bytes.prefix(max(0, read)))
        }
        let head = bytes(at: 0, count: 64 << 10)
        guard head.count >= 12 else { return nil }
        if let tag = id3v2TagSize(head), tag + 200 > Int64(head.count) {
            // The first frame is past what was read.
            return mpegShortfall(firstFrame: bytes(at: tag, count: 4096), tagBytes: tag, fileSize: Int64(status.st_size))
        }
        return shortfall(head: head, fileSize: Int64(status.st_size))
    }

    /// `shortfall` for a file of `fileSize` bytes that begins with `head`.
    static func shortfall(head: [UInt8], fileSize: Int64) -> (announced: Int64, present: Int64)? {
        func text(_ offset: Int) -> String { String(decoding: head[offset..<offset + 4], as: UTF8.self) }
        func number(_ offset: Int, bigEndian: Bool) -> Int64 {
            let bytes = head[offset..<offset + 4].map(Int64.init)
            return bigEndian ? bytes.reduce(0) { $0 << 8 | $1 } : bytes.reversed().reduce(0) { $0 << 8 | $1 }
        }
        guard head.count >= 12 else { return nil }
        let bigEndian: Bool
        let audioChunk: String
        switch (text(0), text(8)) {
        case ("RIFF", "WAVE"): (bigEndian, audioChunk) = (false, "data")
        case ("RIFX", "WAVE"): (bigEndian, audioChunk) = (true, "data")
        case ("FORM", "AIFF"), ("FORM", "AIFC"): (bigEndian, audioChunk) = (true, "SSND")
        default:
            let tag = id3v2TagSize(head) ?? 0
            guard tag < Int64(head.count) else { return nil }
            return mpegShortfall(firstFrame: Array(head[Int(tag)...]), tagBytes: tag, fileSize: fileSize)
        }
        // Chunks follow the 12-byte header: a name, a length, the bytes (padded to an even length).
        var offset = 12
        while offset + 8 <= head.count {
            let size = number(offset + 4, bigEndian: bigEndian)
            if text(offset) == audioChunk {
                guard size != 0, size != 0xFFFF_FFFF else { return nil }
                let present = fileSize - Int64(offset + 8)
                return size > present ? (size, max(0, present)) : nil
            }
            offset += 8 + Int(size) + Int(size & 1)
        }
        return nil
    }

    /// The length of the ID3v2 tag `head` opens with (its 10-byte header, its
    /// size in four 7-bit bytes, and a 10-byte footer when flagged), or nil.
    static func id3v2TagSize(_ head: [UInt8]) -> Int64? {
        guard head.count >= 10, head[0] == 0x49, head[1] == 0x44, head[2] == 0x33,
              head[6..<10].allSatisfy({ $0 < 0x80 }) else { return nil }
        let size = head[6..<10].reduce(Int64(0)) { $0 << 7 | Int64($1) }
        return 10 + size + (head[5] & 0x10 != 0 ? 10 : 0)
    }

    /// An MPEG audio stream's shortfall, by the byte count in the Xing,
    /// Info or VBRI header of `firstFrame` (the stream's first bytes, after
    /// an ID3v2 tag of `tagBytes`). Only a stream shorter than announced by
    /// more than 1% (libmpg123's own tolerance), and shorter than the whole
    /// file too, counts: encoders differ in what they count (the tag, the
    /// header's own frame), and a whole file must never be refused.
    static func mpegShortfall(firstFrame frame: [UInt8], tagBytes: Int64, fileSize: Int64) -> (announced: Int64, present: Int64)? {
        guard let announced = mpegAnnouncedBytes(frame) else { return nil }
        let present = max(0, fileSize - tagBytes)
        guard announced > fileSize, announced - present > announced / 100 else { return nil }
        return (announced, present)
    }

    /// The stream bytes an MPEG audio frame's Xing or Info header (Layer
    /// III, after the side information) or VBRI header (32 bytes after the
    /// frame header) announces, when it has that field.
    static func mpegAnnouncedBytes(_ frame: [UInt8]) -> Int64? {
        guard frame.count >= 4, frame[0] == 0xFF, frame[1] & 0xE0 == 0xE0 else { return nil }
        let version = frame[1] >> 3 & 3, layer = frame[1] >> 1 & 3
        guard version != 1, layer != 0 else { return nil } // reserved values: no frame header
        func number(_ offset: Int, _ count: Int) -> Int64? {
            guard offset + count <= frame.count else { return nil }
            return frame[offset..<offset + count].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        }
        func text(_ offset: Int) -> String? {
            offset + 4 <= frame.count ? String(decoding: frame[offset..<offset + 4], as: UTF8.self) : nil
        }
        if layer == 1 {
            // Layer III's side information: 32 bytes (17 mono) in MPEG-1, 17 (9 mono) in MPEG-2 and 2.5.
            let mono = frame[3] >> 6 == 3
            let xing = 4 + (version == 3 ? (mono ? 17 : 32) : (mono ? 9 : 17))
            if let name = text(xing), name == "Xing" || name == "Info", let flags = number(xing + 4, 4) {
                guard flags & 2 != 0 else { return nil }
                let bytes = number(xing + 8 + (flags & 1 != 0 ? 4 : 0), 4)
                return bytes.flatMap { $0 > 0 ? $0 : nil }
            }
        }
        if text(36) == "VBRI", let bytes = number(36 + 10, 4), bytes > 0 { return bytes }
        return nil
    }
}
