import ContentStore
import Foundation
import MediaCheck
import Transfer
import URLText

/// A web page, or other text, where media was asked for: a login, consent
/// or error page a server sends with 200 for a photo's or a sound's URL, or
/// an error as plain text, JSON or XML (S3's `<Error>`). Stored, it would be
/// the URL's "photo" for good (a later run finds the URL cached), and one
/// such page stood for three `.jpg` URLs, de-duplicated.
///
/// Only where the item says what it is: a photo or a sound, or a URL whose
/// file name ends in a media extension, or a URL that names no media sent
/// with a type of image. A URL and a type that name no image, sound or
/// video (`/page`, `/index.html`) may be a page, and are stored as they come.
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
    /// A body compressed (mediafetch asks for no coding) is no image or
    /// sound as stored, unless it opens as one: a page or text that names a
    /// `contentEncoding`, or opens as a compressed stream, is taken for what
    /// it says it is; a body labelled media, or unnamed, is compressed data
    /// only when it opens as a compressed stream (a header alone may lie),
    /// as is one labelled a compressed file (`application/gzip`).
    /// Images and sounds whose formats open with text (Netpbm, XPM, XBM,
    /// AMR) are never taken for text.
    /// A URL that names no media but was redirected to one that does
    /// (`/dl/3` to `/files/3.jpg`) asks for that media: a sign-in page sent
    /// there was stored as the item, and the URL was cached for good.
    /// Where a URL names no media, a type of image (`image/jpeg` for
    /// `/img/123`) asks for one: a sign-in page so labelled was stored as the
    /// item, and the URL was cached for good. (Not a type of sound or video:
    /// a playlist is sent as `audio/x-mpegurl`, a DASH manifest as video, and
    /// the sound check judges a body labelled a sound. Nor a compressed body:
    /// at such a URL it may be the file asked for, an `.svgz` or a `.tif.gz`.)
    /// A body whose type names a photo format known by its first bytes
    /// (`image/jpeg`, `image/png`…), at a URL that names no other media, that
    /// opens as no image, nor as other media (a video sent for a `.gif`),
    /// nor as text (see above), is "data of no image format": zeros sent as
    /// a JPEG were stored, the URL cached for good. (Bytes sent as
    /// `application/octet-stream` or another type claim no image: stored.)
    static func reason(contentType: String?, contentEncoding: String? = nil, url: String, redirectedTo: String? = nil,
                       kind: ItemKind, size: Int64, opening: () -> [UInt8]) -> String? {
        let type = mediaType(contentType)
        let asked = expectedMedia(url: url, kind: kind)
        let media = asked ?? redirectedTo.flatMap { expectedMedia(url: $0, kind: kind) }
        guard let expected = media ?? (type?.hasPrefix("image/") == true ? "an image" : nil) else { return nil }
        // The target named only where it named the media.
        let named = asked == nil && media != nil ? redirectedTo.map { " (redirected to \(TransferEngine.shownRedirectTarget($0)))" } ?? "" : ""
        let whereAsked = (media != nil ? "where \(expected) was asked for" : "where its type names \(expected)") + named
        // Where only the type names an image, only a web page is refused: text so labelled
        // may be the image all the same (an SVG sent as image/jpeg, a favicon's as image/x-icon).
        if let refused = refusal(contentType: contentType, contentEncoding: contentEncoding, expected: expected, mediaNamed: media != nil,
                                 size: size, opening: opening), media != nil || refused.kind == .page {
            return "the server sent \(refused.what) (\(refused.type)\(refused.how), \(ByteSize.format(size))) \(whereAsked); not stored"
        }
        let namedExtension = mediaExtension(of: url) ?? redirectedTo.flatMap(mediaExtension(of:))
        guard kind != .sound, let type, photoTypesKnownByTheirBytes.contains(type),
              namedExtension.map(photoExtensionsKnownByTheirBytes.contains) ?? true else { return nil }
        // Most bodies so labelled are the image: their signature is looked at first.
        let bytes = opening()
        func opensAsAnImage(_ image: [UInt8]) -> Bool {
            MediaSignature.image(image) != nil || BodyOpening.opensWithAMediaSignature(image)
                || otherImageSignatures.contains(where: image.starts(with:))
        }
        guard !bytes.isEmpty, !opensAsAnImage(bytes) else { return nil }
        // A script's byte order mark or line break before the image (`EF BB BF FF D8 FF`): some image still.
        // (A PCX opens with a line break byte: looked for in the bytes as they came, above.)
        let start = bytes.prefix(16).firstIndex { ![0xEF, 0xBB, 0xBF, 0x20, 0x09, 0x0D, 0x0A].contains($0) } ?? bytes.endIndex
        // (A compressed stream is judged above where media is named, and so is text: where only the
        // type is, it may be the file asked for, or an image that is text, an SVG.)
        guard start == 0 || !opensAsAnImage(Array(bytes[start...])), contentEncoding.map(namesACompression) != true,
              !BodyOpening.isCompressed(bytes), !BodyOpening.looksLikeText(bytes),
              !TextFormatMedia.opens(bytes, whole: size <= Int64(bytes.count)) else { return nil }
        return "the server sent data of no image format (\(type), \(ByteSize.format(size))) \(whereAsked); not stored"
    }

    /// Images of formats no photo site serves, that a server may label a
    /// photo format all the same: CUR, QOI, DDS, OpenEXR, ICNS, JPEG XR,
    /// MNG, JNG, Sun raster, SGI, PCX, Radiance HDR.
    private static let otherImageSignatures: [[UInt8]] = [
        [0x00, 0x00, 0x02, 0x00], Array("qoif".utf8), Array("DDS ".utf8), [0x76, 0x2F, 0x31, 0x01], Array("icns".utf8), [0x49, 0x49, 0xBC],
        [0x8A, 0x4D, 0x4E, 0x47], [0x8B, 0x4A, 0x4E, 0x47], [0x59, 0xA6, 0x6A, 0x95], [0x01, 0xDA],
        [0x0A, 0x00, 0x01], [0x0A, 0x02, 0x01], [0x0A, 0x03, 0x01], [0x0A, 0x04, 0x01], [0x0A, 0x05, 0x01],
        Array("#?RADIANCE".utf8), Array("#?RGBE".utf8),
    ]

    /// The extensions of photo formats that `MediaSignature.image` knows by
    /// their first bytes (a BMP or TIFF of another kind, BigTIFF, by
    /// `BodyOpening.opensWithAMediaSignature`).
    static let photoExtensionsKnownByTheirBytes: Set<String> = [
        "jpg", "jpeg", "jpe", "jfif", "png", "gif", "webp", "avif", "heic", "heif", "bmp", "tif", "tiff", "jxl",
    ]
    /// The types of those formats.
    static let photoTypesKnownByTheirBytes: Set<String> = [
        "image/jpeg", "image/jpg", "image/pjpeg", "image/png", "image/gif", "image/webp", "image/avif", "image/heic",
        "image/heif", "image/bmp", "image/x-bmp", "image/x-ms-bmp", "image/tiff", "image/jxl",
    ]

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
    /// (a login page replaced a photo's part at `/media/9`). Nor where it
    /// was redirected to a name of media (see `reason`).
    static func resumeAnswerRefusal(_ answer: ResumeAnswer, url: String, kind: ItemKind) -> String? {
        let held = answer.held
        let media = expectedMedia(url: url, kind: kind) ?? answer.redirectedTo.flatMap { expectedMedia(url: $0, kind: kind) }
        // Asked only where the URL names no media.
        let heldIsBinary = media == nil && !held.isEmpty && !BodyOpening.looksLikeText(held) && !BodyOpening.opensAsAPage(held)
        let expected = media ?? (heldIsBinary ? "a file whose first bytes are not text" : nil)
        guard let refused = refusal(contentType: answer.contentType, contentEncoding: answer.contentEncoding, expected: expected,
                                    mediaNamed: media != nil, size: answer.wholeLength, opening: { answer.opening }) else { return nil }
        // Compressed data whose coding is undone once it is here is judged then, decoded (see
        // `CodedBodies`): a gzipped photo sent whole again (a server that ignores ranges, a file
        // changed since) was refused at every run, its partial kept a week. Only a coding its bytes
        // prove (gzip's, zlib's): a page is refused as one still, coded or not, and a raw deflate
        // stream is a guess (a page labelled `deflate` opens as one).
        if refused.kind == .compressed,
           let coding = CodedBodies.codingToUndo(contentEncoding: answer.contentEncoding, contentType: answer.contentType,
                                                 url: url, redirectedTo: answer.redirectedTo, opening: { answer.opening }),
           coding != .rawDeflate {
            return nil
        }
        return "the server answered the resume with \(refused.what) (\(refused.type)\(refused.how)) where \(refused.expected) was asked for; "
            + "the part already fetched is kept for the next run"
    }

    /// What `reason` and `resumeAnswerRefusal` say of a refused body.
    private struct Refusal {
        /// What the body is, as messages name it.
        enum What: String {
            case page = "a web page", text = "text", compressed = "compressed data"
        }
        let kind: What
        /// "a web page", "text" or "compressed data".
        var what: String { kind.rawValue }
        /// The media type, or "no type given".
        let type: String
        /// ", compressed" or nothing.
        let how: String
        /// What was asked for: "a photo", "a .jpg file".
        let expected: String
    }

    /// `expected`: what was asked for, as the message names it; nil when no
    /// media was. `mediaNamed`: whether the item or its URL names media, not
    /// only its type (a file at `/media/9` may be a gzip file). `size`: the
    /// whole body's, when it is known (an answer to a resume is judged
    /// before it has ended).
    private static func refusal(contentType: String?, contentEncoding: String?, expected: String?, mediaNamed: Bool,
                                size: Int64? = nil, opening: () -> [UInt8]) -> Refusal? {
        let type = mediaType(contentType)
        // A compressed file's own type (`application/gzip`) says no more of
        // what a body holds than `application/octet-stream`: the file
        // compressed, a page, or anything else.
        let labelledCompressed = type.map(compressedTypes.contains) == true
        let unnamed = (type.map(sayingNothing.contains) ?? true) || labelledCompressed
        let isPage = type == "text/html" || type == "application/xhtml+xml"
        // Labelled media, yet an HTML page (a misconfigured server or CDN
        // labels its error page as the image it stands for): no image, sound
        // or video opens as one. (An SVG, which is XML, does not either: an
        // image so labelled is one.)
        let labelledMedia = type.map { $0.hasPrefix("image/") || $0.hasPrefix("audio/") || $0.hasPrefix("video/") } == true
        guard isPage || unnamed || labelledMedia || type.map(isTextual) == true else { return nil }
        guard let expected else { return nil }
        let bytes = opening()
        // An image or a sound in a format of text (a plain PPM, XPM, AMR) is
        // no page, whatever it is labelled, and wherever it was asked for.
        if TextFormatMedia.opens(bytes, whole: size.map { $0 <= Int64(bytes.count) } ?? false) { return nil }
        // Compressed, sent unasked (mediafetch sends no `Accept-Encoding` and
        // undoes none): no image or sound file as stored, unless it opens as
        // one. Named a page or text, with a coding named or a compressed
        // stream's bytes, it is what it says it is (brotli and deflate pages
        // were stored as the photo). Labelled media, or unnamed, only a
        // compressed stream's bytes tell: it is the file compressed, or
        // anything else (stored, it was the URL's photo for good, one that
        // never opens), where a header alone may lie (a BMP, or a QuickTime
        // file that opens with `moov`, sent with `Content-Encoding: gzip`).
        // Raw deflate and brotli have no bytes of their own to tell: under a
        // coding named, a body that opens as no media is taken for compressed
        // (a photo sent so was stored as bytes no viewer opens).
        let codingNamed = contentEncoding.map(namesACompression) == true
        let opensAsMedia = BodyOpening.opensWithAMediaSignature(bytes)
        if labelledMedia || unnamed {
            let deflateNamed = contentEncoding.map { ContentDecoding.codings(of: $0).contains("deflate") } == true
            let compressedStream = BodyOpening.isCompressed(bytes) || (deflateNamed || type == "application/zlib") && BodyOpening.opensAsZlib(bytes)
            if compressedStream || codingNamed && !bytes.isEmpty, !opensAsMedia {
                // (At a URL that names no media, a file whose first bytes are not text may be a gzip file.)
                guard mediaNamed else { return nil }
                return Refusal(kind: .compressed, type: type ?? "no type given", how: "", expected: expected)
            }
        }
        if let type, labelledMedia {
            if BodyOpening.opensAsHTML(bytes) { return Refusal(kind: .page, type: type, how: "", expected: expected) }
            // Words where an image, sound or video was named ("403 Forbidden"
            // from a proxy that keeps the image's type, a playlist at a `.mp3`
            // URL): none of them reads as text, but for the types that are text.
            // (`FF FE` opens an MPEG frame or UTF-16 text: `looksLikeText` tells them apart.)
            let mayBeText = !opensAsMedia || BodyOpening.utf16Mark(bytes) == false
            guard mayBeText, !isTextImageType(type), BodyOpening.looksLikeText(bytes) else { return nil }
            return Refusal(kind: .text, type: type, how: "", expected: expected)
        }
        let compressed = !unnamed && !bytes.isEmpty && (codingNamed || BodyOpening.isCompressed(bytes)) && !opensAsMedia
        let text = BodyOpening.textOpening(bytes, labelledText: !unnamed, charset: BodyOpening.charset(contentType))
        // Unnamed, markup must open as a page does: a body of any bytes may
        // begin with `<`. Labelled text, an HTML page is one whatever its
        // charset (XML is text: S3's `<Error>`).
        let opensAsPage = unnamed ? BodyOpening.opensAsAPage(bytes) || text.map(BodyOpening.opensAsAPage) == true
            : BodyOpening.opensAsHTML(bytes) || text.map(BodyOpening.opensAsHTML) == true
        // A page may be plain words ("Access denied" as text/html) as well as markup.
        guard compressed || text != nil || isPage && BodyOpening.looksLikeMarkup(bytes) || opensAsPage else { return nil }
        return Refusal(kind: isPage || opensAsPage ? .page : .text, type: type ?? "no type given",
                       how: compressed ? ", compressed" : "", expected: expected)
    }

    /// Whether a media type names an image that is text: SVG (XML, under
    /// its other names too), FITS and EPS (ASCII headers), and the plain
    /// PBM/PGM/PPM, XPM and XBM formats.
    private static func isTextImageType(_ type: String) -> Bool {
        type.hasSuffix("+xml") || type.hasSuffix("/xml") || type.hasPrefix("image/svg") || type.hasPrefix("image/x-portable-")
            || ["image/x-xpixmap", "image/x-xbitmap", "image/fits", "image/x-eps", "image/eps"].contains(type)
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
        ContentDecoding.codings(of: contentEncoding).contains(where: compressions.contains)
    }

    /// Types of a compressed file: what a server sends for a `.gz` stored
    /// in place of the photo (an S3 object uploaded gzipped).
    static let compressedTypes: Set<String> = [
        "application/gzip", "application/x-gzip", "application/x-gzip-compressed", "application/zstd", "application/x-zstd",
        "application/x-xz", "application/x-bzip2", "application/x-bzip", "application/zlib",
    ]

    static let compressions: Set<String> = ["gzip", "x-gzip", "deflate", "br", "zstd", "compress", "x-compress"]

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
        return String(decoding: BodyOpening.asciiLowercased(type), as: UTF8.self)
    }

    /// The extension of the URL's file name when it names an image, a sound
    /// or a video (`jpg`, `mp3`, `mp4`…), lower-cased; nil otherwise.
    static func mediaExtension(of url: String) -> String? {
        fileExtension(of: url).flatMap { mediaExtensions.contains($0) ? $0 : nil }
    }

    /// The extension of the URL's file name (`jpg`, `gz`), lower-cased; nil
    /// when its name has none.
    static func fileExtension(of url: String) -> String? {
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
        return String(decoding: BodyOpening.asciiLowercased(name[(dot + 1)...]), as: UTF8.self)
    }

    static let mediaExtensions: Set<String> = [
        "jpg", "jpeg", "png", "gif", "webp", "heic", "heif", "avif", "tif", "tiff", "bmp",
        "mp3", "wav", "flac", "ogg", "oga", "opus", "m4a", "aac", "aif", "aiff",
        "m4b", "wma", "mka", "amr", "caf", "jxl",
        "mp4", "m4v", "mov", "webm", "mkv", "avi", "ogv", "3gp", "mpg", "mpeg", "flv",
        // Camera and other photo files, sounds by their codecs' names (not `.ts`: TypeScript's too).
        "jpe", "jfif", "jp2", "ico", "psd", "dng", "cr2", "nef", "arw", "orf", "rw2", "pbm", "pgm", "ppm", "pnm", "pam", "xbm", "xpm",
        "ape", "dsf", "dff", "mpc", "tta", "wv", "mid", "midi", "ac3", "weba", "m2ts", "mts",
    ]
}
