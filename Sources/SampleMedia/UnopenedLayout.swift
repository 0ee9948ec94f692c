import CSndFile
import Foundation
import MediaCheck

/// Whole sounds laid out in ways libsndfile 1.2 does not open, though
/// their containers are its own: written through libsndfile, then laid
/// out again as other writers leave them.
public enum UnopenedLayout: String, CaseIterable, Sendable {
    /// RF64 under the name ITU-R BS.2088 gives it (`BW64`).
    case bw64
    /// A WAV whose samples are in two `data` chunks.
    case twoDataChunks
    /// A WAV whose `fmt ` chunk follows its `data` chunk.
    case formatAfterData
    /// A CAF written to a pipe: its `data` chunk's length is -1, "to the end".
    case pipedCAF
    /// FLAC in Ogg, as ffmpeg writes it: the mapping's first packet (with
    /// STREAMINFO), the other metadata, then a packet a frame.
    case oggFLAC

    /// The file name extension such a file has.
    public var fileExtension: String {
        switch self {
        case .bw64, .twoDataChunks, .formatAfterData: "wav"
        case .pipedCAF: "caf"
        case .oggFLAC: "ogg"
        }
    }

    /// Writes `seconds` of `SampleSounds`' sound (stereo, 44.1 kHz, 16 bits) at
    /// `path`, laid out so.
    public func write(to path: String, seconds: Double, seed: UInt64 = 1) throws {
        let source = path + ".source"
        defer { try? FileManager.default.removeItem(atPath: source) }
        let format = switch self {
        case .bw64: SF_FORMAT_RF64 | SF_FORMAT_PCM_16
        case .twoDataChunks, .formatAfterData: SF_FORMAT_WAV | SF_FORMAT_PCM_16
        case .pipedCAF: SF_FORMAT_CAF | SF_FORMAT_PCM_16
        case .oggFLAC: SF_FORMAT_FLAC | SF_FORMAT_PCM_16
        }
        try SampleSounds.write(sndfileFormat: Int32(format), to: source, seconds: seconds, seed: seed)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        switch self {
        case .bw64:
            bytes.replaceSubrange(0..<4, with: Array("BW64".utf8))
        case .twoDataChunks, .formatAfterData:
            var chunks = Self.chunks(of: bytes, from: 12, lengthBytes: 4, bigEndian: false)
            guard let data = chunks.firstIndex(where: { $0.name == "data" }),
                  let format = chunks.firstIndex(where: { $0.name == "fmt " }) else { throw LayoutError() }
            if self == .formatAfterData {
                chunks.append(chunks.remove(at: format))
            } else {
                // Split at a frame (4 bytes) near the middle.
                let samples = chunks[data].body
                let half = samples.count / 8 * 4
                chunks[data].body = Array(samples[..<half])
                chunks.insert((name: "data", body: Array(samples[half...])), at: data + 1)
            }
            var body: [UInt8] = []
            for chunk in chunks {
                body += Array(chunk.name.utf8) + Self.littleEndian(UInt32(chunk.body.count)) + chunk.body
                if chunk.body.count % 2 == 1 { body.append(0) }
            }
            bytes = Array("RIFF".utf8) + Self.littleEndian(UInt32(4 + body.count)) + Array("WAVE".utf8) + body
        case .pipedCAF:
            // libsndfile writes the data chunk last; its length (8 bytes after its type) becomes -1.
            let chunks = Self.chunks(of: bytes, from: 8, lengthBytes: 8, bigEndian: true)
            guard chunks.last?.name == "data" else { throw LayoutError() }
            let lengthAt = bytes.count - chunks[chunks.count - 1].body.count - 8
            bytes.replaceSubrange(lengthAt..<lengthAt + 8, with: [UInt8](repeating: 0xFF, count: 8))
        case .oggFLAC:
            bytes = try Self.oggFLAC(from: bytes)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// The file libsndfile wrote is not laid out as expected.
    struct LayoutError: Error {}

    /// The chunks (a 4-letter name, a length of `lengthBytes`, the bytes,
    /// padded to an even length in RIFF) of `bytes` from `offset` on.
    private static func chunks(of bytes: [UInt8], from offset: Int, lengthBytes: Int,
                               bigEndian: Bool) -> [(name: String, body: [UInt8])] {
        var chunks: [(name: String, body: [UInt8])] = []
        var offset = offset
        while offset + 4 + lengthBytes <= bytes.count {
            let lengthField = bytes[offset + 4..<offset + 4 + lengthBytes]
            let length = Int((bigEndian ? Array(lengthField) : lengthField.reversed()).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
            let start = offset + 4 + lengthBytes, end = min(bytes.count, start + length)
            chunks.append((String(decoding: bytes[offset..<offset + 4], as: UTF8.self), Array(bytes[start..<end])))
            offset = end + (lengthBytes == 4 ? length % 2 : 0)
        }
        return chunks
    }

    private static func littleEndian(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }

    /// A FLAC file laid out in Ogg pages (one stream, a packet a page):
    /// the first packet is 0x7F "FLAC", version 1.0, the count of metadata
    /// packets after it, "fLaC" and STREAMINFO; then each other metadata
    /// block, then each frame (found by its sync code), the last page
    /// marked as the stream's end.
    private static func oggFLAC(from flac: [UInt8]) throws -> [UInt8] {
        guard flac.starts(with: Array("fLaC".utf8)) else { throw LayoutError() }
        var blocks: [[UInt8]] = []
        var offset = 4
        while offset + 4 <= flac.count {
            let length = Int(flac[offset + 1]) << 16 | Int(flac[offset + 2]) << 8 | Int(flac[offset + 3])
            blocks.append(Array(flac[offset..<min(flac.count, offset + 4 + length)]))
            let last = flac[offset] & 0x80 != 0
            offset += 4 + length
            if last { break }
        }
        guard var streamInfo = blocks.first else { throw LayoutError() }
        var others = Array(blocks.dropFirst())
        // The last-block flag moves to the last metadata block in the stream.
        streamInfo[0] &= 0x7F
        for index in others.indices { others[index][0] &= 0x7F }
        if others.isEmpty { streamInfo[0] |= 0x80 } else { others[others.count - 1][0] |= 0x80 }
        let frames = Array(flac[offset...])
        var starts = (0..<max(0, frames.count - 1)).filter { frames[$0] == 0xFF && frames[$0 + 1] & 0xFE == 0xF8 }
        if starts.first != 0 { starts.insert(0, at: 0) }
        let packets = zip(starts, starts.dropFirst() + [frames.count]).map { Array(frames[$0..<$1]) }

        let first = [0x7F] + Array("FLAC".utf8) + [1, 0, UInt8(others.count >> 8), UInt8(others.count & 0xFF)]
            + Array("fLaC".utf8) + streamInfo
        var pages = oggPage(first, sequence: 0, flags: 0x02, granule: 0)
        var sequence: UInt32 = 1
        for block in others {
            pages += oggPage(block, sequence: sequence, flags: 0, granule: 0)
            sequence += 1
        }
        // A page's table of segments counts up to 255 × 255 bytes.
        guard packets.allSatisfy({ $0.count < 255 * 255 }) else { throw LayoutError() }
        for (index, packet) in packets.enumerated() {
            // Granules count samples: 4096 a frame, libsndfile's block size (the last page's is approximate).
            pages += oggPage(packet, sequence: sequence, flags: index == packets.count - 1 ? 0x04 : 0, granule: UInt64(index + 1) * 4096)
            sequence += 1
        }
        return pages
    }

    /// One Ogg page holding `packet` whole, with its checksum.
    private static func oggPage(_ packet: [UInt8], sequence: UInt32, flags: UInt8, granule: UInt64) -> [UInt8] {
        var segments = [UInt8](repeating: 255, count: packet.count / 255)
        segments.append(UInt8(packet.count % 255))
        var page = Array("OggS".utf8) + [0, flags] + withUnsafeBytes(of: granule.littleEndian, Array.init)
            + littleEndian(0x4D46) + littleEndian(sequence) + [0, 0, 0, 0] + [UInt8(segments.count)] + segments + packet
        var checksum = OggPageChecksum()
        checksum.add(page[...])
        page.replaceSubrange(22..<26, with: littleEndian(checksum.value))
        return page
    }
}
