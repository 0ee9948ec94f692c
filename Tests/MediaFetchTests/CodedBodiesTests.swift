import Foundation
import Testing
import TestSupport
import Transfer
@testable import MediaFetch

@Suite struct CodedBodiesTests {
    private let gzip = [UInt8](Compression.compress(Data("<svg/>".utf8), .gzip))
    private let raw = [UInt8](Compression.compress(Data("a photo's bytes".utf8), .raw))

    private func coding(_ encoding: String?, type: String? = "image/jpeg", url: String = "https://h/pins/a.jpg",
                        redirectedTo: String? = nil, opening: [UInt8]) -> ContentDecoding.Coding? {
        CodedBodies.codingToUndo(contentEncoding: encoding, contentType: type, url: url, redirectedTo: redirectedTo, opening: { opening })
    }

    @Test func aCodedBodyIsDecodedUnlessItIsACompressedFileByItsNameOrType() {
        #expect(coding("gzip", opening: gzip) == .gzip)
        #expect(coding("deflate", type: nil, url: "https://h/img/7", opening: raw) == .rawDeflate)
        // A compressed file, by its name (here or where it was redirected) or its type: the file is what was asked for.
        #expect(coding("gzip", url: "https://h/maps/trail.tar.gz", opening: gzip) == nil)
        #expect(coding("gzip", type: "image/svg+xml", url: "https://h/logo.SVGZ", opening: gzip) == nil)
        #expect(coding("gzip", url: "https://h/dl/3", redirectedTo: "https://cdn/a.tgz", opening: gzip) == nil)
        #expect(coding("gzip", type: "application/gzip", url: "https://h/dl/3", opening: gzip) == nil)
        #expect(coding("x-gzip", type: "application/x-gzip; charset=binary", url: "https://h/dl/3", opening: gzip) == nil)
        // Bytes that open as media under `deflate` are taken as sent (a header may lie).
        #expect(coding("deflate", opening: [0xFF, 0xD8, 0xFF, 0xE0, 0, 16, 0x4A, 0x46, 0x49, 0x46, 0]) == nil)
        #expect(coding(nil, opening: gzip) == nil)
    }

    @Test func aFailedDecodingIsSaidInOneLine() {
        let type = "image/jpeg; charset=binary"
        #expect(CodedBodies.refusal(DecodingFailure(.cutShort, "its gzip stream ends at byte 900 before its end"), coding: .gzip,
                                    contentType: type, size: 900, maxFileSize: nil)
            == "the server sent a gzip-coded body cut short (its gzip stream ends at byte 900 before its end; image/jpeg, 900 B as sent); not stored")
        #expect(CodedBodies.refusal(DecodingFailure(.damaged, "its deflate stream fails near byte 10: invalid block type"), coding: .zlib,
                                    contentType: nil, size: 2048, maxFileSize: nil)
            == "the server sent a damaged deflate-coded body (its deflate stream fails near byte 10: invalid block type; 2.0 KiB as sent); not stored")
        #expect(CodedBodies.refusal(DecodingFailure(.tooLarge(limit: 1 << 30), "x"), coding: .gzip, contentType: nil, size: 1 << 20, maxFileSize: nil)
            == "the server sent a gzip-coded body that decodes to more than 1.0 GiB, the most a body of its size may decode to "
            + "(a bigger limit: --max-filesize) (1.0 MiB as sent); not stored")
        #expect(CodedBodies.refusal(DecodingFailure(.tooLarge(limit: 10 << 20), "x"), coding: .gzip, contentType: nil, size: 1 << 20,
                                    maxFileSize: 10 << 20)
            == "the server sent a gzip-coded body that decodes to more than the --max-filesize limit of 10.0 MiB (1.0 MiB as sent); not stored")
    }
}
