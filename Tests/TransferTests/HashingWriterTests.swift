import Crypto
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Transfer

#if canImport(Glibc)
import Glibc
#endif

/// The writer on its own: exact bytes and digest, with and without direct I/O.
@Suite struct HashingWriterTests {
    private func sha256(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    /// A new empty file in `directory` and a writer for it; the caller closes the descriptor.
    private func openWriter(in directory: TemporaryDirectory, name: String, directIO: Bool,
                            pool: ChunkPool = HashingWriter.pool)
        throws -> (writer: HashingWriter, descriptor: Int32, path: String) {
        let path = directory.appending(name)
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        return (HashingWriter(descriptor: fd, path: path, directIO: directIO, pool: pool), fd, path)
    }

    /// Feeds `content` in pieces of the given sizes (cycled), as libcurl does,
    /// optionally ending the attempt after `failAfter` bytes (the retry then
    /// continues from there), and returns the digest and the writer.
    private func write(_ content: Data, pieces: [Int], directIO: Bool, failAfter: Int? = nil,
                       in directory: TemporaryDirectory, name: String = "body.part")
        async throws -> (digest: String, path: String, writer: HashingWriter) {
        let (writer, fd, path) = try openWriter(in: directory, name: name, directIO: directIO)
        var offset = 0
        var piece = 0
        try content.withUnsafeBytes { bytes in
            while offset < bytes.count {
                let count = min(pieces[piece % pieces.count], bytes.count - offset)
                if let failAfter, offset < failAfter, offset + count >= failAfter {
                    let head = failAfter - offset
                    if head > 0 { #expect(take(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + head)]), by: writer) == nil) }
                    offset += head
                    writer.submitFilling() // the attempt ended here
                    continue
                }
                if let error = take(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]), by: writer) {
                    throw error
                }
                offset += count
                piece += 1
            }
        }
        let digest = try await writer.finish()
        _ = close(fd)
        return (digest, path, writer)
    }

    /// Hands `bytes` to `writer` until it takes them, as the loop does with a
    /// paused transfer: when the chunk pool is spent (the shared one serves
    /// other tests' transfers too), it waits for the writer's wake-up.
    /// Returns the error of a refusal.
    private func take(_ bytes: UnsafeRawBufferPointer, by writer: HashingWriter,
                      expectedRemaining: Int64? = nil) -> TransferError? {
        while true {
            switch writer.write(bytes, expectedRemaining: expectedRemaining) {
            case .taken:
                return nil
            case .refused(let error):
                return error
            case .full:
                let room = DispatchSemaphore(value: 0)
                if writer.wakeWhenRoom({ room.signal() }), room.wait(timeout: .now() + .seconds(60)) == .timedOut {
                    return TransferError(.engine, "no room in the chunk pool for a minute")
                }
            }
        }
    }

    /// Feeds `content` in libcurl-sized pieces of 16 KiB, each accepted; with
    /// `announcedLength`, each piece says how much the body still has to send, as the sink does.
    private func feed(_ content: Data, to writer: HashingWriter, announcedLength: Int? = nil) {
        content.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let count = min(16_384, bytes.count - offset)
                let remaining = announcedLength.map { Int64($0 - offset) }
                #expect(take(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]), by: writer,
                             expectedRemaining: remaining) == nil)
                offset += count
            }
        }
    }

    /// A digest's name is its 32 bytes in lower-case hex.
    @Test func aDigestIsNamedInLowerCaseHex() {
        #expect(SHA256.hash(data: Data()).hexString == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hash(data: Data("abc".utf8)).hexString == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test(arguments: [true, false])
    func bodiesOfEveryShapeAreWrittenAndHashedExactly(directIO: Bool) async throws {
        try await TemporaryDirectory.with { directory in
            let sizes = [0, 10, 4095, 4096, 65_536, 300_001, ChunkPool.largest * 3, ChunkPool.largest * 2 + 17]
            for (index, size) in sizes.enumerated() {
                let content = fixtureBytes(count: size, seed: UInt64(500 + index))
                let result = try await write(content, pieces: [16_384, 1, 7_001, 100_000], directIO: directIO,
                                             in: directory, name: "body-\(index).part")
                #expect(result.digest == sha256(content), "size \(size)")
                #expect(FileManager.default.contents(atPath: result.path) == content, "size \(size)")
            }
        }
    }

    @Test(arguments: [true, false])
    func anAttemptEndingMidChunkLeavesTheFileExactForTheRetry(directIO: Bool) async throws {
        try await TemporaryDirectory.with { directory in
            let content = fixtureBytes(count: 1_000_000, seed: 77)
            let result = try await write(content, pieces: [16_384], directIO: directIO, failAfter: 300_007, in: directory)
            #expect(result.digest == sha256(content))
            #expect(FileManager.default.contents(atPath: result.path) == content)
            // The unaligned end of the first attempt moved the file to the page cache.
            #expect(!result.writer.writesDirectly)
        }
    }

    @Test func directIOLastsWhileEveryWriteIsAligned() async throws {
        try await TemporaryDirectory.with { directory in
            let (writer, fd, path) = try openWriter(in: directory, name: "aligned.part", directIO: true)
            defer { _ = close(fd) }
            // Where the filesystem refuses O_DIRECT the writer starts (and stays) buffered.
            let startedDirect = takesDirectIO(directory.path)
            #expect(writer.writesDirectly == startedDirect)
            let content = fixtureBytes(count: ChunkPool.largest * 2, seed: 9)
            content.withUnsafeBytes { bytes in
                #expect(take(bytes, by: writer) == nil)
            }
            writer.drain()
            #expect(writer.writesDirectly == startedDirect)
            let tail = fixtureBytes(count: 100, seed: 10)
            tail.withUnsafeBytes { bytes in
                #expect(take(bytes, by: writer) == nil)
            }
            let digest = try await writer.finish()
            #expect(!writer.writesDirectly)
            #expect(digest == sha256(content + tail))
            #expect(FileManager.default.contents(atPath: path) == content + tail)
        }
    }

    /// All or none: pieces of 10,000 bytes straddle the chunks, so a write
    /// that finds the pool spent needs room in the chunk being filled and a
    /// new one. It must take neither (libcurl hands the same bytes again).
    @Test(.timeLimit(.minutes(1)))
    func aWriterThatFindsTheBudgetSpentTakesNothingUntilAChunkComesBack() async throws {
        try await TemporaryDirectory.with { directory in
            let directWherePossible = takesDirectIO(directory.path)
            // A pool with room for two chunks, one of which another transfer holds.
            let pool = ChunkPool(byteBudget: 2 * ChunkPool.largest)
            let (writer, fd, path) = try openWriter(in: directory, name: "paused.part", directIO: true, pool: pool)
            defer { _ = close(fd) }
            var held = pool.take(size: ChunkPool.largest)
            try #require(held != nil)
            let aligned = 3 * ChunkPool.largest
            let content = fixtureBytes(count: aligned + 12_345, seed: 31)
            var mostInUse = 0
            var timesFull = 0
            var woken = 0
            var checkedDirect = false
            content.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let count = min(10_000, bytes.count - offset)
                    let piece = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
                    var answer = writer.write(piece)
                    if answer == .full {
                        timesFull += 1
                        // Nothing of the piece was taken: the file holds the full chunks before it, no more.
                        _ = writer.writesDirectly // waits for the writer's queued jobs
                        #expect(fileSize(path) == Int64(offset / ChunkPool.largest * ChunkPool.largest))
                        let room = DispatchSemaphore(value: 0)
                        if writer.wakeWhenRoom({ room.signal() }) {
                            // The other transfer's chunk is in the way: no room until it comes back, then the wake-up.
                            #expect(held != nil)
                            #expect(room.wait(timeout: .now() + .milliseconds(50)) == .timedOut)
                            if let chunk = held { pool.give(chunk) }
                            held = nil
                            #expect(room.wait(timeout: .now() + .seconds(30)) == .success)
                            woken += 1
                        }
                        answer = writer.write(piece)
                    }
                    #expect(answer == .taken)
                    // The other transfer takes its chunk again when it can: a later new chunk waits for it.
                    if held == nil { held = pool.take(size: ChunkPool.largest) }
                    offset += count
                    mostInUse = max(mostInUse, pool.bytesInUse)
                    if offset >= aligned, !checkedDirect {
                        // Every byte so far went in aligned chunks: still past the page cache.
                        #expect(writer.writesDirectly == directWherePossible)
                        checkedDirect = true
                    }
                }
            }
            let digest = try await writer.finish()
            if let chunk = held { pool.give(chunk) }
            #expect(timesFull >= 1)
            #expect(woken >= 1)
            #expect(digest == sha256(content))
            #expect(FileManager.default.contents(atPath: path) == content)
            #expect(pool.bytesInUse == 0)
            #expect(mostInUse <= 2 * ChunkPool.largest)
        }
    }

    /// A writer whose pool has room for two chunks, one of them `held`
    /// elsewhere, and the other filled with all but 1,000 bytes of
    /// `content`'s first `first`: the budget is spent, and the rest of
    /// `content` needs a chunk that is not there.
    private func writerWithItsBudgetSpent(in directory: TemporaryDirectory, seed: UInt64) throws
        -> (writer: HashingWriter, descriptor: Int32, path: String, pool: ChunkPool, held: Chunk, content: Data, first: Int) {
        let pool = ChunkPool(byteBudget: 2 * ChunkPool.largest)
        let (writer, fd, path) = try openWriter(in: directory, name: "spent-\(seed).part", directIO: true, pool: pool)
        let held = try #require(pool.take(size: ChunkPool.largest))
        let content = fixtureBytes(count: ChunkPool.largest + 100_000, seed: seed)
        let first = ChunkPool.largest - 1_000
        let answer = content.withUnsafeBytes { bytes in
            writer.write(UnsafeRawBufferPointer(rebasing: bytes[0..<first]), mayPause: false)
        }
        #expect(answer == .taken)
        return (writer, fd, path, pool, held, content, first)
    }

    /// A write that may not pause (an HTTP/2 stream) waits for room instead,
    /// and then takes every byte.
    @Test(.timeLimit(.minutes(1)))
    func aWriterThatMayNotPauseWaitsForAChunkToComeBack() async throws {
        try await TemporaryDirectory.with { directory in
            let (writer, fd, path, pool, held, content, first) = try writerWithItsBudgetSpent(in: directory, seed: 63)
            defer { _ = close(fd) }
            // The rest needs a new chunk: the write waits on another thread until one comes back.
            let done = DispatchSemaphore(value: 0)
            let rest = content[first...]
            let late = Mutex<BodyWrite?>(nil)
            DispatchQueue.global().async {
                let answer = rest.withUnsafeBytes { writer.write($0, mayPause: false) }
                late.withLock { $0 = answer }
                done.signal()
            }
            #expect(done.wait(timeout: .now() + .milliseconds(200)) == .timedOut)
            pool.give(held)
            #expect(done.wait(timeout: .now() + .seconds(30)) == .success)
            #expect(late.withLock { $0 } == .taken)
            #expect(try await writer.finish() == sha256(content))
            #expect(FileManager.default.contents(atPath: path) == content)
            #expect(pool.bytesInUse == 0)
        }
    }

    /// A write that may not pause gives up its wait for chunks when asked
    /// to (a stop), taking nothing: a slow disk does not hold up a Ctrl-C.
    @Test(.timeLimit(.minutes(1)))
    func aWriterThatMayNotPauseStopsWaitingWhenToldToGiveUp() async throws {
        try await TemporaryDirectory.with { directory in
            // The other chunk is held for the whole test, as a disk that never finishes would hold it.
            let (writer, fd, path, pool, held, content, first) = try writerWithItsBudgetSpent(in: directory, seed: 64)
            defer { _ = close(fd) }
            let stop = Atomic<Bool>(false)
            let asked = Atomic<Int>(0)
            let done = DispatchSemaphore(value: 0)
            let rest = content[first...]
            let late = Mutex<BodyWrite?>(nil)
            Thread.detachNewThread {
                let answer = rest.withUnsafeBytes { bytes in
                    writer.write(bytes, mayPause: false, giveUp: {
                        asked.add(1, ordering: .relaxed)
                        return stop.load(ordering: .relaxed)
                    })
                }
                late.withLock { $0 = answer }
                done.signal()
            }
            // It asks before it waits, then again as it waits: no answer meanwhile.
            #expect(waitUntil { asked.load(ordering: .relaxed) >= 3 })
            #expect(done.wait(timeout: .now()) == .timedOut)
            stop.store(true, ordering: .relaxed)
            #expect(done.wait(timeout: .now() + .seconds(30)) == .success)
            #expect(late.withLock { $0 } == .refused(.cancelled))
            // Nothing of the refused bytes was taken: the one chunk in use is still the first one's.
            #expect(pool.bytesInUse == 2 * ChunkPool.largest)
            writer.cancelUnwritten()
            writer.drain()
            pool.give(held)
            #expect(pool.bytesInUse == 0)
            // The file holds no more than the bytes handed over before the stop.
            #expect((FileManager.default.contents(atPath: path)?.count ?? 0) <= first)
        }
    }

    /// A cancelled transfer's queued chunks are dropped, not waited for: the
    /// file keeps what reached it, a prefix, and the next run resumes from there.
    @Test(.timeLimit(.minutes(1)))
    func aCancelledWriterDropsItsQueuedChunksAndWaitsOnlyForTheWriteUnderWay() async throws {
        try await TemporaryDirectory.with { directory in
            // One writer thread, held by another body's job: this writer's chunks queue behind it.
            let writers = WriterPool(threads: 1)
            let release = DispatchSemaphore(value: 0)
            writers.lane().async { release.wait() }
            let path = directory.appending("cancelled.part")
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            try #require(fd >= 0)
            defer { _ = close(fd) }
            let pool = ChunkPool(byteBudget: 4 << 20)
            let writer = HashingWriter(descriptor: fd, path: path, directIO: true, pool: pool, writers: writers)
            let content = fixtureBytes(count: 3 * ChunkPool.largest + 5_000, seed: 67)
            let taken = content.withUnsafeBytes { take($0, by: writer) }
            #expect(taken == nil)
            #expect(pool.bytesInUse == 4 * ChunkPool.largest) // three queued, one filling
            let abandoned = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                writer.abandonUnwritten()
                abandoned.signal()
            }
            // Once the writer refuses bytes, the cancel is in place: let the writer thread go.
            let empty = UnsafeRawBufferPointer(start: nil, count: 0)
            for _ in 0..<2_000 where writer.write(empty) == .taken { try await Task.sleep(for: .milliseconds(5)) }
            #expect(writer.write(empty) == .refused(.cancelled))
            release.signal()
            #expect(abandoned.wait(timeout: .now() + .seconds(30)) == .success)
            // Nothing queued was written, and every chunk is back in the pool.
            #expect(fileSize(path) == 0)
            #expect(pool.bytesInUse == 0)
        }
    }

    /// A 200 in answer to a range request drops the body held: its queued
    /// chunks are skipped, not written first, so the loop thread that resets
    /// the writer waits only for a write under way.
    @Test func aResetSkipsTheQueuedChunksOfTheBodyItDrops() async throws {
        // One writer thread, held by another body's job: this writer's chunks queue behind it.
        let writers = WriterPool(threads: 1)
        let release = DispatchSemaphore(value: 0)
        writers.lane().async { release.wait() }
        // A pipe stands in for the file, so that every byte written is counted.
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        // Not inherited by the processes other tests start: the reader waits for the last writer to close.
        for end in [readEnd, writeEnd] { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let counted = Mutex(0)
        let drained = DispatchSemaphore(value: 0)
        // Threads of their own: blocked on Dispatch's few, they would wait for more to be made.
        Thread {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = read(readEnd, &buffer, buffer.count)
                guard count > 0 else { break }
                counted.withLock { $0 += count }
            }
            drained.signal()
        }.start()
        defer { _ = close(readEnd) }
        let pool = ChunkPool(byteBudget: 4 << 20)
        let writer = HashingWriter(descriptor: writeEnd, path: "pipe", directIO: false, pool: pool, writers: writers)
        let old = fixtureBytes(count: 3 * ChunkPool.largest + 5_000, seed: 81)
        #expect(old.withUnsafeBytes { take($0, by: writer) } == nil)
        #expect(pool.bytesInUse == 4 * ChunkPool.largest) // three queued, one filling

        let resetDone = DispatchSemaphore(value: 0)
        Thread {
            writer.reset()
            resetDone.signal()
        }.start()
        // Once the writer refuses bytes, the reset has marked the queued chunks: let the writer thread go.
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        for _ in 0..<2_000 where writer.write(empty) == .taken { try await Task.sleep(for: .milliseconds(5)) }
        release.signal()
        #expect(resetDone.wait(timeout: .now() + .seconds(30)) == .success)
        #expect(pool.bytesInUse == 0)

        // The new body alone reaches the file, whole, with its own digest.
        let new = fixtureBytes(count: 100_000, seed: 82)
        #expect(new.withUnsafeBytes { take($0, by: writer) } == nil)
        #expect(try await writer.finish() == sha256(new))
        _ = close(writeEnd)
        #expect(drained.wait(timeout: .now() + .seconds(30)) == .success)
        #expect(counted.withLock { $0 } == new.count)
    }

    private func fileSize(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : -1
    }

    @Test func aFileThatAlreadyHoldsBytesStartsBufferedAndAResetGoesBackToDirectIO() async throws {
        try await TemporaryDirectory.with { directory in
            // Where the filesystem refuses O_DIRECT nothing here is direct; the bytes must still be exact.
            let directWherePossible = takesDirectIO(directory.path)

            let path = directory.appending("held.part")
            try Data(repeating: 7, count: 1000).write(to: URL(fileURLWithPath: path))
            let fd = open(path, O_RDWR | O_CLOEXEC)
            try #require(fd >= 0)
            defer { _ = close(fd) }
            _ = lseek(fd, 1000, SEEK_SET)
            let writer = HashingWriter(descriptor: fd, path: path, directIO: true)
            #expect(!writer.writesDirectly) // the held bytes end unaligned

            writer.reset() // a 200 to a range request: the whole body again, from byte zero
            #expect(writer.writesDirectly == directWherePossible)
            let content = fixtureBytes(count: 2 * ChunkPool.largest + 99, seed: 41)
            content.withUnsafeBytes { bytes in
                #expect(take(bytes, by: writer, expectedRemaining: Int64(bytes.count)) == nil)
            }
            #expect(try await writer.finish() == sha256(content))
            #expect(FileManager.default.contents(atPath: path) == content)
        }
    }

    /// A partial cut between chunks (a stop) ends on a block boundary: the
    /// rest of the body goes past the page cache, and the bytes are exact.
    /// One that ends elsewhere (from an older version, or a buffered write)
    /// is cut back to its last boundary where the filesystem takes direct
    /// I/O, and the rest is fetched again.
    @Test func aResumedPartialGoesOnWithDirectIOFromItsLastBlockBoundary() async throws {
        try await TemporaryDirectory.with { directory in
            // Looked for apart from the writer, which must find the same.
            let directWherePossible = takesDirectIO(directory.path)

            let content = fixtureBytes(count: 3 * ChunkPool.largest + 777, seed: 71)
            for held in [ChunkPool.largest, 8192, 1000, 3 * 4096 + 5] {
                let path = directory.appending("resumed-\(held).part")
                try content.prefix(held).write(to: URL(fileURLWithPath: path))
                let fd = open(path, O_RDWR | O_CLOEXEC)
                try #require(fd >= 0)
                defer { _ = close(fd) }
                let writer = HashingWriter(descriptor: fd, path: path, directIO: true)
                let kept = Int(try writer.seed(fromFileLength: Int64(held)))
                let alignment = HashingWriter.directAlignment
                #expect(kept == (directWherePossible ? held - held % alignment : held))
                #expect((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) == kept)
                #expect(writer.writesDirectly == directWherePossible)
                let rest = content.dropFirst(kept)
                let taken = rest.withUnsafeBytes { take($0, by: writer, expectedRemaining: Int64($0.count)) }
                #expect(taken == nil)
                #expect(try await writer.finish() == sha256(content))
                #expect(FileManager.default.contents(atPath: path) == content)
            }
        }
    }

    /// A body cut off mid-chunk keeps whole blocks only: the bytes after the
    /// last boundary are dropped (and asked for again), so the retry goes on
    /// past the page cache instead of through it, and the body is exact.
    @Test(arguments: [true, false])
    func aCutOffBodyKeepsWholeBlocksSoItsRetryGoesOnDirectly(directIO: Bool) async throws {
        try await TemporaryDirectory.with { directory in
            let (writer, fd, path) = try openWriter(in: directory, name: "cut.part", directIO: directIO)
            defer { _ = close(fd) }
            let direct = directIO && takesDirectIO(directory.path)
            #expect(writer.writesDirectly == direct)
            let content = fixtureBytes(count: 2 * ChunkPool.largest + 5000, seed: 73)
            // Cut inside the second chunk, 1,234 bytes past a boundary.
            let dropped = try await attempts(cutAt: [ChunkPool.largest + 3 * 4096 + 1234], of: content,
                                             by: writer, path: path, staysDirect: direct)
            #expect(dropped == [direct ? 1234 : 0])
        }
    }

    /// An attempt cut off before it brought a whole block keeps its bytes
    /// all the same (and the rest goes through the page cache): dropping
    /// them would leave it nothing, and a server that always broke off that
    /// soon would never let the body finish.
    @Test func anAttemptCutOffWithinItsFirstBlockKeepsItsBytes() async throws {
        try await TemporaryDirectory.with { directory in
            let (writer, fd, path) = try openWriter(in: directory, name: "short.part", directIO: true)
            defer { _ = close(fd) }
            let content = fixtureBytes(count: ChunkPool.largest + 5000, seed: 74)
            // The first attempt ends on a boundary; the second brings 1,000 bytes.
            let dropped = try await attempts(cutAt: [2 * 4096, 2 * 4096 + 1000], of: content, by: writer, path: path)
            #expect(dropped == [0, 0])
        }
    }

    /// Feeds `content` to `writer` in attempts that break off at `cuts`, each
    /// retry going on from what the last one kept, then the rest, and checks
    /// the file after each cut and the whole body and digest at the end.
    /// Returns the bytes each cut dropped.
    private func attempts(cutAt cuts: [Int], of content: Data, by writer: HashingWriter, path: String,
                          staysDirect: Bool? = nil) async throws -> [Int] {
        var held = 0
        var dropped: [Int] = []
        for cut in cuts {
            content[held..<cut].withUnsafeBytes { bytes in
                #expect(take(bytes, by: writer, expectedRemaining: Int64(content.count - held)) == nil)
            }
            dropped.append(writer.submitFilling(endingAt: Int64(cut), attemptStart: Int64(held))) // the attempt ended here
            held = cut - dropped[dropped.count - 1]
            writer.drain()
            #expect((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) == held)
            if let staysDirect { #expect(writer.writesDirectly == staysDirect) }
        }
        // The retry asks for the rest from `held` on.
        content.dropFirst(held).withUnsafeBytes { bytes in
            #expect(take(bytes, by: writer, expectedRemaining: Int64(bytes.count)) == nil)
        }
        #expect(try await writer.finish() == sha256(content))
        #expect(FileManager.default.contents(atPath: path) == content)
        return dropped
    }

    @Test func aWriterAskedForBufferedWritesNeverUsesDirectIO() async throws {
        try await TemporaryDirectory.with { directory in
            let (writer, fd, _) = try openWriter(in: directory, name: "buffered.part", directIO: false)
            defer { _ = close(fd) }
            #expect(!writer.writesDirectly)
        }
    }

    @Test(arguments: [true, false])
    func aNewPartialOpenedForDirectIOIsWrittenExactly(writerDirectIO: Bool) async throws {
        try await TemporaryDirectory.with { directory in
            let directWherePossible = takesDirectIO(directory.path)

            // Given a partial created for direct I/O (where the filesystem takes O_DIRECT)
            let partial = try PartialFile(directory: directory.path, url: "http://example.test/a", direct: true)
            #expect(partial.opened == .fresh(direct: directWherePossible))
            // When a writer that may or may not use direct I/O takes it
            let writer = HashingWriter(descriptor: partial.descriptor, path: partial.path,
                                       directIO: writerDirectIO, opened: partial.opened)
            #expect(writer.writesDirectly == (writerDirectIO && directWherePossible))
            // Then a body with an unaligned end is written and hashed exactly either way
            let content = fixtureBytes(count: ChunkPool.largest + 4096 * 3 + 17, seed: 43)
            content.withUnsafeBytes { bytes in
                #expect(take(bytes, by: writer, expectedRemaining: Int64(bytes.count)) == nil)
            }
            #expect(try await writer.finish() == sha256(content))
            #expect(FileManager.default.contents(atPath: partial.path) == content)
            partial.close(discard: true)
        }
    }

    @Test(arguments: [0, 100])
    func aChunkThatEndsTheBodyWaitsForTheSealAndBytesPastTheAnnouncedEndStillCount(extra: Int) async throws {
        try await TemporaryDirectory.with { directory in
            let pool = ChunkPool(byteBudget: 1 << 20)
            let (writer, fd, path) = try openWriter(in: directory, name: "sealed.part", directIO: true, pool: pool)
            defer { _ = close(fd) }
            // A 64 KiB body that says so, in libcurl-sized pieces: it fills one 64 KiB chunk exactly.
            let announced = 64 << 10
            let content = fixtureBytes(count: announced + extra, seed: 47)
            feed(content, to: writer, announcedLength: announced)
            // Every job handed to the writers so far has run (this waits for them).
            _ = writer.writesDirectly
            if extra == 0 {
                // The full last chunk was kept back for the seal: one trip to the writers, not two.
                #expect(pool.bytesInUse == announced)
            }
            let digest = await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
                writer.seal { continuation.resume(returning: try? writer.sealed?.get()) }
            }
            #expect(digest == sha256(content))
            #expect(FileManager.default.contents(atPath: path) == content)
            #expect(pool.bytesInUse == 0)
        }
    }
}
