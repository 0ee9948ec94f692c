import Crypto
import Foundation
import Testing
import TestSupport
@testable import Transfer

#if canImport(Glibc)
import Glibc
#endif

@Suite struct ContentDecodingTests {
    private let url = "http://example.test/pins/summit.jpg"

    /// Bytes that do not compress to nothing: a counter and a seeded noise.
    private func original(count: Int, seed: UInt64 = 7) -> Data {
        var generator = SeededGenerator(seed: seed)
        return Data((0..<count).map { index in index % 3 == 0 ? UInt8(truncatingIfNeeded: index / 7) : UInt8.random(in: 0...40, using: &generator) })
    }

    /// `bytes` written as a finished body in a shard directory under `directory`, as the engine leaves one.
    private func body(_ bytes: Data, in directory: TemporaryDirectory, contentEncoding: String = "gzip") throws -> DownloadedBody {
        let shard = directory.appending("tmp/a")
        try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
        let path = "\(shard)/\(PartialFile.key(for: url)).part.1-2.done"
        try bytes.write(to: URL(fileURLWithPath: path))
        let file = FinishedFile(path: path, descriptor: nil, isReadOnly: false, budget: FinishedFile.Budget(limit: 4))
        return DownloadedBody(url: url, effectiveURL: url, file: file, sha256: hex(bytes), size: Int64(bytes.count),
                              contentType: "image/jpeg", contentEncoding: contentEncoding, etag: "\"e1\"", lastModified: nil,
                              resumedBytes: 0, attempts: 1)
    }

    private func hex(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    /// The files in the body's shard directory.
    private func filesBeside(_ body: DownloadedBody) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: (body.path as NSString).deletingLastPathComponent).sorted()
    }

    @Test func theCodingIsOneZlibUndoesAndTheBytesMustOpenAsIt() {
        let gzip = [UInt8](Compression.compress(Data("photo".utf8), .gzip))
        let zlib = [UInt8](Compression.compress(Data("photo".utf8), .zlib))
        let raw = [UInt8](Compression.compress(Data("photo".utf8), .raw))
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0, 16]
        #expect(ContentDecoding.coding(contentEncoding: "gzip", opening: gzip) == .gzip)
        #expect(ContentDecoding.coding(contentEncoding: "X-GZIP", opening: gzip) == .gzip)
        #expect(ContentDecoding.coding(contentEncoding: "identity, gzip", opening: gzip) == .gzip)
        #expect(ContentDecoding.coding(contentEncoding: "deflate", opening: zlib) == .zlib)
        #expect(ContentDecoding.coding(contentEncoding: "deflate", opening: raw) == .rawDeflate)
        // A header the bytes belie, codings zlib does not undo, two codings, none.
        #expect(ContentDecoding.coding(contentEncoding: "gzip", opening: jpeg) == nil)
        #expect(ContentDecoding.coding(contentEncoding: "gzip", opening: zlib) == nil)
        #expect(ContentDecoding.coding(contentEncoding: "br", opening: gzip) == nil)
        #expect(ContentDecoding.coding(contentEncoding: "zstd", opening: gzip) == nil)
        #expect(ContentDecoding.coding(contentEncoding: "gzip, gzip", opening: gzip) == nil)
        #expect(ContentDecoding.coding(contentEncoding: nil, opening: gzip) == nil)
        #expect(ContentDecoding.coding(contentEncoding: "deflate", opening: [0x78]) == nil)
    }

    @Test func aGzippedBodyIsDecodedIntoAPrivateFileBesideItAndHashedAsItIsWritten() async throws {
        try await TemporaryDirectory.with { directory in
            let bytes = original(count: 700_000)
            let sent = Compression.compress(bytes, .gzip)
            let coded = try body(sent, in: directory)

            let decoded = try ContentDecoding.decode(coded, coding: .gzip, limit: 1 << 30).get()

            #expect(FileManager.default.contents(atPath: decoded.path) == bytes)
            #expect(decoded.sha256 == hex(bytes))
            #expect(decoded.size == Int64(bytes.count))
            #expect(decoded.encodedSize == Int64(sent.count))
            #expect(decoded.bytesReceived == Int64(sent.count))
            #expect(decoded.contentEncoding == nil)
            #expect(decoded.contentType == "image/jpeg" && decoded.etag == "\"e1\"")
            #expect(decoded.opening == [UInt8](bytes.prefix(512)))
            #expect(decoded.closing == [UInt8](bytes.suffix(32)))
            // Read-only as an object must be, named as a finished body is (a sweep knows it), and the body as sent is left.
            #expect(try permissions(of: decoded.path) == 0o444)
            let name = (decoded.path as NSString).lastPathComponent
            #expect(name.hasPrefix(String(PartialFile.key(for: url)) + ".") && name.hasSuffix(".done"))
            #expect(PartialFile.isOwnName(name))
            #expect(try filesBeside(coded).count == 2)
            // Discarded, it takes the body as sent with it.
            decoded.file.discard()
            #expect(try filesBeside(coded).isEmpty)
        }
    }

    @Test func membersOneAfterAnotherZlibAndRawStreamsAreDecodedAndPaddingAfterTheEndIsLeft() async throws {
        try await TemporaryDirectory.with { directory in
            let bytes = original(count: 300_000, seed: 9)
            let cases: [(Data, ContentDecoding.Coding)] = [
                (Compression.compress(bytes.prefix(1000), .gzip) + Compression.compress(bytes.dropFirst(1000), .gzip), .gzip),
                (Compression.compress(bytes, .gzip) + Data(count: 40), .gzip),
                (Compression.compress(bytes, .zlib), .zlib),
                (Compression.compress(bytes, .raw), .rawDeflate),
                (Compression.compress(bytes, .zlib) + Data(count: 40), .zlib),
            ]
            for (index, (sent, coding)) in cases.enumerated() {
                let decoded = try ContentDecoding.decode(try body(sent, in: directory), coding: coding, limit: 1 << 30).get()
                #expect(decoded.sha256 == hex(bytes), "case \(index)")
                #expect(FileManager.default.contents(atPath: decoded.path) == bytes, "case \(index)")
                decoded.file.discard()
            }
        }
    }

    @Test func aStreamCutShortDamagedOrPastTheLimitFailsAndLeavesNoFileBehind() async throws {
        try await TemporaryDirectory.with { directory in
            let bytes = original(count: 200_000, seed: 11)
            let sent = Compression.compress(bytes, .gzip)
            var damaged = sent
            damaged[damaged.count - 6] ^= 0xFF  // the CRC-32 in the trailer
            func failure(_ bytes: Data, _ coding: ContentDecoding.Coding, limit: Int64 = 1 << 30) throws -> DecodingFailure? {
                let coded = try body(bytes, in: directory)
                defer { try? FileManager.default.removeItem(atPath: coded.path) }
                let result = ContentDecoding.decode(coded, coding: coding, limit: limit)
                #expect(try filesBeside(coded).count == 1, "the decoded file is removed")
                guard case .failure(let failure) = result else { return nil }
                return failure
            }

            let cut = try #require(try failure(sent.prefix(sent.count - 100), .gzip))
            #expect(cut.kind == .cutShort)
            #expect(cut.detail == "its gzip stream ends at byte \(sent.count - 100) before its end")
            let crc = try #require(try failure(damaged, .gzip))
            #expect(crc.kind == .damaged)
            #expect(crc.detail.hasSuffix(": incorrect data check"), "\(crc.detail)")
            let large = try #require(try failure(sent, .gzip, limit: 100_000))
            #expect(large.kind == .tooLarge(limit: 100_000))
            // Bytes guessed to be raw deflate that are none: nothing is known of them. Neither are
            // bytes whose first bits read as a whole raw stream with more after it (a dBase file
            // opens so), nor a raw stream that runs out.
            let notDeflate = try #require(try failure(Data([0xFF, 0xD8, 0xFF, 0xE0]) + bytes.prefix(100), .rawDeflate))
            #expect(notDeflate.kind == .notThatCoding)
            let dBase = try #require(try failure(Data([0x03, 0x00]) + bytes.prefix(300_000), .rawDeflate))
            #expect(dBase.kind == .notThatCoding)
            let raw = Compression.compress(bytes, .raw)
            let rawCut = try #require(try failure(raw.prefix(raw.count / 2), .rawDeflate))
            #expect(rawCut.kind == .notThatCoding)
            let zlibDamaged = try #require(try failure(Data([0x78, 0x9C, 0xFF, 0xFF, 0xFF]) + bytes.prefix(100), .zlib))
            #expect(zlibDamaged.kind == .damaged)
        }
    }

    /// Kept to resume (a run stopped while the decoded body was checked, a
    /// store that cannot take it), a decoded body keeps the body as sent,
    /// with its validator, and removes itself: it is made again from it.
    @Test func aDecodedBodyKeptToResumeKeepsTheBodyAsSent() async throws {
        try await TemporaryDirectory.with { directory in
            let shard = directory.appending("tmp/b")
            try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
            let path = "\(shard)/\(PartialFile.key(for: url)).part"
            let sent = Compression.compress(original(count: 50_000), .gzip)
            try sent.write(to: URL(fileURLWithPath: path))
            try Data("\(url)\n\"e1\"\n".utf8).write(to: URL(fileURLWithPath: path + ".validator"))
            let file = FinishedFile(path: path, descriptor: nil, isReadOnly: false, budget: FinishedFile.Budget(limit: 4),
                                    validatorPath: path + ".validator")
            let coded = DownloadedBody(url: url, effectiveURL: url, file: file, sha256: hex(sent), size: Int64(sent.count),
                                       contentType: "image/jpeg", contentEncoding: "gzip", etag: "\"e1\"", lastModified: nil,
                                       resumedBytes: 0, attempts: 1)
            let decoded = try ContentDecoding.decode(coded, coding: .gzip, limit: 1 << 30).get()

            #expect(decoded.file.keepForResume())
            decoded.file.release()

            #expect(try filesBeside(coded) == [(path as NSString).lastPathComponent, (path as NSString).lastPathComponent + ".validator"])
        }
    }

    @Test func aRunStoppedMeanwhileEndsTheDecoding() async throws {
        try await TemporaryDirectory.with { directory in
            let coded = try body(Compression.compress(original(count: 100_000), .gzip), in: directory)
            let result = ContentDecoding.decode(coded, coding: .gzip, limit: 1 << 30, stop: { true })
            guard case .failure(let failure) = result else {
                Issue.record("decoded though stopped")
                return
            }
            #expect(failure.kind == .stopped)
            #expect(try filesBeside(coded).count == 1)
        }
    }

    @Test func theDefaultLimitIsAGibibyteOrSixteenTimesTheBody() {
        #expect(ContentDecoding.defaultLimit(encodedSize: 1000) == 1 << 30)
        #expect(ContentDecoding.defaultLimit(encodedSize: 100 << 20) == 1600 << 20)
        #expect(ContentDecoding.defaultLimit(encodedSize: .max / 2) == .max)
    }
}
