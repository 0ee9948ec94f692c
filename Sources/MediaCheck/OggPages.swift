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
        /// The file ends inside a page.
        case insideAPage
        /// The file ends on a page boundary, a stream without its last page
        /// (none flagged so), as a recording of a live stream ends: no
        /// damage shown (a file cut there, one cut in thousands, looks so too).
        case withoutAStreamsEnd
        /// A page (counted from 1) fails its checksum.
        case checksumFails(page: Int)
        /// Bytes that are no page, or a page of no stream begun, before
        /// every stream ended.
        case brokenOff(page: Int)
    }

    /// A logical stream: its serial number, the first bytes of its first
    /// packet (its codec's identification header), and the granule
    /// position of its last page (for audio, the samples up to its end).
    struct Stream: Equatable {
        let serial: UInt32
        var header: [UInt8]
        var lastGranule: Int64
    }

    let ending: Ending
    /// The streams, in the order their first pages came.
    let streams: [Stream]

    /// Walks the file at `path` of `size` bytes; nil when it cannot be
    /// read or does not begin with a page.
    init?(path: String, size: Int64) {
        guard var reader = FileReader(path: path) else { return nil }
        defer { reader.close() }
        var streams: [Stream] = []
        var open: Set<UInt32> = []
        var pages = 0
        var ending = Ending.whole
        walk: while reader.position < size {
            let pageStart = reader.position
            var header = [UInt8]()
            header.reserveCapacity(27)
            while header.count < 27, let byte = reader.byte() { header.append(byte) }
            guard header.count == 27 else {
                ending = Self.endingAt(pageStart, open: open, pages: pages, header: header, size: size)
                break
            }
            guard header.starts(with: Self.capturePattern), header[4] == 0 else {
                ending = Self.endingAt(pageStart, open: open, pages: pages, header: header, size: size)
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
            var body: [UInt8] = []
            let bodyRead = reader.bytes(bodyLength) { part in
                checksum.add(part)
                if flags & 0x02 != 0, body.count < 64 { body += part.prefix(64 - body.count) }
            }
            guard bodyRead else {
                ending = reader.failed ? .brokenOff(page: pages) : .insideAPage
                break
            }
            guard checksum.value == stated else {
                ending = .checksumFails(page: pages)
                break
            }
            if flags & 0x02 != 0 {
                open.insert(serial)
                streams.append(Stream(serial: serial, header: body, lastGranule: granule))
            } else if !open.contains(serial) {
                ending = .brokenOff(page: pages)
                break
            }
            // A page where no packet ends says -1: the last granule stays the one before.
            if granule >= 0, let index = streams.lastIndex(where: { $0.serial == serial }) { streams[index].lastGranule = granule }
            if flags & 0x04 != 0 { open.remove(serial) }
        }
        if ending == .whole, !open.isEmpty { ending = .withoutAStreamsEnd }
        guard pages > 0 else { return nil }
        self.ending = ending
        self.streams = streams
    }

    /// How the pages end where a page was due at `offset` and `header`
    /// (its first bytes) is there: whole when every stream has ended
    /// (what follows is no page of theirs: a tag), else cut inside a page
    /// (the file ends on a page's beginning) or broken off.
    private static func endingAt(_ offset: Int64, open: Set<UInt32>, pages: Int, header: [UInt8], size: Int64) -> Ending {
        if open.isEmpty, pages > 0 { return .whole }
        let endsInsideAPage = header.count < 27 && capturePattern.starts(with: header.prefix(4)) && offset + Int64(header.count) == size
        return endsInsideAPage ? .insideAPage : .brokenOff(page: pages + 1)
    }

    private static let capturePattern = Array("OggS".utf8)

    /// The samples a second of a chained file's links add up to, at
    /// `sampleRate`, when every link is Vorbis at that rate or Opus (which
    /// counts at 48 kHz, after its pre-skip) with `sampleRate` 48 kHz; nil
    /// otherwise (another codec, or rates that differ).
    func chainedFrames(sampleRate: Int) -> Int64? {
        var total: Int64 = 0
        for stream in streams {
            let header = stream.header
            if header.count >= 16, header.starts(with: [0x01] + Array("vorbis".utf8)) {
                let rate = header[12..<16].reversed().reduce(0) { $0 << 8 | Int($1) }
                guard rate == sampleRate else { return nil }
                total += max(0, stream.lastGranule)
            } else if header.count >= 12, header.starts(with: Array("OpusHead".utf8)), sampleRate == 48_000 {
                let preSkip = Int64(header[10]) | Int64(header[11]) << 8
                total += max(0, stream.lastGranule - preSkip)
            } else {
                return nil
            }
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

    /// Adds the page's next bytes.
    mutating func add(_ bytes: ArraySlice<UInt8>) {
        var value = value
        Self.table.withUnsafeBufferPointer { table in
            for byte in bytes { value = value << 8 ^ table[Int(UInt8(truncatingIfNeeded: value >> 24) ^ byte)] }
        }
        self.value = value
    }

    private static let table: [UInt32] = (0..<256).map { index in
        var remainder = UInt32(index) << 24
        for _ in 0..<8 { remainder = remainder & 0x8000_0000 != 0 ? remainder << 1 ^ 0x04C1_1DB7 : remainder << 1 }
        return remainder
    }
}
