#if canImport(Glibc)
import Glibc
#endif

/// Whether a sound file is shorter than its header says. libsndfile plays
/// such a file to where it ends and says nothing (its log has "data :
/// 3528000 (should be 1763978)"; libmpg123 warns "Xing stream size off"),
/// so a recording a server cut in half would be stored as a sound half as
/// long. WAV, RF64, Wave64, AIFF, CAF and AU say their audio's length in their
/// headers; an MP3 in the Xing, Info or VBRI header its encoder wrote in
/// its first frame. FLAC's is its STREAMINFO's sample count, which
/// `SoundCheck` compares with what decodes; Ogg has none (its pages say
/// where it is cut: see `OggPages`).
enum ContainerLength {
    /// What the checks read of a sound file, once: its size, its first
    /// 64 KiB, the length of the ID3v2 tag it opens with (0 if none), and
    /// the first bytes of its first MPEG frame, after that tag (read past
    /// the 64 KiB where a tag holds pictures), and where that frame begins.
    /// (A chunk before a container's audio that runs past the 64 KiB has
    /// the chunk headers after it read as they are needed: see `audioData`.)
    struct Head {
        let path: String
        let size: Int64
        let bytes: [UInt8]
        let tag: Int64
        /// Where the first MPEG frame begins: right after the ID3v2 tag, or
        /// past bytes some taggers leave between the two (zeros, padding
        /// the tag does not count) or zeros a file without a tag opens
        /// with, where four frames follow each other.
        let audioStart: Int64
        let firstFrame: [UInt8]

        /// Reads the file at `path`; nil when it cannot be opened. Opens and
        /// closes its descriptor itself (it runs on the check's quiet thread).
        init?(path: String) {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return nil }
            defer { close(descriptor) }
            var status = stat()
            guard fstat(descriptor, &status) == 0 else { return nil }
            self.path = path
            size = Int64(status.st_size)
            bytes = Self.bytes(of: descriptor, at: 0, count: 64 << 10)
            tag = id3v2TagSize(bytes) ?? 0
            let afterTag = tag + 200 > Int64(bytes.count) ? Self.bytes(of: descriptor, at: tag, count: 4096) : Array(bytes[Int(tag)...])
            if tag > 0 || bytes.first == 0, mpegFrameLength(afterTag) == nil, tag < size,
               let skipped = Self.firstFrames(in: Self.bytes(of: descriptor, at: tag, count: 64 << 10)) {
                audioStart = tag + Int64(skipped)
                firstFrame = Self.bytes(of: descriptor, at: audioStart, count: 4096)
            } else {
                audioStart = tag
                firstFrame = afterTag
            }
        }

        /// The offset in `bytes` of the first of four MPEG audio frames that
        /// follow each other (fewer where the bytes end with them), of the
        /// same version, layer and rate: two may be a chance pattern in
        /// other bytes (a review's junk held two, and the facts were of
        /// them). Nil where there are none.
        private static func firstFrames(in bytes: [UInt8]) -> Int? {
            var offset = 0
            search: while offset + 4 <= bytes.count {
                guard let at = bytes[offset...].firstIndex(of: 0xFF) else { return nil }
                offset = at + 1
                var frame = at
                for count in 0..<4 {
                    if frame == bytes.count, count >= 2 { return at }
                    guard frame + 4 <= bytes.count, let length = mpegFrameLength(Array(bytes[frame..<frame + 4])),
                          // Sync, version and layer, then the rate's two bits, as the first's.
                          bytes[frame + 1] == bytes[at + 1], bytes[frame + 2] & 0x0C == bytes[at + 2] & 0x0C else { continue search }
                    frame += Int(length)
                }
                return at
            }
            return nil
        }

        /// Up to `count` bytes of the file open as `descriptor`, from `offset`.
        private static func bytes(of descriptor: Int32, at offset: Int64, count: Int) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            var read: Int
            repeat {
                read = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
            } while read < 0 && errno == EINTR
            return Array(bytes.prefix(max(0, read)))
        }

        /// The bytes the header announces and the bytes there are, when it
        /// announces more than there are; nil when it does not, or says no
        /// length (see `audioData`), or has no such header (a container of
        /// samples, an MP3's Xing, Info or VBRI header, or its ID3v2 tag).
        /// An MP3's is confirmed by a walk of its frames (the whole file).
        var shortfall: (announced: Int64, present: Int64)? {
            guard bytes.count >= 12 else { return nil }
            if let container = ContainerLength.shortfall(head: bytes, fileSize: size, reading: read) { return container }
            // A file cut inside the ID3v2 tag before its first frame (a cover picture): no audio at all.
            if endsInsideItsID3Tag { return (tag, size) }
            guard let short = mpegShortfall(firstFrame: firstFrame, tagBytes: audioStart, fileSize: size),
                  mpegEndsInsideAFrame(path: path, from: audioStart, size: size) == true else { return nil }
            return short
        }

        /// Whether the file ends inside the ID3v2 tag it opens with.
        var endsInsideItsID3Tag: Bool { tag > size }

        /// `audioData` for the file.
        var audioData: (announced: Int64?, present: Int64)? { ContainerLength.audioData(head: bytes, fileSize: size, reading: read) }

        /// `count` bytes of the file from `offset` (fewer at its end, none when it cannot be read).
        private func read(_ offset: Int, _ count: Int) -> [UInt8] {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return [] }
            defer { close(descriptor) }
            return Self.bytes(of: descriptor, at: Int64(offset), count: count)
        }

        /// Whether the MP3 says how many frames its stream has (a Xing,
        /// Info or VBRI header with a frame count): its decoder stops there,
        /// so a failure before is in its audio. Without one the decoder
        /// reads on into whatever follows the audio (a Lyrics3 tag,
        /// padding), and may fail there on a whole file.
        var mpegAnnouncesFrames: Bool { mpegHeaderField(firstFrame, xingFlag: 1, vbriOffset: 14) != nil }

        /// The samples (per channel) of the MP3's whole frames, by their
        /// headers, when they end with the file or at a tag; nil otherwise
        /// (see `mpegEndsInsideAFrame`). libsndfile reads an MP3 without a
        /// frame count only as far as its own estimate from the first
        /// frame's bitrate: a VBR file's played 10 s and was counted 4.2 s.
        var mpegSamples: Int64? {
            guard let walk = mpegWalk(path: path, from: audioStart, size: size), !walk.endsInsideAFrame, walk.samples > 0 else { return nil }
            return walk.samples
        }
    }

    /// `shortfall` for a container of samples (see `audioData`) of
    /// `fileSize` bytes that begins with `head` (an MP3's is confirmed by a
    /// walk of its frames: see `Head.shortfall`).
    static func shortfall(head: [UInt8], fileSize: Int64,
                          reading: ((Int, Int) -> [UInt8])? = nil) -> (announced: Int64, present: Int64)? {
        guard let data = audioData(head: head, fileSize: fileSize, reading: reading), let announced = data.announced,
              announced > data.present else { return nil }
        return (announced, data.present)
    }

    /// The audio bytes a container's header announces (nil where it gives
    /// no length: a placeholder a writer left before the length was known,
    /// see `given`) and those the file of `fileSize` bytes holds after the
    /// header, for a RIFF or RIFX WAVE, RF64 (its `ds64` chunk), Wave64,
    /// AIFF or AIFF-C (the sound data chunk, its 8-byte header counted),
    /// CAF (its `data` chunk, with the edit count before the audio), or AU
    /// file that begins with `head`; nil for any other, or where the
    /// audio chunk is not in `head`, nor in what `reading` (count bytes
    /// from an offset of the file, where given) finds after it within the
    /// first `chunksAtMost` chunks (a chunk of tags or pictures before the
    /// audio may run past the head).
    static func audioData(head: [UInt8], fileSize: Int64,
                          reading: ((Int, Int) -> [UInt8])? = nil) -> (announced: Int64?, present: Int64)? {
        // Past the head, a chunk header's name and length come from one read (of up to 4 KiB).
        var window: (offset: Int, bytes: [UInt8]) = (0, [])
        func bytes(_ offset: Int, _ count: Int) -> ArraySlice<UInt8>? {
            guard offset >= 0, offset <= Int(fileSize) - count else { return nil }
            if offset + count <= head.count { return head[offset..<offset + count] }
            if offset < window.offset || offset + count > window.offset + window.bytes.count {
                guard let reading else { return nil }
                window = (offset, reading(offset, 4096))
            }
            guard offset + count <= window.offset + window.bytes.count else { return nil }
            return window.bytes[(offset - window.offset)..<(offset - window.offset + count)]
        }
        func text(_ offset: Int, _ count: Int = 4) -> String? {
            bytes(offset, count).map { String(decoding: $0, as: UTF8.self) }
        }
        func number(_ offset: Int, _ count: Int, bigEndian: Bool) -> Int64? {
            guard let bytes = bytes(offset, count)?.map(Int64.init) else { return nil }
            return bigEndian ? bytes.reduce(0) { $0 << 8 | $1 } : bytes.reversed().reduce(0) { $0 << 8 | $1 }
        }
        var chunks = 0
        /// Whether another chunk may be looked at.
        func another() -> Bool {
            chunks += 1
            return chunks <= chunksAtMost
        }
        if text(0) == ".snd" {
            // AU: the offset of the samples, then their length.
            guard let offset = number(4, 4, bigEndian: true), let size = number(8, 4, bigEndian: true) else { return nil }
            return (given(size, bits: 32), max(0, fileSize - offset))
        }
        if text(0) == "caff" {
            // CAF: chunks of a type and a 64-bit length after the 8-byte header (`data`'s -1: to the end).
            var offset = 8
            while another(), let size = number(offset + 4, 8, bigEndian: true) {
                if text(offset) == "data" { return (given(size, bits: 64), max(0, fileSize - Int64(offset + 12))) }
                guard size >= 0, size < fileSize else { return nil }
                offset += 12 + Int(size)
            }
            return nil
        }
        if head.starts(with: w64RIFF) {
            // Wave64: chunks of a 16-byte GUID and a 64-bit length that counts their 24-byte header, 8-aligned.
            var offset = 40
            while another(), let size = number(offset + 16, 8, bigEndian: false), size >= 24 {
                if text(offset) == "data" {
                    return (given(size, bits: 64).map { $0 - 24 }, max(0, fileSize - Int64(offset + 24)))
                }
                guard size < fileSize else { return nil }
                offset += Int((size + 7) & ~7)
            }
            return nil
        }
        let bigEndian: Bool
        let audioChunk: String
        switch (text(0), text(8)) {
        case ("RIFF", "WAVE"), ("RF64", "WAVE"): (bigEndian, audioChunk) = (false, "data")
        case ("RIFX", "WAVE"): (bigEndian, audioChunk) = (true, "data")
        case ("FORM", "AIFF"), ("FORM", "AIFC"): (bigEndian, audioChunk) = (true, "SSND")
        default: return nil
        }
        // RF64's length is in its `ds64` chunk (after the RIFF and data lengths in 64 bits).
        let rf64DataSize = text(0) == "RF64" && text(12) == "ds64" ? number(28, 8, bigEndian: false) : nil
        // Chunks follow the 12-byte header: a name, a length, the bytes (padded to an even length).
        var offset = 12
        while another(), let size = number(offset + 4, 4, bigEndian: bigEndian) {
            if text(offset) == audioChunk {
                let present = max(0, fileSize - Int64(offset + 8))
                if let rf64DataSize { return (given(rf64DataSize, bits: 64), present) }
                return (given(size, bits: 32), present)
            }
            offset += 8 + Int(size) + Int(size & 1)
        }
        return nil
    }

    /// Chunks looked at at most, here and in `ContainerLayout`: a file of
    /// millions of empty chunks is not read for seconds.
    static let chunksAtMost = 10_000

    /// `size`, a length of `bits` bits in a header, unless it is one of the
    /// lengths writers leave where they could not go back to the header (a
    /// stream, a pipe): 0 and all ones; SoX's 0x7FFFF000, GStreamer's
    /// 0x7FFF0000; ffmpeg's Int64.max in Wave64 (and any 64-bit length no
    /// file could have).
    static func given(_ size: Int64, bits: Int64) -> Int64? {
        let unknown: Set<Int64> = [0, (1 << bits) - 1, 0x7FFF_FFFF, 0x7FFF_F000, 0x7FFF_0000]
        return unknown.contains(size) || size < 0 || size >= 1 << 56 ? nil : size
    }

    /// How a Wave64 file begins: the GUID of its `riff` chunk.
    private static let w64RIFF: [UInt8] = [0x72, 0x69, 0x66, 0x66, 0x2E, 0x91, 0xCF, 0x11, 0xA5, 0xD6, 0x28, 0xDB, 0x04, 0xC1, 0x00, 0x00]

    /// The length of the ID3v2 tag `head` opens with (its 10-byte header, its
    /// size in four 7-bit bytes, and a 10-byte footer when flagged), or nil.
    /// Only a header as the standard has it counts (major version 2 to 4,
    /// no revision 0xFF, no flag it does not define): text that begins
    /// "ID3 tags…" is no tag.
    static func id3v2TagSize(_ head: [UInt8]) -> Int64? {
        guard head.count >= 10, head[0] == 0x49, head[1] == 0x44, head[2] == 0x33, (2...4).contains(head[3]), head[4] != 0xFF,
              head[5] & 0x0F == 0, head[6..<10].allSatisfy({ $0 < 0x80 }) else { return nil }
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

    /// Whether the MPEG audio stream of the file at `path` (from `start`,
    /// after any ID3v2 tag; `size` bytes in all) ends inside a frame: each
    /// frame's header gives its length, and the last runs past the file's
    /// end. False where the frames end with the file or at a tag after them
    /// (ID3v1, APE, Lyrics3, an appended ID3v2): a file trimmed or edited by
    /// whole frames, whose first frame's byte count was not updated, is
    /// whole. Nil where the walk meets something that is no frame, or a
    /// free-format frame (no length in its header): not judged.
    static func mpegEndsInsideAFrame(path: String, from start: Int64, size: Int64) -> Bool? {
        mpegWalk(path: path, from: start, size: size)?.endsInsideAFrame
    }

    /// A walk of an MPEG audio stream's frames by their headers (see
    /// `mpegEndsInsideAFrame`): whether the last runs past the file's end,
    /// and the samples of those that do not.
    private static func mpegWalk(path: String, from start: Int64, size: Int64) -> (endsInsideAFrame: Bool, samples: Int64)? {
        guard var reader = FileReader(path: path) else { return nil }
        defer { reader.close() }
        guard reader.skip(start) else { return nil }
        var offset = start
        var samples: Int64 = 0
        while offset < size {
            var header: [UInt8] = []
            while header.count < 4, let byte = reader.byte() { header.append(byte) }
            if reader.failed { return nil }
            if tagsAfterFrames.contains(where: { header.starts(with: $0) }) { return (false, samples) }
            guard header.count == 4 else { return header.first == 0xFF ? (true, samples) : nil }
            guard let length = mpegFrameLength(header) else { return nil }
            if length > size - offset { return (true, samples) }
            offset += length
            samples += mpegSamplesPerFrame(header)
            guard reader.skip(length - 4) else { return reader.failed ? nil : (true, samples) }
        }
        return (false, samples)
    }

    /// The samples (per channel) in an MPEG audio frame whose header,
    /// valid, is `header`: 384 in Layer I, 1152 in Layer II, and in Layer
    /// III 1152 in MPEG-1 and 576 in MPEG-2 and 2.5.
    private static func mpegSamplesPerFrame(_ header: [UInt8]) -> Int64 {
        switch (header[1] >> 1 & 3, header[1] >> 3 & 3) {
        case (3, _): 384
        case (1, let version) where version != 3: 576
        default: 1152
        }
    }

    /// How the tags that may follow an MP3's frames begin: ID3v1, APE,
    /// Lyrics3, an ID3v2 tag appended.
    private static let tagsAfterFrames: [[UInt8]] = [Array("TAG".utf8), Array("APET".utf8), Array("LYRI".utf8), Array("ID3".utf8)]

    /// The length in bytes of the MPEG audio frame whose header is `header`
    /// (4 bytes), or nil when it is no frame header or a free-format one.
    static func mpegFrameLength(_ header: [UInt8]) -> Int64? {
        guard header.count >= 4, header[0] == 0xFF, header[1] & 0xE0 == 0xE0 else { return nil }
        let version = Int(header[1] >> 3 & 3), layer = Int(header[1] >> 1 & 3)
        let bitrateIndex = Int(header[2] >> 4), rateIndex = Int(header[2] >> 2 & 3), padding = Int64(header[2] >> 1 & 1)
        guard version != 1, layer != 0, (1...14).contains(bitrateIndex), rateIndex != 3 else { return nil }
        let mpeg1 = version == 3
        // Kilobits per second by layer (III, II, I), for MPEG-1 and for MPEG-2 and 2.5.
        let bitrates: [[Int64]] = mpeg1
            ? [[32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
               [32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
               [32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448]]
            : [[8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
               [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
               [32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256]]
        let bitrate = bitrates[layer - 1][bitrateIndex - 1] * 1000
        let rate: Int64 = [[11025, 12000, 8000], [0, 0, 0], [22050, 24000, 16000], [44100, 48000, 32000]][version][rateIndex]
        switch layer {
        case 3: return (12 * bitrate / rate + padding) * 4 // Layer I
        case 1 where !mpeg1: return 72 * bitrate / rate + padding // Layer III, MPEG-2 and 2.5
        default: return 144 * bitrate / rate + padding
        }
    }

    /// The stream bytes an MPEG audio frame's Xing or Info header (Layer
    /// III, after the side information) or VBRI header (32 bytes after the
    /// frame header) announces, when it has that field.
    static func mpegAnnouncedBytes(_ frame: [UInt8]) -> Int64? {
        mpegHeaderField(frame, xingFlag: 2, vbriOffset: 10)
    }

    /// A field of the Xing or Info header (the one `xingFlag` marks: 1 the
    /// frames, 2 the bytes) or VBRI header (`vbriOffset` after its name: 14
    /// the frames, 10 the bytes) in the MPEG audio frame `frame`, when it
    /// has it and it is not 0.
    private static func mpegHeaderField(_ frame: [UInt8], xingFlag: Int64, vbriOffset: Int) -> Int64? {
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
                guard flags & xingFlag != 0 else { return nil }
                // The frames come first when flagged, then the bytes.
                let at = xing + 8 + (xingFlag == 2 && flags & 1 != 0 ? 4 : 0)
                return number(at, 4).flatMap { $0 > 0 ? $0 : nil }
            }
        }
        if text(36) == "VBRI", let value = number(36 + vbriOffset, 4), value > 0 { return value }
        return nil
    }
}
