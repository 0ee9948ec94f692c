import CFileSync
import Crypto
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes body bytes to a file and feeds them to SHA-256 as they pass: the
/// bytes are hashed from memory, never read back from disk.
///
/// Small bodies are hashed and written inline on the loop thread. Large ones
/// are *pipelined*: the loop thread copies each chunk and hands it to a serial
/// queue, so hashing and writing run on another core while libcurl keeps
/// receiving. At most `maxChunksInFlight` chunks wait at once across all
/// writers; past that the loop thread waits (back-pressure), so memory stays
/// bounded however fast the network is.
///
/// `@unchecked Sendable`: `hasher`, `bytesWritten` and the file offset are
/// touched either inline by the one thread that owns the transfer or, when
/// pipelined, only on `queue`; switching modes and reading the result first
/// drain the queue. `failure` is behind a mutex.
final class HashingWriter: @unchecked Sendable {
    /// Chunks waiting to be hashed and written, across every transfer.
    static let maxChunksInFlight = 64
    private static let inFlight = DispatchSemaphore(value: maxChunksInFlight)
    private static let workers = DispatchQueue(label: "mediafetch.body-writers", attributes: .concurrent)

    private let descriptor: Int32
    private let path: String
    private let queue = DispatchQueue(label: "mediafetch.body-writer", target: HashingWriter.workers)
    private var hasher = SHA256()
    /// Bytes written so far, and how far disk writeback has been started.
    private var written: Int64 = 0
    private var writebackStarted: Int64 = 0
    /// Writeback is started every this many bytes, so the flush before the
    /// object is stored finds most of the body on disk already.
    private static let writebackStep: Int64 = 4 << 20
    private let failure = Mutex<TransferError?>(nil)
    private(set) var isPipelined = false

    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    /// Chooses inline or pipelined work for the bytes that follow.
    func pipeline(_ enabled: Bool) {
        drain()
        isPipelined = enabled
    }

    /// Hashes and writes `bytes`, now or on the queue. Returns an error seen
    /// so far (a failed write on the queue shows up at the next call).
    func write(_ bytes: UnsafeRawBufferPointer) -> TransferError? {
        if let error = failure.withLock({ $0 }) { return error }
        guard isPipelined else { return hashAndWrite(bytes) }
        Self.inFlight.wait()
        let chunk = Chunk(copying: bytes)
        queue.async { [self] in
            defer {
                chunk.memory.deallocate()
                Self.inFlight.signal()
            }
            guard failure.withLock({ $0 }) == nil else { return }
            if let error = hashAndWrite(UnsafeRawBufferPointer(chunk.memory)) {
                failure.withLock { $0 = error }
            }
        }
        return nil
    }

    /// Hashes bytes already in the file (a partial from an earlier run) without writing them.
    func seed(fromFileLength length: Int64) throws(TransferError) {
        drain()
        let chunkSize = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < length {
            let count = pread(descriptor, buffer.baseAddress, min(chunkSize, Int(length - offset)), off_t(offset))
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                throw TransferError(.fileSystem(errno: errno), "cannot read the partial file \(path)")
            }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            offset += Int64(count)
        }
        _ = lseek(descriptor, off_t(length), SEEK_SET)
        written = length
        writebackStarted = length
    }

    /// Forgets every byte: the file is emptied and the hash starts over.
    func reset() {
        drain()
        hasher = SHA256()
        written = 0
        writebackStarted = 0
        failure.withLock { $0 = nil }
        _ = ftruncate(descriptor, 0)
        _ = lseek(descriptor, 0, SEEK_SET)
    }

    /// Waits for pending chunks, then returns the digest (lower-case hex).
    func finish() throws(TransferError) -> String {
        drain()
        if let error = failure.withLock({ $0 }) { throw error }
        startWriteback()
        return hasher.finalize().hexString
    }

    /// Waits until every queued chunk is hashed and written.
    func drain() {
        if isPipelined { queue.sync {} }
    }

    private func hashAndWrite(_ bytes: UnsafeRawBufferPointer) -> TransferError? {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return nil }
        hasher.update(bufferPointer: bytes)
        var offset = 0
        while offset < bytes.count {
            let count = systemWrite(descriptor, base + offset, bytes.count - offset)
            if count < 0 {
                if errno == EINTR { continue }
                let code = errno
                return TransferError(.fileSystem(errno: code), "cannot write \(path): \(String(cString: strerror(code)))")
            }
            offset += count
        }
        written += Int64(bytes.count)
        if written - writebackStarted >= Self.writebackStep { startWriteback() }
        return nil
    }

    private func startWriteback() {
        guard written > writebackStarted else { return }
        mf_start_writeback(descriptor, writebackStarted, written - writebackStarted)
        writebackStarted = written
    }
}

/// A copy of body bytes on its way to the writer queue.
/// `@unchecked Sendable`: the loop thread fills it and never touches it again;
/// the queue owns it from then on and frees it.
private struct Chunk: @unchecked Sendable {
    let memory: UnsafeMutableRawBufferPointer

    init(copying bytes: UnsafeRawBufferPointer) {
        memory = .allocate(byteCount: bytes.count, alignment: 16)
        memory.copyMemory(from: bytes)
    }
}

extension Digest {
    /// Lower-case hex, the form used for object names.
    var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes = [UInt8]()
        bytes.reserveCapacity(Self.byteCount * 2)
        for byte in self {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
