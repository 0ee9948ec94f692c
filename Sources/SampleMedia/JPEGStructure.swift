import Foundation

/// A JPEG's size in pixels, as its frame header (`SOFn`) gives it.
public struct JPEGDimensions: Equatable, Sendable, CustomStringConvertible {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    public var description: String { "\(width)×\(height)" }
}

/// Reads a JPEG's segment structure: enough to tell a whole JPEG from
/// anything else (an HTML page, a cut-off body) without decoding pixels.
public enum JPEGStructure {
    /// The frame's dimensions when `data` is a whole JPEG: it starts with
    /// `SOI`, its segments up to the scan are well formed, one of them is a
    /// frame header, and it ends with `EOI`. Nil otherwise.
    public static func dimensions(of data: Data) -> JPEGDimensions? {
        let bytes = [UInt8](data)
        guard bytes.count >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8,
              bytes[bytes.count - 2] == 0xFF, bytes[bytes.count - 1] == 0xD9 else { return nil }
        var offset = 2
        var found: JPEGDimensions?
        while offset + 4 <= bytes.count {
            guard bytes[offset] == 0xFF else { return nil }
            let marker = bytes[offset + 1]
            if marker == 0xFF { offset += 1; continue } // fill byte
            let length = Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            guard length >= 2, offset + 2 + length <= bytes.count else { return nil }
            if isFrameHeader(marker) {
                guard length >= 8 else { return nil }
                let height = Int(bytes[offset + 5]) << 8 | Int(bytes[offset + 6])
                let width = Int(bytes[offset + 7]) << 8 | Int(bytes[offset + 8])
                found = JPEGDimensions(width: width, height: height)
            }
            // Entropy-coded data follows the scan header; the EOI check above covers the end.
            if marker == 0xDA { return found }
            offset += 2 + length
        }
        return nil
    }

    /// The offset just past `SOI` and the `APPn` segments that follow it
    /// (JFIF wants its `APP0` first), where a comment segment may go.
    static func endOfApplicationSegments(in data: Data) -> Int {
        let bytes = [UInt8](data)
        var offset = 2
        while offset + 4 <= bytes.count, bytes[offset] == 0xFF, (0xE0...0xEF).contains(bytes[offset + 1]) {
            offset += 2 + (Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3]))
        }
        return min(offset, bytes.count)
    }

    /// SOF0–SOF15, leaving out DHT (C4), JPG (C8) and DAC (CC), which share the range.
    private static func isFrameHeader(_ marker: UInt8) -> Bool {
        (0xC0...0xCF).contains(marker) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC
    }
}
