import ContentStore
import Transfer
import Foundation
import URLText

/// A web page, or other text, where media was asked for: a login, consent
/// or error page a server sends with 200 for a photo's or a sound's URL, or
/// an error as plain text, JSON or XML (S3's `<Error>`). Stored, it would be
/// the URL's "photo" for good (a later run finds the URL cached), and one
/// such page stood for three `.jpg` URLs, de-duplicated.
///
/// Only where the item says what it is: a photo or a sound, or a URL whose
/// file name ends in a media extension. A URL that names no media (`/page`,
/// `/index.html`) may be a page, and is stored as it comes.
enum PageInsteadOfMedia {
    /// Why the body is refused, in one line; nil when it may be stored.
    /// `opening` gives the body's first bytes: a page must look like one, and
    /// text like text (a handler that sets no type of its own labels real
    /// photos `text/html`, a misconfigured one `text/plain`; no image, sound
    /// or video file begins as text).
    /// A body with no type, or one that says nothing (`application/octet-stream`,
    /// or a header that could not be read) is looked at too: a login page
    /// sent so was stored as the photo.
    /// A body labelled media (`image/jpeg`) that opens as an HTML page is
    /// one too: a server's or CDN's error page sent as the image.
    /// Asked only for text, an unnamed type or media, where media was asked for:
    /// the body's first bytes are kept as they arrive, and its file is read
    /// only for a body resumed from an earlier run (a read from the disk,
    /// since bodies are written past the page cache).
    /// A body compressed (a `contentEncoding` named, mediafetch asking for
    /// none, or a compressed stream's bytes) is no image or sound as stored,
    /// unless it opens as one: a page or text is taken for what it says it
    /// is, anything else for compressed data.
    static func reason(contentType: String?, contentEncoding: String? = nil, url: String, kind: ItemKind, size: Int64,
                       opening: () -> [UInt8]) -> String? {
        let media = expectedMedia(url: url, kind: kind)
        return refusal(contentType: contentType, contentEncoding: contentEncoding, expected: media, mediaNamed: media != nil,
                       opening: opening).map {
            "the server sent \($0.what) (\($0.type)\($0.how), \(ByteSize.format(size))) where \($0.expected) was asked for; not stored"
        }
    }

    /// Why a whole new body (a 200) that answered a resume is not the file
    /// and must not replace the part already fetched, from its type and its
    /// first bytes, by the rules of `reason`; nil when it may (a changed file
    /// is sent whole, as it should be, and a real photo labelled `text/plain`
    /// is taken as one).
    /// (The engine judges an answer by its first 32 bytes at least, unless
    /// it is shorter: a WAV's `RIFF`, a FLAC's `fLaC` or an Ogg's `OggS`
    /// read as text until the bytes after them.)
    /// Where the URL names no media, the bytes held tell what was asked
    /// for: a file whose first bytes are not text is not answered by a page
    /// (a login page replaced a photo's part at `/media/9`).
    static func resumeAnswerRefusal(_ answer: ResumeAnswer, url: String, kind: ItemKind) -> String? {
        let heldIsBinary = !answer.held.isEmpty && !looksLikeText(answer.held) && !opensAsAPage(answer.held)
        let media = expectedMedia(url: url, kind: kind)
        let expected = media ?? (heldIsBinary ? "a file whose first bytes are not text" : nil)
        return refusal(contentType: answer.contentType, contentEncoding: answer.contentEncoding, expected: expected,
                       mediaNamed: media != nil, opening: { answer.opening }).map {
            "the server answered the resume with \($0.what) (\($0.type)\($0.how)) where \($0.expected) was asked for; "
                + "the part already fetched is kept for the next run"
        }
    }

    /// What `reason` and `resumeAnswerRefusal` say of a refused body.
    private struct Refusal {
        /// "a web page" or "text".
        let what: String
        /// The media type, or "no type given".
        let type: String
        /// ", compressed" or nothing.
        let how: String
        /// What was asked for: "a photo", "a .jpg file".
        let expected: String
    }

    /// `expected`: what was asked for, as the message names it; nil when no
    /// media was. `mediaNamed`: whether the item or its URL names media (a
    /// file at `/media/9` may be a gzip file).
    private static func refusal(contentType: String?, contentEncoding: String?, expected: String?, mediaNamed: Bool,
                                opening: () -> [UInt8]) -> Refusal? {
        let type = mediaType(contentType)
        let unnamed = type.map(sayingNothing.contains) ?? true
        let isPage = type == "text/html" || type == "application/xhtml+xml"
        // Labelled media, yet an HTML page (a misconfigured server or CDN
        // labels its error page as the image it stands for): no image, sound
        // or video opens as one. (An SVG, which is XML, does not either: an
        // image so labelled is one.)
        let labelledMedia = type.map { $0.hasPrefix("image/") || $0.hasPrefix("audio/") || $0.hasPrefix("video/") } == true
        guard isPage || unnamed || labelledMedia || type.map(isTextual) == true else { return nil }
        guard let expected else { return nil }
        let bytes = opening()
        // Compressed, sent unasked (mediafetch sends no `Accept-Encoding` and
        // undoes none): no image or sound file as stored, unless it opens as
        // one. Named a page or text, with a coding named or a compressed
        // stream's bytes, it is what it says it is (brotli and deflate pages
        // were stored as the photo). Labelled media, or unnamed, only a
        // compressed stream's bytes tell: it is the file compressed, or
        // anything else (stored, it was the URL's photo for good, one that
        // never opens), where a header alone may lie (a BMP, or a QuickTime
        // file that opens with `moov`, sent with `Content-Encoding: gzip`).
        let codingNamed = contentEncoding.map(namesACompression) == true
        if labelledMedia || unnamed {
            let compressedStream = isCompressed(bytes)
                || codingNamed && opensAsZlib(bytes) && contentEncoding?.lowercased().contains("deflate") == true
            if compressedStream && !opensWithAMediaSignature(bytes) {
                // (At a URL that names no media, a file whose first bytes are not text may be a gzip file.)
                guard mediaNamed else { return nil }
                return Refusal(what: "compressed data", type: type ?? "no type given", how: "", expected: expected)
            }
        }
        if labelledMedia {
            // (A page in UTF-16 opens with its byte order mark.)
            let htmlInUTF16 = bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF])
            guard opensAsHTML(bytes) || htmlInUTF16 && textOpening(bytes).map(opensAsHTML) == true else { return nil }
            return Refusal(what: "a web page", type: type ?? "", how: "", expected: expected)
        }
        let compressed = !unnamed && !bytes.isEmpty && (codingNamed || isCompressed(bytes)) && !opensWithAMediaSignature(bytes)
        let text = textOpening(bytes, labelledText: !unnamed, charset: charset(contentType))
        // Unnamed, markup must open as a page does: a body of any bytes may
        // begin with `<`. Labelled text, an HTML page is one whatever its
        // charset (XML is text: S3's `<Error>`).
        let opensAsPage = unnamed ? opensAsAPage(bytes) || text.map(opensAsAPage) == true
            : opensAsHTML(bytes) || text.map(opensAsHTML) == true
        // A page may be plain words ("Access denied" as text/html) as well as markup.
        guard compressed || text != nil || isPage && looksLikeMarkup(bytes) || opensAsPage else { return nil }
        return Refusal(what: isPage || opensAsPage ? "a web page" : "text", type: type ?? "no type given",
                       how: compressed ? ", compressed" : "", expected: expected)
    }

    /// What media the item asks for, as errors name it: "a photo", "a
    /// sound", "a .jpg file"; nil when it asks for no media.
    private static func expectedMedia(url: String, kind: ItemKind) -> String? {
        switch kind {
        case .photo: return "a photo"
        case .sound: return "a sound"
        case .file: return mediaExtension(of: url).map { "a .\($0) file" }
        }
    }

    /// Types that say only "bytes": what a server sends when it does not know.
    static let sayingNothing: Set<String> = [
        "application/octet-stream", "binary/octet-stream", "application/binary", "application/unknown",
        "application/x-unknown", "application/download", "application/x-download", "application/force-download",
    ]

    /// Whether a media type names text: `text/*`, JSON, XML, and their
    /// `+json` and `+xml` kinds (`application/problem+json`).
    static func isTextual(_ type: String) -> Bool {
        type.hasPrefix("text/") || ["application/json", "application/xml", "application/javascript"].contains(type)
            || type.hasSuffix("+json") || type.hasSuffix("+xml")
    }

    /// Whether a `Content-Encoding` value names a compression (`gzip`, `br`,
    /// `deflate, gzip`…); PHP's `none` and the like do not.
    static func namesACompression(_ contentEncoding: String) -> Bool {
        contentEncoding.lowercased().split(separator: ",").contains { coding in
            compressions.contains(coding.trimmingCharacters(in: .whitespaces))
        }
    }

    static let compressions: Set<String> = ["gzip", "x-gzip", "deflate", "br", "zstd", "compress", "x-compress"]

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
    /// `<?xml`, `<!--`), in any letter case.
    static func opensAsAPage(_ bytes: [UInt8]) -> Bool {
        opens(bytes, withOneOf: htmlOpenings + ["<?xml", "<!--"])
    }

    /// Whether `bytes` begin, after blanks and a byte order mark, as an HTML
    /// page does (`htmlOpenings`), in any letter case.
    static func opensAsHTML(_ bytes: [UInt8]) -> Bool {
        opens(bytes, withOneOf: htmlOpenings)
    }

    private static let htmlOpenings = ["<!doctype html", "<html", "<head", "<body"]

    private static func opens(_ bytes: [UInt8], withOneOf openings: [String]) -> Bool {
        let opening = asciiLowercased(afterBlanks(bytes).prefix(14))
        return openings.contains { opening.starts(with: $0.utf8) }
    }

    /// `bytes` with ASCII capitals made small, as an array (a lazy map is
    /// read through a dynamic cast, byte by byte, when a string is made of it).
    private static func asciiLowercased<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> [UInt8] {
        bytes.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
    }

    /// Whether `bytes` (a file's opening, maybe cut inside a character) are
    /// text by `textOpening`'s rules for a body not labelled text: UTF-8, or
    /// UTF-16 after its byte order mark.
    static func looksLikeText(_ bytes: [UInt8]) -> Bool {
        textOpening(bytes) != nil
    }

    /// `bytes` (a file's opening, maybe cut inside a character) as UTF-8 when
    /// they are text, with no control character but line breaks, tabs and
    /// form feeds; nil when they are not. Every image, sound and video format
    /// opens with bytes that are not (JPEG `FF D8`, PNG `89`, a NUL in RIFF's,
    /// FLAC's and Ogg's headers).
    ///
    /// Text is UTF-8; UTF-16 after its byte order mark (see `utf16Text`);
    /// and Windows-1252 words, mostly ASCII (Latin-1 is read so, as browsers
    /// read it). Labelled text (`labelledText`: a `text/*`, page, JSON or XML
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
        if bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF]) {
            return wideText(bytes.dropFirst(2), width: 2, bigEndian: bytes[0] == 0xFE)
        }
        let inAnotherCharset = !opensWithAMediaSignature(bytes)
        // A charset counts where the type says text.
        let named = labelledText && inAnotherCharset ? charset : nil
        if let named, named.hasPrefix("utf-16") || named.hasPrefix("utf-32") {
            // No byte order mark: big-endian unless the name says otherwise (RFC 2781), then little-endian as Windows writes it.
            let width = named.hasPrefix("utf-32") ? 4 : 2
            let text = named.hasSuffix("le") ? nil : wideText(bytes[...], width: width, bigEndian: true)
            if let text = text ?? (named.hasSuffix("be") ? nil : wideText(bytes[...], width: width, bigEndian: false)) {
                return text
            }
        }
        var namedIsReadable = false
        if let named, let encoding = knownCharsets[named] {
            // A multi-byte character (or an escape) cut by the end of the opening is text still.
            let text = (0...3).lazy.compactMap { cut in
                cut < bytes.count ? String(bytes: bytes.dropLast(cut), encoding: encoding) : nil
            }.first
            if let text, !text.isEmpty {
                if hasNoControls(text) { return Array(text.utf8) }
                namedIsReadable = true
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
        if let named, !unicodeCharsets.contains(named), !named.hasPrefix("utf-") {
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

    /// The charsets of Unicode, which `textOpening` reads by their own rules.
    private static let unicodeCharsets: Set<String> = ["utf-8", "utf8", "utf-16", "utf-16le", "utf-16be"]

    /// Whether `bytes` begin as an image, sound or video file does: JPEG,
    /// PNG, GIF, BMP, RIFF (WAV, WebP, AVI), AIFF, FLAC, Ogg, an ID3 tag, an
    /// MPEG audio or ADTS frame (after zeros, as some MP3s have), Matroska/WebM,
    /// TIFF, or an ISO media or QuickTime file (`ftyp`, `moov`, `mdat`,
    /// `wide`, `free`, `skip`, `pnot` first: MP4, M4A, MOV, HEIC, AVIF).
    static func opensWithAMediaSignature(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 2 else { return false }
        let frame = bytes.prefix(66).firstIndex { $0 != 0 } ?? bytes.endIndex
        if frame + 1 < bytes.count, bytes[frame] == 0xFF, bytes[frame + 1] & 0xE0 == 0xE0 || frame == 0 && bytes[1] == 0xD8 {
            return true
        }
        if bytes.count >= 8, quickTimeBoxes.contains(where: { bytes[4...7].elementsEqual($0) }) { return true }
        // A BMP's two reserved words are zero.
        if bytes.count >= 10, bytes[0] == 0x42, bytes[1] == 0x4D, bytes[6...9].allSatisfy({ $0 == 0 }) { return true }
        return mediaSignatures.contains { bytes.starts(with: $0) }
    }

    private static let quickTimeBoxes = ["ftyp", "moov", "mdat", "wide", "free", "skip", "pnot"].map { Array($0.utf8) }

    private static let mediaSignatures: [[UInt8]] = [
        [0x89, 0x50, 0x4E, 0x47], Array("GIF8".utf8), Array("RIFF".utf8), Array("FORM".utf8), Array("fLaC".utf8),
        Array("OggS".utf8), Array("ID3".utf8), [0x1A, 0x45, 0xDF, 0xA3], [0x49, 0x49, 0x2A, 0x00], [0x4D, 0x4D, 0x00, 0x2A],
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

    /// The media type of a `Content-Type` value, lower-cased, without parameters.
    static func mediaType(_ contentType: String?) -> String? {
        guard let contentType else { return nil }
        // Bytes, not Foundation's trimming: this runs for every body, and a
        // header value is ASCII. `.whitespaces` is tab and Unicode's spaces,
        // of which ASCII has only the space.
        var type = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }[...]
        guard type.allSatisfy({ $0 < 0x80 }) else {
            let type = contentType.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces).lowercased()
            return type.isEmpty ? nil : type
        }
        while let first = type.first, first == 0x20 || first == 0x09 { type.removeFirst() }
        while let last = type.last, last == 0x20 || last == 0x09 { type.removeLast() }
        guard !type.isEmpty else { return nil }
        // Most types come lower-case already.
        guard type.contains(where: { (0x41...0x5A).contains($0) }) else { return String(Substring(type)) }
        return String(decoding: asciiLowercased(type), as: UTF8.self)
    }

    /// The extension of the URL's file name when it names an image, a sound
    /// or a video (`jpg`, `mp3`, `mp4`…), lower-cased; nil otherwise.
    static func mediaExtension(of url: String) -> String? {
        // On the UTF-8 bytes, Foundation only to decode: this runs for every body.
        let path = URLPath.of(url).utf8
        // (A path ending in "/" names a directory, not its last part: its last part is empty.)
        var segment = path[(path.lastIndex(of: UInt8(ascii: "/")).map(path.index(after:)) ?? path.startIndex)...]
        // Without its parameters (`a.jpg;jsessionid=…`, a Java server's login
        // redirect), and decoded (`a%2Ejpg`).
        if let parameters = segment.firstIndex(of: UInt8(ascii: ";")) { segment = segment[..<parameters] }
        let name: [UInt8]
        if segment.contains(UInt8(ascii: "%")) {
            let encoded = String(Substring(segment))
            name = Array((encoded.removingPercentEncoding ?? encoded).utf8)
        } else {
            name = Array(segment)
        }
        guard let dot = name.lastIndex(of: UInt8(ascii: ".")), dot != name.startIndex else { return nil }
        let ext = String(decoding: asciiLowercased(name[(dot + 1)...]), as: UTF8.self)
        return mediaExtensions.contains(ext) ? ext : nil
    }

    static let mediaExtensions: Set<String> = [
        "jpg", "jpeg", "png", "gif", "webp", "heic", "heif", "avif", "tif", "tiff", "bmp",
        "mp3", "wav", "flac", "ogg", "oga", "opus", "m4a", "aac", "aif", "aiff",
        "m4b", "wma", "mka", "amr", "caf", "jxl",
        "mp4", "m4v", "mov", "webm", "mkv", "avi", "ogv", "3gp", "mpg", "mpeg", "flv",
    ]
}
