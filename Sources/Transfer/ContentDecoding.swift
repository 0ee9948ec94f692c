import CFileSync
import CZlib
import Crypto
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Undoes the `Content-Encoding` a server applied to a body unasked.
///
/// mediafetch sends no `Accept-Encoding`, yet some servers gzip everything
/// they send (an S3 object uploaded gzipped with that label, a CDN told to
/// compress every type). Such a photo, stored as it came, is bytes no
/// viewer opens. The engine writes and resumes a body as it came, so the
/// decoding happens after the download: the finished file is inflated into
/// a new private file beside it, hashed as it is written (nothing is held
/// whole in memory), and that file is the body from then on.
public enum ContentDecoding {
    /// The codings undone: zlib's formats.
    public enum Coding: Sendable, Equatable {
        /// `gzip` (or its old name `x-gzip`): one gzip member or more, one after another.
        case gzip
        /// `deflate` as HTTP defines it: a zlib stream.
        case zlib
        /// `deflate` as some servers send it: a raw deflate stream, without
        /// zlib's header. Nothing in its bytes says so: a body that does not
        /// inflate is not known to be one (see `DecodingFailure.Kind.notThatCoding`).
        case rawDeflate

        /// The coding's name, as messages give it.
        public var name: String {
            switch self {
            case .gzip: "gzip"
            case .zlib, .rawDeflate: "deflate"
            }
        }
    }

    /// The coding to undo for a body whose `Content-Encoding` is
    /// `contentEncoding` and whose first bytes are `opening`: when it names
    /// exactly one of gzip, x-gzip or deflate (`identity` aside) and the
    /// bytes open as that coding's stream (gzip's magic number; for deflate,
    /// zlib's header, else a raw stream). Nil for anything else: no coding,
    /// codings zlib does not undo (`br`, `zstd`, `compress`), two codings,
    /// or a header the bytes belie (a JPEG sent with `gzip`).
    public static func coding(contentEncoding: String?, opening: [UInt8]) -> Coding? {
        guard let contentEncoding else { return nil }
        let codings = codings(of: contentEncoding).filter { !$0.isEmpty && $0 != "identity" }
        guard codings.count == 1 else { return nil }
        switch codings[0] {
        case "gzip", "x-gzip":
            return opening.starts(with: [0x1F, 0x8B, 0x08]) ? .gzip : nil
        case "deflate":
            guard opening.count >= 2 else { return nil }
            return opensAsZlib(opening) ? .zlib : .rawDeflate
        default:
            return nil
        }
    }

    /// The codings a `Content-Encoding` value lists, lower-cased and trimmed.
    public static func codings(of contentEncoding: String) -> [String] {
        contentEncoding.lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    /// Whether bytes open with a zlib header: deflate's method, a window
    /// zlib takes, no preset dictionary, and the header's check.
    static func opensAsZlib(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 2 else { return false }
        let (method, flags) = (Int(bytes[0]), Int(bytes[1]))
        return method & 0x0F == 8 && method >> 4 <= 7 && flags & 0x20 == 0 && (method << 8 | flags) % 31 == 0
    }

    /// How much a body may grow by its decoding when no `--max-filesize`
    /// bounds it: a gzip "bomb" of 1 MB inflates to 1 GB. 1 GiB, or 16 times
    /// the body as sent if that is more.
    public static func defaultLimit(encodedSize: Int64) -> Int64 {
        max(1 << 30, encodedSize.multipliedReportingOverflow(by: 16).overflow ? .max : encodedSize * 16)
    }

    /// Inflates `body` (coded with `coding`) into a new private file beside
    /// it, hashing the decoded bytes as they are written, and returns the
    /// decoded body: the same response with the new file, its digest, size,
    /// first and last bytes, no `contentEncoding`, and `encodedSize` set.
    /// The decoded body's file holds the body as sent until it is stored or
    /// given up (see `FinishedFile`); on a failure the body as sent is left
    /// as it is, for the caller. `limit`: the most bytes the decoded body
    /// may have. `stop` is asked between blocks: a run interrupted meanwhile
    /// ends the decoding (`.stopped`).
    public static func decode(_ body: DownloadedBody, coding: Coding, limit: Int64,
                              stop: @Sendable () -> Bool = { false }) -> Result<DownloadedBody, DecodingFailure> {
        let input = open(body.path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { return .failure(.fileSystem(errno, "cannot open \(body.path)")) }
        defer { _ = systemClose(input) }
        let output: (path: String, descriptor: Int32)
        do {
            output = try PartialFile.createPrivateTemporary(besides: body.path, url: body.url)
        } catch {
            let code: Int32 = if case .fileSystem(let code) = error.kind { code } else { EIO }
            return .failure(DecodingFailure(.fileSystem(errno: code), error.message))
        }
        var inflater = Inflater(coding: coding, limit: limit)
        let size: Int64
        switch inflater.run(from: input, to: output.descriptor, outputPath: output.path, stop: stop) {
        case .success(let decoded):
            size = decoded
        case .failure(let failure):
            _ = unlink(output.path)
            _ = mf_close_unlocking(output.descriptor)
            return .failure(failure)
        }
        var info = stat()
        let isReadOnly = fstat(output.descriptor, &info) == 0 && info.st_mode & 0o7777 == 0o444
        // Not held open: its lock would be a descriptor past the engine's
        // budget for each decoded body waiting to be stored. Unlocked, it is
        // named as a finished body is, which a sweep leaves a day (a private
        // temporary no one holds goes after ten minutes).
        let finished = "\(output.path).\(PartialFile.privateName()).done"
        let renamed = mf_renameat_noreplace(AT_FDCWD, output.path, AT_FDCWD, finished) == 0
        let code = errno
        _ = mf_close_unlocking(output.descriptor)
        guard renamed else {
            _ = unlink(output.path)
            return .failure(.fileSystem(code, "cannot rename \(output.path)"))
        }
        let file = FinishedFile(path: finished, descriptor: nil, isReadOnly: isReadOnly, budget: unheld, source: body.file)
        var decoded = DownloadedBody(
            url: body.url, effectiveURL: body.effectiveURL, file: file, sha256: inflater.digest, size: size,
            contentType: body.contentType, etag: body.etag, lastModified: body.lastModified,
            resumedBytes: body.resumedBytes, attempts: body.attempts)
        decoded.opening = inflater.opening
        decoded.closing = inflater.closing
        decoded.encodedSize = body.encodedSize ?? body.size
        return .success(decoded)
    }

    /// The budget of a file that holds no descriptor (it is never drawn on).
    private static let unheld = FinishedFile.Budget(limit: 0)
}

/// Why a body could not be decoded.
public struct DecodingFailure: Error, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// The stream is broken (zlib's words in `detail`): the body is damaged.
        case damaged
        /// The stream ends before its end: the body was cut short.
        case cutShort
        /// The decoded bytes would pass the limit.
        case tooLarge(limit: Int64)
        /// A raw deflate stream was guessed and the bytes are none: nothing
        /// is known of the body (its header may lie), so it goes on as sent.
        case notThatCoding
        /// The run was interrupted.
        case stopped
        /// Reading the body or writing its decoded copy failed.
        case fileSystem(errno: Int32)
    }

    public let kind: Kind
    /// What went wrong, in a few words (zlib's, or the system's).
    public let detail: String

    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    static func fileSystem(_ code: Int32, _ what: String) -> DecodingFailure {
        DecodingFailure(.fileSystem(errno: code), "\(what): \(String(cString: strerror(code)))")
    }

    /// The decoded copy did not fit: the disk is full (or the quota spent).
    public var isOutOfSpace: Bool {
        guard case .fileSystem(let code) = kind else { return false }
        return code == ENOSPC || code == EDQUOT
    }
}

/// zlib's inflate over a file, 256 KiB in and out at a time.
private struct Inflater {
    let coding: ContentDecoding.Coding
    let limit: Int64
    private var hasher = SHA256()
    private(set) var opening: [UInt8] = []
    private(set) var closing: [UInt8] = []
    var digest: String { hasher.finalize().hexString }

    init(coding: ContentDecoding.Coding, limit: Int64) {
        self.coding = coding
        self.limit = limit
    }

    /// Inflates the file `input` into `output`; returns the decoded size.
    mutating func run(from input: Int32, to output: Int32, outputPath: String,
                      stop: () -> Bool) -> Result<Int64, DecodingFailure> {
        let blockSize = 256 << 10
        let inBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: blockSize)
        let outBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: blockSize)
        defer {
            inBuffer.deallocate()
            outBuffer.deallocate()
        }
        var stream = z_stream()
        let windowBits: Int32 = switch coding {
        case .gzip: 15 + 16
        case .zlib: 15
        case .rawDeflate: -15
        }
        guard mf_inflate_init2(&stream, windowBits) == Z_OK else {
            return .failure(DecodingFailure(.fileSystem(errno: ENOMEM), "zlib could not start"))
        }
        defer { inflateEnd(&stream) }
        var held = 0             // bytes of input at the start of inBuffer not yet inflated
        var readTotal: Int64 = 0 // bytes of the body read so far
        var atEnd = false        // the whole body has been read
        var memberEnded = false  // a stream (a gzip member) has ended
        var written: Int64 = 0
        while true {
            // More input when it has run out, or to see whether another gzip member follows.
            if !atEnd, held == 0 || memberEnded && held < 2 {
                if held > 0, let next = stream.next_in { inBuffer.update(from: next, count: held) }
                let count = Self.readSome(input, into: inBuffer + held, count: blockSize - held)
                if count < 0 { return .failure(.fileSystem(errno, "cannot read the body")) }
                if count == 0 { atEnd = true }
                readTotal += Int64(count)
                held += count
                stream.next_in = inBuffer
                stream.avail_in = UInt32(held)
            }
            if memberEnded {
                // A guessed raw stream that ends before the body does is no
                // proof of one: a few bits of another format can read as a
                // whole deflate block (dBase files open with one).
                if coding == .rawDeflate, held > 0 { return .failure(DecodingFailure(.notThatCoding, "bytes after its end")) }
                // gzip allows members one after another; anything else after
                // the end (a server's padding) is left, as browsers leave it.
                guard coding == .gzip, held >= 2, let next = stream.next_in, next[0] == 0x1F, next[1] == 0x8B else { break }
                inflateReset(&stream)
                memberEnded = false
            }
            // Asked at every block out too: one block in of a "bomb" makes a thousand out.
            if stop() { return .failure(DecodingFailure(.stopped, "interrupted")) }
            stream.next_out = outBuffer
            stream.avail_out = UInt32(blockSize)
            let status = inflate(&stream, Z_NO_FLUSH)
            held = Int(stream.avail_in)
            let produced = blockSize - Int(stream.avail_out)
            if produced > 0 {
                guard written + Int64(produced) <= limit else {
                    return .failure(DecodingFailure(.tooLarge(limit: limit), "it inflates past \(ByteSize.format(limit))"))
                }
                let bytes = UnsafeRawBufferPointer(start: outBuffer, count: produced)
                if let failure = Self.writeAll(bytes, to: output, path: outputPath) { return .failure(failure) }
                hasher.update(bufferPointer: bytes)
                keepEnds(of: bytes)
                written += Int64(produced)
            }
            let consumed = readTotal - Int64(held)
            switch status {
            case Z_OK:
                continue
            case Z_STREAM_END:
                memberEnded = true
                if held == 0, atEnd { return .success(written) }
            case Z_BUF_ERROR where held == 0 && atEnd:
                // (A guessed raw stream that runs out is no proof of one either.)
                return .failure(coding == .rawDeflate
                    ? DecodingFailure(.notThatCoding, "no whole deflate stream")
                    : DecodingFailure(.cutShort, "its \(coding.name) stream ends at byte \(consumed) before its end"))
            case Z_BUF_ERROR where held == 0:
                continue
            case Z_MEM_ERROR:
                return .failure(DecodingFailure(.fileSystem(errno: ENOMEM), "zlib has no memory left"))
            default:
                // (Z_BUF_ERROR with input left cannot come with room out; were it to, it is no loop.)
                let words = stream.msg.map { String(cString: $0) } ?? "zlib error \(status)"
                if coding == .rawDeflate { return .failure(DecodingFailure(.notThatCoding, words)) }
                return .failure(DecodingFailure(.damaged, "its \(coding.name) stream fails near byte \(consumed): \(words)"))
            }
        }
        return .success(written)
    }

    /// Keeps the decoded body's first 512 bytes and last 32, as the engine
    /// keeps a body's for the checks that follow.
    private mutating func keepEnds(of bytes: UnsafeRawBufferPointer) {
        if opening.count < 512 { opening += bytes.prefix(512 - opening.count) }
        closing = Array((closing + bytes.suffix(32)).suffix(32))
    }

    /// read(2), again after a signal; -1 on an error (errno says which).
    private static func readSome(_ fd: Int32, into buffer: UnsafeMutablePointer<UInt8>, count: Int) -> Int {
        while true {
            let got = read(fd, buffer, count)
            if got >= 0 || errno != EINTR { return got }
        }
    }

    /// write(2) until every byte is written; the failure when one fails.
    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32, path: String) -> DecodingFailure? {
        var offset = 0
        while offset < bytes.count {
            let count = systemWrite(fd, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                return .fileSystem(errno, "cannot write \(path)")
            }
            offset += count
        }
        return nil
    }
}
