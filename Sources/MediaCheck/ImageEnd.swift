/// Whether an image file reaches the end its format marks. A photo cut
/// short (a connection closed early where the server gave no length, or a
/// length that fell short of the file) still opens, and shows its top
/// rows over grey, but is no whole photo; and its URL would never be
/// fetched again. JPEG ends with an end-of-image marker, PNG with an
/// `IEND` chunk, GIF with its trailer byte, WebP, BMP, TIFF, and HEIF or
/// AVIF where their headers, directories and boxes say.
///
/// A whole file is known by its last bytes, kept as they arrived, so it
/// costs no read; only a file that ends otherwise (cut short, or with
/// bytes after its end: a phone's motion photo puts a video after its
/// JPEG) is walked from its start, read once. A file whose structure is
/// not as its format has it is not judged: only one that runs off its
/// end in the middle of a well-formed structure is cut short.
public enum ImageEnd {
    /// What the bytes known of an image say of its end, without reading it.
    public enum Verdict: Equatable, Sendable {
        /// It ends as its format has it, or its format's end is not checked
        /// (JPEG XL, or no image at all).
        case whole
        /// It is cut short, in a few words ("its header announces…").
        case cutShort(String)
        /// Only a walk of the file can tell (`walkedShortfall`).
        case needsWalk
    }

    /// The verdict on an image in format `format` (as `MediaSignature.image`
    /// names it; nil for none) of `size` bytes, opening with `opening` and
    /// ending with `closing` (as many of their bytes as are known).
    public static func quickVerdict(format: String?, opening: [UInt8], closing: [UInt8], size: Int64) -> Verdict {
        switch format {
        case "jpeg":
            // An end marker may be an embedded thumbnail's, in a segment the file ends inside.
            guard segmentsFit(jpegOpening: opening, size: size) else { return .cutShort(jpegCut) }
            return closing.suffix(2).elementsEqual([0xFF, 0xD9]) ? .whole : .needsWalk
        case "png":
            return closing.suffix(12).elementsEqual(pngEnd) ? .whole : .needsWalk
        case "gif":
            // A block's terminator, then the trailer (0x3B alone is one data byte in 256).
            return closing.suffix(2).elementsEqual([0x00, 0x3B]) ? .whole : .needsWalk
        case "webp":
            // RIFF's length counts what follows its first 8 bytes.
            guard opening.count >= 8 else { return .whole }
            let announced = opening[4..<8].reversed().reduce(Int64(0)) { $0 << 8 | Int64($1) } + 8
            return announced > size ? .cutShort("its header announces \(announced) bytes, \(size) are there") : .whole
        case "heif", "avif", "tiff":
            return .needsWalk
        case "bmp":
            guard let end = bmpPixelsEnd(opening: opening), end > size else { return .whole }
            return .cutShort("its header announces \(end) bytes, \(size) are there")
        default:
            return .whole
        }
    }

    /// Where a BMP's pixels end by the header in its `opening` (a 40-byte
    /// header or a later one): from the offset its file header gives, a
    /// row of the width's pixels, padded to 4 bytes, for each row of its
    /// height, uncompressed (the last row's padding not counted: some
    /// writers leave it out); compressed (RLE, or a JPEG or PNG inside),
    /// the image size its header gives. Nil where the header is not as the
    /// format has it, or gives no size: not judged. A file that ends inside
    /// its header ends before its pixels' first byte.
    static func bmpPixelsEnd(opening: [UInt8]) -> Int64? {
        func number(_ offset: Int, _ count: Int) -> Int64? {
            guard offset + count <= opening.count else { return nil }
            return opening[offset..<offset + count].reversed().reduce(Int64(0)) { $0 << 8 | Int64($1) }
        }
        guard let headerSize = number(14, 4), headerSize >= 40, headerSize <= 1024 else { return nil }
        guard let offset = number(10, 4), let width = number(18, 4), let rawHeight = number(22, 4), let planes = number(26, 2),
              let bits = number(28, 2), let compression = number(30, 4), let imageSize = number(34, 4) else {
            // Cut inside its header: its pixels begin after it at the least.
            return 14 + headerSize
        }
        // The height is signed: negative for rows stored top to bottom.
        let height = rawHeight >= 1 << 31 ? (1 << 32) - rawHeight : rawHeight
        // (A JPEG or PNG inside, compression 4 or 5, has 0 bits a pixel.)
        guard planes == 1, [1, 2, 4, 8, 16, 24, 32, 64].contains(bits) || bits == 0 && [4, 5].contains(compression),
              (1...1 << 20).contains(width), (1...1 << 20).contains(height), offset >= 14 + headerSize else { return nil }
        switch compression {
        case 0, 3, 6:
            let row = (width * bits + 31) / 32 * 4
            return offset + row * (height - 1) + (width * bits + 7) / 8
        case 1, 2, 4, 5:
            return imageSize > 0 ? offset + imageSize : nil
        default:
            return nil
        }
    }

    /// How the image at `path` (`size` bytes, in format `format`) falls
    /// short of its end, found by walking its structure (a read of the
    /// file, blocking); nil when it is whole, or its structure is not as
    /// its format has it, or the file cannot be read.
    public static func walkedShortfall(format: String, size: Int64, path: String) -> String? {
        switch format {
        case "jpeg": walk(path) { jpegEnd(&$0) } == .cutShort ? jpegCut : nil
        case "png": walk(path) { pngEnd(&$0) } == .cutShort ? "a PNG without its IEND chunk" : nil
        case "gif": walk(path) { gifEnd(&$0) } == .cutShort ? "a GIF without its trailer" : nil
        case "heif", "avif":
            switch walk(path, { boxesEnd(&$0, size: size) }) {
            case .cutShort: "a\(format == "heif" ? "" : "n") \(format.uppercased()) whose last box ends past the file's end"
            case .whole(mediaData: false): "a\(format == "heif" ? "" : "n") \(format.uppercased()) without its media data box"
            default: nil
            }
        case "tiff": walkedTIFFShortfall(path: path, size: size)
        default: nil
        }
    }

    /// `tiffShortfall` of the file at `path`; nil where a read fails.
    private static func walkedTIFFShortfall(path: String, size: Int64) -> String? {
        guard var reader = FileReader(path: path, bufferSize: 4096) else { return nil }
        defer { reader.close() }
        let words = tiffShortfall(&reader, size: size)
        return reader.failed ? nil : words
    }

    /// How a TIFF of `size` bytes falls short, by its directories (the chain
    /// from its header, 64 at most) and the image data their strips or tiles
    /// (or an old-style JPEG's stream) point at: cut short where its first
    /// directory, a table of offsets or lengths, or the data runs past the
    /// file's end (a later directory past it ends the walk). Nil where it is whole, or not as the format has it
    /// (BigTIFF, a loop of directories, a table of 65,536 strips or more,
    /// numbers of a type no table has): not judged.
    static func tiffShortfall(_ reader: inout FileReader, size: Int64) -> String? {
        let bigEndian: Bool
        switch reader.number(2, bigEndian: true) {
        case 0x4D4D: bigEndian = true
        case 0x4949: bigEndian = false
        default: return size < 8 ? "it ends inside its header" : nil
        }
        guard let version = reader.number(2, bigEndian: bigEndian), let first = reader.number(4, bigEndian: bigEndian) else {
            return "it ends inside its header"
        }
        guard version == 42 else { return nil }
        /// The numbers of a table entry's `count` values of `type` (SHORT or
        /// LONG): in its value field when they fit there, else where it points.
        enum Values { case read([Int64]), pastTheEnd(Int64), notJudged }
        func values(type: Int64, count: Int64, field: Int64) -> Values {
            guard let width = [3: 2, 4: 4][type], (1..<1 << 16).contains(count) else { return .notJudged }
            if Int64(width) * count <= 4 {
                // Packed from the field's first byte on, in the file's byte order.
                let shorts = bigEndian ? [field >> 16, field & 0xFFFF] : [field & 0xFFFF, field >> 16]
                return .read(width == 4 ? [field] : Array(shorts.prefix(Int(count))))
            }
            guard field + Int64(width) * count <= size else { return .pastTheEnd(field) }
            reader.seek(to: field)
            var numbers: [Int64] = []
            for _ in 0..<count {
                guard let number = reader.number(width, bigEndian: bigEndian) else { return .notJudged }
                numbers.append(number)
            }
            return .read(numbers)
        }
        var directory = first
        var seen: Set<Int64> = []
        var dataEnd: Int64 = 0
        while directory != 0 {
            guard seen.count < 64, seen.insert(directory).inserted, directory >= 8 else { return nil }
            guard directory + 2 <= size else {
                if seen.count == 1 { return "its directory at byte \(directory) is past its end" }
                // A later one: a writer's garbage after a whole image (libtiff reads that image), or pages cut off.
                break
            }
            reader.seek(to: directory)
            guard let entries = reader.number(2, bigEndian: bigEndian), entries > 0 else { return nil }
            guard directory + 2 + 12 * entries + 4 <= size else { return "it ends inside its directory at byte \(directory)" }
            var tables: [Int64: (type: Int64, count: Int64, field: Int64)] = [:]
            for _ in 0..<entries {
                guard let tag = reader.number(2, bigEndian: bigEndian), let type = reader.number(2, bigEndian: bigEndian),
                      let count = reader.number(4, bigEndian: bigEndian), let field = reader.number(4, bigEndian: bigEndian) else { return nil }
                if Self.tiffDataTags.contains(tag) { tables[tag] = (type, count, field) }
            }
            guard let next = reader.number(4, bigEndian: bigEndian) else { return nil }
            // Strips, tiles, and an old-style JPEG's stream: where each piece starts, and its length.
            for (startsTag, lengthsTag) in [(273, 279), (324, 325), (513, 514)] as [(Int64, Int64)] {
                guard let starts = tables[startsTag], let lengths = tables[lengthsTag] else { continue }
                switch (values(type: starts.type, count: starts.count, field: starts.field),
                        values(type: lengths.type, count: lengths.count, field: lengths.field)) {
                case (.read(let offsets), .read(let counts)):
                    // (An empty tile of a sparse file may point anywhere.)
                    for (offset, count) in zip(offsets, counts) where count > 0 { dataEnd = max(dataEnd, offset + count) }
                case (.pastTheEnd(let table), _), (_, .pastTheEnd(let table)):
                    return "its table at byte \(table) is past its end"
                default:
                    return nil
                }
            }
            directory = next
        }
        // A few bytes over are a writer's miscount ("Bogus StripByteCounts", and libtiff decodes it).
        return dataEnd > size + tiffCountSlack ? "its image data runs to byte \(dataEnd), \(size) are there" : nil
    }

    /// How far a TIFF's image data may run past its end and be whole: a
    /// writer's miscount of its last strip, which libtiff reads all the same.
    static let tiffCountSlack: Int64 = 8

    /// The tags of a TIFF's tables of where its image data is and how long.
    private static let tiffDataTags: Set<Int64> = [273, 279, 324, 325, 513, 514]

    /// `quickVerdict`, then `walkedShortfall` where it is needed.
    public static func shortfall(format: String, opening: [UInt8], closing: [UInt8], size: Int64, path: String) -> String? {
        switch quickVerdict(format: format, opening: opening, closing: closing, size: size) {
        case .whole: nil
        case .cutShort(let words): words
        case .needsWalk: walkedShortfall(format: format, size: size, path: path)
        }
    }

    private static let jpegCut = "a JPEG without its end marker"

    /// Whether the segments whose headers are in a JPEG's `opening` bytes
    /// (up to its first scan) end within its `size` bytes. The end marker of
    /// a thumbnail inside an EXIF segment, where the file was cut, looked
    /// like the photo's own.
    static func segmentsFit(jpegOpening opening: [UInt8], size: Int64) -> Bool {
        var index = 2
        while index + 4 <= opening.count, opening[index] == 0xFF {
            let marker = opening[index + 1]
            if marker == 0xFF { index += 1; continue } // a fill byte
            if (0xD0...0xD7).contains(marker) || marker == 0x01 { index += 2; continue }
            if marker == 0xD9 || marker == 0xDA || marker < 0xC0 { break } // the end, the first scan, or no marker
            let end = index + 2 + (Int(opening[index + 2]) << 8 | Int(opening[index + 3]))
            if Int64(end) > size { return false }
            index = end
        }
        return true
    }

    /// What a walk of a file's structure found.
    enum Walk: Equatable {
        /// It reached the format's end (bytes may follow); for an ISO
        /// media file, whether it has a media data box (`mdat`).
        case whole(mediaData: Bool = true)
        /// The file ended inside the structure.
        case cutShort
        /// Bytes where the format has none such, or no file to read.
        case malformed
    }

    /// Opens `path` and walks it with `body`, reading each byte once. A
    /// read that fails (not the file's end) judges nothing.
    static func walk(_ path: String, _ body: (inout FileReader) -> Walk) -> Walk {
        guard var reader = FileReader(path: path) else { return .malformed }
        defer { reader.close() }
        let found = body(&reader)
        return reader.failed ? .malformed : found
    }

    private static let pngEnd: [UInt8] = [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]

    /// A JPEG's segments from its start-of-image marker to its end-of-image
    /// marker: each segment's length, and after each start-of-scan the
    /// entropy-coded bytes, in which 0xFF is followed by 0 (a stuffed byte)
    /// or a restart marker, to the next marker.
    static func jpegEnd(_ reader: inout FileReader) -> Walk {
        guard reader.byte() == 0xFF, reader.byte() == 0xD8 else { return .malformed }
        while true {
            guard let first = reader.byte() else { return .cutShort }
            guard first == 0xFF else { return .malformed }
            var marker = first
            // Fill bytes (0xFF) may come before a marker.
            while marker == 0xFF {
                guard let next = reader.byte() else { return .cutShort }
                marker = next
            }
            switch marker {
            case 0xD9:
                return .whole()
            case 0xD0...0xD7, 0x01:
                continue // no length
            case ..<0xC0:
                return .malformed // no marker

            default:
                guard let length = reader.number(2, bigEndian: true) else { return .cutShort }
                guard length >= 2 else { return .malformed }
                guard reader.skip(length - 2) else { return .cutShort }
                if marker == 0xDA {
                    guard reader.skipEntropyCodedBytes() else { return .cutShort }
                }
            }
        }
    }

    /// A PNG's chunks after its 8-byte signature, each a length, a type,
    /// the data and a CRC, to its `IEND`.
    static func pngEnd(_ reader: inout FileReader) -> Walk {
        guard reader.skip(8) else { return .cutShort }
        while true {
            guard let length = reader.number(4, bigEndian: true), let type = reader.number(4, bigEndian: true) else {
                return .cutShort
            }
            guard length < 1 << 31 else { return .malformed }
            if type == 0x49454E44 { return reader.skip(4) ? .whole() : .cutShort } // IEND, and its CRC
            guard reader.skip(length + 4) else { return .cutShort }
        }
    }

    /// A GIF's screen descriptor and colour table, then its blocks
    /// (extensions and images, each ending in an empty sub-block) to its
    /// trailer, 0x3B, or to the file's end right after an image.
    static func gifEnd(_ reader: inout FileReader) -> Walk {
        func colourTable(flags: UInt8) -> Int64 { flags & 0x80 != 0 ? 3 << (Int64(flags & 7) + 1) : 0 }
        func subBlocks(_ reader: inout FileReader) -> Bool {
            while true {
                guard let count = reader.byte() else { return false }
                if count == 0 { return true }
                guard reader.skip(Int64(count)) else { return false }
            }
        }
        guard reader.skip(10), let flags = reader.byte(), reader.skip(2 + colourTable(flags: flags)) else { return .cutShort }
        // Some encoders leave the trailer out: a file that ends right after a whole image is whole.
        var afterAnImage = false
        while true {
            guard let introducer = reader.byte() else { return afterAnImage ? .whole() : .cutShort }
            afterAnImage = false
            switch introducer {
            case 0x3B:
                return .whole()
            case 0x21:
                guard reader.skip(1), subBlocks(&reader) else { return .cutShort }
            case 0x2C:
                guard reader.skip(8), let flags = reader.byte(), reader.skip(colourTable(flags: flags) + 1), subBlocks(&reader) else {
                    return .cutShort
                }
                afterAnImage = true
            default:
                return .malformed
            }
        }
    }

    /// An ISO media file's top-level boxes (HEIF, AVIF), each its length
    /// (or 1 and a 64-bit length after its type, or 0: to the file's end)
    /// and its type: whole when the last ends at or before the file's end,
    /// with whether a media data box (`mdat`) was among them (a file cut
    /// after its `meta` box holds no image). Bytes after the boxes that are
    /// no box this format has (fewer than 8, or another type: a trailer
    /// such as a motion photo's) are not judged, unless no media data came
    /// before them.
    static func boxesEnd(_ reader: inout FileReader, size: Int64) -> Walk {
        var offset: Int64 = 0
        var mediaData = false
        while offset < size {
            guard size - offset >= 8, reader.skip(offset - reader.position), let length = reader.number(4, bigEndian: true),
                  let type = reader.number(4, bigEndian: true) else { return mediaData ? .whole() : .malformed }
            let name = String(decoding: (0..<4).map { UInt8(type >> (8 * (3 - $0)) & 0xFF) }, as: UTF8.self)
            guard topLevelBoxes.contains(name) else { return mediaData ? .whole() : .malformed }
            if name == "mdat" { mediaData = true }
            var boxLength = length
            if length == 1 {
                guard let long = reader.number(8, bigEndian: true) else { return .cutShort }
                guard long >= 16 else { return .malformed }
                boxLength = long
            }
            // Item data may be kept in the `meta` box's own `idat` instead.
            if name == "meta", length != 0, boxLength <= size - offset, holdsItemData(&reader, metaEnd: offset + boxLength) {
                mediaData = true
            }
            if length == 0 { return .whole(mediaData: mediaData) }
            guard boxLength >= 8 else { return .malformed }
            // Past the file's end (a largesize up to 2^63 too: no sum that overflows).
            if boxLength > size - offset { return .cutShort }
            offset += boxLength
        }
        return .whole(mediaData: mediaData)
    }

    /// Whether the `meta` box whose children follow (after its version and
    /// flags) and end at `metaEnd` holds an `idat` box of item data.
    private static func holdsItemData(_ reader: inout FileReader, metaEnd: Int64) -> Bool {
        guard reader.skip(4) else { return false }
        while metaEnd - reader.position >= 8 {
            let start = reader.position
            guard let length = reader.number(4, bigEndian: true), let type = reader.number(4, bigEndian: true),
                  length >= 8, start + length <= metaEnd else { return false }
            if type == 0x69646174 { return true } // idat
            guard reader.skip(start + length - reader.position) else { return false }
        }
        return false
    }

    /// The boxes an ISO media file (HEIF, AVIF) has at its top level.
    private static let topLevelBoxes: Set<String> = [
        "ftyp", "meta", "mdat", "moov", "moof", "mfra", "free", "skip", "uuid", "pdin", "styp", "sidx", "ssix", "prft",
        "emsg", "meco", "etyp", "wide", "jumb", "altr",
    ]
}
