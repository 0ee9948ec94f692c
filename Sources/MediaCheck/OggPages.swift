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
        /// Bytes that are no page with pages after them (or, while a
        /// stream is open, at a read that failed), or a page of no stream
        /// begun: the page counted from 1 that was due there.
        case brokenOff(page: Int)
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
                                       pages: pages)
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
                ending = .brokenOff(page: pages)
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
    private static func endingAt(_ offset: Int64, header: [UInt8], reader: inout FileReader, size: Int64, streamsOpen: Bool,
                                 pages: Int) -> Ending {
        // (After streams that all ended, the start of a page at the file's end is a trailer's: junk.)
        if header.count < 27, offset + Int64(header.count) == size, capturePattern.starts(with: header.prefix(4)), pages > 0 {
            return streamsOpen ? .insideAPage : .whole
        }
        guard pages > 0 else { return .brokenOff(page: 1) }
        // Looked for in what follows the first byte there.
        var tail = Array(header.dropFirst())
        var found = false
        _ = reader.bytes(Int(min(Int64(Int.max), size - reader.position))) { part in
            guard !found else { return }
            let window = tail.suffix(3) + part
            found = Self.holdsCapturePattern(window)
            tail = Array(part.suffix(3))
        }
        if !found { found = holdsCapturePattern(tail[...]) }
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

    private static let capturePattern = Array("OggS".utf8)

    /// The samples a chained file's links add up to, at `sampleRate`, when
    /// the streams follow each other (not multiplexed), each begins near
    /// its granule 0 (within 10 s: not a cut from a live source, whose
    /// granules run on from where the source began), and every link is
    /// Vorbis at that rate or Opus (which counts at 48 kHz, after its
    /// pre-skip) with `sampleRate` 48 kHz; nil otherwise.
    func chainedFrames(sampleRate: Int) -> Int64? {
        guard !multiplexed else { return nil }
        var total: Int64 = 0
        for stream in streams {
            let header = stream.header
            let preSkip: Int64
            if header.count >= 16, header.starts(with: [0x01] + Array("vorbis".utf8)) {
                let rate = header[12..<16].reversed().reduce(0) { $0 << 8 | Int($1) }
                guard rate == sampleRate else { return nil }
                preSkip = 0
            } else if header.count >= 12, header.starts(with: Array("OpusHead".utf8)), sampleRate == 48_000 {
                preSkip = Int64(header[10]) | Int64(header[11]) << 8
            } else {
                return nil
            }
            guard let first = stream.firstGranule, first <= preSkip + 10 * Int64(sampleRate) else { return nil }
            total += max(0, stream.lastGranule - preSkip)
        }
        return total
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
    mutating func add(_ bytes: ArraySlice<UInt8>) {
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
