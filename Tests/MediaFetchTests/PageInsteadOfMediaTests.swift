import Foundation
import Testing
import Transfer
import TestSupport
import URLText
@testable import ContentStore
@testable import MediaFetch

/// Which bodies are web pages where media was asked for.
@Suite struct PageInsteadOfMediaTests {
    private let page = Array("\u{FEFF}\n  <!DOCTYPE html><html>Login required</html>".utf8)

    @Test func aPageIsRefusedWhereTheURLOrTheKindNamesMedia() {
        let refused = PageInsteadOfMedia.reason(contentType: "text/html; charset=utf-8",
                                                url: "https://farm1.example/a/b/photo.JPG?size=l#top", kind: .file, size: 40, opening: { page })
        #expect(refused == "the server sent a web page (text/html, 40 B) where a .jpg file was asked for; not stored")
        #expect(PageInsteadOfMedia.reason(contentType: "application/xhtml+xml", url: "http://h/x", kind: .sound, size: 1, opening: { page })?
            .contains("where a sound was asked for") == true)
        #expect(PageInsteadOfMedia.reason(contentType: " TEXT/HTML ", url: "http://h/x", kind: .photo, size: 1, opening: { page }) != nil)
    }

    @Test func anythingElseIsStoredAsItComes() {
        // A page where no media was named.
        for url in ["http://h/", "http://h/index.html", "http://h/page", "http://h/a.jpg/", "http://h/.mp3", "http://h/x?f=a.jpg"] {
            #expect(PageInsteadOfMedia.reason(contentType: "text/html", url: url, kind: .file, size: 1, opening: { page }) == nil, "\(url)")
        }
        // A type that names anything else but text or media, under a media name
        // (one that names media, on a page, is refused: `anHTMLPageLabelledAsMediaIsRefused`).
        for type in ["application/pdf", "application/zip"] {
            #expect(PageInsteadOfMedia.reason(contentType: type, url: "http://h/a.jpg", kind: .photo, size: 1, opening: { page }) == nil)
        }
        // Media that comes with no type, or one that says nothing.
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46]
        for type in ["application/octet-stream", "", nil] as [String?] {
            #expect(PageInsteadOfMedia.reason(contentType: type, url: "http://h/a.jpg", kind: .photo, size: 8, opening: { jpeg }) == nil)
        }
    }

    /// A page or text that comes with no type, or one that says nothing (a
    /// header that could not be read is none), is refused where media was
    /// asked for: a login page sent so was stored as the photo.
    @Test func pagesAndTextWithoutATypeAreRefusedWhereMediaWasAskedFor() {
        let login = Array("<html>login</html>\r\n".utf8)
        #expect(PageInsteadOfMedia.reason(contentType: nil, url: "http://h/photo.jpg", kind: .file, size: 20, opening: { login })
                == "the server sent a web page (no type given, 20 B) where a .jpg file was asked for; not stored")
        #expect(PageInsteadOfMedia.reason(contentType: "Application/Octet-Stream", url: "http://h/x", kind: .sound, size: 13,
                                          opening: { Array("Access denied".utf8) })
                == "the server sent text (application/octet-stream, 13 B) where a sound was asked for; not stored")
        #expect(PageInsteadOfMedia.reason(contentType: "binary/octet-stream", url: "http://h/x", kind: .photo, size: 20, opening: { login }) != nil)
        // Markup that is not UTF-8 (a Latin-1 page) with no type is a page too.
        let latin1 = Array("<html><p>Pr".utf8) + [0xED] + Array("stup zamietnut".utf8) + [0xFD]
        #expect(PageInsteadOfMedia.reason(contentType: nil, url: "http://h/a.jpg", kind: .file, size: 30, opening: { latin1 })?
            .hasPrefix("the server sent a web page (no type given") == true)
        // Bytes that only happen to begin with `<` are no page.
        let binary: [UInt8] = [0x20, 0x3C, 0x00, 0xFF, 0x13, 0x80, 0x3C]
        #expect(PageInsteadOfMedia.reason(contentType: nil, url: "http://h/a.jpg", kind: .file, size: 7, opening: { binary }) == nil)
        #expect(BodyOpening.opensAsAPage(Array("\u{FEFF}\n <!DOCTYPE HTML>".utf8)) && !BodyOpening.opensAsAPage(Array("<x".utf8)))
        // Where no media was named, it is stored as it comes.
        #expect(PageInsteadOfMedia.reason(contentType: nil, url: "http://h/page", kind: .file, size: 20, opening: { login }) == nil)
    }

    /// A URL's file name is read without its parameters and decoded: a login
    /// page for `a.jpg;jsessionid=…` was stored as the photo.
    @Test func theFileNameIsReadWithoutParametersAndDecoded() {
        for url in ["http://h/a.jpg;jsessionid=1", "http://h/a%2Ejpg", "http://h/a%2ejpg?x=1", "http://h/dir;v=2/a.JPG;x"] {
            #expect(PageInsteadOfMedia.reason(contentType: "text/html", url: url, kind: .file, size: 1, opening: { page }) != nil, "\(url)")
        }
        #expect(PageInsteadOfMedia.mediaExtension(of: "http://h/a.jpg;jsessionid=1") == "jpg")
        for ext in ["ogv", "3gp", "mpg", "flv", "wma", "m4b", "jxl"] {
            #expect(PageInsteadOfMedia.mediaExtension(of: "http://h/clip.\(ext.uppercased())") == ext)
        }
        #expect(PageInsteadOfMedia.mediaExtension(of: "http://h/a.html;x.jpg") == nil)
    }

    /// A `Content-Type` is read as its media type alone, lower-cased and
    /// trimmed of spaces and tabs; a non-ASCII value is read the same way.
    @Test func theMediaTypeIsReadWithoutParametersCaseOrBlanks() {
        #expect(PageInsteadOfMedia.mediaType(" \tText/HTML ; charset=UTF-8") == "text/html")
        #expect(PageInsteadOfMedia.mediaType("image/jpeg") == "image/jpeg")
        #expect(PageInsteadOfMedia.mediaType(" ;x") == nil)
        #expect(PageInsteadOfMedia.mediaType("") == nil)
        #expect(PageInsteadOfMedia.mediaType(nil) == nil)
        #expect(PageInsteadOfMedia.mediaType("\u{00A0}Text/Plain\u{00A0}") == "text/plain")
        #expect(PageInsteadOfMedia.mediaExtension(of: "https://h/dir/B.JPEG?x=/a.html#y") == "jpeg")
        #expect(PageInsteadOfMedia.mediaExtension(of: "https://h/a.jpg/") == nil)
        #expect(PageInsteadOfMedia.mediaExtension(of: "https://h") == nil)
        #expect(PageInsteadOfMedia.mediaExtension(of: "https://h/.jpg") == nil)
    }

    /// A whole body that answers a resume is refused before it replaces the
    /// part already fetched by the rules a fresh body is refused by: a page
    /// or text where media was asked for, judged by its type and its first
    /// bytes (a real photo labelled `text/plain` is the file, sent whole; a
    /// page labelled `application/octet-stream` is a page).
    @Test func aPageThatAnswersAResumeOfMediaIsRefused() {
        let page = Array("<!DOCTYPE html><html>Log in</html>".utf8)
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46]
        func answer(_ type: String?, _ opening: [UInt8], encoding: String? = nil) -> ResumeAnswer {
            ResumeAnswer(contentType: type, contentEncoding: encoding, opening: opening)
        }
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("text/html; charset=utf-8", page), url: "https://h/p", kind: .photo)
            == "the server answered the resume with a web page (text/html) where a photo was asked for; "
            + "the part already fetched is kept for the next run")
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("application/json", Array(#"{"error":"expired"}"#.utf8)),
                                                       url: "https://h/a.MP3", kind: .file)
            == "the server answered the resume with text (application/json) where a .mp3 file was asked for; "
            + "the part already fetched is kept for the next run")
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("application/octet-stream", page), url: "https://h/a.jpg", kind: .file)
            == "the server answered the resume with a web page (application/octet-stream) where a .jpg file was asked for; "
            + "the part already fetched is kept for the next run")
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("text/html", [0x1B, 0x2F, 0x00], encoding: "br"), url: "https://h/s", kind: .sound)
            == "the server answered the resume with a web page (text/html, compressed) where a sound was asked for; "
            + "the part already fetched is kept for the next run")
        for type in ["text/plain", "text/html", nil, "application/octet-stream", "image/jpeg"] {
            #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer(type, jpeg), url: "https://h/a.jpg", kind: .photo) == nil, "\(type ?? "nil")")
        }
        // Coded unasked: a gzipped photo sent whole again is decoded once here, not refused as compressed
        // data; a gzipped page, or a page labelled `deflate` (a raw stream is only a guess), is refused still.
        let gzippedPhoto = [UInt8](Compression.compress(Data(jpeg), .gzip))
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("image/jpeg", gzippedPhoto, encoding: "gzip"), url: "https://h/a.jpg",
                                                       kind: .photo) == nil)
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("text/html", [UInt8](Compression.compress(Data(page), .gzip)), encoding: "gzip"),
                                                       url: "https://h/a.jpg", kind: .photo)
            == "the server answered the resume with a web page (text/html, compressed) where a photo was asked for; "
            + "the part already fetched is kept for the next run")
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("text/html", page, encoding: "deflate"), url: "https://h/a.jpg", kind: .photo)
            != nil)
        // The engine judges by 32 bytes at least: a sound's opening shows a byte no text has by then.
        let wave: [UInt8] = Array("RIFFABCDWAVEfmt ".utf8) + [0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00] + Array(repeating: 0x44, count: 8)
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("text/plain", wave), url: "https://h/a.wav", kind: .sound) == nil)
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("text/html", Array("<p>".utf8)), url: "https://h/a.wav", kind: .sound) != nil)
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("text/html", page), url: "https://h/index.html", kind: .file) == nil)
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer("text/html", page), url: "https://h/download?id=3", kind: .file) == nil)
        // A URL that names no media: the bytes held tell. A photo's part is not answered by a page; a text's may be.
        let heldPhoto = ResumeAnswer(contentType: "text/html", contentEncoding: nil, opening: page, held: jpeg)
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(heldPhoto, url: "https://h/media/9", kind: .file)
            == "the server answered the resume with a web page (text/html) where a file whose first bytes are not text was asked for; "
            + "the part already fetched is kept for the next run")
        let heldText = ResumeAnswer(contentType: "text/html", contentEncoding: nil, opening: page, held: Array("id,name\n1,a".utf8))
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(heldText, url: "https://h/media/9", kind: .file) == nil)
        // Redirected to a name of media, the answer asks for that media, whatever the bytes held
        // (text-like here: without the redirect, the page replaced them).
        let redirected = ResumeAnswer(contentType: "text/html", contentEncoding: nil, opening: page, held: Array("id,name\n1,a".utf8),
                                      redirectedTo: "/files/3.jpg")
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(redirected, url: "https://h/dl/3", kind: .file)
            == "the server answered the resume with a web page (text/html) where a .jpg file was asked for; "
            + "the part already fetched is kept for the next run")
    }

    /// An HTML page labelled as media (a server's or CDN's error page sent
    /// as the image it stands for) is refused; a body that does not open as
    /// HTML is stored whatever its label, and an SVG is no page.
    @Test func anHTMLPageLabelledAsMediaIsRefused() {
        let page = Array("\u{FEFF}\n<!DOCTYPE html><html><body>Not found</body></html>".utf8)
        for type in ["image/jpeg", "audio/mpeg", "video/mp4", "image/png; charset=utf-8"] {
            #expect(PageInsteadOfMedia.reason(contentType: type, url: "https://h/a.jpg", kind: .photo, size: 60, opening: { page })
                == "the server sent a web page (\(type.split(separator: ";")[0]), 60 B) where a photo was asked for; not stored", "\(type)")
        }
        #expect(PageInsteadOfMedia.reason(contentType: "image/jpeg", url: "https://h/a.jpg", kind: .photo, size: 60,
                                          opening: { [0xFF, 0xD8, 0xFF, 0xE0, 0x3C, 0x68] }) == nil)
        // At a URL that names no media, the type asks for it: a sign-in page labelled image/jpeg was stored as the item.
        #expect(PageInsteadOfMedia.reason(contentType: "image/jpeg", url: "https://h/page", kind: .file, size: 60, opening: { page })
                == "the server sent a web page (image/jpeg, 60 B) where its type names an image; not stored")
        // Images of formats no photo site serves, under a photo format's label, are no "data of no image format".
        for opening in [[0x00, 0x00, 0x02, 0x00, 0x01, 0x00], Array("qoif".utf8) + [0, 0, 0, 1], [0x49, 0x49, 0xBC, 0x01, 0x08, 0x00],
                        [0x0A, 0x05, 0x01, 0x08, 0x00, 0x00, 0x00, 0x00], Array("#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n".utf8) + [2, 2, 0, 0x80, 0xFF]] {
            #expect(PageInsteadOfMedia.reason(contentType: "image/png", url: "https://h/a.png", kind: .file, size: 600, opening: { opening })
                    == nil, "\(opening)")
        }
        // Not a type of sound or video (a playlist is sent as `audio/x-mpegurl`): the sound check judges those.
        #expect(PageInsteadOfMedia.reason(contentType: "video/mp4", url: "https://h/watch?v=1", kind: .file, size: 60, opening: { page }) == nil)
        #expect(PageInsteadOfMedia.reason(contentType: "audio/x-mpegurl", url: "https://h/radio", kind: .file, size: 30,
                                          opening: { Array("#EXTM3U\nhttp://radio.example/live\n".utf8) }) == nil)
        #expect(PageInsteadOfMedia.reason(contentType: "text/html", url: "https://h/page", kind: .file, size: 60, opening: { page }) == nil)
    }

    /// Words labelled as the media they stand for (a proxy's error that
    /// keeps the image's type, a playlist at a `.mp3` URL) are text; an
    /// image whose format is text (SVG, plain PPM, XPM) is the image.
    @Test func textLabelledAsMediaIsRefusedButAnImageThatIsTextIsNot() {
        func refusal(_ type: String, _ text: String, url: String = "https://h/a.jpg") -> String? {
            PageInsteadOfMedia.reason(contentType: type, url: url, kind: .file, size: Int64(text.utf8.count), opening: { Array(text.utf8) })
        }
        #expect(refusal("image/jpeg", "403 Forbidden") == "the server sent text (image/jpeg, 13 B) where a .jpg file was asked for; not stored")
        #expect(refusal("audio/x-mpegurl", "#EXTM3U\nhttp://radio.example/live\n", url: "https://h/a.mp3")?
            .hasPrefix("the server sent text (audio/x-mpegurl") == true)
        #expect(refusal("image/svg+xml", "<svg xmlns=\"http://www.w3.org/2000/svg\"/>") == nil)
        #expect(refusal("image/x-portable-pixmap", "P3\n2 1\n255\n255 0 0 0 0 255\n") == nil)
        #expect(refusal("image/x-xpixmap", "/* XPM */\nstatic char *x[] = {") == nil)
        // At a URL that names no media, only a web page is refused where the type names an image:
        // text so labelled may be the image (an SVG sent as image/jpeg, at a `.svg` URL too).
        #expect(refusal("image/jpeg", "403 Forbidden", url: "https://h/media/9") == nil)
        let svg = "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1\" height=\"1\"/>"
        for url in ["https://h/media/9", "https://h/logo.svg"] {
            for type in ["image/jpeg", "image/x-icon", "image/png"] {
                #expect(refusal(type, svg, url: url) == nil, "\(type) \(url)")
            }
        }
    }

    /// A page or text that names a coding (mediafetch asks for none) is
    /// taken for what it says it is: a brotli or deflate login page was
    /// stored as the photo, where gzip and zstd ones, known by their bytes, were not.
    @Test func aCodedPageIsRefusedWhateverItsCoding() {
        let deflated: [UInt8] = [0x78, 0x9C, 0xB3, 0x51, 0x74, 0xF1, 0x77, 0x0E]
        for coding in ["br", "deflate", "gzip", "X-GZIP", "identity, br"] {
            #expect(PageInsteadOfMedia.reason(contentType: "text/html", contentEncoding: coding, url: "https://h/a.jpg", kind: .file,
                                              size: 83, opening: { deflated })
                == "the server sent a web page (text/html, compressed, 83 B) where a .jpg file was asked for; not stored", "\(coding)")
        }
        // Labelled media, or with no type, a compressed body is no photo (it never opens), unless it opens as one: the header lies.
        let gzipped: [UInt8] = [0x1F, 0x8B, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03]
        #expect(PageInsteadOfMedia.reason(contentType: "image/jpeg", contentEncoding: "gzip", url: "https://h/a.jpg", kind: .file,
                                          size: 83, opening: { gzipped })
                == "the server sent compressed data (image/jpeg, 83 B) where a .jpg file was asked for; not stored")
        #expect(PageInsteadOfMedia.reason(contentType: nil, contentEncoding: "deflate", url: "https://h/a.mp3", kind: .file,
                                          size: 83, opening: { deflated })?.hasPrefix("the server sent compressed data (no type given") == true)
        // Labelled media or unnamed, only the bytes tell: a header alone may lie (a BMP, a QuickTime file that opens with `moov`).
        let bmp: [UInt8] = [0x42, 0x4D, 0x46, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x36, 0x00]
        let movie: [UInt8] = [0x00, 0x00, 0x6C, 0x5A] + Array("moov".utf8) + [0x00, 0x00, 0x00, 0x6C]
        let zeros: [UInt8] = [0x00, 0x00, 0x00, 0xFF, 0xFB, 0x90, 0x64]
        for (opening, url) in [(bmp, "https://h/a.bmp"), (movie, "https://h/a.mov"), (zeros, "https://h/a.mp3")] {
            for type in ["image/bmp", "video/quicktime", "application/octet-stream"] {
                #expect(PageInsteadOfMedia.reason(contentType: type, contentEncoding: "br", url: url, kind: .file,
                                                  size: 83, opening: { opening }) == nil, "\(url) \(type)")
            }
        }
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46]
        for type in ["image/jpeg", "text/plain", "application/octet-stream"] {
            #expect(PageInsteadOfMedia.reason(contentType: type, contentEncoding: "gzip", url: "https://h/a.jpg", kind: .file,
                                              size: 83, opening: { jpeg }) == nil, "\(type)")
        }
        // At a URL that names no media, a compressed body may be the file asked for, whatever its type
        // (an `.svgz` is sent as image/svg+xml, an `a.tif.gz` as image/tiff with `Content-Encoding: x-gzip`).
        let gzippedFile = gzipped + [UInt8](repeating: 0x5A, count: 40)
        for (type, url) in [("image/jpeg", "https://h/a"), ("image/svg+xml", "https://h/x.svgz"), ("image/tiff", "https://h/a.tif.gz")] {
            #expect(PageInsteadOfMedia.reason(contentType: type, contentEncoding: "x-gzip", url: url, kind: .file,
                                              size: 83, opening: { gzippedFile }) == nil, "\(url)")
        }
        // Raw deflate and brotli have no bytes of their own: under a coding named,
        // bytes that open as no media are taken for compressed (such a photo was stored).
        let rawDeflate: [UInt8] = [0x00, 0x03, 0x40, 0xFC, 0xBF, 0xFF, 0xD8, 0xFF]
        let brotli: [UInt8] = [0x1B, 0x4F, 0xC3, 0x00, 0x00, 0x8C, 0x0A, 0x4C]
        for (opening, coding) in [(rawDeflate, "deflate"), (brotli, "br"), (deflated, "br"), (brotli, "zstd")] {
            for type in ["image/jpeg", "application/octet-stream"] {
                #expect(PageInsteadOfMedia.reason(contentType: type, contentEncoding: coding, url: "https://h/a.jpg", kind: .file,
                                                  size: 83, opening: { opening })
                        == "the server sent compressed data (\(type), 83 B) where a .jpg file was asked for; not stored", "\(coding) \(type)")
            }
            #expect(PageInsteadOfMedia.reason(contentType: "image/jpeg", contentEncoding: coding, url: "https://h/a", kind: .file,
                                              size: 83, opening: { opening }) == nil)
        }
        // Without a coding named, such bytes are not taken for compressed (a format without a signature
        // of its own), but labelled a JPEG they are no image; labelled nothing, they may be any file.
        #expect(PageInsteadOfMedia.reason(contentType: "image/jpeg", url: "https://h/a.jpg", kind: .file,
                                          size: 83, opening: { brotli }) == "the server sent data of no image format (image/jpeg, 83 B) where a .jpg file was asked for; not stored")
        #expect(PageInsteadOfMedia.reason(contentType: "application/octet-stream", url: "https://h/a.jpg", kind: .file,
                                          size: 83, opening: { brotli }) == nil)
        // PHP's `Content-Encoding: none` names no coding: a real photo labelled text/plain is the photo.
        #expect(PageInsteadOfMedia.reason(contentType: "text/plain", contentEncoding: "none", url: "https://h/a.jpg", kind: .file,
                                          size: 83, opening: { [0xFF, 0xD8, 0xFF, 0xE0] }) == nil)
    }

    /// A URL's path is what follows its scheme and authority, up to its
    /// query or fragment; a `://` inside a path or a query starts no
    /// authority (`/login?next=https://h/p.jpg` was read as `/p.jpg`), and
    /// an authority ends at a query too (`https://h?f=/a.jpg` has no path).
    @Test func aURLsPathIsReadPastSchemeAndAuthorityOnly() {
        let cases: [(String, String)] = [
            ("https://h.test/a/b.jpg?x=1#y", "/a/b.jpg"), ("//h.test/a/b.jpg", "/a/b.jpg"), ("//host", ""),
            ("https://h", ""), ("", ""), ("https:///a.jpg", "/a.jpg"), ("/a.jpg?u=1", "/a.jpg"),
            ("https://h/a.html?next=https://c/x.jpg", "/a.html"), ("https://h?f=/a.jpg", ""), ("https://h#f/a.jpg", ""),
            ("/login?next=https://h/p.jpg", "/login"), ("svn+ssh://h/r/a.mp3", "/r/a.mp3"), ("1http://h/a.jpg", "1http://h/a.jpg"),
        ]
        for (reference, path) in cases {
            #expect(URLPath.of(reference) == path, "\(reference)")
        }
        #expect(PageInsteadOfMedia.mediaExtension(of: "https://h?f=/a.jpg") == nil)
        #expect(PageInsteadOfMedia.mediaExtension(of: "https://h/login?next=https://h/p.jpg") == nil)
    }

    /// A media extension is found in any letter case, after decoding, and
    /// only in the path's last part; a non-ASCII name around it is no matter.
    @Test func aMediaExtensionIsFoundInTheLastPartOfThePathOnly() {
        let cases: [(String, String?)] = [
            ("//h/x.JPG", "jpg"), ("https://h/caf%C3%A9.MP3", "mp3"), ("https://h/a%FF.jpg", "jpg"), ("https://h/x.j%70g", "jpg"),
            ("https://h/x.mp4#a.html", "mp4"), ("https://h/é/x.Mp4", "mp4"), ("https://h/a.jpg%2F", nil), ("https://h/a.jpg.html", nil),
            ("https://h/a.", nil), ("https://h/noextension", nil), ("https://h/IMG_0001.CR2", "cr2"), ("https://h/pin.xpm", "xpm"),
            ("https://h/a.ape", "ape"), ("https://h/app.ts", nil), ("https://h/a.svg", nil),
        ]
        for (url, ext) in cases {
            #expect(PageInsteadOfMedia.mediaExtension(of: url) == ext, "\(url)")
        }
        #expect(PageInsteadOfMedia.mediaType("image/jpeg ;q=1") == "image/jpeg")
        #expect(PageInsteadOfMedia.mediaType("\timage/png") == "image/png")
    }

    /// An error sent as plain text, JSON or XML under a media name is refused
    /// too: "Access denied" was stored as the photo.
    @Test func textWhereMediaWasAskedForIsRefused() {
        let cases: [(type: String, body: String)] = [
            ("text/plain", "Access denied"), ("application/json", "{\"error\": \"quota\"}"),
            ("application/xml", "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code></Error>"),
            ("application/problem+json", "{\"title\": \"Forbidden\"}"), ("text/plain; charset=utf-8", "Prístup zamietnutý\n"),
        ]
        for (type, body) in cases {
            let refused = PageInsteadOfMedia.reason(contentType: type, url: "http://h/a.jpg", kind: .file, size: Int64(body.utf8.count),
                                                    opening: { Array(body.utf8) })
            let shown = PageInsteadOfMedia.mediaType(type) ?? ""
            #expect(refused == "the server sent text (\(shown), \(body.utf8.count) B) where a .jpg file was asked for; not stored")
        }
        // A photo labelled text by a misconfigured server is stored: it does not read as text.
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46]
        let wave = Array("RIFF".utf8) + [0x24, 0x08, 0x00, 0x00] + Array("WAVEfmt ".utf8)
        for opening in [jpeg, wave, Array("fLaC".utf8) + [0x00, 0x00, 0x00, 0x22]] {
            #expect(PageInsteadOfMedia.reason(contentType: "text/plain", url: "http://h/a.jpg", kind: .photo, size: 8, opening: { opening }) == nil)
        }
        // Words without markup, labelled a page.
        #expect(PageInsteadOfMedia.reason(contentType: "text/html", url: "http://h/a.jpg", kind: .photo, size: 13,
                                          opening: { Array("Access denied".utf8) })
                == "the server sent a web page (text/html, 13 B) where a photo was asked for; not stored")
        // Text cut inside a character at the end of the opening is text.
        #expect(BodyOpening.looksLikeText(Array("Prístup".utf8) + [0xC3]))
        #expect(!BodyOpening.looksLikeText([]))
    }

    /// An error in a charset other than UTF-8 is text too: Latin-1 (text's
    /// old default) when none is named, the charset a text type names, and
    /// UTF-16 after its byte order mark, whatever the type. Such a page was
    /// taken for a photo.
    @Test func textInOtherCharsetsIsRefusedWhereMediaWasAskedFor() {
        // "Prístup zamietnutý" in ISO 8859-2 (í ED, ý FD); "Accès refusé" in Latin-1; "アクセス拒否" in Shift_JIS.
        let slovak = Array("Pr".utf8) + [0xED] + Array("stup zamietnut".utf8) + [0xFD]
        let french = Array("Acc".utf8) + [0xE8] + Array("s refus".utf8) + [0xE9]
        let japanese: [UInt8] = [0x83, 0x41, 0x83, 0x4E, 0x83, 0x5A, 0x83, 0x58, 0x8B, 0x91, 0x94, 0xDB]
        let cases: [(type: String, body: [UInt8])] = [
            ("text/plain; charset=ISO-8859-2", slovak), ("text/plain", french), ("text/plain; charset=\"windows-1252\"", french),
            ("application/json; charset=Shift_JIS", japanese), ("text/plain; charset=shift_jis", japanese + [0x83]),
            // A charset not known here: its text keeps ASCII's controls out.
            ("text/plain; charset=gbk", [0xB7, 0xC3, 0xCE, 0xCA, 0xB1, 0xBB, 0xBE, 0xDC, 0xBE, 0xF8]),
        ]
        for (type, body) in cases {
            let refused = PageInsteadOfMedia.reason(contentType: type, url: "http://h/a.jpg", kind: .file, size: Int64(body.count),
                                                    opening: { body })
            let shown = PageInsteadOfMedia.mediaType(type) ?? ""
            #expect(refused == "the server sent text (\(shown), \(body.count) B) where a .jpg file was asked for; not stored", "\(type)")
        }
        // UTF-16 with its byte order mark, whatever the type: a page is named one.
        func utf16(_ text: String, bigEndian: Bool) -> [UInt8] {
            (bigEndian ? [0xFE, 0xFF] : [0xFF, 0xFE]) + text.utf16.flatMap { unit -> [UInt8] in
                let high = UInt8(unit >> 8), low = UInt8(unit & 0xFF)
                return bigEndian ? [high, low] : [low, high]
            }
        }
        #expect(PageInsteadOfMedia.reason(contentType: nil, url: "http://h/a.mp3", kind: .file, size: 28,
                                          opening: { utf16("Access denied", bigEndian: false) })
                == "the server sent text (no type given, 28 B) where a .mp3 file was asked for; not stored")
        #expect(PageInsteadOfMedia.reason(contentType: "application/octet-stream", url: "http://h/x", kind: .photo, size: 40,
                                          opening: { utf16("<html><body>Login</body></html>", bigEndian: true) })?
            .hasPrefix("the server sent a web page (application/octet-stream") == true)
        // Cut inside a character, or a surrogate pair, at the end of the opening.
        #expect(BodyOpening.looksLikeText(utf16("Zugriff verweigert 🚫", bigEndian: false).dropLast(1)))
        #expect(BodyOpening.looksLikeText(utf16("Zugriff verweigert 🚫", bigEndian: true).dropLast(2)))
    }

    /// What two reviews found let through, or refused, in other charsets.
    @Test func errorsInOtherCharsetsFoundByReviewsAreRefused() {
        func refusal(_ type: String?, _ body: [UInt8], url: String = "http://h/p.jpg") -> String? {
            PageInsteadOfMedia.reason(contentType: type, url: url, kind: .file, size: Int64(body.count), opening: { body })
        }
        func utf16(_ text: String, bigEndian: Bool, mark: Bool = true) -> [UInt8] {
            (mark ? (bigEndian ? [0xFE, 0xFF] : [0xFF, 0xFE]) : []) + text.utf16.flatMap { unit -> [UInt8] in
                bigEndian ? [UInt8(unit >> 8), UInt8(unit & 0xFF)] : [UInt8(unit & 0xFF), UInt8(unit >> 8)]
            }
        }
        // "Zugriff verweigert – Sie haben keine Berechtigung „hier“" in Windows-1252, under Latin-1's names or none.
        let german = Array("Zugriff verweigert ".utf8) + [0x96] + Array(" Sie haben keine Berechtigung ".utf8) + [0x84]
            + Array("hier".utf8) + [0x93]
        for type in ["text/plain", "text/plain; charset=iso-8859-1", "text/plain; charset=US-ASCII", "text/plain; charset=utf-8",
                     "application/octet-stream"] {
            #expect(refusal(type, german)?.hasPrefix("the server sent text (") == true, "\(type)")
        }
        #expect(refusal(nil, german) == "the server sent text (no type given, 56 B) where a .jpg file was asked for; not stored")
        // Windows-1252 converted twice into UTF-8: C1 characters are text there.
        #expect(refusal("text/plain", Array("Access denied \u{96} you don\u{92}t have permission".utf8)) != nil)
        // ISO-2022-JP (7 bits, with escapes), EUC-JP (not read here: any bytes but ASCII's controls), ISO-2022-KR.
        let iso2022: [UInt8] = [0x1B, 0x24, 0x42, 0x25, 0x22, 0x25, 0x2F, 0x25, 0x3B, 0x25, 0x39, 0x35, 0x71, 0x48, 0x5D, 0x1B, 0x28, 0x42]
        #expect(refusal("text/plain; charset=iso-2022-jp", iso2022) != nil)
        let eucJP: [UInt8] = [0xA5, 0xA2, 0xA5, 0xAF, 0xA5, 0xBB, 0xA5, 0xB9, 0xB5, 0xF1, 0xC8, 0xDD]
        #expect(refusal("text/plain; charset=EUC-JP", eucJP) != nil)
        #expect(refusal("text/plain; charset=iso-2022-kr", [0x1B, 0x24, 0x29, 0x43, 0x0E, 0x3E, 0x7B, 0x0F, 0x41]) != nil)
        // UTF-16 of a script that is not Latin, with its byte order mark or under a name that says which.
        #expect(refusal(nil, utf16("アクセスが拒否されました。", bigEndian: false)) != nil)
        #expect(refusal("application/octet-stream", utf16("Ошибка 403. Доступ запрещён.", bigEndian: true)) != nil)
        #expect(refusal("text/plain; charset=UTF-16LE", utf16("Accès refusé", bigEndian: false, mark: false)) != nil)
        #expect(refusal("text/plain; charset=utf-16", utf16("Accès refusé", bigEndian: true, mark: false)) != nil)
        #expect(refusal("text/plain; charset=utf-16", utf16("Accès refusé", bigEndian: false, mark: false)) != nil)
        // An HTML page is one under text/plain too, whatever its charset.
        let shiftJISPage = Array("<html><head><title>".utf8) + [0x83, 0x41, 0x83, 0x4E, 0x83, 0x5A, 0x83, 0x58, 0x8B, 0x91, 0x94, 0xDB]
        #expect(refusal("text/plain", shiftJISPage)?.hasPrefix("the server sent a web page (text/plain, ") == true)
        // Compressed streams other than gzip and zstd, with no type.
        #expect(refusal(nil, [0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00, 0x00, 0x04])?.hasPrefix("the server sent compressed data") == true)
        #expect(refusal("application/octet-stream", Array("BZh91AY&SY".utf8))?.hasPrefix("the server sent compressed data") == true)
    }

    /// What the second round of the black-box review found.
    @Test func wideTextISO2022AndPagesInUTF16AreFoundWhereverTheyAre() {
        func refusal(_ type: String?, _ body: [UInt8], url: String = "http://h/p.jpg") -> String? {
            PageInsteadOfMedia.reason(contentType: type, url: url, kind: .file, size: Int64(body.count), opening: { body })
        }
        func wide(_ text: String, width: Int, bigEndian: Bool) -> [UInt8] {
            text.unicodeScalars.flatMap { scalar -> [UInt8] in
                let units: [UInt32] = width == 4 ? [scalar.value] : String(scalar).utf16.map(UInt32.init)
                return units.flatMap { unit -> [UInt8] in
                    let bytes = (0..<width).map { UInt8(truncatingIfNeeded: unit >> (8 * $0)) }
                    return bigEndian ? bytes.reversed() : bytes
                }
            }
        }
        // Cyrillic in UTF-16 without a mark is valid UTF-8 (every byte below 0x80): the name says what it is.
        let russian = "Доступ запрещен\n"
        #expect(refusal("text/plain; charset=utf-16le", wide(russian, width: 2, bigEndian: false)) != nil)
        #expect(refusal("text/plain; charset=UTF-16BE", wide(russian, width: 2, bigEndian: true)) != nil)
        #expect(refusal("text/plain; charset=utf-16", wide(russian, width: 2, bigEndian: false)) != nil)
        // UTF-32, by its mark or its name.
        #expect(refusal("text/plain", [0xFF, 0xFE, 0x00, 0x00] + wide("Access denied", width: 4, bigEndian: false)) != nil)
        #expect(refusal("text/plain; charset=utf-32", wide("Access denied", width: 4, bigEndian: true)) != nil)
        // ISO-2022-JP with no charset named.
        let iso2022: [UInt8] = [0x1B, 0x24, 0x42, 0x25, 0x22, 0x25, 0x2F, 0x25, 0x3B, 0x25, 0x39, 0x35, 0x71, 0x48, 0x5D, 0x1B, 0x28, 0x42]
        #expect(refusal("text/plain", iso2022) != nil)
        // A byte order mark alone is an empty text, as UTF-8's is.
        for mark in [[0xFF, 0xFE], [0xFE, 0xFF], [0xFF, 0xFE, 0x00, 0x00], [0x00, 0x00, 0xFE, 0xFF], [0xEF, 0xBB, 0xBF]] as [[UInt8]] {
            #expect(refusal("text/plain", mark) != nil, "\(mark)")
        }
        // An HTML page in UTF-16, with its mark or without, labelled as the image, as a page, or not at all.
        let login = "<!DOCTYPE html><html><body>Login</body></html>"
        #expect(refusal("image/jpeg", [0xFF, 0xFE] + wide(login, width: 2, bigEndian: false))?
            .hasPrefix("the server sent a web page (image/jpeg") == true)
        for bigEndian in [false, true] {
            for type in ["image/jpeg", "text/html", "text/plain", "application/octet-stream"] {
                #expect(refusal(type, wide(login, width: 2, bigEndian: bigEndian))?.hasPrefix("the server sent a web page (\(type)") == true,
                        "\(type) \(bigEndian)")
            }
        }
        // A file whose first bytes are an ASCII character and a zero is no page for that (nor a BMP).
        #expect(refusal("image/bmp", Array("B".utf8) + [0x00, 0x4D, 0x00, 0x00, 0x00, 0x00, 0x00])?
            .hasPrefix("the server sent data of no image format (image/bmp") == true)
        // An SVG is an image: labelled one, it is not refused as text, wherever it is.
        let svg = Array("<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8)
        #expect(refusal("image/svg+xml", svg) == nil)
    }

    /// What the last code review found: UTF-16's mark is no MPEG frame to
    /// the text check, words are no QuickTime box, SVG under other names
    /// and FITS are images, AMR and JPEG XL open as media, a named charset
    /// is read by it, and Latin-1 that its Windows-1252 reading leaves
    /// unassigned is judged as if no charset were named.
    @Test func signaturesAndCharsetsAsTheCodeReviewFoundThem() {
        func refusal(_ type: String, _ body: [UInt8], url: String = "https://h/a.jpg") -> String? {
            PageInsteadOfMedia.reason(contentType: type, url: url, kind: .file, size: Int64(body.count), opening: { body })
        }
        let forbidden: [UInt8] = [0xFF, 0xFE] + "403 Forbidden".utf16.flatMap { unit -> [UInt8] in [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
        #expect(refusal("image/jpeg", forbidden) == "the server sent text (image/jpeg, 28 B) where a .jpg file was asked for; not stored")
        #expect(refusal("image/jpeg", Array("Get free access \u{2013} log in".utf8))?.hasPrefix("the server sent text") == true)
        #expect(refusal("image/svg", Array("<svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8)) == nil)
        #expect(refusal("image/fits", Array("SIMPLE  =                    T / conforms to FITS".utf8)) == nil)
        let amr = Array("#!AMR\n".utf8) + [UInt8](repeating: 0x44, count: 26)
        #expect(refusal("audio/amr", amr, url: "https://h/a.amr") == nil && TextFormatMedia.opens(amr, whole: true))
        #expect(BodyOpening.opensWithAMediaSignature([0xFF, 0x0A, 0xFA, 0x7F]))
        for opening in [[0x00, 0x00, 0x01, 0xBA, 0x44, 0x00], [0x0B, 0x77, 0x3E, 0x51], Array("MThd".utf8) + [0, 0, 0, 6],
                        [0x00, 0x00, 0x00, 0x0C] + Array("jP  ".utf8)] as [[UInt8]] {
            #expect(BodyOpening.opensWithAMediaSignature(opening), "\(opening)")
        }
        // An MPEG Layer I frame opens with UTF-16's mark: under a text type and a coding that lies, it is still the sound.
        let layerOne: [UInt8] = [0xFF, 0xFE, 0x92, 0x64, 0x00, 0x00, 0x13, 0x80]
        #expect(PageInsteadOfMedia.reason(contentType: "text/plain", contentEncoding: "gzip", url: "https://h/a.mp3", kind: .file,
                                          size: 8, opening: { layerOne }) == nil)
        // Read by the charset named (not merely free of controls).
        let sjis: [UInt8] = [0x83, 0x41, 0x83, 0x4E, 0x83, 0x5A, 0x83, 0x58, 0x8B, 0x91, 0x94, 0xDB]
        #expect(BodyOpening.textOpening(sjis, labelledText: true, charset: "shift_jis") == Array("アクセス拒否".utf8))
        #expect(BodyOpening.textOpening(Array("Pr".utf8) + [0xED] + Array("stup".utf8), labelledText: true, charset: "iso-8859-2")
                == Array("Prístup".utf8))
        // Named Latin-1, bytes Windows-1252 leaves unassigned: the rules for no charset, mostly ASCII.
        #expect(BodyOpening.textOpening([0x81, 0xE9, 0xE8, 0x41], labelledText: true, charset: "iso-8859-1") == nil)
        #expect(BodyOpening.textOpening([0x81, 0xE9, 0x41, 0x42], labelledText: true, charset: "iso-8859-1") == nil)
        #expect(BodyOpening.textOpening([0x41, 0xE9, 0x41, 0x42], labelledText: true, charset: "iso-8859-1") == Array("AéAB".utf8))
    }

    /// Media that two reviews found refused, or close to it: a JPEG whose
    /// first segment is text, and an MPEG frame read in a charset not known here.
    @Test func mediaThatOpensWithTextOrHighBytesIsStored() {
        func refusal(_ type: String?, _ body: [UInt8], url: String = "http://h/p.jpg") -> String? {
            PageInsteadOfMedia.reason(contentType: type, url: url, kind: .file, size: Int64(body.count), opening: { body })
        }
        // XMP first: the first NUL is at byte 34; a resume's answer is judged by 32.
        let xmp = [0xFF, 0xD8, 0xFF, 0xE1, 0x0C, 0x5E] + Array("http://ns.adobe.com/xap/1.0/".utf8) + [0x00]
        // A comment of Latin-1 words first (`FF FE`, then its length).
        let comment = [0xFF, 0xD8, 0xFF, 0xFE, 0x24, 0x24] + Array(String(repeating: "Photo prise à Bratislava. ", count: 20).utf8).prefix(506)
        for type in ["text/plain", "text/html", "text/plain; charset=iso-8859-1", "text/plain; charset=windows-1252",
                     "text/plain; charset=gbk", "text/plain; charset=utf-8", nil] as [String?] {
            #expect(refusal(type, Array(xmp.prefix(32))) == nil, "\(type ?? "none")")
            #expect(refusal(type, Array(comment)) == nil, "\(type ?? "none")")
        }
        // An MPEG audio frame, then bytes of 0x80–0xFF: a charset not known here gives them meaning.
        let frame = [0xFF, 0xFB, 0x90, 0x64] + (0..<508).map { UInt8(0x80 + ($0 * 37) % 128) }
        for type in ["text/plain; charset=bogus", "text/plain; charset=koi8-r", "text/plain"] {
            #expect(refusal(type, frame, url: "http://h/a.mp3") == nil, "\(type)")
        }
        #expect(BodyOpening.opensWithAMediaSignature(Array("\0\0\0\u{20}ftypheic".utf8)))
        #expect(!BodyOpening.opensWithAMediaSignature(Array("Access".utf8)))
    }

    /// Media never reads as text in another charset: its opening has
    /// control bytes where text has none.
    @Test func mediaIsNotTakenForTextInAnotherCharset() {
        // An MPEG audio frame that opens with FF FE, read as UTF-16: not mostly ASCII.
        let mpeg: [UInt8] = [0xFF, 0xFE, 0x92, 0x64, 0xE1, 0x7A, 0xB3, 0x5C, 0xC4, 0x9E, 0x6B, 0xD2, 0xA7, 0xF1, 0x3B, 0xE8]
        #expect(!BodyOpening.looksLikeText(mpeg))
        #expect(PageInsteadOfMedia.reason(contentType: nil, url: "http://h/a.mp3", kind: .sound, size: 16, opening: { mpeg }) == nil)
        // Latin-1 (no charset named) has no C1 controls; an MPEG frame's 0x90 is one.
        let frame: [UInt8] = [0xFF, 0xFB, 0x90, 0x64, 0xE1, 0x7A, 0xB3, 0x5C, 0xC4, 0xAE, 0x6B, 0xD2]
        #expect(PageInsteadOfMedia.reason(contentType: "text/plain", url: "http://h/a.mp3", kind: .sound, size: 12, opening: { frame }) == nil)
        #expect(BodyOpening.textOpening(frame, labelledText: true, charset: nil) == nil)
        // A JPEG's NUL is a control in every charset, named or not.
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46]
        for charset in [nil, "gbk", "windows-1252", "shift_jis"] as [String?] {
            #expect(BodyOpening.textOpening(jpeg, labelledText: true, charset: charset) == nil)
        }
        // Unlabelled as labelled, Windows-1252 is read for words, mostly ASCII.
        #expect(BodyOpening.textOpening(Array("Acc".utf8) + [0xE8, 0x73], labelledText: false)
                == Array("Accès".utf8))
        #expect(BodyOpening.textOpening([0x41, 0xE8, 0xE9, 0xEA], labelledText: true) == nil)
        #expect(BodyOpening.charset(" text/plain ; Charset = \"Shift_JIS\" ;q=1") == "shift_jis")
        #expect(BodyOpening.charset("text/plain") == nil && BodyOpening.charset(nil) == nil)
    }

    /// Images and sounds whose formats open with text (Netpbm, XPM, XBM,
    /// AMR) are stored under any label and at any media URL; formats whose
    /// letters are followed by binary (APE, DSF, binary PGM) count as media
    /// when a text label comes with a false `Content-Encoding`.
    @Test func mediaInFormatsOfTextAndMoreSignaturesAreStored() {
        func refusal(_ type: String?, _ body: [UInt8], url: String = "http://h/p.jpg", coding: String? = nil) -> String? {
            PageInsteadOfMedia.reason(contentType: type, contentEncoding: coding, url: url, kind: .file, size: Int64(body.count),
                                      opening: { body })
        }
        let plainPPM = Array("P3\n# made by hand\n2 1\n255\n255 0 0 0 0 255\n".utf8)
        let pam = Array("P7\nWIDTH 2\nHEIGHT 1\nDEPTH 1\nMAXVAL 255\nTUPLTYPE GRAYSCALE\nENDHDR\n".utf8) + [0x00, 0xFF]
        let xpm = Array("/* XPM */\nstatic char *pin[] = {\n\"2 1 1 1\",".utf8)
        let xpm2 = Array("! XPM2\n2 1 1 1\n".utf8)
        let xbm = Array("#define pin_width 16\n#define pin_height 16\nstatic unsigned char pin_bits[] = {".utf8)
        // GIMP's comment first; ImageMagick's name kept as the file's; tabs.
        let xbmCommented = Array("/* Created with The GIMP */\n#define my-icon_width 16\n#define my-icon_height 2\n".utf8)
        let xbmTabs = Array("#define\tpin_width\t16\n".utf8)
        // AMR's silent frames: every byte ASCII (four SID frames, two NO_DATA).
        let amr = Array("#!AMR\n".utf8) + [UInt8](repeating: 0x44, count: 24) + [0x7C, 0x7C]
        for type in ["text/plain", "text/html", "image/jpeg", "application/octet-stream", nil] as [String?] {
            #expect(refusal(type, plainPPM) == nil, "\(type ?? "none")")
            for body in [pam, xpm, xpm2, xbm, xbmCommented, xbmTabs] {
                #expect(refusal(type, body, url: "http://h/p.png") == nil, "\(type ?? "none"): \(String(decoding: body, as: UTF8.self))")
            }
            #expect(refusal(type, amr, url: "http://h/a.amr") == nil, "\(type ?? "none")")
        }
        // Cut short by the opening (a body that goes on): a long comment, a name at the end.
        #expect(TextFormatMedia.opens(Array("P6\n# Created by GIMP vers".utf8), whole: false))
        #expect(TextFormatMedia.opens(Array("P7\nWIDTH 2\nHEI".utf8), whole: false))
        #expect(TextFormatMedia.opens(Array("#define pin_width".utf8), whole: false))
        #expect(TextFormatMedia.opens(Array("#!AMR\n".utf8) + [0x3C, 0x01, 0x02], whole: false))
        // The same, whole: a body that ends inside its header is none.
        #expect(!TextFormatMedia.opens(Array("P6\n# Created by GIMP vers".utf8), whole: true))
        #expect(!TextFormatMedia.opens(Array("#define pin_width".utf8), whole: true))
        #expect(!TextFormatMedia.opens(Array("#!AMR\n".utf8) + [0x3C, 0x01, 0x02], whole: true))
        // A text label with a false Content-Encoding: refused as compressed unless the body opens as media.
        let binaryPGM = Array("P5\n640 480\n255\n".utf8) + [0x00, 0xFF, 0x10, 0x80]
        let ape = Array("MAC ".utf8) + [0x96, 0x0F, 0x34, 0x00, 0x00, 0x00]
        let dsf = Array("DSD ".utf8) + [0x1C, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]
        let floatAPE = Array("MACF".utf8) + [0x96, 0x0F, 0x34, 0x00]
        let musepack7 = Array("MP+".utf8) + [0x17, 0x00, 0x00, 0x00]
        let musepack8 = Array("MPCKSH".utf8) + [0x10, 0x8F, 0x2E, 0x00]
        let olympus = Array("IIRO".utf8) + [0x08, 0x00, 0x00, 0x00]
        let panasonic: [UInt8] = [0x49, 0x49, 0x55, 0x00, 0x18, 0x00, 0x00, 0x00]
        for (body, url) in [(binaryPGM, "http://h/p.jpg"), (ape, "http://h/a.mp3"), (dsf, "http://h/a.mp3"), (floatAPE, "http://h/a.mp3"),
                            (musepack7, "http://h/a.mp3"), (musepack8, "http://h/a.mp3"), (olympus, "http://h/P1.ORF"),
                            (panasonic, "http://h/P1.RW2")] {
            #expect(refusal("text/plain", body, url: url, coding: "gzip") == nil, "\(url)")
        }
        // Words that only begin so are text all the same, under a text label or a media one.
        for words in ["Plain text: access denied", "P3 is not allowed here", "#define your terms", "MAC address blocked",
                      "#!AMR is not served here", "P5 500 Internal Server Error\n", "P2 2024-05-01 maintenance window\n",
                      "P4\n403 Forbidden\n", "P1 1 error: quota exceeded\n", "P7 WIDTH exceeds limit\n",
                      "P1 # ticket 123 open: access denied\n", "P3 #", "P1\n", "#define x_width", "#!AMR\n404 Not Found\n",
                      "/* XPM */ not found", "! XPM2 is not served here", "MAC 1\nblocked\n", "MP+\nerror\n", "MPCK error\n"] {
            #expect(refusal("text/plain", Array(words.utf8))?.hasPrefix("the server sent text (text/plain, ") == true, "\(words)")
            #expect(refusal("image/jpeg", Array(words.utf8))?.hasPrefix("the server sent text (image/jpeg, ") == true, "\(words)")
        }
        #expect(refusal("text/plain", Array("MAC address blocked".utf8), coding: "gzip")
                == "the server sent text (text/plain, compressed, 19 B) where a .jpg file was asked for; not stored")
    }

    /// An answer to a resume is judged by its first bytes: a header cut by
    /// them may go on, unless the answer ended there.
    @Test func aResumeAnswerEndingInsideAHeaderIsNoImage() {
        let denied = Array("P1 # ticket 123 open: access denied\n".utf8)
        let goesOn = ResumeAnswer(contentType: "text/plain", contentEncoding: nil, opening: denied)
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(goesOn, url: "http://h/p.jpg", kind: .file) == nil)
        let ended = ResumeAnswer(contentType: "text/plain", contentEncoding: nil, opening: denied, wholeLength: Int64(denied.count))
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(ended, url: "http://h/p.jpg", kind: .file)?
            .hasPrefix("the server answered the resume with text (text/plain) where a .jpg file was asked for") == true)
    }

    /// A gzip file labelled as one (`application/gzip`, an object stored
    /// gzipped) is no photo where one was asked for; elsewhere it is the
    /// file. Such a label says no more than `application/octet-stream`: a
    /// page sent under it is a page.
    @Test func aCompressedFileLabelledSoIsRefusedWhereMediaWasAskedFor() {
        let gzip: [UInt8] = [0x1F, 0x8B, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xB3, 0xC9]
        #expect(PageInsteadOfMedia.reason(contentType: "application/gzip", url: "http://h/a.jpg", kind: .file, size: 12, opening: { gzip })
                == "the server sent compressed data (application/gzip, 12 B) where a .jpg file was asked for; not stored")
        #expect(PageInsteadOfMedia.reason(contentType: "application/x-gzip", url: "http://h/x", kind: .photo, size: 12, opening: { gzip }) != nil)
        let zlib: [UInt8] = [0x78, 0x9C, 0xB3, 0x51, 0x74, 0xF1, 0x77, 0x0E]
        #expect(PageInsteadOfMedia.reason(contentType: "application/zlib", url: "http://h/a.mp3", kind: .file, size: 8, opening: { zlib }) != nil)
        #expect(PageInsteadOfMedia.reason(contentType: "application/gzip", url: "http://h/media/9", kind: .file, size: 12, opening: { gzip }) == nil)
        #expect(PageInsteadOfMedia.reason(contentType: "application/gzip", url: "http://h/a.tar.gz", kind: .file, size: 12, opening: { gzip }) == nil)
        // The label lies, the bytes do not: a JPEG is stored, a page refused.
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46]
        #expect(PageInsteadOfMedia.reason(contentType: "application/gzip", url: "http://h/a.jpg", kind: .photo, size: 8, opening: { jpeg }) == nil)
        let login = Array("<html>login</html>\r\n".utf8)
        #expect(PageInsteadOfMedia.reason(contentType: "application/gzip", url: "http://h/a.jpg", kind: .photo, size: 20, opening: { login })
                == "the server sent a web page (application/gzip, 20 B) where a photo was asked for; not stored")
        #expect(PageInsteadOfMedia.reason(contentType: "application/gzip", url: "http://h/a.jpg", kind: .photo, size: 14,
                                          opening: { Array("403 Forbidden\n".utf8) }) != nil)
    }

    /// A login page sent gzip-compressed, unasked, was stored as the photo:
    /// its bytes do not read as a page, but nothing a photo or a sound opens
    /// with does either.
    @Test func aCompressedPageOrTextIsRefusedAsWhatItSaysItIs() {
        let gzip: [UInt8] = [0x1F, 0x8B, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xB3, 0xC9]
        #expect(PageInsteadOfMedia.reason(contentType: "text/html", url: "http://h/a.jpg", kind: .file, size: 53, opening: { gzip })
                == "the server sent a web page (text/html, compressed, 53 B) where a .jpg file was asked for; not stored")
        let zstd: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD, 0x04, 0x58]
        #expect(PageInsteadOfMedia.reason(contentType: "application/json", url: "http://h/a.mp3", kind: .sound, size: 6, opening: { zstd })
                == "the server sent text (application/json, compressed, 6 B) where a sound was asked for; not stored")
        // Unnamed, compressed bytes say nothing of what they hold, but they are no photo or sound file either.
        #expect(PageInsteadOfMedia.reason(contentType: "application/octet-stream", url: "http://h/a.jpg", kind: .file, size: 12,
                                          opening: { gzip })
                == "the server sent compressed data (application/octet-stream, 12 B) where a .jpg file was asked for; not stored")
        #expect(PageInsteadOfMedia.reason(contentType: nil, url: "http://h/x", kind: .sound, size: 6, opening: { zstd })
                == "the server sent compressed data (no type given, 6 B) where a sound was asked for; not stored")
        // Where no media was named, it may be the file (a .gz at `/media/9`): stored, and a resume answered with it is taken.
        #expect(PageInsteadOfMedia.reason(contentType: nil, url: "http://h/media/9", kind: .file, size: 12, opening: { gzip }) == nil)
        let answer = ResumeAnswer(contentType: nil, contentEncoding: nil, opening: gzip, held: [0x1F, 0x8B, 0x08, 0x00])
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer, url: "http://h/media/9", kind: .file) == nil)
        #expect(PageInsteadOfMedia.resumeAnswerRefusal(answer, url: "http://h/a.jpg", kind: .file)
                == "the server answered the resume with compressed data (no type given) where a .jpg file was asked for; "
                + "the part already fetched is kept for the next run")
    }

    /// A real photo a handler labels `text/html` (it sets no type of its own) is stored.
    @Test func aBodyThatDoesNotLookLikeAPageIsStoredWhateverItsType() {
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46]
        #expect(PageInsteadOfMedia.reason(contentType: "text/html", url: "http://h/a.jpg", kind: .photo, size: 8, opening: { jpeg }) == nil)
        #expect(PageInsteadOfMedia.reason(contentType: "text/html", url: "http://h/a.jpg", kind: .photo, size: 0, opening: { [] }) == nil)
        #expect(BodyOpening.looksLikeMarkup(Array(" \r\n\t<p>".utf8)))
        #expect(!BodyOpening.looksLikeMarkup(Array("x<p>".utf8)))
    }

    /// Only a body that may be a page where media was asked for is looked
    /// at (text, no type, or media, which an error page may be labelled):
    /// the file of every other body is not read.
    @Test func onlyAPageWhereMediaWasAskedForIsRead() {
        var reads = 0
        let opening = { () -> [UInt8] in
            reads += 1
            return Array("<html>".utf8)
        }
        _ = PageInsteadOfMedia.reason(contentType: "application/pdf", url: "http://h/a.jpg", kind: .photo, size: 1, opening: opening)
        _ = PageInsteadOfMedia.reason(contentType: "text/html", url: "http://h/page", kind: .file, size: 1, opening: opening)
        _ = PageInsteadOfMedia.reason(contentType: nil, url: "http://h/page.bin", kind: .file, size: 1, opening: opening)
        _ = PageInsteadOfMedia.reason(contentType: "application/octet-stream", url: "http://h/page.bin", kind: .file, size: 1, opening: opening)
        #expect(reads == 0)
        #expect(PageInsteadOfMedia.reason(contentType: "text/html", url: "http://h/a.jpg", kind: .file, size: 1, opening: opening) != nil)
        // Media labelled media is looked at too: an HTML page may come so, at a URL that names no media as well.
        #expect(PageInsteadOfMedia.reason(contentType: "image/jpeg", url: "http://h/a.jpg", kind: .file, size: 1, opening: opening) != nil)
        #expect(PageInsteadOfMedia.reason(contentType: "image/jpeg", url: "http://h/page.bin", kind: .file, size: 1, opening: opening) != nil)
        #expect(reads == 3)
    }
}

/// The text-format readers on every cut of real headers and on mixes of
/// their pieces: they never read past an opening, and a cut opening is
/// taken at least as readily as a whole one.
@Suite struct TextFormatMediaCutsTests {
    private static let headers: [String] = [
        "P1\n2 1\n0 1\n", "P2\n# c\n2 1\n255\n0 255\n", "P3 2 1 255 255 0 0 0 0 255\n", "P4\n8 1\n\u{1}",
        "P5\n640 480\n255\n\u{0}", "P6\n# Created by GIMP version 2.10.30 PNM plug-in\n600 400\n255\n\u{FF}",
        "P7\nWIDTH 2\nHEIGHT 1\nDEPTH 3\nMAXVAL 255\nTUPLTYPE RGB\nENDHDR\n", "/* XPM */\nstatic char *x[] = {",
        "! XPM2\n2 1 1 1\n", "/* Created with The GIMP */\n#define a-b_width 16\n#define a-b_height 2\n",
        "#!AMR\n\u{3C}", "#!AMR-WB\n\u{4}", "#!AMR_MC1.0\n", "P5 500 Internal Server Error\n", "#define x_width 1",
    ]

    @Test func everyCutAndMixIsReadWithinItsBytes() {
        var openings: [[UInt8]] = []
        for header in Self.headers {
            let bytes = Array(header.utf8) + Array("\n# more\n1 2 3\n".utf8)
            for cut in 0...bytes.count { openings.append(Array(bytes.prefix(cut))) }
        }
        var random = SeededGenerator(seed: 42)
        let pieces: [[UInt8]] = Self.headers.map { Array($0.utf8) } + ["P", "7", "#", "\n", " ", "/*", "*/", "_width", "WIDTH", "9", "\u{0}"]
            .map { Array($0.utf8) }
        for _ in 0..<3000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 1...5, using: &random) {
                let piece = pieces.randomElement(using: &random) ?? []
                bytes += piece.prefix(Int.random(in: 0...piece.count, using: &random))
            }
            openings.append(bytes)
        }
        for opening in openings {
            let whole = TextFormatMedia.opens(opening, whole: true)
            let cut = TextFormatMedia.opens(opening, whole: false)
            #expect(!whole || cut, "\(opening)")
            _ = PageInsteadOfMedia.reason(contentType: "text/plain", url: "http://h/a.jpg", kind: .file, size: Int64(opening.count),
                                          opening: { opening })
        }
    }
}
