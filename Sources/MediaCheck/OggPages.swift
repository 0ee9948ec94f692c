/// A walk of an Ogg file's pages from its start: whether they run whole
/// to its end, and the logical streams they carry. libsndfile decodes an
/// Ogg file cut short to where it ends without a word (its header gives
/// no length), and only the first link of a chained one (two recordings
/// one after the other), so a cut file was stored as a shorter sound.
/// Each page says how long it is and has a checksum: the walk tells a
/// whole file from one cut inside a page or damaged.
struct OggPages {
    /// How the pages end.
    enum Ending: Equatable {
        /// Every stream begun ended, on the last page or before bytes
        /// that are no page (a tag appended after the streams).
        case whole
        /// The file ends on a page boundary, or before bytes that are no
        /// page and hold none (a tag, zeros), a stream without its last page
        /// (none flagged so), as a recording of a live stream ends: no
        /// damage shown (a file cut there, one cut in thousands, looks so too).
        case withoutAStreamsEnd
        /// The file ends inside a page.
        case insideAPage
        /// A page (counted from 1) fails its checksum.
        case checksumFails(page: Int)
        /// Bytes that are no page with pages after them, or a read that
        /// failed: the page counted from 1 that was due there.
        case brokenOff(page: Int)
        /// A page (counted from 1) of a stream that did not begin before it.
        case ofNoStreamBegun(page: Int)
        /// Not walked to the end: more streams than any sound has, or the
        /// walk was asked to stop.
        case notJudged
    }

    /// A logical stream: its serial number, the first bytes of its first
    /// packet (its codec's identification header), the granule position
    /// of its first page after its headers that gives one (for audio, the
    /// samples up to that page's end) and of its last.
    struct Stream: Equatable {
        let serial: UInt32
        var header: [UInt8]
        var firstGranule: Int64?
        var lastGranule: Int64
    }

    let ending: Ending
    /// The streams, in the order their first pages came.
    let streams: [Stream]
    /// Whether a stream began while another had not ended (multiplexed,
    /// as audio beside video is), rather than after it (chained).
    let multiplexed: Bool

    /// Streams walked at most: a file of thousands of streams is no sound's.
    static let streamsAtMost = 256

    /// Walks the file at `path` of `size` bytes, asking `stop` every 256
    /// pages; nil when it cannot be read or does not begin with a page.
    init?(path: String, size: Int64, stop: () -> Bool = { false }) {
        guard var reader = FileReader(path: path) else { return nil }
        defer { reader.close() }
        var streams: [Stream] = []
        // The streams begun and not ended, by serial number: their index in `streams`.
        var open: [UInt32: Int] = [:]
        var multiplexed = false
        var pages = 0
        var ending = Ending.whole
        walk: while reader.position < size {
            if pages % 256 == 255, stop() {
                ending = .notJudged
                break
            }
            let pageStart = reader.position
            var header = [UInt8]()
            header.reserveCapacity(27)
            while header.count < 27, let byte = reader.byte() { header.append(byte) }
            guard header.count == 27, header.starts(with: Self.capturePattern), header[4] == 0 else {
                ending = Self.endingAt(pageStart, header: header, reader: &reader, size: size, streamsOpen: !open.isEmpty,
                                       pages: pages, stop: stop)
                break
            }
            pages += 1
            let flags = header[5]
            let granule = Int64(bitPattern: header[6..<14].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
            let serial = header[14..<18].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let stated = header[22..<26].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            var checksum = OggPageChecksum()
            // The checksum is computed with its own four bytes as zeros.
            for (index, byte) in header.enumerated() { checksum.add((22..<26).contains(index) ? 0 : byte) }
            var bodyLength = 0
            for _ in 0..<Int(header[26]) {
                guard let segment = reader.byte() else {
                    ending = .insideAPage
                    break walk
                }
                checksum.add(segment)
                bodyLength += Int(segment)
            }
            let begins = flags & 0x02 != 0
            var body: [UInt8] = []
            let bodyRead = reader.bytes(bodyLength) { part in
                checksum.add(part)
                if begins, body.count < 64 { body += part.prefix(64 - body.count) }
            }
            guard bodyRead else {
                ending = reader.failed ? .brokenOff(page: pages) : .insideAPage
                break
            }
            guard checksum.value == stated else {
                ending = .checksumFails(page: pages)
                break
            }
            let index: Int
            if begins {
                guard streams.count < Self.streamsAtMost else {
                    ending = .notJudged
                    break
                }
                if !open.isEmpty { multiplexed = true }
                index = streams.count
                open[serial] = index
                streams.append(Stream(serial: serial, header: body, firstGranule: nil, lastGranule: granule))
            } else if let known = open[serial] {
                index = known
                // A page where no packet ends says -1; the header pages say 0.
                if granule > 0, streams[index].firstGranule == nil { streams[index].firstGranule = granule }
            } else {
                ending = .ofNoStreamBegun(page: pages)
                break
            }
            if granule >= 0 { streams[index].lastGranule = granule }
            if flags & 0x04 != 0 { open[serial] = nil }
        }
        if ending == .whole, !open.isEmpty { ending = .withoutAStreamsEnd }
        guard pages > 0 else { return nil }
        self.ending = ending
        self.streams = streams
        self.multiplexed = multiplexed
    }

    /// How the pages end where a page was due at `offset` and `header` (the
    /// bytes read there, up to 27) is no page: inside a page where the file
    /// ends on a page's first bytes while a stream is open; else after the streams (whole, or
    /// without a stream's end) where no page follows in what is left (a
    /// tag, zeros); else broken off.
    /// (Asks `stop` between the mebibytes it looks through.)
    private static func endingAt(_ offset: Int64, header: [UInt8], reader: inout FileReader, size: Int64, streamsOpen: Bool,
                                 pages: Int, stop: () -> Bool) -> Ending {
        // (After streams that all ended, the start of a page at the file's end is a trailer's: junk.)
        if header.count < 27, offset + Int64(header.count) == size, capturePattern.starts(with: header.prefix(4)) {
            return streamsOpen ? .insideAPage : .whole
        }
        // Looked for in what follows the first byte there.
        var tail = Array(header.dropFirst())
        var found = holdsCapturePattern(tail[...])
        while !found, reader.position < size {
            if stop() { return .notJudged }
            let read = reader.bytes(Int(min(1 << 20, size - reader.position))) { part in
                guard !found else { return }
                found = Self.holdsCapturePattern(tail.suffix(3) + part)
                tail = Array(part.suffix(3))
            }
            if !read { break }
        }
        if found || reader.failed { return .brokenOff(page: pages + 1) }
        return streamsOpen ? .withoutAStreamsEnd : .whole
    }

    /// Whether `bytes` hold "OggS".
    private static func holdsCapturePattern(_ bytes: ArraySlice<UInt8>) -> Bool {
        var index = bytes.startIndex
        while index + 4 <= bytes.endIndex {
            if bytes[index] == 0x4F, bytes[index + 1] == 0x67, bytes[index + 2] == 0x67, bytes[index + 3] == 0x53 { return true }
            index += 1
        }
        return false
    }

    /// How every page begins.
    static let capturePattern = Array("OggS".utf8)

    /// The samples a chained file's links add up to, at `sampleRate`, when
    /// the streams follow each other (not multiplexed), each begins near
    /// its granule 0 (within 10 s: not a cut from a live source, whose
    /// granules run on from where the source began), and every link is
    /// Vorbis at that rate or Opus (which counts at 48 kHz, after its
    /// pre-skip, whatever rate it is decoded at); nil otherwise, or where
    /// the sum would be more than any file holds.
    func chainedFrames(sampleRate: Int) -> Int64? {
        guard !multiplexed, sampleRate > 0 else { return nil }
        var total: Int64 = 0
        for stream in streams {
            guard let codec = OggCodec(identification: stream.header), let first = stream.firstGranule,
                  stream.lastGranule >= first else { return nil }
            let samples: Int64
            switch codec {
            case .vorbis(let rate):
                guard rate == sampleRate, first <= 10 * Int64(rate) else { return nil }
                samples = stream.lastGranule
            case .opus(let preSkip):
                guard 48_000 % sampleRate == 0, first <= preSkip + 480_000 else { return nil }
                samples = max(0, stream.lastGranule - preSkip) / Int64(48_000 / sampleRate)
            case .flac, .speex:
                return nil
            }
            // Granules no file could hold (2^62 samples): not counted.
            guard samples < 1 << 62 - total else { return nil }
            total += samples
        }
        return total
    }
}

/// The audio codec of an Ogg stream, by its first packet (its
/// identification header), with what its granule positions need (0 where
/// the packet's first bytes do not reach it).
enum OggCodec: Equatable {
    /// Vorbis at `rate` samples a second (its granules count them).
    case vorbis(rate: Int)
    /// Opus, whose granules count at 48 kHz from `preSkip` samples before the audio.
    case opus(preSkip: Int64)
    /// FLAC in Ogg.
    case flac
    /// Speex (no format of libsndfile's).
    case speex

    /// The codec whose identification header `packet` begins with, or nil
    /// for another (Theora's video, a Skeleton).
    init?(identification packet: [UInt8]) {
        if packet.starts(with: [0x01] + Array("vorbis".utf8)) {
            self = .vorbis(rate: packet.count >= 16 ? packet[12..<16].reversed().reduce(0) { $0 << 8 | Int($1) } : 0)
        } else if packet.starts(with: Array("OpusHead".utf8)) {
            self = .opus(preSkip: packet.count >= 12 ? Int64(packet[10]) | Int64(packet[11]) << 8 : 0)
        } else if packet.starts(with: [0x7F] + Array("FLAC".utf8)) {
            self = .flac
        } else if packet.starts(with: Array("Speex   ".utf8)) {
            self = .speex
        } else {
            return nil
        }
    }
}

/// Ogg's page checksum: CRC-32 with the polynomial 0x04C11DB7, not
/// reflected, from 0, over the whole page with the checksum's own four
/// bytes as zeros.
public struct OggPageChecksum {
    /// The checksum of the bytes added so far.
    public private(set) var value: UInt32 = 0

    public init() {}

    /// Adds the page's next byte.
    public mutating func add(_ byte: UInt8) {
        value = value << 8 ^ Self.table[Int(UInt8(truncatingIfNeeded: value >> 24) ^ byte)]
    }

    /// Adds the page's next bytes, four at a time where it can (a page
    /// walk checks every byte of a sound: 50 MB took 0.15 s a byte at a time).
    public mutating func add(_ bytes: ArraySlice<UInt8>) {
        var value = value
        Self.tables.withUnsafeBufferPointer { tables in
            bytes.withUnsafeBufferPointer { bytes in
                var index = 0
                while index + 4 <= bytes.count {
                    value ^= UInt32(bytes[index]) << 24 | UInt32(bytes[index + 1]) << 16 | UInt32(bytes[index + 2]) << 8
                        | UInt32(bytes[index + 3])
                    value = tables[768 + Int(value >> 24)] ^ tables[512 + Int(value >> 16 & 0xFF)]
                        ^ tables[256 + Int(value >> 8 & 0xFF)] ^ tables[Int(value & 0xFF)]
                    index += 4
                }
                while index < bytes.count {
                    value = value << 8 ^ tables[Int(UInt8(truncatingIfNeeded: value >> 24) ^ bytes[index])]
                    index += 1
                }
            }
        }
        self.value = value
    }

    /// The checksum of each byte (`table`), and for four bytes at a time
    /// three more: the checksum of a byte followed by one, two and three zeros.
    private static let table: [UInt32] = (0..<256).map { index in
        var remainder = UInt32(index) << 24
        for _ in 0..<8 { remainder = remainder & 0x8000_0000 != 0 ? remainder << 1 ^ 0x04C1_1DB7 : remainder << 1 }
        return remainder
    }
    /// `table`, then three more tables of 256 for the bytes after it.
    private static let tables: [UInt32] = {
        var tables = table
        for round in 1..<4 {
            for index in 0..<256 {
                let previous = tables[(round - 1) * 256 + index]
                tables.append(previous << 8 ^ table[Int(previous >> 24)])
            }
        }
        return tables
    }()
}
