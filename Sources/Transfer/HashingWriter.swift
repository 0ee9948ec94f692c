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
/// The loop thread only copies the bytes into chunks (see `ChunkPool`); each
/// chunk, when full or when the attempt ends (a full chunk that ends the body
/// waits for `seal`), goes to a serial queue that hashes and writes it on a
/// writer thread, so the thread that receives never waits for the
/// filesystem. The chunks in use across all writers stay within `pool`'s
/// byte budget, so memory stays bounded however fast the network is: when
/// it is spent, `write` takes nothing and the transfer is paused until
/// chunks come back.
///
/// A body that arrived whole is `seal`ed by the loop thread itself: its last
/// chunk and the digest go to the queue in one trip, and the queue resumes
/// the waiting task when both are done, so the task is woken once per body.
///
/// A fresh body is written with direct I/O (`O_DIRECT`) where the filesystem
/// allows it: the aligned chunks go from memory to the device with no copy
/// into the page cache, which on a VM means no fresh page to fault in per
/// 4 KiB, and nothing is left for the store's flush to write back. A
/// resumed body goes on the same way (`seed` cuts a partial back to a block
/// boundary). What cannot be aligned (the last few bytes of a body, the rest
/// of one whose attempt broke off within its first block) goes through the
/// page cache, as everything does where the filesystem refuses `O_DIRECT`;
/// a file that left direct I/O stays out of it until a `reset` empties it.
///
/// `@unchecked Sendable`: `hasher`, `written`, `direct`, `sealed` and the file
/// offset are touched on `queue` only, except in
/// `seed`/`reset`/`finish`, which first wait for the queue (or are ordered
/// after it by the continuation it resumed); `filling` belongs to whoever owns
/// the transfer at the time (the loop thread during an attempt, the task
/// between attempts: the continuation orders the hand-over). `failure` is
/// behind a mutex.
final class HashingWriter: @unchecked Sendable {
    /// Chunks filling or waiting to be hashed and written, across every
    /// transfer: the shares of the engines alive (16 MiB for one of 16 slots:
    /// 64 chunks of 256 KiB, or 256 small bodies of 64 KiB), and 16 MiB at
    /// least (see `ChunkPool`).
    static let pool = ChunkPool(byteBudget: 16 << 20)
    /// Direct I/O wants the buffer, the file offset and the length to be
    /// multiples of the device's block size; 4 KiB covers every common device.
    static let directAlignment = 4096
    /// Bodies at least this large get their disk writeback started when they
    /// are complete; smaller ones are left to the store's group flush (one
    /// writeback request per small file costs more than it saves).
    static let writebackThreshold: Int64 = 1 << 20

    private let descriptor: Int32
    private let path: String
    /// This body's jobs, in order, on the writer threads (see `WriterPool`).
    private let queue: WriterPool.Lane
    private var hasher = SHA256()
    /// Bytes written so far, and how far disk writeback has been started.
    private var written: Int64 = 0
    private var writebackStarted: Int64 = 0
    /// Whether writes bypass the page cache (see the type's comment).
    private var direct: Bool
    private let failure = Mutex<TransferError?>(nil)
    /// Chunks sent to the writer threads and not yet written (or skipped).
    private let chunksQueued = Atomic<Int>(0)
    /// The chunk being filled on the loop thread, and how much of it is used.
    private var filling: Chunk?
    private var filled = 0
    /// The bytes of chunks the last `.full` write needed (the loop thread's, like `filling`).
    private var shortfall = 0
    /// The digest (or the failure) once `seal` has run on the queue. Read it
    /// after `seal`'s `done` was called (on that thread, or after a hand-over
    /// that orders the accesses).
    private(set) var sealed: Result<String, TransferError>?

    /// The chunks this writer fills, and the threads that write them (the shared ones, but for tests).
    private let pool: ChunkPool

    /// Whether direct I/O may be used at all (it is used while the file is
    /// written from its start with aligned chunks).
    private let directAllowed: Bool
    /// Whether the body went past the page cache when its writing began (at
    /// `init`, `seed` or `reset`), so that a cut-off body is kept to whole
    /// blocks (see `submitFilling(endingAt:attemptStart:)`). The caller's copy of
    /// `direct`, which lives on the queue; it misses only a fall back to the
    /// page cache on EINVAL, after which whole blocks merely cost a few bytes.
    private var blockAligned = false

    /// What the opener knows of a descriptor: a file it created empty just
    /// now (opened with O_DIRECT or not), or nothing, so the writer looks.
    enum OpenedFile: Equatable {
        case unknown
        case fresh(direct: Bool)
    }

    /// `directIO` allows writes that bypass the page cache; they are used
    /// where the filesystem supports them, from an empty file on, or after
    /// `seed` when the bytes held end on a block boundary.
    /// `opened` spares the system calls that find out whether the file is
    /// empty and already open for direct I/O.
    init(descriptor: Int32, path: String, directIO: Bool, opened: OpenedFile = .unknown,
         pool: ChunkPool = HashingWriter.pool, writers: WriterPool = .shared) {
        self.descriptor = descriptor
        self.path = path
        self.pool = pool
        queue = writers.lane()
        directAllowed = directIO
        switch opened {
        case .fresh(direct: true) where directIO:
            direct = true
        case .fresh(direct: let isDirect):
            // Not wanted after all: leave direct I/O (a failure shows at the first write).
            if isDirect { _ = mf_set_direct_io(descriptor, 0) }
            direct = directIO && mf_set_direct_io(descriptor, 1) == 0
        case .unknown:
            var info = stat()
            let empty = fstat(descriptor, &info) == 0 && info.st_size == 0
            direct = directIO && empty && mf_set_direct_io(descriptor, 1) == 0
        }
        blockAligned = direct
    }

    /// Whether the next write may still bypass the page cache (for tests).
    var writesDirectly: Bool { queue.sync { [self] in direct } }

    /// Takes `bytes` to be hashed and written: all of them, or none.
    /// `expectedRemaining` is what the body still has to send counting these
    /// bytes, when known: it sizes a new chunk.
    ///
    /// `.full` takes nothing: the chunks these bytes need do not fit the
    /// pool's budget (the writers are behind: a slow disk). Hand the same
    /// bytes again after `wakeWhenRoom`'s call; libcurl keeps a paused
    /// transfer's bytes for that. Waiting here instead holds up the loop
    /// thread, and with it every other transfer, for a slow disk; without
    /// `mayPause` it waits all the same (see `Attempt.receiveBody` for when).
    /// `.refused` carries an error seen so far (a failed write on the queue
    /// shows up at the next call), or `.cancelled` when a write that may
    /// not pause stopped waiting because `giveUp` said so: it is asked
    /// every tenth of a second while the writers free chunks, so that a stop
    /// is not held up for as long as a slow disk needs.
    func write(_ bytes: UnsafeRawBufferPointer, expectedRemaining: Int64? = nil, mayPause: Bool = true,
               giveUp: () -> Bool = { false }) -> BodyWrite {
        if let error = failure.withLock({ $0 }) { return .refused(error) }
        guard !bytes.isEmpty else { return .taken }
        // A full chunk kept back at the end of the body (below): more came after all.
        if let current = filling, filled == current.size { submitFilling() }
        var remaining = expectedRemaining.map { max($0, Int64(bytes.count)) }
        let room = filling.map { $0.size - filled } ?? 0
        var fresh: [Chunk] = []
        if bytes.count > room {
            let sizes = Self.chunkSizes(for: bytes.count - room, remaining: remaining.map { $0 - Int64(room) })
            guard let taken = takeChunks(sizes, waiting: !mayPause, giveUp: giveUp) else {
                if !mayPause { return .refused(.cancelled) }
                shortfall = sizes.reduce(0, +)
                return .full
            }
            fresh = taken
        }
        var next = fresh.makeIterator()
        var rest = bytes
        while !rest.isEmpty {
            guard let chunk = filling ?? next.next() else {
                preconditionFailure("HashingWriter.write planned too few chunks")
            }
            let count = min(rest.count, chunk.size - filled)
            UnsafeMutableRawBufferPointer(rebasing: chunk.memory[filled..<(filled + count)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: rest[0..<count]))
            filled += count
            filling = chunk
            rest = UnsafeRawBufferPointer(rebasing: rest[count...])
            remaining = remaining.map { $0 - Int64(count) }
            // A chunk that ends the body is kept for `seal`, which sends it
            // with the request for the digest: one trip to the writers, not two.
            if filled == chunk.size, remaining.map({ $0 > 0 }) ?? true { submitFilling() }
        }
        return .taken
    }

    /// New chunks of these sizes, all or none: nil when they do not fit the
    /// budget, or with `waiting`, once room comes back, unless `giveUp` says
    /// to stop first. That wait ends: chunks being filled are half the budget
    /// at most (see `ChunkPool`), and the rest are queued to the writer
    /// threads, which give them back.
    private func takeChunks(_ sizes: [Int], waiting: Bool, giveUp: () -> Bool) -> [Chunk]? {
        while true {
            if let taken = pool.take(sizes: sizes) { return taken }
            guard waiting, !giveUp() else { return nil }
            let room = DispatchSemaphore(value: 0)
            guard pool.wakeWhenRoom(for: sizes.reduce(0, +), { room.signal() }) else { continue }
            while room.wait(timeout: .now() + Self.stopCheckInterval) == .timedOut {
                // A late call of the wake-up only signals a semaphore nobody waits on.
                if giveUp() { return nil }
            }
        }
    }

    /// How often a write waiting for chunks asks whether to give up.
    static let stopCheckInterval = DispatchTimeInterval.milliseconds(100)

    /// The sizes of the new chunks for `count` bytes past the chunk being
    /// filled, when the body has `remaining` bytes left from the first of them:
    /// the same sizes `write`'s copying takes them in.
    static func chunkSizes(for count: Int, remaining: Int64?) -> [Int] {
        var sizes: [Int] = []
        var left = count
        var remaining = remaining
        while left > 0 {
            let size = ChunkPool.size(forRemaining: remaining)
            sizes.append(size)
            left -= size
            remaining = remaining.map { $0 - Int64(size) }
        }
        return sizes
    }

    /// Calls `wake` once the chunks the last `.full` write asked for fit the
    /// pool (on the thread that gives one back); returns false, and never
    /// calls it, when they fit now.
    func wakeWhenRoom(_ wake: @escaping @Sendable () -> Void) -> Bool {
        pool.wakeWhenRoom(for: shortfall, wake)
    }

    /// Hands the chunk being filled to the queue (at the end of an attempt, so
    /// the last bytes are written at once and a transfer waiting to retry
    /// holds no chunk).
    func submitFilling(evenIfStopped: Bool = false) {
        guard let last = takeFilling() else { return }
        enqueue(last.chunk, count: last.count, evenIfStopped: evenIfStopped)
    }

    /// `submitFilling` for an attempt that was cut off, when `held` bytes of
    /// the body have been handed over: a body written past the page cache
    /// keeps whole blocks only, and the bytes after the last block boundary
    /// (under 4 KiB) are dropped, to be asked for again. The file then ends
    /// on a boundary, and the retry, or the next run's resume, goes on with
    /// direct I/O; an unaligned tail would send the rest of the body through
    /// the page cache. Unless that would drop all the attempt brought (it
    /// began at `start` and ended within a block of it): every attempt keeps
    /// its progress, or a server that always broke off that soon would never
    /// let the body finish. Returns how many bytes were dropped.
    func submitFilling(endingAt held: Int64, attemptStart start: Int64, evenIfStopped: Bool = false) -> Int {
        let alignment = Self.directAlignment
        let dropped = filled % alignment
        // Every chunk before this one was whole, and chunk sizes are
        // multiples of a block, so this one starts on a boundary.
        guard blockAligned, (held - Int64(filled)) % Int64(alignment) == 0, held - Int64(dropped) > start,
              let last = takeFilling() else {
            submitFilling(evenIfStopped: evenIfStopped)
            return 0
        }
        let kept = last.count - dropped
        if kept == 0 {
            pool.give(last.chunk)
        } else {
            enqueue(last.chunk, count: kept, evenIfStopped: evenIfStopped)
        }
        return dropped
    }

    /// Sends a chunk to the writer threads; `evenIfStopped`, it is written
    /// after a stop too (see `cancelUnwritten(keepingFillingEndingAt:attemptStart:)`).
    private func enqueue(_ chunk: Chunk, count: Int, evenIfStopped: Bool) {
        chunksQueued.add(1, ordering: .relaxed)
        queue.async { [self] in writeChunk(chunk, count: count, evenIfStopped: evenIfStopped) }
    }

    /// The chunk being filled and its length, now owned by the caller.
    private func takeFilling() -> (chunk: Chunk, count: Int)? {
        defer {
            filling = nil
            filled = 0
        }
        return filling.map { ($0, filled) }
    }

    /// On the queue: hashes and writes a chunk's bytes, then frees the chunk.
    private func writeChunk(_ chunk: Chunk, count: Int, evenIfStopped: Bool = false) {
        defer {
            pool.give(chunk)
            chunksQueued.subtract(1, ordering: .releasing)
        }
        let failed = failure.withLock { $0 }
        // After a failure nothing more is written; after a stop, only the tail it keeps.
        guard failed == nil || (evenIfStopped && failed?.kind == .cancelled) else { return }
        if let error = hashAndWrite(UnsafeRawBufferPointer(rebasing: chunk.memory[0..<count])) {
            failure.withLock { $0 = error }
        }
    }

    /// The first bytes (up to `FileSink.openingSize`) of those `seed` read
    /// back, and the last (up to `FileSink.recentCapacity`).
    private(set) var seededOpening: [UInt8] = []
    private(set) var seededTail: [UInt8] = []

    /// Hashes bytes already in the file (a partial from an earlier run)
    /// without writing them, and returns how many it kept: all of them, or,
    /// where the file can be written past the page cache, those up to the
    /// last block boundary. The rest (under 4 KiB) is cut off, to be fetched
    /// again, so that the body goes on with direct I/O: on a slow disk, one
    /// written through the page cache held up the run's last flush, and a
    /// stop, by tens of seconds.
    func seed(fromFileLength length: Int64) throws(TransferError) -> Int64 {
        drain()
        let alignment = Int64(Self.directAlignment)
        var length = length
        // Whether the filesystem takes direct I/O; the bytes are read back through the page cache first.
        let goesDirect = directAllowed && !direct && mf_set_direct_io(descriptor, 1) == 0
        if goesDirect {
            _ = mf_set_direct_io(descriptor, 0)
            if length % alignment != 0 {
                let whole = length - length % alignment
                guard ftruncate(descriptor, off_t(whole)) == 0 else {
                    let code = errno
                    throw TransferError(.fileSystem(errno: code),
                                        "cannot shorten the partial file \(path): \(String(cString: strerror(code)))")
                }
                length = whole
            }
        }
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
            if offset == 0 { seededOpening = Array(UnsafeRawBufferPointer(rebasing: buffer[0..<min(count, FileSink.openingSize)])) }
            // The last bytes, over the last two reads at most (a read is far longer).
            let last = UnsafeRawBufferPointer(rebasing: buffer[0..<count]).suffix(FileSink.recentCapacity)
            seededTail = Array((seededTail + last).suffix(FileSink.recentCapacity))
            offset += Int64(count)
        }
        _ = lseek(descriptor, off_t(length), SEEK_SET)
        written = length
        writebackStarted = length
        // Set after reading: direct reads would need aligned buffers.
        if goesDirect { direct = mf_set_direct_io(descriptor, 1) == 0 }
        blockAligned = direct
        return length
    }

    /// Forgets every byte: the file is emptied and the hash starts over.
    /// The chunks still queued are skipped rather than written (they belong
    /// to the body being dropped), so the caller, the loop thread when a
    /// server answers a range request with the whole body, waits for a writer
    /// thread to take this body's turn, not for a slow disk to take them all.
    func reset() {
        cancelUnwritten()
        drain()
        sealed = nil
        hasher = SHA256()
        written = 0
        writebackStarted = 0
        failure.withLock { $0 = nil }
        // Old bytes past the new body's end would not match its hash: fail it.
        // EINVAL is a descriptor that is no regular file (a pipe), with no old bytes to remove.
        if ftruncate(descriptor, 0) != 0, errno != EINVAL {
            let code = errno
            failure.withLock { $0 = TransferError(.fileSystem(errno: code), "cannot empty \(path): \(String(cString: strerror(code)))") }
        }
        _ = lseek(descriptor, 0, SEEK_SET)
        // Empty again: the new body can go past the page cache from its first byte.
        direct = directAllowed && mf_set_direct_io(descriptor, 1) == 0
        blockAligned = direct
    }

    /// Sends the last bytes and the request for the digest to the queue in
    /// one trip, and calls `done` there once every byte is hashed and written;
    /// `finish()` then returns at once. Called by the loop thread when a body
    /// arrived whole, so the task waiting for it is woken only once.
    func seal(then done: @escaping @Sendable () -> Void) {
        let last = takeFilling()
        if last != nil { chunksQueued.add(1, ordering: .relaxed) }
        queue.async { [self] in
            sealed = complete(last)
            done()
        }
    }

    /// The digest (lower-case hex) once every byte handed over is hashed and
    /// written: at once after `seal`, else waiting without holding a thread.
    func finish() async throws(TransferError) -> String {
        if let sealed { return try sealed.get() }
        let last = takeFilling()
        if last != nil { chunksQueued.add(1, ordering: .relaxed) }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<String, TransferError>, Never>) in
            queue.async { [self] in continuation.resume(returning: complete(last)) }
        }
        return try result.get()
    }

    /// On the queue: writes the last chunk and returns the digest or the failure.
    private func complete(_ last: (chunk: Chunk, count: Int)?) -> Result<String, TransferError> {
        if let last { writeChunk(last.chunk, count: last.count) }
        if let error = failure.withLock({ $0 }) { return .failure(error) }
        if written >= Self.writebackThreshold { startWriteback() }
        return .success(hasher.finalize().hexString)
    }

    /// Gives up on the bytes not yet written, for a transfer that was
    /// cancelled, and waits only for a write under way. The file keeps what
    /// reached it, a prefix of the body that the next run resumes from; on a
    /// slow disk, writing the rest first held up the end of an interrupted
    /// run by seconds (the whole chunk budget at the disk's pace).
    func abandonUnwritten() {
        if sealed != nil { return }
        cancelUnwritten()
        queue.sync()
    }

    /// `abandonUnwritten` without the wait: called by the loop thread for
    /// every transfer a stop cancels, so that the writers skip all their
    /// queued chunks at once instead of one transfer's at a time as each
    /// is closed.
    func cancelUnwritten() {
        failure.withLock { if $0 == nil { $0 = .cancelled } }
        if let last = takeFilling() { pool.give(last.chunk) }
    }

    /// `cancelUnwritten` for a transfer a stop cancels, when `held` bytes of
    /// the body have been handed over (the attempt began at `start`): when
    /// every chunk before the one being filled is written already (the
    /// network, not the disk, was the slow side), that one's whole blocks
    /// are written too instead of dropped. At 20 KB/s a Ctrl-C threw away
    /// up to 256 KiB a transfer, 13 s of download. With chunks still queued
    /// it goes with them, or the file would have a hole. The stop does not
    /// wait for that write; closing the file does. Returns the bytes of the
    /// chunk being filled that were dropped (those of queued chunks are not
    /// counted: nothing reads the count of a cancelled transfer).
    func cancelUnwritten(keepingFillingEndingAt held: Int64, attemptStart start: Int64) -> Int {
        guard filling != nil, chunksQueued.load(ordering: .acquiring) == 0 else {
            let dropped = filled
            cancelUnwritten()
            return dropped
        }
        let dropped = submitFilling(endingAt: held, attemptStart: start, evenIfStopped: true)
        failure.withLock { if $0 == nil { $0 = .cancelled } }
        return dropped
    }

    /// Waits until every byte handed over is hashed and written (blocking).
    /// After `seal` there is nothing left to wait for: it returns at once, so
    /// it may be called from the sealing job's own `done` (a failed body
    /// abandoned on its writer thread).
    func drain() {
        if sealed != nil { return }
        submitFilling()
        queue.sync()
    }

    private func hashAndWrite(_ bytes: UnsafeRawBufferPointer) -> TransferError? {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return nil }
        hasher.update(bufferPointer: bytes)
        let alignment = Self.directAlignment
        var offset = 0
        while offset < bytes.count {
            var length = bytes.count - offset
            let directNow = direct && (written + Int64(offset)) % Int64(alignment) == 0
                && Int(bitPattern: base + offset) % alignment == 0 && length >= alignment
            if directNow {
                length &= ~(alignment - 1)
            } else if direct, let error = stopDirectIO(at: written + Int64(offset)) {
                return error
            }
            let count = systemWrite(descriptor, base + offset, length)
            if count < 0 {
                if errno == EINTR { continue }
                if directNow, errno == EINVAL {
                    // This filesystem or device wants another alignment: the page cache it is.
                    if let error = stopDirectIO(at: written + Int64(offset)) { return error }
                    continue
                }
                let code = errno
                return TransferError(.fileSystem(errno: code), "cannot write \(path): \(String(cString: strerror(code)))")
            }
            // A regular file never takes nothing of a write; a filesystem that
            // does (some FUSE ones) would have this loop spin for ever.
            guard count > 0 else {
                return TransferError(.fileSystem(errno: EIO), "cannot write \(path): the filesystem took no bytes")
            }
            offset += count
        }
        written += Int64(bytes.count)
        if !direct, written - writebackStarted >= Self.writebackStep { startWriteback() }
        return nil
    }

    /// From `position` on, bytes go through the page cache; what came before
    /// is on the device already and needs no writeback. Returns an error when
    /// the descriptor cannot leave direct I/O (then no unaligned write can succeed).
    private func stopDirectIO(at position: Int64) -> TransferError? {
        guard mf_set_direct_io(descriptor, 0) == 0 else {
            let code = errno
            return TransferError(.fileSystem(errno: code),
                                 "cannot switch \(path) from direct to buffered writes: \(String(cString: strerror(code)))")
        }
        direct = false
        writebackStarted = position
        return nil
    }

    /// A large body's writeback is started every this many bytes, from the
    /// writer thread, so little is left for the store's flush when it ends.
    static let writebackStep: Int64 = 8 << 20

    private func startWriteback() {
        guard written > writebackStarted else { return }
        mf_start_writeback(descriptor, writebackStarted, written - writebackStarted)
        writebackStarted = written
    }
}

extension Digest {
    /// Lower-case hex, the form used for object names.
    var hexString: String {
        // Straight from the digest's bytes into the string's storage: once a body.
        withUnsafeBytes { digest in
            String(unsafeUninitializedCapacity: digest.count * 2) { text in
                for (offset, byte) in digest.enumerated() {
                    text[2 * offset] = Self.hexDigit(byte >> 4)
                    text[2 * offset + 1] = Self.hexDigit(byte & 0x0F)
                }
                return digest.count * 2
            }
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
