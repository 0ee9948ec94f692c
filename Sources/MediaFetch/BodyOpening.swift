import Foundation

/// What a body's first bytes are, for the page check (`PageInsteadOfMedia`):
/// text in some charset, a page's markup, an image's, sound's or video's
/// signature, or a compressed stream. Each is read from the opening alone
/// (the first 512 bytes of a body, or 32 of an answer to a resume), which
/// may be cut anywhere, even inside a character.
enum BodyOpening {
    /// Whether `bytes` begin as a gzip, zstd, xz or bzip2 stream does: a page
    /// or a file a server compressed though it was not asked to (mediafetch
    /// sends no `Accept-Encoding`), which would be stored as sent.
    /// (By the first byte first: this runs for every body where media was asked for.)
    static func isCompressed(_ bytes: [UInt8]) -> Bool {
        switch bytes.first {
        case 0x1F: return bytes.starts(with: [0x1F, 0x8B, 0x08]) // gzip
        case 0x28: return bytes.starts(with: [0x28, 0xB5, 0x2F, 0xFD]) // zstd
        case 0xFD: return bytes.starts(with: [0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00]) // xz
        case 0x42: return bytes.count >= 4 && bytes[1] == 0x5A && bytes[2] == 0x68 && (0x31...0x39).contains(bytes[3]) // bzip2
        default: return false
        }
    }

    /// Whether `bytes` begin as a zlib stream does (`deflate` as HTTP
    /// means it): deflate's method and a header check that 31 divides.
    static func opensAsZlib(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 2 && bytes[0] & 0x0F == 8 && bytes[0] >> 4 <= 7 && (UInt16(bytes[0]) << 8 | UInt16(bytes[1])) % 31 == 0
    }

    /// Whether `bytes` begin, after blanks and a UTF-8 byte order mark, with `<`.
    static func looksLikeMarkup(_ bytes: [UInt8]) -> Bool {
        afterBlanks(bytes).first == UInt8(ascii: "<")
    }

    /// `bytes` without a UTF-8 byte order mark and the blanks that open them.
    private static func afterBlanks(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
        var rest = bytes[...]
        if rest.starts(with: [0xEF, 0xBB, 0xBF]) { rest = rest.dropFirst(3) }
        return rest.drop { [0x20, 0x09, 0x0A, 0x0D, 0x0C].contains($0) }
    }

    /// Whether `bytes` begin, after blanks and a byte order mark, as an HTML
    /// or XML page does (`<!DOCTYPE html`, `<html`, `<head`, `<body`,
    /// `<?xml`, `<!--`), in any letter case; in UTF-8 or in UTF-16, with its
    /// mark or without.
    static func opensAsAPage(_ bytes: [UInt8]) -> Bool {
        opens(bytes, withOneOf: pageOpenings)
    }

    /// Whether `bytes` begin, after blanks and a byte order mark, as an HTML
    /// page does (`htmlOpenings`), in any letter case; in UTF-8 or UTF-16, as
    /// `opensAsAPage` reads them.
    static func opensAsHTML(_ bytes: [UInt8]) -> Bool {
        opens(bytes, withOneOf: htmlOpenings)
    }

    private static let htmlOpenings = ["<!doctype html", "<html", "<head", "<body"]
    private static let pageOpenings = htmlOpenings + ["<?xml", "<!--"]

    private static func opens(_ bytes: [UInt8], withOneOf openings: [String]) -> Bool {
        let opening = asciiLowercased(afterBlanks(asciiOfUTF16(bytes) ?? bytes).prefix(14))
        return openings.contains { opening.starts(with: $0.utf8) }
    }

    /// The ASCII characters a UTF-16 opening begins with (after its byte
    /// order mark, if any), a byte each: all that markup is known by. Nil
    /// when `bytes` do not begin as UTF-16 (with a mark, or an ASCII
    /// character and a zero byte in either order: `<` `00`, `00` `<`).
    private static func asciiOfUTF16(_ bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count >= 2 else { return nil }
        var rest = bytes[...]
        let bigEndian: Bool
        if let marked = utf16Mark(bytes) {
            bigEndian = marked
            rest = rest.dropFirst(2)
        } else if bytes[0] != 0, bytes[0] < 0x80, bytes[1] == 0 {
            bigEndian = false
        } else if bytes[0] == 0, bytes[1] != 0, bytes[1] < 0x80 {
            bigEndian = true
        } else {
            return nil
        }
        var ascii: [UInt8] = []
        var index = rest.startIndex
        while index + 1 < rest.endIndex, ascii.count < 32 {
            let (high, low) = bigEndian ? (rest[index], rest[index + 1]) : (rest[index + 1], rest[index])
            guard high == 0, low < 0x80 else { break }
            ascii.append(low)
            index += 2
        }
        return ascii
    }

    /// Whether `bytes` open with UTF-16's byte order mark: true for
    /// big-endian (`FE FF`), false for little-endian (`FF FE`); nil for none.
    static func utf16Mark(_ bytes: [UInt8]) -> Bool? {
        guard bytes.count >= 2 else { return nil }
        switch (bytes[0], bytes[1]) {
        case (0xFE, 0xFF): return true
        case (0xFF, 0xFE): return false
        default: return nil
        }
    }

    /// `bytes` with ASCII capitals made small, as an array (a lazy map is
    /// read through a dynamic cast, byte by byte, when a string is made of it).
    static func asciiLowercased<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> [UInt8] {
        bytes.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
    }

    /// Whether `bytes` (a file's opening, maybe cut inside a character) are
    /// text by `textOpening`'s rules for a body not labelled text: UTF-8,
    /// UTF-16 or UTF-32 after its byte order mark, or Windows-1252 words.
    static func looksLikeText(_ bytes: [UInt8]) -> Bool {
        textOpening(bytes) != nil
    }

    /// `bytes` (a file's opening, maybe cut inside a character) as UTF-8 when
    /// they are text, with no control character but line breaks, tabs and
    /// form feeds; nil when they are not. Every image, sound and video format
    /// opens with bytes that are not (JPEG `FF D8`, PNG `89`, a NUL in RIFF's,
    /// FLAC's and Ogg's headers).
    ///
    /// Text is UTF-8; UTF-16 or UTF-32 after its byte order mark (see
    /// `wideText`); and Windows-1252 words, mostly ASCII (Latin-1 is read so,
    /// as browsers read it). Labelled text (`labelledText`: a `text/*`, page, JSON or XML
    /// type), it may also be in the `charset` the type names (`shift_jis`,
    /// `iso-2022-jp`, `windows-1250`, `utf-16le`…), or, with one named that
    /// cannot be read here (`euc-kr`, `big5`), any bytes but ASCII's
    /// controls. An error page in Latin-1 or Shift_JIS was taken for a photo.
    /// Those charsets give meaning to any byte, so an opening that begins
    /// as media does (`opensWithAMediaSignature`) is never read in them: a
    /// JPEG whose first segment is XMP, or a long comment, has no control
    /// byte for dozens or thousands of bytes.
    static func textOpening(_ bytes: [UInt8], labelledText: Bool = false, charset: String? = nil) -> [UInt8]? {
        guard !bytes.isEmpty else { return nil }
        // By a byte order mark, UTF-32's first (it opens with UTF-16's).
        if bytes.starts(with: [0xFF, 0xFE, 0x00, 0x00]) || bytes.starts(with: [0x00, 0x00, 0xFE, 0xFF]) {
            return wideText(bytes.dropFirst(4), width: 4, bigEndian: bytes[0] == 0)
        }
        if let bigEndian = utf16Mark(bytes) {
            return wideText(bytes.dropFirst(2), width: 2, bigEndian: bigEndian)
        }
        let inAnotherCharset = !opensWithAMediaSignature(bytes)
        // A charset counts where the type says text.
        var named = labelledText && inAnotherCharset ? charset : nil
        if let named, named.hasPrefix("utf-16") || named.hasPrefix("utf-32") {
            // No byte order mark: big-endian unless the name says otherwise (RFC 2781), then little-endian as Windows writes it.
            let width = named.hasPrefix("utf-32") ? 4 : 2
            let text = named.hasSuffix("le") ? nil : wideText(bytes[...], width: width, bigEndian: true)
            if let text = text ?? (named.hasSuffix("be") ? nil : wideText(bytes[...], width: width, bigEndian: false)) {
                return text
            }
        }
        var namedIsReadable = false
        if let name = named, let encoding = knownCharsets[name] {
            // A multi-byte character (or an escape) cut by the end of the opening is text still.
            let text = (0...3).lazy.compactMap { cut in
                cut < bytes.count ? String(bytes: bytes.dropLast(cut), encoding: encoding) : nil
            }.first
            if let text, !text.isEmpty {
                if hasNoControls(text) { return Array(text.utf8) }
                namedIsReadable = true
            } else if encoding == .windowsCP1252 {
                // Latin-1's names are read as Windows-1252; bytes that it
                // leaves unassigned are judged as if no charset were named.
                named = nil
            }
        }
        // Labelled another charset, UTF-8 may still be what was sent.
        if let text = String(validating: withoutACutCharacter(bytes), as: UTF8.self), !text.isEmpty {
            // C1 characters count as text here (Windows-1252 text converted twice has them).
            if hasNoControls(text, countingC1: false) { return bytes }
            // ISO-2022-JP with no charset named: its escapes say what it is.
            if named == nil, labelledText, inAnotherCharset, bytes.contains(0x1B),
               let text = String(bytes: bytes, encoding: .iso2022JP), !text.isEmpty, hasNoControls(text) {
                return Array(text.utf8)
            }
            // ISO 2022's seven bits are valid UTF-8, its escapes and shifts controls there.
            guard named?.hasPrefix("iso-2022") == true else { return nil }
        }
        guard inAnotherCharset, !namedIsReadable else { return nil }
        let allowed: Set<UInt8> = named?.hasPrefix("iso-2022") == true
            ? [0x09, 0x0A, 0x0C, 0x0D, 0x0E, 0x0F, 0x1B] // ISO 2022's shifts and escapes
            : [0x09, 0x0A, 0x0C, 0x0D]
        guard !bytes.contains(where: { ($0 < 0x20 || $0 == 0x7F) && !allowed.contains($0) }) else { return nil }
        if let named, !named.hasPrefix("utf") {
            // Named, and not one read here: any charset that keeps ASCII. Read
            // as Latin-1, which keeps ASCII, all the markup a page is known by.
            var text = String.UnicodeScalarView()
            text.append(contentsOf: bytes.map(Unicode.Scalar.init))
            return Array(String(text).utf8)
        }
        // None named (or a Unicode one the bytes are not in): Windows-1252
        // words, mostly ASCII (an MPEG audio frame's bytes are not), without
        // its five unassigned bytes.
        guard !bytes.contains(where: { [0x81, 0x8D, 0x8F, 0x90, 0x9D].contains($0) }),
              bytes.filter({ $0 < 0x80 }).count * 2 >= bytes.count,
              let text = String(bytes: bytes, encoding: .windowsCP1252) else { return nil }
        return Array(text.utf8)
    }

    /// Whether `bytes` begin as an image, sound or video file does: JPEG,
    /// JPEG XL, PNG, GIF, BMP, RIFF (WAV, WebP, AVI), AIFF, CAF, FLAC, Ogg,
    /// ASF (WMA), FLV, an ID3 tag, an MPEG audio or ADTS frame (after up
    /// to 64 zero bytes, as some MP3s have), Matroska/WebM, TIFF, or an ISO
    /// media or QuickTime file (`ftyp`, `moov`, `mdat`, `wide`, `free`,
    /// `skip`, `pnot` first, after a box size that is not four letters: MP4,
    /// M4A, MOV, HEIC, AVIF; JPEG 2000's `jP  `), AC-3, MIDI, PSD, WavPack,
    /// ICO, Monkey's Audio (APE), DSF, DSDIFF, Musepack, TTA, or Olympus and
    /// Panasonic raw photos. (Formats that open with text are `TextFormatMedia`'s.)
    /// (`FF FE` is UTF-16's byte order mark as well as an MPEG frame's
    /// start: `textOpening` reads the mark first, and `wideText` tells such
    /// a frame from text.) MPEG program and elementary streams (`00 00 01
    /// BA`, `00 00 01 B3`) and transport streams (`G` every 188 bytes) too.
    static func opensWithAMediaSignature(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 2 else { return false }
        // The first byte that is not zero, among the first 66 (a frame's two bytes after 64 zeros).
        let frame = bytes.prefix(66).firstIndex { $0 != 0 } ?? bytes.endIndex
        if frame + 1 < bytes.count, bytes[frame] == 0xFF,
           bytes[frame + 1] & 0xE0 == 0xE0 || frame == 0 && [0xD8, 0x0A].contains(bytes[1]) {
            return true
        }
        if bytes.count >= 8, !bytes[0...3].allSatisfy({ (0x20...0x7E).contains($0) }),
           quickTimeBoxes.contains(where: { bytes[4...7].elementsEqual($0) }) {
            return true
        }
        // A BMP's two reserved words are zero.
        if bytes.count >= 10, bytes[0] == 0x42, bytes[1] == 0x4D, bytes[6...9].allSatisfy({ $0 == 0 }) { return true }
        if bytes.count > 376, bytes[0] == 0x47, bytes[188] == 0x47, bytes[376] == 0x47 { return true }
        // Monkey's Audio (integer or float) and Musepack SV7 by the version after
        // their letters (3.00 to 5.00, or 7.0 and 7.1: not text), Musepack SV8 by its first packet's key.
        if bytes.count >= 6, bytes.starts(with: "MAC ".utf8) || bytes.starts(with: "MACF".utf8),
           (3000...5000).contains(UInt16(bytes[5]) << 8 | UInt16(bytes[4])) {
            return true
        }
        if bytes.count >= 4, bytes.starts(with: "MP+".utf8), [0x07, 0x17].contains(bytes[3]) { return true }
        return mediaSignatures.contains { bytes.starts(with: $0) }
    }

    private static let quickTimeBoxes = ["ftyp", "moov", "mdat", "wide", "free", "skip", "pnot", "jP  "].map { Array($0.utf8) }

    private static let mediaSignatures: [[UInt8]] = [
        [0x89, 0x50, 0x4E, 0x47], Array("GIF8".utf8), Array("RIFF".utf8), Array("FORM".utf8), Array("fLaC".utf8),
        Array("OggS".utf8), Array("ID3".utf8), [0x1A, 0x45, 0xDF, 0xA3], [0x49, 0x49, 0x2A, 0x00], [0x4D, 0x4D, 0x00, 0x2A],
        Array("caff".utf8), Array("FLV".utf8) + [0x01], [0x30, 0x26, 0xB2, 0x75],
        [0x00, 0x00, 0x01, 0xBA], [0x00, 0x00, 0x01, 0xB3],
        [0x0B, 0x77], Array("MThd".utf8), Array("8BPS".utf8), Array("wvpk".utf8), [0x00, 0x00, 0x01, 0x00], // AC-3, MIDI, PSD, WavPack, ICO
        Array("DSD ".utf8) + [0x1C, 0x00], Array("FRM8".utf8) + [0x00], Array("MPCKSH".utf8), // DSF, DSDIFF, Musepack SV8
        Array("TTA1".utf8) + [0x01, 0x00], Array("TTA1".utf8) + [0x02, 0x00], // TTA (its format: 1 or 2)
        Array("IIRO".utf8) + [0x08, 0x00], Array("IIRS".utf8) + [0x08, 0x00], [0x49, 0x49, 0x55, 0x00], // Olympus and Panasonic raw
        [0x49, 0x49, 0x2B, 0x00], [0x4D, 0x4D, 0x00, 0x2B], [0xFF, 0x4F, 0xFF, 0x51], // BigTIFF, a JPEG 2000 codestream
    ]

    /// `bytes` without the start of a UTF-8 character that the end of the
    /// opening cut (a lead byte and fewer continuation bytes than it calls
    /// for); as they are otherwise.
    private static func withoutACutCharacter(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
        var start = bytes.endIndex
        while start > bytes.startIndex, bytes.endIndex - start < 3, (0x80...0xBF).contains(bytes[start - 1]) { start -= 1 }
        guard start > bytes.startIndex else { return bytes[...] }
        let lead = bytes[start - 1]
        let length = (0xC2...0xDF).contains(lead) ? 2 : (0xE0...0xEF).contains(lead) ? 3 : (0xF0...0xF4).contains(lead) ? 4 : 0
        return length > bytes.endIndex - (start - 1) ? bytes[..<(start - 1)] : bytes[...]
    }

    /// Whether `text` has no control character but tabs, line breaks and
    /// form feeds; C1's (U+0080–U+009F) count when `countingC1`.
    private static func hasNoControls(_ text: String, countingC1: Bool = true) -> Bool {
        text.unicodeScalars.allSatisfy {
            $0.value >= 0x20 && $0.value != 0x7F && !(countingC1 && (0x80...0x9F).contains($0.value))
                || [0x09, 0x0A, 0x0C, 0x0D].contains($0.value)
        }
    }

    /// UTF-16 or UTF-32 `bytes` (`width` 2 or 4; after a byte order mark,
    /// if there was one) as UTF-8 when they are text: no control, and either
    /// mostly ASCII (a page's markup, a Latin script's words) or at least
    /// eight characters with none unassigned or for private use (Japanese,
    /// Russian). An MPEG audio frame may open with `FF FE`: its bytes, read
    /// so, soon pair no surrogates or fall in the private use area. A byte
    /// order mark alone is an empty text.
    private static func wideText(_ bytes: ArraySlice<UInt8>, width: Int, bigEndian: Bool) -> [UInt8]? {
        guard !bytes.isEmpty else { return [] }
        var units: [UInt32] = stride(from: bytes.startIndex, to: bytes.endIndex - (width - 1), by: width).map { index in
            let unit = bytes[index..<(index + width)]
            let mostSignificantFirst = bigEndian ? Array(unit) : unit.reversed()
            return mostSignificantFirst.reduce(0) { $0 << 8 | UInt32($1) }
        }
        let text: String?
        if width == 2 {
            // A pair cut by the end of the opening.
            if let last = units.last, UTF16.isLeadSurrogate(UInt16(last)) { units.removeLast() }
            text = String(validating: units.map { UInt16($0) }, as: UTF16.self)
        } else {
            let scalars = units.compactMap(Unicode.Scalar.init)
            text = scalars.count == units.count ? String(String.UnicodeScalarView(scalars)) : nil
        }
        guard let text, !text.isEmpty, hasNoControls(text) else { return nil }
        let scalars = text.unicodeScalars
        if scalars.filter({ $0.isASCII }).count * 2 >= scalars.count { return Array(text.utf8) }
        let ordinary = scalars.allSatisfy { scalar in
            let category = scalar.properties.generalCategory
            return category != .unassigned && category != .privateUse && !scalar.properties.isNoncharacterCodePoint
        }
        return ordinary && scalars.count >= 8 ? Array(text.utf8) : nil
    }

    /// The `charset` parameter of a `Content-Type` value, lower-cased and unquoted; nil when it names none.
    static func charset(_ contentType: String?) -> String? {
        guard let contentType, contentType.contains(";") else { return nil }
        for parameter in contentType.split(separator: ";").dropFirst() {
            let parts = parameter.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces).lowercased() == "charset" else { continue }
            let value = parts[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\"'"))
            return value.isEmpty ? nil : value.lowercased()
        }
        return nil
    }

    /// The charsets, by their registered names and common aliases, that
    /// text is read in besides UTF-8 and UTF-16.
    private static let knownCharsets: [String: String.Encoding] = [
        // As browsers read them (the WHATWG Encoding Standard): servers send Windows-1252 under these names.
        "iso-8859-1": .windowsCP1252, "iso_8859-1": .windowsCP1252, "latin1": .windowsCP1252, "l1": .windowsCP1252,
        "us-ascii": .windowsCP1252, "ascii": .windowsCP1252,
        "iso-8859-2": .isoLatin2, "iso_8859-2": .isoLatin2, "latin2": .isoLatin2, "l2": .isoLatin2,
        "windows-1250": .windowsCP1250, "cp1250": .windowsCP1250, "windows-1251": .windowsCP1251, "cp1251": .windowsCP1251,
        "windows-1252": .windowsCP1252, "cp1252": .windowsCP1252, "windows-1253": .windowsCP1253, "cp1253": .windowsCP1253,
        "windows-1254": .windowsCP1254, "cp1254": .windowsCP1254,
        "shift_jis": .shiftJIS, "shift-jis": .shiftJIS, "sjis": .shiftJIS, "x-sjis": .shiftJIS, "ms_kanji": .shiftJIS,
        "windows-31j": .shiftJIS, "cp932": .shiftJIS,
        "euc-jp": .japaneseEUC, "iso-2022-jp": .iso2022JP,
    ]

    /// The first bytes of the file at `path` (up to 512); none when it cannot be read.
    static func opening(of path: String) -> [UInt8] {
        // Not blocking, and a file only: a FIFO put at the name would hold the run.
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return [] }
        var bytes = [UInt8](repeating: 0, count: 512)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        return count > 0 ? Array(bytes.prefix(count)) : []
    }
}
