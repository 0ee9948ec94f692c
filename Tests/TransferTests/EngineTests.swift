import Crypto
import Foundation
import Synchronization
import Testing
import TestOrigin
import TestSupport
import URLText
@testable import Transfer

/// The SHA-256 of `data` in hex, as `DownloadedBody.sha256` gives it.
private func sha256(_ data: Data) -> String {
    SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
}

/// Downloads `url` on a new engine made with `configuration` over the
/// partial directory `partials`; returns the body and every progress report.
private func downloadReportingProgress(_ url: String, _ configuration: TransferConfiguration,
                                       partials: String) async throws -> (DownloadedBody, [EngineSnapshot]) {
    let engine = try TransferEngine(configuration: configuration, partialDirectory: partials)
    let collector = Task { () -> [EngineSnapshot] in
        var reports: [EngineSnapshot] = []
        for await event in engine.events {
            if case .progress(let snapshot) = event { reports.append(snapshot) }
        }
        return reports
    }
    let body: DownloadedBody
    do {
        body = try await engine.download(url)
    } catch {
        engine.shutdown()
        throw error
    }
    engine.shutdown()
    return (body, await collector.value)
}

/// The engine against a real HTTP origin on loopback.
@Suite struct EngineTests {
    private func configuration(retries: Int = 4) -> TransferConfiguration {
        var configuration = TransferConfiguration()
        configuration.retry = RetryPolicy(maxRetries: retries, baseDelay: 0.01, maxDelay: 0.05)
        configuration.connectTimeout = 5
        configuration.stallTimeout = 5
        return configuration
    }

    /// Runs `body` with an origin, an engine over a fresh partial directory, and
    /// the engine's events collected until it shuts down.
    private func withEngine(
        retries: Int = 4, adjust: (inout TransferConfiguration) -> Void = { _ in },
        chunkPool: ChunkPool = HashingWriter.pool, hostNames: HostNames = .system,
        _ body: (TestOrigin, TransferEngine, TemporaryDirectory) async throws -> Void
    ) async throws -> [TransferEvent] {
        try await withOrigin { origin, directory in
            var configuration = configuration(retries: retries)
            adjust(&configuration)
            let engine = try TransferEngine(configuration: configuration, partialDirectory: directory.appending("tmp"),
                                            chunkPool: chunkPool, hostNames: hostNames)
            let collector = Task { () -> [TransferEvent] in
                var events: [TransferEvent] = []
                for await event in engine.events {
                    if case .progress = event { continue }
                    events.append(event)
                }
                return events
            }
            do {
                try await body(origin, engine, directory)
            } catch {
                engine.shutdown()
                throw error
            }
            engine.shutdown()
            return await collector.value
        }
    }

    /// A sink that refuses every body byte as cancelled, as a write does
    /// that stopped waiting for the disk because its transfer was stopped.
    private final class StoppedSink: BodySink {
        let ends = Mutex<[String]>([])
        var resumeOffset: Int64 { 0 }
        var resumeValidator: String? { nil }
        var bytesHeld: Int64 { 0 }
        var expectedTotal: Int64? { nil }
        func begin(_ head: ResponseHead, requestedOffset: Int64) -> TransferError? { nil }
        func write(_ bytes: UnsafeRawBufferPointer, mayPause: Bool, giveUp: () -> Bool) -> BodyWrite { .refused(.cancelled) }
        func wakeWhenRoom(_ wake: @escaping @Sendable () -> Void) -> Bool { false }
        func restart() {}
        func attemptFailed() { ends.withLock { $0.append("failed") } }
        func attemptCancelled() { ends.withLock { $0.append("cancelled") } }
        func attemptSucceeded(then resume: @escaping @Sendable () -> Void) {
            ends.withLock { $0.append("succeeded") }
            resume()
        }
        func wholeBodyHeld(answeredBy head: ResponseHead) -> ResponseHead? { nil }
    }

    /// An attempt whose body write gave up because its transfer is being
    /// stopped ends as cancelled, not failed: the sink drops what it has
    /// queued instead of writing it, and the attempt is not retried.
    @Test func anAttemptWhoseWriteGaveUpForAStopEndsAsCancelled() async throws {
        _ = try await withEngine { origin, engine, _ in
            origin.addResource("/stopped.bin", data: fixtureBytes(count: 100_000, seed: 71))
            let sink = StoppedSink()
            let attempt = engine.makeAttempt(id: engine.nextTransferID(), target: try RequestTarget(origin.url("/stopped.bin")),
                                             number: 1, sink: sink)
            let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<AttemptOutcome, Never>) in
                attempt.onEnd = { continuation.resume(returning: $0) }
                if !engine.submit(attempt) { attempt.takeOnEnd()?(.cancelled()) }
            }
            #expect(outcome.cancelled)
            #expect(sink.ends.withLock { $0 } == ["cancelled"])
            if case .failure(let error) = TransferEngine.classify(outcome) {
                #expect(error.kind == .cancelled)
            } else {
                Issue.record("a stopped attempt classified as a success")
            }
        }
    }

    /// A run without retries that fails on `url` (a fault set up by the caller) and keeps its partial.
    private func failOnce(_ url: String, partials: String) async throws {
        try await withTransferEngine(configuration: configuration(retries: 0), partialDirectory: partials) { engine in
            await #expect(throws: TransferError.self) { try await engine.download(url) }
        }
    }

    /// A later run with a fresh engine over the same partial directory.
    /// Downloads `url` with a new engine over `partials`, as a new run does;
    /// the run's count of resumed bytes is checked against the body's (a
    /// resume refused by its first bytes was counted as resumed).
    private func downloadInNewRun(_ url: String, partials: String) async throws -> DownloadedBody {
        let (body, reports) = try await downloadReportingProgress(url, configuration(), partials: partials)
        #expect((reports.last?.bytesResumed ?? 0) == body.resumedBytes, "the run's resumed bytes against the body's")
        return body
    }

    /// What a run cut off after 300,000 of the 500,000 bytes of `path`
    /// (served as `contentType`, with `etag` when given) leaves: the body it
    /// was fetching, the partial directory, and the bytes the partial holds.
    private func leavePartial(_ origin: TestOrigin, _ directory: TemporaryDirectory, _ path: String, seed: UInt64,
                              contentType: String = "image/jpeg", etag: String? = nil) async throws -> (content: Data, partials: String, held: Int) {
        let content = fixtureBytes(count: 500_000, seed: seed)
        origin.addResource(path, data: content, contentType: contentType, etag: etag)
        origin.setFault(path, .dropAfter(bytes: 300_000), times: 1)
        let partials = directory.appending("tmp")
        try await failOnce(origin.url(path), partials: partials)
        return (content, partials, resumeOffset(afterCutAt: 300_000, in: directory.path))
    }

    private func leftovers(_ directory: TemporaryDirectory) -> [String] {
        partialDirectoryFiles(directory.appending("tmp"))
    }

    @Test func downloadStreamsToAFileWithItsSHA256() async throws {
        _ = try await withEngine { origin, engine, _ in
            let content = fixtureBytes(count: 300_000, seed: 1)
            origin.addResource("/photo.jpg", data: content, contentType: "image/jpeg")

            let body = try await engine.download(origin.url("/photo.jpg"))

            #expect(body.sha256 == sha256(content))
            #expect(body.size == 300_000)
            #expect(body.contentType == "image/jpeg")
            #expect(body.attempts == 1)
            #expect(FileManager.default.contents(atPath: body.path) == content)
            #expect(origin.requests(for: "/photo.jpg").first?.header("user-agent") == "mediafetch/\(mediafetchVersion)")
        }
    }

    @Test func aLargeBodyIsHashedOffTheLoopThreadAndResumed() async throws {
        _ = try await withEngine { origin, engine, directory in
            // Hashed and written on the writer queue while a later attempt resumes it.
            let content = fixtureBytes(count: 6_000_000, seed: 20)
            origin.addResource("/large.flac", data: content)
            origin.setFault("/large.flac", .dropAfter(bytes: 2_500_000), times: 1)

            let body = try await engine.download(origin.url("/large.flac"))

            #expect(body.sha256 == sha256(content))
            #expect(body.resumedBytes == resumeOffset(afterCutAt: 2_500_000, in: directory.path))
            #expect(FileManager.default.contents(atPath: body.path) == content)
        }
    }

    @Test func aReusedHandleCarriesNoRangeIntoTheNextTransfer() async throws {
        // One slot, so every transfer runs on the same easy handle, one after the other.
        _ = try await withEngine(adjust: { $0.maxConcurrentTransfers = 1; $0.maxTransfersPerHost = 1 }) { origin, engine, directory in
            let resumed = fixtureBytes(count: 600_000, seed: 21)
            let next = fixtureBytes(count: 50_000, seed: 22)
            origin.addResource("/resumed.bin", data: resumed)
            origin.addResource("/next.bin", data: next)
            origin.setFault("/resumed.bin", .dropAfter(bytes: 300_000), times: 1)

            // A transfer that ends with a range request (Range + If-Range)...
            let first = try await engine.download(origin.url("/resumed.bin"))
            let offset = resumeOffset(afterCutAt: 300_000, in: directory.path)
            #expect(first.resumedBytes == offset)
            // ...and the one after it on the same handle
            let second = try await engine.download(origin.url("/next.bin"))

            #expect(second.sha256 == sha256(next))
            let request = try #require(origin.requests(for: "/next.bin").first)
            #expect(request.headers["range"] == nil)
            #expect(request.headers["if-range"] == nil)
            #expect(origin.requests(for: "/resumed.bin").last?.headers["range"] == resumeRange(from: offset))
        }
    }

    /// An ETag names a version of one file, not which file: nginx gives two
    /// files of one size and time the same one. A URL that redirected to one
    /// and, on the retry, to the other had the second's tail stitched to the
    /// first's head. A resume by another redirect now starts over.
    /// The range refused starts the body over at once, using up no retry.
    @Test func aResumeThatRedirectsToAnotherFileStartsOver() async throws {
        _ = try await withEngine(retries: 1) { origin, engine, _ in
            let day1 = fixtureBytes(count: 600_000, seed: 31)
            let day2 = fixtureBytes(count: 600_000, seed: 32)
            origin.addResource("/img/day1.jpg", data: day1, etag: "\"same\"")
            origin.addResource("/img/day2.jpg", data: day2, etag: "\"same\"")
            origin.setFault("/img/day1.jpg", .dropAfter(bytes: 300_000), times: 1)
            let asked = Mutex(0)
            origin.route("/latest.jpg") { _ in
                let first = asked.withLock { count in
                    count += 1
                    return count == 1
                }
                return OriginResponse(status: 302, headers: [("Location", first ? "/img/day1.jpg" : "/img/day2.jpg")])
            }

            let body = try await engine.download(origin.url("/latest.jpg"))

            #expect(body.sha256 == sha256(day2))
            #expect(FileManager.default.contents(atPath: body.path) == day2)
            #expect(body.resumedBytes == 0)
            // The range asked of day2 was refused as another file's, and the whole of it fetched.
            #expect(origin.requests(for: "/img/day2.jpg").count == 2)
            #expect(origin.requests(for: "/img/day2.jpg").last?.headers["range"] == nil)
        }
    }

    /// A 200 is the whole file: one that says it is a part (`Content-Range`),
    /// as a server answered a resume, had the tail stored as the whole file.
    @Test func aWholeResponseThatSaysItIsAPartIsRefused() async throws {
        _ = try await withEngine(retries: 1) { origin, engine, directory in
            let tail = fixtureBytes(count: 100, seed: 34)
            origin.route("/part.jpg") { _ in
                OriginResponse(status: 200, headers: [("Content-Range", "bytes 900-999/1000")], body: tail)
            }
            // A 200 whose range is the whole file is one, as is one whose range says nothing.
            let whole = fixtureBytes(count: 100, seed: 35)
            origin.route("/whole.jpg") { _ in
                OriginResponse(status: 200, headers: [("Content-Range", "bytes 0-99/100")], body: whole)
            }

            let refused = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/part.jpg")) }

            #expect(refused?.kind == .protocolViolation)
            #expect(refused?.message.hasPrefix("the server answered 200 with a part of the file (Content-Range: bytes 900-999/1000)") == true,
                    "\(String(describing: refused))")
            #expect(leftovers(directory).isEmpty)
            let stored = try await engine.download(origin.url("/whole.jpg"))
            #expect(stored.sha256 == sha256(whole))
            let unsized = fixtureBytes(count: 100, seed: 36)
            origin.route("/unsized.jpg") { _ in
                OriginResponse(status: 200, headers: [("Content-Range", "bytes 0-99/*")], body: unsized)
            }
            let unsizedStored = try await engine.download(origin.url("/unsized.jpg"))
            #expect(unsizedStored.sha256 == sha256(unsized))
        }
    }

    /// A resume answered by a 200 that holds the rest of the file: one whose
    /// range has no total (`bytes N-M/*`) or cannot be read, or one with no
    /// range but just as many bytes as were left, is refused, and the file
    /// is asked for whole (each had the tail stored as the file).
    /// (The server sends the range asked, or, `fromHeld`, what follows the bytes held.)
    @Test(arguments: ["bytes %d-499999/*", "bytes=%d-499999", ""], [false, true])
    func aTailSentAsA200IsNotTheFile(contentRange: String, fromHeld: Bool) async throws {
        try await withOrigin { origin, directory in
            let path = "/tail.jpg"
            let (content, partials, held) = try await leavePartial(origin, directory, path, seed: 54, etag: "\"v1\"")
            origin.route(path) { request in
                guard let askedFrom = askedStart(request) else {
                    return OriginResponse(headers: [("ETag", "\"v2\"")], body: content)
                }
                let start = fromHeld ? held : askedFrom
                let range = contentRange.isEmpty ? [] : [("Content-Range", contentRange.replacingOccurrences(of: "%d", with: "\(start)"))]
                return OriginResponse(status: 200, headers: range, body: content.suffix(from: start))
            }

            let body = try await downloadInNewRun(origin.url(path), partials: partials)

            #expect(body.sha256 == sha256(content))
            #expect(origin.requests(for: path).suffix(2).map { $0.header("range") } == [resumeRange(from: held), nil])
        }
    }

    /// A 206 that carries the whole file, though no range was asked, is the
    /// file (it was refused, and asked again five times to the same answer);
    /// one with a part of it is still refused.
    @Test func a206WithTheWholeFileUnaskedIsTheFile() async throws {
        _ = try await withEngine(retries: 0) { origin, engine, _ in
            let whole = fixtureBytes(count: 5002, seed: 37)
            origin.route("/all.jpg") { _ in
                OriginResponse(status: 206, headers: [("Content-Range", "bytes 0-5001/5002"), ("ETag", "\"w1\"")], body: whole)
            }
            origin.route("/some.jpg") { _ in
                OriginResponse(status: 206, headers: [("Content-Range", "bytes 0-999/5002")], body: whole.prefix(1000))
            }

            let body = try await engine.download(origin.url("/all.jpg"))
            #expect(body.sha256 == sha256(whole))
            #expect(body.resumedBytes == 0)
            body.file.release()
            let refused = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/some.jpg")) }
            #expect(refused?.message == "server answered with a range that was not asked for")
        }
    }

    /// The same after a first answer cut off (without a validator, its bytes
    /// are held but no range is asked): the retry's whole-file 206 is the file.
    @Test func a206WithTheWholeFileAfterACutIsTheFile() async throws {
        _ = try await withEngine(retries: 1) { origin, engine, _ in
            let whole = fixtureBytes(count: 50_000, seed: 38)
            let answers = Mutex(0)
            origin.route("/cut.jpg") { _ in
                let count = answers.withLock { $0 += 1; return $0 }
                return count == 1 ? OriginResponse(status: 200, body: whole)
                    : OriginResponse(status: 206, headers: [("Content-Range", "bytes 0-49999/50000")], body: whole)
            }
            origin.setFault("/cut.jpg", .dropAfter(bytes: 20_000), times: 1)

            let body = try await engine.download(origin.url("/cut.jpg"))
            #expect(body.sha256 == sha256(whole))
            #expect(answers.withLock { $0 } == 2)
            body.file.release()
        }
    }

    /// A resume through the same redirect goes on from the bytes held, a
    /// signed link's changing query and host included.
    @Test func aResumeThroughTheSameRedirectGoesOn() async throws {
        _ = try await withEngine { origin, engine, _ in
            let photo = fixtureBytes(count: 600_000, seed: 33)
            origin.addResource("/img/photo.jpg", data: photo)
            origin.setFault("/img/photo.jpg", .dropAfter(bytes: 300_000), times: 1)
            let asked = Mutex(0)
            origin.route("/latest.jpg") { _ in
                let count = asked.withLock { count in
                    count += 1
                    return count
                }
                // The first by its address, the next by its name: one file.
                let host = count == 1 ? "127.0.0.1" : "localhost"
                return OriginResponse(status: 302, headers: [
                    ("Location", "http://\(host):\(origin.port)/img/photo.jpg?expires=\(count)&signature=\(count * 7919)")])
            }

            let body = try await engine.download(origin.url("/latest.jpg"))

            #expect(body.sha256 == sha256(photo))
            #expect(body.resumedBytes > 0)
            #expect(origin.requests(for: "/img/photo.jpg").count == 2)
        }
    }

    @Test func moreLargeTransfersThanWriterChunksAllComplete() async throws {
        // 40 large pipelined bodies at once, each holding a chunk while it fills
        // and handing full ones to the writers (a writer that finds the budget
        // spent is shown on its own in HashingWriterTests and WriterPoolTests).
        let count = 40
        _ = try await withEngine(adjust: { $0.maxConcurrentTransfers = count; $0.maxTransfersPerHost = count }) { origin, engine, _ in
            var expected: [String: String] = [:]
            for index in 0..<count {
                let content = fixtureBytes(count: 1_300_000, seed: UInt64(100 + index))
                origin.addResource("/l\(index)", data: content)
                origin.setFault("/l\(index)", .slow(bytesPerSecond: 2_600_000))
                expected[origin.url("/l\(index)")] = sha256(content)
            }
            let hashes = try await withThrowingTaskGroup(of: (String, String).self) { group in
                for url in expected.keys { group.addTask { (url, try await engine.download(url).sha256) } }
                return try await group.reduce(into: [String: String]()) { $0[$1.0] = $1.1 }
            }
            #expect(hashes == expected)
        }
    }

    /// A disk slower than the network: the writers hold every chunk. The
    /// transfer is paused, which is neither a stall nor time against
    /// `--timeout`; the loop goes on serving other transfers and a cancel;
    /// the body resumes when chunks come back.
    @Test(.timeLimit(.minutes(1)))
    func aTransferPausedForWantOfChunksIsNoStallAndGoesOnWhenChunksComeBack() async throws {
        let pool = ChunkPool(byteBudget: 2 * ChunkPool.largest)
        _ = try await withEngine(adjust: { $0.stallTimeout = 1; $0.attemptTimeout = 2 }, chunkPool: pool) { origin, engine, directory in
            // Every chunk of the engine's budget is held, as by writers behind on a slow disk.
            var held: [Chunk] = []
            while let chunk = pool.take(size: ChunkPool.largest) { held.append(chunk) }
            let content = fixtureBytes(count: 1_000_000, seed: 61)
            origin.addResource("/paused.bin", data: content)
            origin.addResource("/cancelled.bin", data: fixtureBytes(count: 1_000_000, seed: 62))
            origin.route("/api") { _ in .json(#"{"ok":true}"#) }
            let paused = Task { try await engine.download(origin.url("/paused.bin")) }
            let cancelled = Task { try await engine.download(origin.url("/cancelled.bin")) }
            while origin.requests(for: "/paused.bin").isEmpty || origin.requests(for: "/cancelled.bin").isEmpty {
                try await Task.sleep(for: .milliseconds(20))
            }
            // Three times the stall timeout with no byte taken, past the attempt's
            // time limit too: a stall or a timeout would have been retried by now.
            try await Task.sleep(for: .seconds(3))
            // The loop thread is not held up: an answer kept in memory arrives, and a cancel ends its transfer.
            let answer = try await engine.fetch(origin.url("/api"))
            #expect(answer.status == 200)
            cancelled.cancel()
            await #expect(throws: TransferError.cancelled) { try await cancelled.value }
            #expect(pool.bytesInUse == held.reduce(0) { $0 + $1.size })
            for chunk in held { pool.give(chunk) }
            let body = try await paused.value
            #expect(body.sha256 == sha256(content))
            #expect(body.attempts == 1)
            #expect(origin.requests(for: "/paused.bin").count == 1)
            withExtendedLifetime(directory) {}
        }
        #expect(pool.bytesInUse == 0)
    }

    /// A stop keeps the whole blocks that arrived of a transfer whose earlier
    /// chunks are all written (a slow network, not a slow disk): the chunk
    /// being filled was dropped with the queued ones, and at 20 KB/s a
    /// Ctrl-C threw away up to 256 KiB, 13 s of download.
    @Test func aStopKeepsTheBlocksThatArrivedOfASlowTransfer() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/slow.wav", data: fixtureBytes(count: 1_000_000, seed: 81))
            origin.setFault("/slow.wav", .stallAfter(bytes: 100_000, seconds: 60), times: 1)
            var configuration = configuration()
            configuration.stallTimeout = 120
            let partials = directory.appending("tmp")
            let engine = try TransferEngine(configuration: configuration, partialDirectory: partials)
            let arrived = Task { () -> Bool in
                for await event in engine.events {
                    if case .progress(let snapshot) = event, snapshot.bytesReceived >= 100_000 { return true }
                }
                return false
            }
            let download = Task { try await engine.download(origin.url("/slow.wav")) }
            let sawAll = await arrived.value
            download.cancel()
            let result = await download.result
            engine.shutdown()

            #expect(sawAll)
            guard case .failure(let error as TransferError) = result else { Issue.record("not cancelled: \(result)"); return }
            #expect(error.kind == .cancelled)
            let names = partialDirectoryFiles(partials)
            let partial = try #require(names.first { $0.hasSuffix(".part") }, "\(names)")
            #expect(names.contains(partial + ".validator"))
            let size = try FileManager.default.attributesOfItem(atPath: partials + "/" + partial)[.size] as? Int
            #expect(size == resumeOffset(afterCutAt: 100_000, in: partials))
        }
    }

    @Test func aDroppedConnectionResumesWithRangeAndIfRange() async throws {
        let events = try await withEngine { origin, engine, directory in
            let content = fixtureBytes(count: 1_000_000, seed: 2)
            origin.addResource("/big.bin", data: content)
            origin.setFault("/big.bin", .dropAfter(bytes: 400_000), times: 1)

            let body = try await engine.download(origin.url("/big.bin"))

            // From the last block boundary before the cut, where direct I/O is used.
            let offset = resumeOffset(afterCutAt: 400_000, in: directory.path)
            let requests = origin.requests(for: "/big.bin")
            #expect(requests.count == 2)
            #expect(requests[1].header("range") == resumeRange(from: offset))
            #expect(requests[1].header("if-range") != nil)
            #expect(requests[1].header("if-range") == requests[0].header("if-range") ?? body.etag)
            #expect(body.resumedBytes == offset)
            #expect(body.sha256 == sha256(content))
            #expect(body.attempts == 2)
        }
        #expect(events.contains { if case .retrying(_, _, 2, _, _) = $0 { true } else { false } })
    }

    @Test func retryAfterOn429IsHonoured() async throws {
        let events = try await withEngine { origin, engine, _ in
            origin.addResource("/limited", data: fixtureBytes(count: 1000, seed: 3))
            origin.setFault("/limited", .status(429, retryAfter: 1), times: 1)

            let body = try await engine.download(origin.url("/limited"))

            #expect(body.size == 1000)
            #expect(origin.requests(for: "/limited").count == 2)
        }
        let delays = events.compactMap { event -> Double? in
            if case .retrying(_, _, _, let delay, let reason) = event, reason.kind == .http(status: 429) { return delay }
            return nil
        }
        // The second asked for, and at most a tenth of it more (the spread).
        #expect(delays.count == 1)
        #expect(delays.allSatisfy { $0 >= 1 && $0 <= 1.1 }, "\(delays)")
    }

    /// A 429 that says when to come back uses up no retry: with one retry
    /// allowed, three such answers in a row still end in the body (they
    /// had failed the item after two).
    @Test func aRetryAfterUsesUpNoRetry() async throws {
        _ = try await withEngine(retries: 1) { origin, engine, _ in
            origin.addResource("/busy.jpg", data: fixtureBytes(count: 1000, seed: 57))
            origin.setFault("/busy.jpg", .status(429, retryAfter: 1), times: 3)

            let body = try await engine.download(origin.url("/busy.jpg"))

            #expect(body.size == 1000)
            #expect(origin.requests(for: "/busy.jpg").count == 4)
        }
    }

    /// Without a Retry-After, a 429 is a failed attempt like any other.
    @Test func a429WithoutRetryAfterUsesUpARetry() async throws {
        _ = try await withEngine(retries: 1) { origin, engine, _ in
            origin.addResource("/busy.jpg", data: fixtureBytes(count: 1000, seed: 58))
            origin.setFault("/busy.jpg", .status(429), times: 3)

            let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/busy.jpg")) }

            #expect(error?.message.hasSuffix("(after 2 attempts)") == true, "\(error?.message ?? "")")
            #expect(origin.requests(for: "/busy.jpg").count == 2)
        }
    }

    /// A server that drops each idle connection just as it is reused: libcurl
    /// sends the request again on a fresh connection, but counts those
    /// retries in the easy handle for good and stops after five. Handles
    /// are reused, so from the sixth such race on every URL failed (a
    /// server closing each connection unannounced failed 1 URL in 7 under
    /// `--retries 0`, where curl failed none).
    @Test func aConnectionTheServerDroppedAsItWasReusedFailsNoURL() async throws {
        _ = try await withEngine(retries: 0, adjust: { $0.maxConcurrentTransfers = 1 }) { origin, engine, _ in
            var urls: [String] = []
            for index in 0..<12 {
                origin.addResource("/k\(index).jpg", data: fixtureBytes(count: 3000, seed: UInt64(700 + index)))
                origin.setFault("/k\(index).jpg", .resetNextRequest)
                urls.append(origin.url("/k\(index).jpg"))
            }
            for url in urls {
                let body = try await engine.download(url)
                #expect(body.size == 3000)
                body.file.release()
            }
            // Each after the first was asked on the connection the server dropped
            // (met with a reset, unrecorded), then on a new one.
            #expect(Set(origin.requests().map(\.connection)).count == 12)
        }
    }

    /// A URL that fails after retries that used up none says how many
    /// there were: "after 4 attempts" under `--retries 1` read as the option ignored.
    @Test func theRetriesThatUsedUpNoneAreSaidWhenTheURLFails() async throws {
        _ = try await withEngine(retries: 1) { origin, engine, _ in
            let answered = Mutex(0)
            origin.route("/later-broken") { _ in
                let count = answered.withLock { $0 += 1; return $0 }
                return count <= 2 ? OriginResponse(status: 429, headers: [("Retry-After", "1")]) : OriginResponse(status: 500)
            }
            let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/later-broken")) }
            #expect(error?.message == "HTTP 500 Internal Server Error (after 4 attempts, 2 of them not counted against --retries)")
            #expect(answered.withLock { $0 } == 4)
        }
    }

    @Test func a503IsRetriedUntilItPasses() async throws {
        _ = try await withEngine { origin, engine, _ in
            origin.addResource("/flaky", data: Data("ok".utf8))
            origin.setFault("/flaky", .status(503), times: 2)
            let body = try await engine.download(origin.url("/flaky"))
            #expect(body.attempts == 3)
        }
    }

    /// A response with two different `Content-Length`s (libcurl frames the
    /// body by the last, here the shorter) is refused, not stored cut short.
    @Test func twoDifferentLengthsAreRefusedNotStoredCutShort() async throws {
        _ = try await withEngine(retries: 0) { origin, engine, directory in
            origin.addResource("/doubled.jpg", data: fixtureBytes(count: 5000, seed: 61))
            origin.setFault("/doubled.jpg", .secondLength(bytes: 4000))
            let doubled = TransferError(.protocolViolation, "the server gave two different lengths (Content-Length: 5000, 4000)")
            await #expect(throws: doubled) { try await engine.download(origin.url("/doubled.jpg")) }
            #expect(leftovers(directory).isEmpty)
            // An answer read into memory (an API's) is held to the same rule.
            await #expect(throws: doubled) { try await engine.fetch(origin.url("/doubled.jpg")) }
        }
    }

    /// A `Content-Length` that is no count of bytes is refused: libcurl read
    /// `1e3` as 1 and 2^63 as no length, and the body, cut short, was stored as whole.
    @Test func aLengthThatIsNoCountOfBytesIsRefusedNotStoredCutShort() async throws {
        _ = try await withEngine(retries: 0) { origin, engine, directory in
            origin.addResource("/odd.jpg", data: fixtureBytes(count: 5000, seed: 63))
            // libcurl refuses a negative one itself ("Invalid Content-Length: value"), said as the others are.
            origin.setFault("/odd.jpg", .lengthText("-5000"))
            let negative = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/odd.jpg")) }
            #expect(negative?.kind == .protocolViolation)
            #expect(negative?.message.hasPrefix("the server gave a length that is no count of bytes (libcurl: Invalid Content-Length") == true,
                    "\(negative?.message ?? "")")
            for text in ["1e3", "9223372036854775808", "99999999999999999999999", "5000 bytes"] {
                origin.setFault("/odd.jpg", .lengthText(text))
                let refused = TransferError(.protocolViolation,
                                            "the server gave a length that is no count of bytes (Content-Length: \(text))")
                await #expect(throws: refused) { try await engine.download(origin.url("/odd.jpg")) }
                await #expect(throws: refused) { try await engine.fetch(origin.url("/odd.jpg")) }
            }
            #expect(leftovers(directory).isEmpty)
        }
    }

    /// A chunked body is read by its chunks, as curl reads it; with a
    /// `Content-Length` beside it that the chunks do not add up to (RFC 9112:
    /// "ought to be handled as an error"), it is refused, not stored: a proxy
    /// that chunked an upstream answer cut short sent half a photo.
    @Test func aChunkedBodyIsStoredOnlyWhenItsContentLengthAgrees() async throws {
        _ = try await withEngine(retries: 0) { origin, engine, directory in
            let bytes = fixtureBytes(count: 150_000, seed: 62)
            origin.addResource("/chunked.jpg", data: bytes)
            origin.setFault("/chunked.jpg", .chunked(claimedLength: 200_000), times: 1)
            let short = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/chunked.jpg")) }
            #expect(short == TransferError(.protocolViolation, "the server's chunks held 150000 bytes where its Content-Length said 200000"))
            origin.setFault("/chunked.jpg", .chunked(claimedLength: 100_000), times: 1)
            let long = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/chunked.jpg")) }
            #expect(long?.kind == .protocolViolation)
            #expect(leftovers(directory).isEmpty)

            origin.setFault("/chunked.jpg", .chunked(claimedLength: 150_000), times: 1)
            let agreeing = try await engine.download(origin.url("/chunked.jpg"))
            #expect(FileManager.default.contents(atPath: agreeing.path) == bytes)
            #expect(agreeing.sha256 == sha256(bytes))
            origin.setFault("/chunked.jpg", .chunked(claimedLength: nil), times: 1)
            #expect(try await engine.download(origin.url("/chunked.jpg")).size == 150_000)
        }
    }

    @Test func notFoundIsFinalAndLeavesNothingBehind() async throws {
        _ = try await withEngine { origin, engine, directory in
            await #expect(throws: TransferError(.http(status: 404), "HTTP 404 Not Found")) {
                try await engine.download(origin.url("/missing.jpg"))
            }
            #expect(origin.requests(for: "/missing.jpg").count == 1)
            #expect(leftovers(directory).isEmpty)
        }
    }

    /// Serves `size` bytes at `path`, and runs once, without retries, into a
    /// connection dropped after `cutAt` bytes: the partial that run keeps is
    /// in the returned directory.
    private func partialLeftByARun(at path: String, size: Int, cutAt: Int, seed: UInt64, origin: TestOrigin,
                                   in directory: TemporaryDirectory) async throws -> (content: Data, partials: String) {
        let content = fixtureBytes(count: size, seed: seed)
        origin.addResource(path, data: content)
        origin.setFault(path, .dropAfter(bytes: cutAt), times: 1)
        let partials = directory.appending("tmp")
        try await failOnce(origin.url(path), partials: partials)
        #expect(leftovers(directory).contains { $0.hasSuffix(".part") })
        return (content, partials)
    }

    @Test func theNextRunResumesAPartialLeftByTheLastOne() async throws {
        try await withOrigin { origin, directory in
            // A first run gives up after the drop (no retries) and keeps the partial.
            let (content, partials) = try await partialLeftByARun(at: "/song.mp3", size: 800_000, cutAt: 300_000, seed: 4,
                                                                  origin: origin, in: directory)

            // The next run asks only for the rest.
            let body = try await downloadInNewRun(origin.url("/song.mp3"), partials: partials)
            let offset = resumeOffset(afterCutAt: 300_000, in: directory.path)
            #expect(origin.requests(for: "/song.mp3").last?.header("range") == resumeRange(from: offset))
            #expect(body.resumedBytes == offset)
            #expect(body.sha256 == sha256(content))
            // Its first bytes came in the earlier run: none are kept, a reader looks at the file.
            #expect(body.opening == nil)
            // The finished body keeps its validator until it is handed off (stored), then only the body is left.
            let name = String(body.path.dropFirst(partials.count + 1))
            #expect(leftovers(directory).sorted() == [name, name + ".validator"])
            body.file.release()
            #expect(leftovers(directory) == [name])
        }
    }

    @Test func aBodyCompleteButNotStoredWhenTheRunDiedIsNotFetchedAgain() async throws {
        try await withOrigin { origin, directory in
            // A whole number of blocks: a partial is kept to whole blocks (where
            // direct I/O is used), and this one is kept whole.
            let content = fixtureBytes(count: 704_512, seed: 45)
            origin.addResource("/whole.flac", data: content)
            let partials = directory.appending("tmp")
            // A run that got the whole body and died before storing it: what it leaves in tmp/.
            var left: [(path: String, bytes: Data)] = []
            var received: String?
            try await withTransferEngine(configuration: configuration(), partialDirectory: partials) { engine in
                let body = try await engine.download(origin.url("/whole.flac"))
                received = body.etag
                for name in partialDirectoryFiles(partials) {
                    left.append((partials + "/" + name, try Data(contentsOf: URL(fileURLWithPath: partials + "/" + name))))
                }
                body.file.release()
            }
            #expect(left.map { URL(fileURLWithPath: $0.path).pathExtension }.sorted() == ["part", "validator"])
            for file in left { try file.bytes.write(to: URL(fileURLWithPath: file.path)) }

            // The next run asks for the last bytes held again: the 206 that sends them, as they are held, completes it.
            let body = try await downloadInNewRun(origin.url("/whole.flac"), partials: partials)
            let requests = origin.requests(for: "/whole.flac")
            #expect(requests.count == 2)
            #expect(requests.last?.header("range") == "bytes=700416-")
            #expect(body.resumedBytes == 704_512)
            #expect(body.size == 704_512)
            #expect(body.sha256 == sha256(content))
            // What is known of the held bytes is recorded: the validator the first run received.
            #expect(received?.hasPrefix("\"") == true)
            #expect(requests.last?.header("if-range") == received)
            #expect(body.etag == received)
        }
    }

    /// Leaves in `partials` the `bytes` of `url` a run held under ETag "v1", of a body whose length was not given (it came chunked).
    private func leaveUnsizedPartial(_ bytes: Data, of url: String, in partials: String) throws {
        let key = PartialFile.key(for: url)
        let shard = PartialFile.shardDirectory(partials, key: key)
        try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
        try bytes.write(to: URL(fileURLWithPath: "\(shard)/\(key).part"))
        try Data("\(url)\n\"v1\"\n\n\n".utf8).write(to: URL(fileURLWithPath: "\(shard)/\(key).part.validator"))
    }

    /// Leaves in `partials` what a run killed after receiving all of `bytes` from `url` leaves: the body and its validator.
    private func leaveCompleteBody(_ bytes: Data, of url: String, validator: String, in partials: String) throws {
        let key = PartialFile.key(for: url)
        let shard = PartialFile.shardDirectory(partials, key: key)
        try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
        let path = "\(shard)/\(key).part"
        try bytes.write(to: URL(fileURLWithPath: path))
        // The length the response gave comes with its validator.
        try Data("\(url)\n\(validator)\n\(bytes.count)\n".utf8).write(to: URL(fileURLWithPath: path + ".validator"))
    }

    /// A whole body a run held when it stopped (every byte there, its
    /// validator recorded, the run killed before it stored it) is proven
    /// whole by the 416 of the next run and stored with the content type and
    /// coding it came with: the 416 describes no body, and it was stored as
    /// unlabelled (a brotli body labelled a photo was then not recognised as
    /// compressed). A validator file of an older version, without them, still resumes.
    @Test func aBodyProvenWholeByA416KeepsTheLabelsItCameWith() async throws {
        try await withOrigin { origin, directory in
            // (Whole 4 KiB blocks: a partial written with direct I/O is resumed from the last one.)
            let content = fixtureBytes(count: 303_104, seed: 48)
            let partials = directory.appending("tmp")
            try FileManager.default.createDirectory(atPath: partials, withIntermediateDirectories: true)
            PartialFile.makeShardDirectories(in: partials)
            let cases: [(path: String, labels: BodyLabels?)] = [
                ("/kept.jpg", BodyLabels(contentType: "image/jpeg")),
                ("/coded.jpg", BodyLabels(contentType: "image/jpeg", contentEncoding: "br")),
                ("/older.jpg", nil),
            ]
            for (path, recorded) in cases {
                let url = origin.url(path)
                origin.route(path) { request in
                    request.header("range") == nil
                        ? OriginResponse(status: 200, headers: [("ETag", "\"v1\""), ("Content-Type", "image/jpeg")], body: content)
                        : OriginResponse(status: 416, headers: [("Content-Range", "bytes */303104"), ("ETag", "\"v1\"")])
                }
                if let recorded {
                    let partial = try PartialFile(directory: partials, url: url)
                    partial.recordValidator("\"v1\"", total: 303_104, route: "", labels: recorded)
                    #expect(content.withUnsafeBytes { write(partial.descriptor, $0.baseAddress, $0.count) } == content.count)
                    partial.close(discard: false)
                } else {
                    try leaveCompleteBody(content, of: url, validator: "\"v1\"", in: partials)
                }

                let body = try await downloadInNewRun(url, partials: partials)

                #expect(body.sha256 == sha256(content))
                #expect(body.contentType == recorded?.contentType, "\(path)")
                #expect(body.contentEncoding == recorded?.contentEncoding, "\(path)")
                #expect(origin.requests(for: path).map { $0.header("range") != nil } == [true], "\(path): proven whole, not fetched again")
            }
            // A run's own writer records them from the response, as it records the validator.
            let (_, cutPartials, _) = try await leavePartial(origin, directory, "/cut.jpg", seed: 49, contentType: "image/jpeg", etag: "\"v1\"")
            let key = PartialFile.key(for: origin.url("/cut.jpg"))
            let validatorFile = "\(PartialFile.shardDirectory(cutPartials, key: key))/\(key).part.validator"
            #expect(PartialFile.readValidatorFile(validatorFile)?.hasSuffix("\n\"v1\"\n500000\n\nimage/jpeg\n\n") == true)
        }
    }

    @Test func a416FromAServerThatIgnoresIfRangeDoesNotKeepAStaleBody() async throws {
        try await withOrigin { origin, directory in
            let old = fixtureBytes(count: 400_000, seed: 46)
            let new = fixtureBytes(count: 400_000, seed: 47)
            // The file changed (same length, new ETag); this server answers a range past the end with 416 whatever If-Range says.
            origin.route("/same-size.bin") { request in
                if request.header("range") != nil {
                    return OriginResponse(status: 416, headers: [("ETag", "\"v2\""), ("Content-Range", "bytes */400000")])
                }
                return OriginResponse(status: 200, headers: [("ETag", "\"v2\"")], body: new)
            }
            let partials = directory.appending("tmp")
            try leaveCompleteBody(old, of: origin.url("/same-size.bin"), validator: "\"v1\"", in: partials)

            let body = try await downloadInNewRun(origin.url("/same-size.bin"), partials: partials)
            #expect(body.sha256 == sha256(new))
            #expect(body.resumedBytes == 0)
        }
    }

    /// A server that answers a resume with an error a plain request does not
    /// get (412 or 304 from one that reads `If-Range` as `If-Match` or
    /// `If-None-Match`, 400 or 403 from a firewall's rule, 501 from one
    /// without ranges) is asked for the whole body once, using up no retry:
    /// the partial, kept a week, failed the URL on every run.
    @Test(arguments: [412, 304, 400, 403, 501])
    func aServerThatRefusesResumesIsAskedForTheWholeBodyOnce(status: Int) async throws {
        try await withOrigin { origin, directory in
            let path = "/refuses-ranges.jpg"
            let (content, partials, held) = try await leavePartial(origin, directory, path, seed: 50, etag: "\"v1\"")
            origin.route(path) { request in
                request.header("range") != nil ? OriginResponse(status: status)
                    : OriginResponse(headers: [("ETag", "\"v1\"")], body: content)
            }

            let body = try await withTransferEngine(configuration: configuration(retries: 0), partialDirectory: partials) { engine in
                try await engine.download(origin.url(path))
            }

            #expect(body.sha256 == sha256(content))
            #expect(body.resumedBytes == 0)
            #expect(origin.requests(for: path).suffix(2).map { $0.header("range") } == [resumeRange(from: held), nil])
        }
    }

    /// A server that fails every resume with a server error, and would send
    /// the file to a plain request, gets one when the retries run out.
    @Test(arguments: [0, 2])
    func serverErrorsToEveryResumeEndInAPlainRequest(retries: Int) async throws {
        try await withOrigin { origin, directory in
            let path = "/ranges-fail.jpg"
            let (content, partials, _) = try await leavePartial(origin, directory, path, seed: 52, etag: "\"v1\"")
            origin.route(path) { request in
                request.header("range") != nil ? OriginResponse(status: 500)
                    : OriginResponse(headers: [("ETag", "\"v1\"")], body: content)
            }
            let before = origin.requests(for: path).count

            let body = try await withTransferEngine(configuration: configuration(retries: retries), partialDirectory: partials) { engine in
                try await engine.download(origin.url(path))
            }

            #expect(body.sha256 == sha256(content))
            let requests = origin.requests(for: path).dropFirst(before)
            #expect(requests.map { $0.header("range") == nil } == Array(repeating: false, count: retries + 1) + [true])
        }
    }

    /// Asked for the whole body after a refused resume, a server that
    /// refuses that too leaves the bytes held as they were, for a later run.
    @Test func thePartStaysWhenTheWholeBodyIsRefusedToo() async throws {
        try await withOrigin { origin, directory in
            let path = "/expired.jpg"
            let (content, partials, held) = try await leavePartial(origin, directory, path, seed: 53, etag: "\"v1\"")
            origin.route(path) { _ in OriginResponse(status: 403) }
            try await withTransferEngine(configuration: configuration(retries: 0), partialDirectory: partials) { engine in
                await #expect(throws: TransferError.self) { try await engine.download(origin.url(path)) }
            }
            #expect(origin.requests(for: path).suffix(2).map { $0.header("range") } == [resumeRange(from: held), nil])

            origin.route(path) { request in
                request.header("range") == resumeRange(from: held) && request.header("if-range") == "\"v1\""
                    ? OriginResponse(status: 206, headers: [("ETag", "\"v1\""), ("Content-Range", "bytes \(held - 4096)-499999/500000")],
                                     body: content.suffix(from: held - 4096))
                    : OriginResponse(status: 500)
            }
            let body = try await downloadInNewRun(origin.url(path), partials: partials)
            #expect(body.sha256 == sha256(content))
            #expect(body.resumedBytes == Int64(held))
        }
    }

    /// Validators that name no version are not resumed by: an empty ETag
    /// (some frameworks send `""` for every response), or a date before 1990
    /// (a tree whose files all carry 1970); a body cut off starts over.
    @Test(arguments: [("ETag", "\"\""), ("Last-Modified", "Thu, 01 Jan 1970 00:00:01 GMT")])
    func aValidatorThatNamesNoVersionIsNotResumedBy(field: String, value: String) async throws {
        _ = try await withEngine { origin, engine, _ in
            let content = fixtureBytes(count: 600_000, seed: 55)
            origin.route("/placeholder.wav") { _ in
                OriginResponse(headers: [(field, value), ("Date", HTTPDate.format(Date()))], body: content)
            }
            origin.setFault("/placeholder.wav", .dropAfter(bytes: 300_000), times: 1)

            let body = try await engine.download(origin.url("/placeholder.wav"))

            #expect(body.sha256 == sha256(content))
            #expect(body.resumedBytes == 0)
            #expect(origin.requests(for: "/placeholder.wav").map { $0.header("range") } == [nil, nil])
        }
    }

    /// A validator file whose validator holds a control character (written
    /// by hand, or damaged) is not sent as `If-Range`: the partial starts over.
    @Test func aValidatorWithAControlCharacterIsNotSent() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 400_000, seed: 56)
            origin.addResource("/crafted.jpg", data: content)
            let partials = directory.appending("tmp")
            try leaveCompleteBody(content.prefix(200_000), of: origin.url("/crafted.jpg"), validator: "\"v1\rX-Injected: 1\"", in: partials)

            let body = try await downloadInNewRun(origin.url("/crafted.jpg"), partials: partials)

            #expect(body.sha256 == sha256(content))
            #expect(body.resumedBytes == 0)
            let request = try #require(origin.requests(for: "/crafted.jpg").last)
            #expect(request.header("range") == nil && request.header("if-range") == nil && request.header("x-injected") == nil)
        }
    }

    /// A file replaced by another of the same length under the same ETag (a
    /// deploy that keeps sizes and times, and an ETag made of them): the 206
    /// vouches for the new bytes, but the last bytes held, asked for again,
    /// come back other than held, and the file starts over. One version's
    /// head was stitched to the other's tail, stored with a digest that
    /// matched the mix.
    @Test func aFileReplacedUnderTheSameValidatorIsNotStitched() async throws {
        try await withOrigin { origin, directory in
            let path = "/same-size.wav"
            let (_, partials, held) = try await leavePartial(origin, directory, path, seed: 57, etag: "\"1-500000\"")
            let replacement = fixtureBytes(count: 500_000, seed: 58)
            origin.addResource(path, data: replacement, contentType: "image/jpeg", etag: "\"1-500000\"")

            let body = try await downloadInNewRun(origin.url(path), partials: partials)

            #expect(body.sha256 == sha256(replacement))
            #expect(body.resumedBytes == 0)
            #expect(origin.requests(for: path).suffix(2).map { $0.header("range") } == [resumeRange(from: held), nil])
        }
    }

    /// A file shrunk under the same validator to end within the bytes sent
    /// again (its first length was not known: it came chunked): the 206 is
    /// refused and the file asked for whole. Taken, the body ended within
    /// the bytes held, and the URL failed on every run.
    @Test func aFileShrunkBelowTheBytesHeldStartsOver() async throws {
        try await withOrigin { origin, directory in
            let path = "/shrunk.wav"
            let url = origin.url(path)
            let partials = directory.appending("tmp")
            let old = fixtureBytes(count: 300_000, seed: 59)
            // Held: 299,008 bytes of a body whose length was not given.
            try leaveUnsizedPartial(old.prefix(299_008), of: url, in: partials)
            // Cut short (a truncated copy): its bytes are the held ones up to its end.
            let shrunk = old.prefix(297_000)
            origin.route(path) { answer($0, from: shrunk, etag: "\"v1\"") }

            let body = try await downloadInNewRun(url, partials: partials)

            #expect(body.sha256 == sha256(shrunk))
            #expect(origin.requests(for: path).map { $0.header("range") } == [resumeRange(from: 299_008), nil])
        }
    }

    /// After a refused resume, the whole body asked for comes, and is cut
    /// off: the next attempt resumes it, under its own validator (it asked
    /// for the whole body again, and again).
    @Test func aWholeBodyAskedForAfterARefusedResumeIsResumedInItsTurn() async throws {
        try await withOrigin { origin, directory in
            let path = "/refused-then-cut.jpg"
            let (_, partials, _) = try await leavePartial(origin, directory, path, seed: 61, etag: "\"v1\"")
            let new = fixtureBytes(count: 500_000, seed: 62)
            origin.route(path) { request in
                request.header("if-range") == "\"v1\"" ? OriginResponse(status: 412) : answer(request, from: new, etag: "\"v2\"")
            }
            // The 412, then the whole body, cut off.
            origin.setFault(path, .dropAfter(bytes: 300_000), times: 2)

            let body = try await downloadInNewRun(origin.url(path), partials: partials)

            #expect(body.sha256 == sha256(new))
            let held = resumeOffset(afterCutAt: 300_000, in: directory.path)
            #expect(origin.requests(for: path).suffix(2).map { $0.header("range") } == [nil, resumeRange(from: held)])
            #expect(body.resumedBytes == Int64(held))
        }
    }

    /// Two attempts cut off in one run, the second within a block of new
    /// bytes: the bytes kept for the next resume's check end where the body
    /// does, without the first attempt's bytes that were dropped (cut to a
    /// block). They were kept, and the third attempt's check failed: the
    /// whole body was fetched again.
    @Test func aSecondCutSoonAfterTheFirstStillResumes() async throws {
        _ = try await withEngine { origin, engine, directory in
            let content = fixtureBytes(count: 800_000, seed: 63)
            let requests = Mutex(0)
            origin.route("/twice.wav") { request in
                let number = requests.withLock { count in
                    count += 1
                    return count
                }
                // The second request's answer is cut 2,000 bytes past the 4 KiB sent again.
                if number == 1 { origin.setFault("/twice.wav", .dropAfter(bytes: 4_096 + 2_000), times: 1) }
                return answer(request, from: content, etag: "\"v1\"")
            }
            origin.setFault("/twice.wav", .dropAfter(bytes: 300_000), times: 1)

            let body = try await engine.download(origin.url("/twice.wav"))

            #expect(body.sha256 == sha256(content))
            #expect(body.resumedBytes > 300_000, "\(body.resumedBytes)")
            #expect(origin.requests(for: "/twice.wav").count == 3)
        }
    }

    /// A body whose first length was not given (it came chunked), cut, and
    /// the resume answered by a 200 of the rest: from the start asked (its
    /// first bytes are the last ones held), or from the bytes held under the
    /// same validator (shorter than what is held of it). Each was stored as
    /// the file. (From the bytes held with no validator, nothing tells.)
    @Test(arguments: [(false, false), (false, true), (true, true)])
    func aTailSentAsA200AfterAChunkedStartIsNotTheFile(fromHeld: Bool, sameETag: Bool) async throws {
        try await withOrigin { origin, directory in
            let path = "/chunked-then-tail.bin"
            let url = origin.url(path)
            let partials = directory.appending("tmp")
            let content = fixtureBytes(count: 1_000_000, seed: 64)
            // Held: 598,016 bytes of a body whose length was not given.
            try leaveUnsizedPartial(content.prefix(598_016), of: url, in: partials)
            origin.route(path) { request in
                guard let start = askedStart(request) else { return OriginResponse(headers: [("ETag", "\"v1\"")], body: content) }
                return OriginResponse(headers: sameETag ? [("ETag", "\"v1\"")] : [],
                                      body: content.suffix(from: fromHeld ? 598_016 : start))
            }

            let body = try await downloadInNewRun(url, partials: partials)

            #expect(body.sha256 == sha256(content))
            #expect(origin.requests(for: path).map { $0.header("range") } == [resumeRange(from: 598_016), nil])
        }
    }

    /// A range answer that gives no length of its own ends with its
    /// connection, so a break looks like its end: what came is kept, and the
    /// next attempt resumes from it (it was dropped, and the whole body
    /// fetched again).
    @Test func aRangeAnswerOfNoLengthCutShortIsResumedAgain() async throws {
        try await withOrigin { origin, directory in
            let path = "/no-length.wav"
            let (content, partials, held) = try await leavePartial(origin, directory, path, seed: 65, etag: "\"v1\"")
            // The 4 KiB sent again and 50,000 bytes more, then the connection goes.
            origin.setFault(path, .noLength(dropAfter: 4_096 + 50_000), times: 1)

            let body = try await downloadInNewRun(origin.url(path), partials: partials)

            #expect(body.sha256 == sha256(content))
            let ranges = origin.requests(for: path).dropFirst().map { $0.header("range") }
            #expect(ranges.count == 2 && ranges.first == resumeRange(from: held) && ranges.last != nil, "\(ranges)")
            #expect(body.resumedBytes > Int64(held + 40_000), "\(body.resumedBytes)")
        }
    }

    /// A 404 to a resume is the URL's answer: final, at once.
    @Test func a404ToAResumeIsFinal() async throws {
        try await withOrigin { origin, directory in
            let path = "/gone.jpg"
            let (_, partials, _) = try await leavePartial(origin, directory, path, seed: 51, etag: "\"v1\"")
            origin.route(path) { _ in OriginResponse(status: 404) }
            let before = origin.requests(for: path).count

            try await withTransferEngine(configuration: configuration(retries: 0), partialDirectory: partials) { engine in
                await #expect(throws: TransferError.self) { try await engine.download(origin.url(path)) }
            }

            #expect(origin.requests(for: path).count == before + 1)
        }
    }

    @Test func aBodyHeldWholeIsStillHeldToTheSizeLimit() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 700_000, seed: 48)
            origin.addResource("/big.wav", data: content)
            let partials = directory.appending("tmp")
            let etag = try #require(try await withTransferEngine(configuration: configuration(), partialDirectory: partials) { engine in
                try await engine.download(origin.url("/big.wav"))
            }.etag)
            try leaveCompleteBody(content, of: origin.url("/big.wav"), validator: etag, in: partials)

            var limited = configuration(retries: 0)
            limited.maxFileSize = 100_000
            let held = partialDirectoryFiles(partials)
            try await withTransferEngine(configuration: limited, partialDirectory: partials) { engine in
                let refused = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/big.wav")) }
                #expect(refused?.kind == .tooLarge)
                // The size held, and why nothing was asked: the line said neither.
                #expect(refused?.message.hasPrefix("larger than the --max-filesize limit of 97.7 KiB (100000 bytes): 6") == true)
                #expect(refused?.message.hasSuffix(" KiB of it held from an earlier run, kept for a run without the limit "
                    + "(nothing asked of the server)") == true, "\(String(describing: refused))")
            }
            // Refused before any request, and kept as it was (it was started
            // over by the 416, and dropped): a run without the limit goes on from it.
            #expect(origin.requests(for: "/big.wav").count == 1)
            #expect(partialDirectoryFiles(partials) == held)
            let body = try await downloadInNewRun(origin.url("/big.wav"), partials: partials)
            #expect(body.sha256 == sha256(content))
            #expect(body.resumedBytes == Int64(resumeOffset(afterCutAt: 700_000, in: directory.path)))
        }
    }

    @Test func aFileChangedOnTheServerIsNeverStitched() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/map.png", data: fixtureBytes(count: 600_000, seed: 5))
            origin.setFault("/map.png", .dropAfter(bytes: 250_000), times: 1)
            let partials = directory.appending("tmp")
            try await failOnce(origin.url("/map.png"), partials: partials)

            // The file changes before the next run: If-Range no longer matches.
            let newContent = fixtureBytes(count: 700_000, seed: 6)
            origin.addResource("/map.png", data: newContent)
            let body = try await downloadInNewRun(origin.url("/map.png"), partials: partials)

            #expect(origin.requests(for: "/map.png").last?.header("if-range") != nil)
            #expect(body.sha256 == sha256(newContent))
            #expect(body.size == 700_000)
            #expect(body.resumedBytes == 0)
        }
    }

    /// A file replaced by a longer one under the same ETag (a server that
    /// derives it from something else, or a file copied with its date kept):
    /// the range answer's length is not the one the held bytes came with,
    /// so they are dropped, not stitched to the new tail.
    @Test func aLengthThatChangedUnderTheSameValidatorIsNeverStitched() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/grow.bin", data: fixtureBytes(count: 1_048_576, seed: 51), etag: "\"same\"")
            origin.setFault("/grow.bin", .dropAfter(bytes: 400_000), times: 1)
            let partials = directory.appending("tmp")
            try await failOnce(origin.url("/grow.bin"), partials: partials)

            let grown = fixtureBytes(count: 1_500_000, seed: 52)
            origin.addResource("/grow.bin", data: grown, etag: "\"same\"")
            let body = try await downloadInNewRun(origin.url("/grow.bin"), partials: partials)

            let requests = origin.requests(for: "/grow.bin")
            #expect(requests.count == 3)
            #expect(requests[1].header("if-range") == "\"same\"")
            #expect(requests[2].header("range") == nil)
            #expect(body.sha256 == sha256(grown))
            #expect(body.resumedBytes == 0)
        }
    }

    /// The same within one run: the first answer's length was 1 MiB, the
    /// retry's range answer says 1.5 MB, under the same ETag.
    @Test func aLengthThatChangedBetweenAttemptsIsNeverStitched() async throws {
        try await withOrigin { origin, directory in
            let first = fixtureBytes(count: 1_048_576, seed: 53), second = fixtureBytes(count: 1_500_000, seed: 54)
            origin.route("/swap.bin") { request in
                guard let start = askedStart(request) else {
                    // The first answer is the old file (cut off below); later whole answers the new one.
                    let isFirst = origin.requests(for: "/swap.bin").count == 1
                    return OriginResponse(headers: [("ETag", "\"same\"")], body: isFirst ? first : second)
                }
                return OriginResponse(status: 206, headers: [("ETag", "\"same\""),
                                                             ("Content-Range", "bytes \(start)-\(second.count - 1)/\(second.count)")],
                                      body: second[start...])
            }
            origin.setFault("/swap.bin", .dropAfter(bytes: 400_000), times: 1)

            let body = try await withTransferEngine(configuration: configuration(), partialDirectory: directory.appending("tmp")) { engine in
                try await engine.download(origin.url("/swap.bin"))
            }

            #expect(origin.requests(for: "/swap.bin").count == 3)
            #expect(body.sha256 == sha256(second))
            #expect(body.resumedBytes == 0)
        }
    }

    /// A 416 naming the length of bytes held does not make a partial cut
    /// off short of the length its response gave into the whole file.
    @Test func a416ForTheBytesHeldOfACutOffBodyStartsOver() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 1_048_576, seed: 55)
            origin.route("/cut.bin") { request in
                guard let start = askedStart(request) else {
                    return OriginResponse(headers: [("ETag", "\"v1\"")], body: content)
                }
                return OriginResponse(status: 416, headers: [("ETag", "\"v1\""), ("Content-Range", "bytes */\(start)")])
            }
            origin.setFault("/cut.bin", .dropAfter(bytes: 400_000), times: 1)
            let partials = directory.appending("tmp")
            try await failOnce(origin.url("/cut.bin"), partials: partials)

            let body = try await downloadInNewRun(origin.url("/cut.bin"), partials: partials)

            #expect(body.sha256 == sha256(content))
            #expect(body.size == 1_048_576)
            #expect(body.resumedBytes == 0)
        }
    }

    /// A date not at least a second before the response's own (RFC 9110:
    /// not a strong validator; here a file dated ahead of the server's clock,
    /// so that no second boundary can make it one) is not sent as If-Range:
    /// the retry starts over.
    @Test func aLastModifiedNotBeforeTheResponseIsNoValidator() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 600_000, seed: 56)
            origin.route("/fresh.bin") { _ in
                let format = DateFormatter()
                format.locale = Locale(identifier: "en_US_POSIX")
                format.timeZone = TimeZone(identifier: "GMT")
                format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
                return OriginResponse(headers: [("Last-Modified", format.string(from: Date() + 10))], body: content)
            }
            origin.setFault("/fresh.bin", .dropAfter(bytes: 300_000), times: 1)

            let body = try await withTransferEngine(configuration: configuration(), partialDirectory: directory.appending("tmp")) { engine in
                try await engine.download(origin.url("/fresh.bin"))
            }

            let requests = origin.requests(for: "/fresh.bin")
            #expect(requests.count == 2)
            #expect(requests[1].header("if-range") == nil)
            #expect(requests[1].header("range") == nil)
            #expect(body.sha256 == sha256(content))
        }
    }

    @Test func aServerThatIgnoresRangesStartsOverCleanly() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 500_000, seed: 7)
            origin.addResource("/norange", data: content)
            origin.setFault("/norange", .dropAfter(bytes: 300_000), times: 1)
            let partials = directory.appending("tmp")
            try await failOnce(origin.url("/norange"), partials: partials)

            // The server now answers a Range request with the whole body (200).
            origin.setFault("/norange", .ignoreRange)
            let body = try await downloadInNewRun(origin.url("/norange"), partials: partials)

            #expect(origin.requests(for: "/norange").last?.header("range")
                == resumeRange(from: resumeOffset(afterCutAt: 300_000, in: directory.path)))
            #expect(body.sha256 == sha256(content))
            #expect(body.size == 500_000)
            #expect(body.resumedBytes == 0)
        }
    }

    /// A 206 that names its range twice, or its validator twice, with
    /// different values has no range or validator to trust: the file starts
    /// over. The last value was taken, and the first 300 KB were stored twice
    /// (a second `Content-Range` that named the bytes asked for), or another
    /// version's tail stitched on (a second `ETag` that matched).
    @Test(arguments: ["twoRanges", "twoTags"])
    func aResumeAnswerWithTwoRangesOrTwoValidatorsStartsOver(_ fault: String) async throws {
        try await withOrigin { origin, directory in
            let (content, partials, held) = try await leavePartial(origin, directory, "/two.jpg", seed: 41, etag: "\"vv\"")
            let other = fixtureBytes(count: 500_000, seed: 42)
            origin.route("/two.jpg") { request in
                guard request.header("range") != nil else {
                    return OriginResponse(headers: [("Content-Type", "image/jpeg"), ("ETag", "\"vv\"")], body: content)
                }
                let rest = "bytes \(held)-499999/500000"
                if fault == "twoRanges" {
                    return OriginResponse(status: 206, headers: [("Content-Range", "bytes 0-\(499_999 - held)/500000"),
                                                                 ("Content-Range", rest), ("ETag", "\"vv\"")],
                                          body: content.prefix(500_000 - held))
                }
                return OriginResponse(status: 206, headers: [("Content-Range", rest), ("ETag", "\"other\""), ("ETag", "\"vv\"")],
                                      body: other.suffix(500_000 - held))
            }
            let body = try await downloadInNewRun(origin.url("/two.jpg"), partials: partials)

            #expect(body.sha256 == sha256(content))
            #expect(body.resumedBytes == 0)
            #expect(origin.requests(for: "/two.jpg").contains { $0.header("range") != nil })
        }
    }

    /// A connection closed inside the response's head is a failed attempt,
    /// tried again: libcurl ends such a response as whole, and a resume's
    /// 206 cut there was stored as the file, the bytes held alone (a prefix
    /// of it, with exit status 0). A 200 cut so was said to be an empty body.
    @Test(arguments: [40, 69, 100])
    func aResponseCutInsideItsHeadIsRetriedNotStored(_ cut: Int) async throws {
        try await withOrigin { origin, directory in
            let (content, partials, _) = try await leavePartial(origin, directory, "/cut.jpg", seed: 43, etag: "\"c1\"")
            origin.setFault("/cut.jpg", .cutHead(bytes: cut), times: 1)
            let body = try await downloadInNewRun(origin.url("/cut.jpg"), partials: partials)

            #expect(body.sha256 == sha256(content))
            #expect(body.size == Int64(content.count))
            #expect(body.attempts == 2)
        }
        _ = try await withEngine(retries: 0) { origin, engine, _ in
            origin.addResource("/whole.jpg", data: fixtureBytes(count: 5000, seed: 44))
            origin.setFault("/whole.jpg", .cutHead(bytes: cut), times: 1)
            await #expect(throws: TransferError(.protocolViolation, "the connection closed inside the response's head (HTTP 200)")) {
                try await engine.download(origin.url("/whole.jpg"))
            }
        }
    }

    /// A whole body that answers a resume and that the caller's check
    /// refuses ends the download as `.notTheFile` at once (no retry: it
    /// would get the same answer), its body unread, and the bytes held stay:
    /// the next run resumes from them. Without a check, such an answer
    /// starts the file over (`aServerThatIgnoresRangesStartsOverCleanly`).
    @Test func aResumeAnswerTheCallerRefusesKeepsTheBytesHeld() async throws {
        try await withOrigin { origin, directory in
            let (content, partials, held) = try await leavePartial(origin, directory, "/photo.jpg", seed: 12)

            origin.route("/photo.jpg") { _ in
                OriginResponse(headers: [("Content-Type", "text/html")], body: Data(repeating: 0x20, count: 200_000))
            }
            let asked = Mutex<[ResumeAnswer]>([])
            let check: ResumeAnswerCheck = { answer in
                asked.withLock { $0.append(answer) }
                return answer.contentType == "text/html" ? "a page, not the photo" : nil
            }
            let error = await #expect(throws: TransferError.self) {
                try await withTransferEngine(configuration: configuration(), partialDirectory: partials) { engine in
                    try await engine.download(origin.url("/photo.jpg"), resumeAnswerCheck: check)
                }
            }
            #expect(error?.kind == .notTheFile)
            #expect(error?.message.hasPrefix("a page, not the photo") == true, "\(error?.message ?? "")")
            // Asked once, at the body's first bytes (up to 512 of them).
            let answers = asked.withLock { $0 }
            #expect(answers.map(\.contentType) == ["text/html"])
            #expect(answers.first.map { !$0.opening.isEmpty && $0.opening.count <= 512 && $0.opening.allSatisfy { $0 == 0x20 } } == true)
            #expect(origin.requests(for: "/photo.jpg").count == 2)

            origin.removeRoute("/photo.jpg")
            let body = try await downloadInNewRun(origin.url("/photo.jpg"), partials: partials)
            #expect(origin.requests(for: "/photo.jpg").last?.header("range") == resumeRange(from: held))
            #expect(body.resumedBytes == held)
            #expect(body.sha256 == sha256(content))
        }
    }

    /// An answer to a resume that the check takes replaces the bytes held
    /// (the file changed, or the server ignores ranges), and its validator
    /// becomes the partial's; one cut before its first byte replaces
    /// nothing, and the retry asks for the same range again.
    @Test func aResumeAnswerTheCallerTakesReplacesTheBytesHeld() async throws {
        try await withOrigin { origin, directory in
            let new = fixtureBytes(count: 400_000, seed: 14)
            let (_, partials, held) = try await leavePartial(origin, directory, "/photo.jpg", seed: 13, etag: "\"v1\"")

            // The file changed: If-Range no longer matches, so the server sends
            // it whole; the first such answer is cut before its first byte.
            origin.addResource("/photo.jpg", data: new, contentType: "text/plain", etag: "\"v2\"")
            origin.setFault("/photo.jpg", .dropAfter(bytes: 0), times: 1)
            let body = try await withTransferEngine(configuration: configuration(), partialDirectory: partials) { engine in
                try await engine.download(origin.url("/photo.jpg"), resumeAnswerCheck: { _ in nil })
            }
            let ranges = origin.requests(for: "/photo.jpg").suffix(2).map { $0.header("range") }
            #expect(ranges == [resumeRange(from: held), resumeRange(from: held)])
            #expect(body.sha256 == sha256(new))
            #expect(body.resumedBytes == 0)
            #expect(body.etag == "\"v2\"")
        }
    }

    /// An empty answer to a resume replaces nothing: it ends as any empty
    /// body does (retried, never stored), and the bytes held stay for the
    /// next run. It was stored as the file, 0 bytes long.
    @Test func anEmptyAnswerToAResumeReplacesNothing() async throws {
        try await withOrigin { origin, directory in
            let (content, partials, held) = try await leavePartial(origin, directory, "/photo.jpg", seed: 15)

            origin.route("/photo.jpg") { _ in OriginResponse(headers: [("Content-Type", "image/jpeg")]) }
            let error = await #expect(throws: TransferError.self) {
                try await withTransferEngine(configuration: configuration(retries: 1), partialDirectory: partials) { engine in
                    try await engine.download(origin.url("/photo.jpg"), resumeAnswerCheck: { _ in nil })
                }
            }
            #expect(error?.message.hasPrefix("the server sent an empty body (HTTP 200 OK)") == true, "\(error?.message ?? "")")
            #expect(origin.requests(for: "/photo.jpg").suffix(2).map { $0.header("range") } == [resumeRange(from: held), resumeRange(from: held)])

            origin.removeRoute("/photo.jpg")
            let body = try await downloadInNewRun(origin.url("/photo.jpg"), partials: partials)
            #expect(body.resumedBytes == held)
            #expect(body.sha256 == sha256(content))
        }
    }

    /// An answer to a resume cut before it could be judged leaves no trace:
    /// the 416 that then proves the whole body held hands over the held
    /// bytes' own validator, not the page's head (it was catalogued as
    /// `text/html`, with the page's ETag).
    @Test func anAnswerCutWhileItIsJudgedLeavesNoTrace() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 704_512, seed: 46)
            let partials = directory.appending("tmp")
            try leaveCompleteBody(content, of: origin.url("/whole.jpg"), validator: "\"v1\"", in: partials)
            let asked = Mutex(0)
            origin.route("/whole.jpg") { _ in
                let first = asked.withLock { count -> Bool in
                    count += 1
                    return count == 1
                }
                return first
                    ? OriginResponse(headers: [("Content-Type", "text/html"), ("ETag", "\"page\"")], body: Data(repeating: 0x3C, count: 1000))
                    : OriginResponse(status: 416, headers: [("Content-Range", "bytes */704512"), ("ETag", "\"v1\"")])
            }
            origin.setFault("/whole.jpg", .dropAfter(bytes: 0), times: 1)
            let body = try await withTransferEngine(configuration: configuration(), partialDirectory: partials) { engine in
                try await engine.download(origin.url("/whole.jpg"), resumeAnswerCheck: { _ in "not the file" })
            }
            #expect(asked.withLock { $0 } == 2)
            #expect(body.sha256 == sha256(content))
            #expect(body.etag == "\"v1\"")
            #expect(body.contentType != "text/html")
        }
    }

    /// An answer to a resume sent a byte at a time is judged by its first 32
    /// bytes, not by its first write (a WAV's `RIFF` reads as text until the
    /// bytes after it); taken, every byte is written in order.
    @Test(.timeLimit(.minutes(1)))
    func anAnswerSentAByteAtATimeIsJudgedBy32BytesAndKeptWhole() async throws {
        try await withOrigin { origin, directory in
            let new = Data("RIFF".utf8) + fixtureBytes(count: 400, seed: 17)
            let (_, partials, _) = try await leavePartial(origin, directory, "/sound.wav", seed: 16, contentType: "audio/wav", etag: "\"v1\"")

            origin.addResource("/sound.wav", data: new, contentType: "text/plain", etag: "\"v2\"")
            origin.setFault("/sound.wav", .trickle(seconds: 0.001))
            let openings = Mutex<[[UInt8]]>([])
            let wholeLengths = Mutex<[Int64?]>([])
            let body = try await withTransferEngine(configuration: configuration(), partialDirectory: partials) { engine in
                try await engine.download(origin.url("/sound.wav"), resumeAnswerCheck: { answer in
                    openings.withLock { $0.append(answer.opening) }
                    wholeLengths.withLock { $0.append(answer.wholeLength) }
                    return nil
                })
            }
            // Judged once, at 32 bytes or the first write past them (a busy
            // machine may read a few trickled bytes at once).
            let judged = openings.withLock { $0 }
            #expect(judged.count == 1)
            #expect((32...new.count).contains(judged.first?.count ?? 0), "\(judged.map(\.count))")
            #expect(judged.first.map { Array(new.prefix($0.count)) == $0 } == true)
            #expect(wholeLengths.withLock { $0 } == [judged.first?.count == new.count ? Int64(new.count) : nil])
            #expect(body.sha256 == sha256(new))
            #expect(body.size == Int64(new.count))
            #expect(body.resumedBytes == 0)
        }
    }

    /// An answer shorter than the bytes it is judged by is judged whole,
    /// and says so: a header that ends in it is cut by the body's end, not
    /// by the opening (`P1 # denied` is no image then).
    @Test(.timeLimit(.minutes(1)))
    func anAnswerShorterThanItsJudgementIsJudgedWhole() async throws {
        try await withOrigin { origin, directory in
            let new = Data("P1 # access denied\n".utf8)
            let (_, partials, _) = try await leavePartial(origin, directory, "/p.pbm", seed: 18, contentType: "image/x-portable-bitmap",
                                                          etag: "\"v1\"")
            origin.addResource("/p.pbm", data: new, contentType: "text/plain", etag: "\"v2\"")
            let answers = Mutex<[ResumeAnswer]>([])
            _ = try await withTransferEngine(configuration: configuration(), partialDirectory: partials) { engine in
                try await engine.download(origin.url("/p.pbm"), resumeAnswerCheck: { answer in
                    answers.withLock { $0.append(answer) }
                    return nil
                })
            }
            let judged = answers.withLock { $0 }
            #expect(judged.count == 1)
            #expect(judged.first?.opening == Array(new))
            #expect(judged.first?.wholeLength == Int64(new.count))
        }
    }

    /// `--timeout` bounds one attempt, kept on the loop's clock: a body that
    /// takes longer fails as timed out, and is retried like any timeout.
    @Test(.timeLimit(.minutes(1)))
    func anAttemptThatTakesLongerThanItsTimeLimitTimesOut() async throws {
        _ = try await withEngine(retries: 1, adjust: { $0.attemptTimeout = 1 }) { origin, engine, _ in
            // Ten seconds' worth at this pace, with no pause long enough to be a stall.
            origin.addResource("/slow.wav", data: fixtureBytes(count: 400_000, seed: 90))
            origin.setFault("/slow.wav", .slow(bytesPerSecond: 40_000))
            let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/slow.wav")) }
            #expect(error?.kind == .timeout)
            // What arrived in the time; the second attempt resumed, and says what is held
            // of the whole file, as in "timed out: 40000 bytes received in 1 s, 76864 of 400000 so far"
            // (it said "40000 of 363136", the rest asked for).
            let message = error?.message ?? ""
            #expect(message.hasPrefix("timed out: ") && message.contains(" bytes received in 1 s, ")
                && message.hasSuffix(" of 400000 so far (after 2 attempts)"), "\(message)")
            #expect(origin.requests(for: "/slow.wav").count == 2)
        }
    }

    /// The engine's last progress report counts every byte, and keeps the
    /// rate of the last seconds rather than dropping to nothing.
    @Test func theLastProgressReportKeepsTheRate() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/last.bin", data: fixtureBytes(count: 300_000, seed: 67))
            let engine = try TransferEngine(configuration: configuration(), partialDirectory: directory.appending("tmp"))
            let started = ContinuousClock.now
            let collector = Task { () -> EngineSnapshot? in
                var last: EngineSnapshot?
                for await event in engine.events {
                    if case .progress(let snapshot) = event { last = snapshot }
                }
                return last
            }
            do {
                _ = try await engine.download(origin.url("/last.bin"))
            } catch {
                engine.shutdown()
                throw error
            }
            engine.shutdown()
            let took = ContinuousClock.now - started
            let last = await collector.value
            #expect(last?.bytesReceived == 300_000)
            #expect(last?.active.isEmpty == true)
            // Every byte came within the rate's window of 5 s, unless a loaded
            // machine held the run longer (then 0 B/s over the last 5 s is right).
            if took < .seconds(4) {
                #expect((last?.bytesPerSecond ?? 0) > 0, "\(String(describing: last))")
            }
        }
    }

    @Test func theRateLimitersPausesAreNotStalls() async throws {
        // libcurl holds a transfer back whenever it got ahead of --limit-rate;
        // with a stall timeout shorter than those pauses, each was taken for a
        // stalled server and the attempt retried (or failed).
        let events = try await withEngine(retries: 0, adjust: {
            $0.maxBytesPerSecond = 100_000
            $0.stallTimeout = 0.3
            $0.progressInterval = 0.1
        }) { origin, engine, _ in
            let content = fixtureBytes(count: 400_000, seed: 44)
            origin.addResource("/limited.bin", data: content)
            let body = try await engine.download(origin.url("/limited.bin"))
            #expect(body.sha256 == sha256(content))
        }
        #expect(!events.contains { if case .retrying = $0 { true } else { false } })
    }

    /// A 2xx with no bytes is not a body to cache (it would never be fetched
    /// again): an empty 200 may be a passing fault and is tried again; a
    /// 204 says there is no content, once.
    @Test func anEmptyBodyIsNotStored() async throws {
        _ = try await withEngine(retries: 2) { origin, engine, _ in
            origin.addResource("/empty.jpg", data: Data())
            origin.route("/none.jpg") { _ in OriginResponse(status: 204, body: Data()) }

            let empty = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/empty.jpg")) }
            let none = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/none.jpg")) }

            #expect(empty?.message == "the server sent an empty body (HTTP 200 OK): nothing to store (after 3 attempts)")
            #expect(origin.requests(for: "/empty.jpg").count == 3)
            #expect(none?.message == "HTTP 204 No Content: no body to store")
            #expect(origin.requests(for: "/none.jpg").count == 1)
            // Whatever length it gives: a 204 has no body to frame.
            origin.route("/odd.jpg") { _ in OriginResponse(status: 204, headers: [("Content-Length", "1e3")], body: Data()) }
            let odd = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/odd.jpg")) }
            #expect(odd?.message == "HTTP 204 No Content: no body to store")
            #expect(origin.requests(for: "/odd.jpg").count == 1)
        }
    }

    /// A 2xx other than 200, 203 and 206 sends something else than the file
    /// (202 "accepted, come back later", 205): its body was stored as the
    /// file. It is named, once; a 203 (a proxy's copy) is the file.
    @Test func aSuccessThatSendsNoFileIsNotStored() async throws {
        _ = try await withEngine(retries: 2) { origin, engine, _ in
            for status in [202, 205] {
                origin.route("/\(status).jpg") { _ in OriginResponse(status: status, body: Data("queued".utf8)) }
                let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/\(status).jpg")) }
                let reason = status == 202 ? "Accepted" : "Reset Content"
                #expect(error?.message == "HTTP \(status) \(reason): the server sent no file (only 200, 203 and 206 carry one); not stored")
                #expect(origin.requests(for: "/\(status).jpg").count == 1)
            }
            let content = fixtureBytes(count: 5000, seed: 45)
            origin.route("/203.jpg") { _ in OriginResponse(status: 203, body: content) }
            let copy = try await engine.download(origin.url("/203.jpg"))
            #expect(copy.sha256 == sha256(content))
            // An API's answer (`fetch`) is returned whatever its 2xx.
            let accepted = try await engine.fetch(origin.url("/202.jpg"))
            #expect(accepted.status == 202)
            #expect(accepted.body == Data("queued".utf8))
        }
    }

    /// A response head over libcurl's 100 KB: libcurl 7.88 says only "Out of
    /// memory", which reads as a problem here; the message says what it likely
    /// is, and it is not retried (the same head comes back).
    @Test func headersOverLibcurlsLimitAreNamedAndNotRetried() async throws {
        _ = try await withEngine(retries: 2) { origin, engine, _ in
            let big = String(repeating: "x", count: 200_000)
            origin.route("/big-head.jpg") { _ in OriginResponse(status: 200, headers: [("X-Big", big)], body: Data("abc".utf8)) }

            let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/big-head.jpg")) }

            #expect(error?.message.hasPrefix("the response's headers are probably over the 100 KB libcurl accepts (libcurl: ") == true,
                    "\(error?.message ?? "")")
            #expect(origin.requests(for: "/big-head.jpg").count == 1)
        }
    }

    /// A server that asks for a longer wait than mediafetch gives is told
    /// as such: "HTTP 503" alone hid why it was not tried again. Just over
    /// the limit it is said in seconds: both rounded to "10 min" read as a contradiction.
    @Test(arguments: [(3600, "60 min", "10 min"), (601, "601 s", "600 s")])
    func aRetryAfterBeyondTheLimitSaysWhyItWasNotTriedAgain(asked: Int, askedText: String, limitText: String) async throws {
        _ = try await withEngine(retries: 2) { origin, engine, _ in
            origin.addResource("/later.jpg", data: fixtureBytes(count: 1000, seed: 46))
            origin.setFault("/later.jpg", .status(503, retryAfter: asked))

            let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/later.jpg")) }

            #expect(error?.message == "HTTP 503 Service Unavailable (the server asked to wait \(askedText) before trying again; "
                + "mediafetch waits \(limitText) at most)")
            #expect(origin.requests(for: "/later.jpg").count == 1)
        }
    }

    @Test func aRedirectWithNoLocationSaysSo() async throws {
        _ = try await withEngine(retries: 0) { origin, engine, _ in
            origin.route("/moved") { _ in OriginResponse(status: 302) }
            let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/moved")) }
            #expect(error?.message == "HTTP 302 Found (with no Location to follow)")
            // An empty one is none either.
            origin.route("/moved-nowhere") { _ in OriginResponse(status: 302, headers: [("Location", "")]) }
            let empty = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/moved-nowhere")) }
            #expect(empty?.message == "HTTP 302 Found (with no Location to follow)")
        }
    }

    /// A raw '@' in a password ends it early, and what follows is no host: said how to write it.
    @Test func anAtInAPasswordIsSaidHowToWrite() async throws {
        _ = try await withEngine { _, engine, _ in
            let error = await #expect(throws: TransferError.self) { try await engine.download("http://u:p@ss@127.0.0.1:1/a.jpg") }
            #expect(error?.message.hasSuffix("(an @ in a user name or password is written %40)") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("p@ss") == false)
        }
    }

    /// A name the resolver says does not exist (a typo in a host) fails its
    /// URL at its first attempt, and its host's other URLs without a retry,
    /// the host given up; a name it cannot say of (offline) is retried as
    /// before. The verdicts are the test's; libcurl's lookups are this
    /// machine's, which must fail for `.invalid` names (reserved never to
    /// exist) as "Could not resolve host": where no resolver answers at all
    /// (they time out), the test cannot run.
    @Test(.enabled(if: SystemResolver.saysNoSuchName("typo.invalid")))
    func aNameThatDoesNotExistIsNotTriedAgain() async throws {
        let lookups = Mutex<[String]>([])
        let names = HostNames { name in
            lookups.withLock { $0.append(name) }
            return name == "typo.invalid" ? .doesNotExist : .unknown
        }
        _ = try await withEngine(retries: 2, adjust: {
            // A lookup this machine's resolver drops is asked again after 5 s: within the connect timeout.
            $0.connectTimeout = 30
            // No URL let through to see whether the host is back while the test runs.
            $0.unreachableHostTrialInterval = 3600
        }, hostNames: names) { _, engine, _ in
            let error = await #expect(throws: TransferError.self) { try await engine.download("http://typo.invalid/a.jpg") }
            #expect(error?.message == "Could not resolve host: typo.invalid (no such name: not tried again)")
            #expect(engine.attemptsMade.load(ordering: .relaxed) == 1)
            let messages = await withTaskGroup(of: String.self) { group in
                for index in 0..<6 {
                    group.addTask {
                        do throws(TransferError) {
                            _ = try await engine.download("http://typo.invalid/\(index).jpg")
                            return "downloaded"
                        } catch {
                            return error.message
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            for message in messages {
                #expect(message == "Could not resolve host: typo.invalid (no such name: not tried again)"
                    || message.hasPrefix("given up: typo.invalid:80 has no such name (Could not resolve host: typo.invalid); "),
                        "\(message)")
            }
            // One attempt a URL at most (a URL of the host given up makes none), and one lookup in all.
            let attempts = engine.attemptsMade.load(ordering: .relaxed)
            #expect(attempts <= 7)
            let looked = lookups.withLock { $0 }
            #expect(looked == ["typo.invalid"])
            // The verdict was known before the six began: the first of them to fail gave the host up.
            let later = await #expect(throws: TransferError.self) { try await engine.download("http://typo.invalid/later.jpg") }
            #expect(later?.message.hasPrefix("given up: typo.invalid:80 has no such name (Could not resolve host: typo.invalid); ") == true,
                    "\(later?.message ?? "")")
            let retried = await #expect(throws: TransferError.self) { try await engine.download("http://offline.invalid/a.jpg") }
            #expect(retried?.message == "Could not resolve host: offline.invalid (after 3 attempts)")
        }
    }

    /// While connecting, the connect timeout rules: a connect that hung said
    /// "stalled" after a shorter --stall-timeout. A listener whose queue is
    /// full leaves a connect waiting, as a host that drops packets does.
    @Test func aHungConnectIsTheConnectTimeoutsNotAStall() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(listener, generic, length) == 0 && listen(listener, 0) == 0 && getsockname(listener, generic, &length) == 0
            }
        }
        #expect(bound)
        // Connections nobody accepts fill the queue; the next connect waits.
        var fillers: [Int32] = []
        defer { fillers.forEach { close($0) } }
        for _ in 0..<4 {
            let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            _ = fcntl(filler, F_SETFL, O_NONBLOCK)
            _ = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, length) }
            }
            fillers.append(filler)
        }
        // Their handshakes settle first (on a loaded machine a SYN handled
        // before the queue filled let the download connect, and then stall).
        try await Task.sleep(for: .milliseconds(200))
        let port = Int(UInt16(bigEndian: address.sin_port))
        _ = try await withEngine(retries: 0, adjust: {
            // A stall timeout well under the connect timeout, yet long enough
            // that a loop thread kept off its core just after libcurl's own
            // deadline still sees libcurl's timeout first.
            $0.connectTimeout = 3
            $0.stallTimeout = 1
            $0.progressInterval = 0.1
        }) { _, engine, _ in
            let error = await #expect(throws: TransferError.self) { try await engine.download("http://127.0.0.1:\(port)/x.jpg") }
            // libcurl's words vary with which of its clocks notices first
            // ("Failed to connect … after 1501 ms", "Connection timed out after 1502 milliseconds").
            #expect(error?.kind == .timeout)
            #expect(error?.message.hasPrefix("timed out: ") == true, "\(String(describing: error))")
            #expect(error?.message.contains("onnect") == true, "\(String(describing: error))")
        }
    }

    @Test func aFullDiskKeepsThePartialForTheNextRun() {
        #expect(TransferEngine.keepsPartial(after: TransferError(.fileSystem(errno: ENOSPC), "cannot write")))
        #expect(TransferEngine.keepsPartial(after: TransferError(.fileSystem(errno: EDQUOT), "cannot write")))
        #expect(TransferEngine.keepsPartial(after: TransferError(.network(curlCode: 56), "reset")))
        #expect(TransferEngine.keepsPartial(after: TransferError(.cancelled, "cancelled")))
        #expect(!TransferEngine.keepsPartial(after: TransferError(.fileSystem(errno: EACCES), "cannot write")))
        #expect(!TransferEngine.keepsPartial(after: TransferError(.http(status: 404), "HTTP 404")))
        // Over this run's size limit: a run without it goes on from the partial.
        #expect(TransferEngine.keepsPartial(after: TransferError(.tooLarge, "too large")))
    }

    @Test func stallMessagesShowTheTimeoutAsGiven() {
        #expect(NumberText.seconds(30) == "30 s")
        #expect(NumberText.seconds(0.3) == "0.3 s")
        #expect(NumberText.seconds(2.5) == "2.5 s")
    }

    @Test func underARateLimitLibcurlReadsSmallRounds() {
        #expect(CurlLoop.receiveBufferSize(bytesPerSecond: nil) == 256 * 1024)
        #expect(CurlLoop.receiveBufferSize(bytesPerSecond: 10 << 20) == 10_485)
        #expect(CurlLoop.receiveBufferSize(bytesPerSecond: 1 << 20) == 1_048)
        #expect(CurlLoop.receiveBufferSize(bytesPerSecond: 50_000) == 1024)
        #expect(CurlLoop.receiveBufferSize(bytesPerSecond: 1 << 40) == 256 * 1024)
        // The rate shown spans two bursts where they come further apart than 2.5 s.
        #expect(CurlLoop.rateWindowSpan(bytesPerSecond: nil) == .seconds(5))
        #expect(CurlLoop.rateWindowSpan(bytesPerSecond: 500 * 1024) == .seconds(5))
        #expect(CurlLoop.rateWindowSpan(bytesPerSecond: 10 * 1024) == .seconds(20))
        #expect(CurlLoop.rateWindowSpan(bytesPerSecond: 1) == .seconds(120))
    }

    @Test func aStalledTransferTimesOutAndIsRetried() async throws {
        _ = try await withEngine(adjust: { $0.stallTimeout = 1 }) { origin, engine, directory in
            let content = fixtureBytes(count: 400_000, seed: 8)
            origin.addResource("/stall", data: content)
            origin.setFault("/stall", .stallAfter(bytes: 280_000, seconds: 4), times: 1)
            let body = try await engine.download(origin.url("/stall"))
            #expect(body.sha256 == sha256(content))
            #expect(body.attempts == 2)
            #expect(origin.requests(for: "/stall").last?.header("range")
                == resumeRange(from: resumeOffset(afterCutAt: 280_000, in: directory.path)))
        }
    }

    /// A body's first and last bytes are kept as they arrive (a caller looks
    /// at them, for a page or a photo's end marker, without reading back a
    /// file written past the page cache), also when they came in several
    /// writes, across a retry that resumed (the failed attempt's dropped
    /// bytes not among the last), in a run that resumed an earlier run's
    /// partial, and where the server answered that resume with the whole body.
    @Test func aBodysFirstAndLastBytesAreKeptAsTheyArrive() async throws {
        try await withOrigin { origin, directory in
            let partials = directory.appending("tmp")
            var adjusted = configuration()
            adjusted.stallTimeout = 5
            try await withTransferEngine(configuration: adjusted, partialDirectory: partials) { engine in
                let content = fixtureBytes(count: 300_000, seed: 12)
                origin.addResource("/a.jpg", data: content)
                origin.setFault("/a.jpg", .slow(bytesPerSecond: 2_000_000), times: 1)
                let slow = try await engine.download(origin.url("/a.jpg"))
                #expect(slow.opening == Array(content.prefix(512)) && slow.closing == Array(content.suffix(32)))
                let short = fixtureBytes(count: 20, seed: 13)
                origin.addResource("/b.jpg", data: short)
                let small = try await engine.download(origin.url("/b.jpg"))
                #expect(small.opening == Array(short) && small.closing == Array(short))
                origin.setFault("/a.jpg", .dropAfter(bytes: 200_001), times: 1)
                let resumed = try await engine.download(origin.url("/a.jpg"))
                #expect(resumed.attempts == 2 && resumed.resumedBytes > 0)
                #expect(resumed.opening == Array(content.prefix(512)) && resumed.closing == Array(content.suffix(32)))
            }
            for answer in ["a range", "the whole body"] {
                let path = "/c\(answer.count).jpg"
                let (content, _) = try await partialLeftByARun(at: path, size: 800_000, cutAt: 300_000, seed: 16,
                                                               origin: origin, in: directory)
                if answer == "the whole body" { origin.setFault(path, .ignoreRange) }
                let next = try await downloadInNewRun(origin.url(path), partials: partials)
                #expect((next.resumedBytes > 0) == (answer == "a range"), "\(answer)")
                // The first bytes of a resumed body came in the earlier run: a reader looks at the file.
                #expect(next.opening == (answer == "a range" ? nil : Array(content.prefix(512))), "\(answer)")
                #expect(next.closing == Array(content.suffix(32)), "\(answer)")
            }
        }
    }

    /// A server that never finishes its head (a 103 after another, or a
    /// header line at a time) sends bytes often enough for the "no data"
    /// clock, and held a run without `--timeout` for ever: the final head
    /// is owed within the stall timeout of the request, and within ten times
    /// that while only interim answers come (`102 Processing` from a server
    /// still at work).
    @Test(arguments: [true, false])
    func aHeadThatNeverEndsIsAStall(interim: Bool) async throws {
        _ = try await withEngine(retries: 0, adjust: { $0.stallTimeout = 0.4 }) { origin, engine, _ in
            origin.addResource("/endless.jpg", data: fixtureBytes(count: 1000, seed: 3))
            origin.setFault("/endless.jpg", .endlessHead(interim: interim, seconds: 0.1), times: 1)
            do throws(TransferError) {
                _ = try await engine.download(origin.url("/endless.jpg"))
                Issue.record("a head that never ended was taken")
            } catch {
                #expect(error.kind == .timeout)
                let expected = interim ? "no final answer in 4 s (only interim ones, 1xx)" : "no complete response header in 0.4 s"
                #expect(error.message.contains(expected), "\(error.message)")
            }
        }
    }

    /// A body refused for this run's size limit keeps the partial an earlier
    /// run left: a run without the limit goes on from it.
    @Test func aPartialRefusedForTheSizeLimitIsKeptForALaterRun() async throws {
        try await withOrigin { origin, directory in
            let (content, partials) = try await partialLeftByARun(at: "/long.flac", size: 1_200_000, cutAt: 700_000, seed: 49,
                                                                  origin: origin, in: directory)
            let held = partialDirectoryFiles(partials)

            var limited = configuration(retries: 0)
            limited.maxFileSize = 1_000_000
            try await withTransferEngine(configuration: limited, partialDirectory: partials) { engine in
                let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/long.flac")) }
                #expect(error?.kind == .tooLarge)
            }
            #expect(partialDirectoryFiles(partials) == held)

            let body = try await downloadInNewRun(origin.url("/long.flac"), partials: partials)
            #expect(body.sha256 == sha256(content))
            #expect(body.resumedBytes == Int64(resumeOffset(afterCutAt: 700_000, in: directory.path)))
        }
    }

    @Test func bodiesOverTheSizeLimitAreRefused() async throws {
        _ = try await withEngine(adjust: { $0.maxFileSize = 50_000 }) { origin, engine, directory in
            origin.addResource("/huge", data: fixtureBytes(count: 100_000, seed: 9))
            await #expect(throws: TransferError(.tooLarge, "larger than the --max-filesize limit of 48.8 KiB (50000 bytes): "
                                                  + "the server gave its size as 97.7 KiB")) {
                try await engine.download(origin.url("/huge"))
            }
            #expect(origin.requests(for: "/huge").count == 1)
            // A chunked body says no length up front: the bytes are counted as they come.
            origin.setFault("/huge", .chunked(claimedLength: nil))
            await #expect(throws: TransferError(.tooLarge, "larger than the --max-filesize limit of 48.8 KiB (50000 bytes)")) {
                try await engine.download(origin.url("/huge"))
            }
            #expect(origin.requests(for: "/huge").count == 2)
            // What this run fetched up to the limit is not kept (an earlier run's partial would be).
            #expect(leftovers(directory).isEmpty)
        }
    }

    /// A redirect loop ends after `maxRedirects`, and is not retried.
    @Test func aRedirectLoopEndsAndIsNotRetried() async throws {
        _ = try await withEngine(adjust: { $0.maxRedirects = 3 }) { origin, engine, _ in
            origin.route("/loop") { _ in .redirect(to: "/loop") }
            let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/loop")) }
            #expect(error?.kind == .tooManyRedirects)
            #expect(error?.message.hasPrefix("too many redirects: ") == true, "\(error?.message ?? "")")
            // The first request and three redirects followed.
            #expect(origin.requests(for: "/loop").count == 4)
        }
    }

    /// What a timed-out or stalled attempt says: a server that never answers
    /// within `--timeout`, and one that falls silent past `--stall-timeout`.
    @Test func aSilentServerIsNamedAsSuch() async throws {
        _ = try await withEngine(retries: 0, adjust: { $0.attemptTimeout = 1; $0.stallTimeout = 30 }) { origin, engine, _ in
            origin.route("/mute") { _ in
                usleep(2_500_000)
                return OriginResponse(status: 200, body: Data("late".utf8))
            }
            await #expect(throws: TransferError(.timeout, "timed out: no answer in 1 s")) {
                try await engine.download(origin.url("/mute"))
            }
        }
        _ = try await withEngine(retries: 0, adjust: { $0.stallTimeout = 1 }) { origin, engine, _ in
            origin.addResource("/quiet", data: fixtureBytes(count: 200_000, seed: 63))
            origin.setFault("/quiet", .stallAfter(bytes: 100_000, seconds: 3))
            await #expect(throws: TransferError(.timeout, "stalled: no data for 1 s")) {
                try await engine.download(origin.url("/quiet"))
            }
        }
    }

    /// A redirect's body that stops is a stall, on the connection made: it
    /// waited for the connect timeout first (libcurl reads a redirect's body
    /// before it follows), as if for a connection, then for the stall timeout.
    @Test(.timeLimit(.minutes(1)))
    func aRedirectsBodyThatStopsStallsOnTheConnectionMade() async throws {
        _ = try await withEngine(retries: 0, adjust: { $0.stallTimeout = 1; $0.connectTimeout = 300 }) { origin, engine, _ in
            origin.addResource("/real.jpg", data: Data("jpeg".utf8))
            origin.route("/moved") { _ in
                OriginResponse(status: 302, headers: [("Location", "/real.jpg")], body: Data(repeating: 0x20, count: 100_000))
            }
            origin.setFault("/moved", .stallAfter(bytes: 10, seconds: 30))
            await #expect(throws: TransferError(.timeout, "stalled: no data for 1 s")) {
                try await engine.download(origin.url("/moved"))
            }
            // Followed at once, a redirect still gets its connect timeout for the next connection.
            origin.route("/quick") { _ in .redirect(to: "/real.jpg") }
            let quick = try await engine.download(origin.url("/quick"))
            #expect(quick.size == 4)
        }
    }

    /// `--max-filesize` is the file's limit, not a redirect's: a 500-byte
    /// file behind a redirect with a 2 KB page was refused as 2 KB.
    @Test func aRedirectsOwnBodyIsNotHeldToTheFileSizeLimit() async throws {
        _ = try await withEngine(retries: 0, adjust: { $0.maxFileSize = 1000 }) { origin, engine, _ in
            origin.addResource("/small.jpg", data: fixtureBytes(count: 500, seed: 64))
            origin.addResource("/large.jpg", data: fixtureBytes(count: 2000, seed: 65))
            for target in ["/small.jpg", "/large.jpg"] {
                origin.route("/to\(target)") { _ in
                    OriginResponse(status: 302, headers: [("Location", target), ("Content-Type", "text/html")],
                                   body: Data(repeating: 0x20, count: 2000))
                }
            }
            let small = try await engine.download(origin.url("/to/small.jpg"))
            #expect(small.size == 500)
            let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/to/large.jpg")) }
            #expect(error?.kind == .tooLarge)
            #expect(error?.message.hasPrefix("larger than the --max-filesize limit of ") == true
                && error?.message.contains(": the server gave its size as ") == true, "\(error?.message ?? "")")
        }
    }

    @Test func redirectsAreFollowedButOnlyToHTTP() async throws {
        _ = try await withEngine { origin, engine, _ in
            origin.addResource("/real.jpg", data: Data("jpeg".utf8))
            origin.route("/moved") { _ in .redirect(to: "/real.jpg") }
            origin.route("/to-file") { _ in .redirect(to: "file:///etc/passwd") }

            let body = try await engine.download(origin.url("/moved"))
            #expect(body.effectiveURL == origin.url("/real.jpg"))
            #expect(body.size == 4)

            do {
                _ = try await engine.download(origin.url("/to-file"))
                Issue.record("a redirect to file:// was followed")
            } catch let error as TransferError {
                #expect(error.kind == .unsupportedURL)
                // Worded as a redirect to `market:` is (libcurl's words for it were "Protocol "file" not supported…").
                #expect(error.message == "the server redirected to file:///etc/passwd: only http and https are allowed")
            }
        }
    }

    /// A failure after a redirect names where it was sent: "HTTP 404" alone
    /// named only the URL asked for.
    @Test func aFailureAfterARedirectNamesItsTarget() async throws {
        _ = try await withEngine(retries: 0) { origin, engine, _ in
            origin.route("/short") { _ in .redirect(to: "/gone.jpg?token=secret") }

            let error = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/short")) }
            // libcurl writes /x/../gone.jpg as /gone.jpg: no redirect, none named.
            let direct = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/x/../gone.jpg")) }
            // A redirect libcurl cannot follow (an app link, `javascript:`, a target it
            // cannot read) says it is the server's: "not a usable URL" read as the user's
            // own at fault, and the target was named nowhere.
            origin.route("/app") { _ in .redirect(to: "market://details?id=x") }
            origin.route("/script") { _ in .redirect(to: "javascript:alert(1)") }
            origin.route("/broken") { _ in .redirect(to: "http://[::1") }
            // A control byte in the target (which makes the field malformed) is named too.
            origin.route("/escape") { _ in .redirect(to: "/gone/\u{1B}[31mred.jpg") }
            let appLink = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/app")) }
            let script = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/script")) }
            let broken = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/broken")) }
            let escape = await #expect(throws: TransferError.self) { try await engine.download(origin.url("/escape")) }
            #expect(appLink?.kind == .unsupportedURL)
            #expect(appLink?.message == "the server redirected to market://details?…: only http and https are allowed")
            #expect(script?.message == "the server redirected to javascript:alert(1): only http and https are allowed")
            #expect(broken?.message.hasPrefix("the server redirected to a URL that cannot be used: http://[::1 (") == true,
                    "\(String(describing: broken))")
            #expect(escape?.message.hasPrefix("the server redirected to a URL that cannot be used: /gone/\u{1B}[31mred.jpg (") == true,
                    "\(String(describing: escape))")
            #expect(origin.requests(for: "/app").count == 1)

            // Without the query, but seen to have one: a signed CDN link holds a token.
            #expect(error?.message == "HTTP 404 Not Found (redirected to \(origin.url("/gone.jpg"))?…)")
            #expect(direct?.message == "HTTP 404 Not Found")
        }
    }

    @Test func aDeadHostFailsWithAConnectionError() async throws {
        _ = try await withEngine(retries: 1) { _, engine, _ in
            // A port nobody listens on, held so that no other test's origin gets it.
            let closed = try ReservedPort()
            let url = closed.url("/x")
            do {
                _ = try await engine.download(url)
                Issue.record("download from a closed port succeeded")
            } catch let error as TransferError {
                #expect(error.kind == .network(curlCode: 7))
                #expect(error.message.lowercased().contains("connect"))
            }
            withExtendedLifetime(closed) {}
        }
    }

    @Test func cancellingTheTaskStopsTheTransferAndKeepsThePartial() async throws {
        _ = try await withEngine { origin, engine, directory in
            // 20 s of body: it cannot end before the cancel, however loaded the machine.
            origin.addResource("/slow", data: fixtureBytes(count: 4_000_000, seed: 10))
            origin.setFault("/slow", .slow(bytesPerSecond: 200_000))
            let task = Task { try await engine.download(origin.url("/slow")) }
            while !holdsResumablePartial(directory.appending("tmp")) {
                try await Task.sleep(for: .milliseconds(20))
            }
            task.cancel()
            await #expect(throws: TransferError.cancelled) { try await task.value }
            #expect(leftovers(directory).contains { $0.hasSuffix(".part") })
        }
    }

    @Test func fetchKeepsSmallAnswersInMemory() async throws {
        _ = try await withEngine { origin, engine, _ in
            origin.route("/api") { request in .json(#"{"page":"\#(request.query["page"] ?? "")"}"#) }
            let response = try await engine.fetch(origin.url("/api?page=3"))
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self) == #"{"page":"3"}"#)
        }
    }

    /// The slot limits, seen from the server: each body takes 0.1 s, so the
    /// transfers allowed at once overlap and reach exactly the limit.
    @Test(arguments: [(perHost: 2, total: 8, expectedPeak: 2), (perHost: 16, total: 3, expectedPeak: 3)])
    func concurrencyStaysWithinTheLimits(perHost: Int, total: Int, expectedPeak: Int) async throws {
        _ = try await withEngine(adjust: { $0.maxTransfersPerHost = perHost; $0.maxConcurrentTransfers = total }) { origin, engine, _ in
            for index in 0..<9 {
                origin.addResource("/f\(index)", data: fixtureBytes(count: 100_000, seed: UInt64(index)))
                origin.setFault("/f\(index)", .slow(bytesPerSecond: 1_000_000))
            }
            try await withThrowingTaskGroup(of: DownloadedBody.self) { group in
                for index in 0..<9 { group.addTask { try await engine.download(origin.url("/f\(index)")) } }
                try await group.waitForAll()
            }
            #expect(origin.peakConcurrentResponses == expectedPeak)
        }
    }

    /// A server that never falls silent for a whole stall timeout, yet sends
    /// under a byte a second, is stalled all the same: a byte now and then
    /// kept the stall clock from running out, and the transfer held its slots
    /// for as long as the server liked.
    @Test func aTricklingServerIsStalled() async throws {
        _ = try await withEngine(retries: 0, adjust: { $0.stallTimeout = 5 }) { origin, engine, _ in
            // A byte every 2 s: 80 s for the whole body, never 5 s without a byte
            // (unless the origin's thread is held 3 s, which a loaded machine does not do).
            origin.addResource("/trickle", data: fixtureBytes(count: 40, seed: 3))
            origin.setFault("/trickle", .trickle(seconds: 2))
            do throws(TransferError) {
                let body = try await engine.download(origin.url("/trickle"))
                Issue.record("stored a trickled body of \(body.size) bytes")
            } catch {
                #expect(error.kind == .timeout)
                #expect(error.message.contains("stalled: under 1 byte a second for 5 s"), "\(error.message)")
            }
        }
    }

    @Test func aTransferCancelledWhileWaitingForASlotNeverReachesTheServer() async throws {
        _ = try await withEngine(adjust: { $0.maxConcurrentTransfers = 1; $0.stallTimeout = 120 }) { origin, engine, directory in
            // The first transfer holds the only slot until the test cancels it.
            origin.addResource("/first", data: fixtureBytes(count: 200_000, seed: 1))
            origin.setFault("/first", .stallAfter(bytes: 100_000, seconds: 60))
            origin.addResource("/second", data: fixtureBytes(count: 1_000, seed: 2))
            let first = Task { try await engine.download(origin.url("/first")) }
            while origin.requests(for: "/first").isEmpty { try await Task.sleep(for: .milliseconds(5)) }
            // The second waits in the loop's queue (or, on a slow machine, is
            // cancelled before it gets there: it must not reach the server either way).
            let second = Task { try await engine.download(origin.url("/second")) }
            try await Task.sleep(for: .milliseconds(100))
            second.cancel()
            await #expect(throws: TransferError.cancelled) { try await second.value }
            #expect(origin.requests(for: "/second").isEmpty)
            first.cancel()
            await #expect(throws: TransferError.cancelled) { try await first.value }
            #expect(origin.requests(for: "/second").isEmpty)
            #expect(!leftovers(directory).contains { $0.hasSuffix(".tmp") })
        }
    }
}

@Suite struct EngineProgressTests {
    /// Downloads `url` on an engine made with `configuration` (progress every
    /// tenth of a second); returns the body and every running transfer of
    /// every progress report.
    private func downloadShowingProgress(_ url: String, _ configuration: TransferConfiguration = TransferConfiguration(),
                                         in directory: TemporaryDirectory) async throws -> (DownloadedBody, [TransferSnapshot]) {
        var configuration = configuration
        configuration.progressInterval = 0.1
        let (body, reports) = try await downloadReportingProgress(url, configuration, partials: directory.appending("tmp"))
        return (body, reports.flatMap(\.active))
    }

    @Test func aStalledTransferStillReportsProgress() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/pause", data: fixtureBytes(count: 300_000, seed: 1))
            origin.setFault("/pause", .stallAfter(bytes: 100_000, seconds: 1.5), times: 1)
            let (_, snapshots) = try await downloadShowingProgress(origin.url("/pause"), in: directory)

            // Ticks keep coming while no byte arrives: several show the same count.
            let atStall = snapshots.filter { $0.bytesReceived == 100_000 }
            #expect(atStall.count >= 5)
            #expect(atStall.allSatisfy { $0.bytesExpected == 300_000 })
        }
    }

    /// The rate limiter's pauses are not shown as silence: under a low limit
    /// libcurl takes 100 KiB at once and then waits, and the status line said
    /// "no data for 9 s" for most of every 10 s at 10K.
    @Test func theRateLimitersPausesAreNotShownAsSilence() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 110_000, seed: 46)
            origin.addResource("/limited.bin", data: content)
            var configuration = TransferConfiguration()
            configuration.maxBytesPerSecond = 50_000
            let (body, shown) = try await downloadShowingProgress(origin.url("/limited.bin"), configuration, in: directory)
            #expect(body.sha256 == sha256(content))
            // Running while the limiter held it (2 s after its first 100 KiB), and never silent.
            #expect(shown.count >= 5, "\(shown)")
            #expect(shown.allSatisfy { $0.secondsWithoutData == 0 }, "\(shown.map(\.secondsWithoutData))")
        }
    }

    @Test func a416StartsOverFromByteZero() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 400_000, seed: 2)
            origin.addResource("/r", data: content)
            origin.setFault("/r", .dropAfter(bytes: 300_000), times: 1)
            var configuration = TransferConfiguration()
            configuration.retry = RetryPolicy(maxRetries: 0)
            let partials = directory.appending("tmp")
            try await withTransferEngine(configuration: configuration, partialDirectory: partials) { engine in
                await #expect(throws: TransferError.self) { try await engine.download(origin.url("/r")) }
            }

            origin.setFault("/r", .status(416), times: 1)
            let body = try await withTransferEngine(configuration: configuration, partialDirectory: partials) { engine in
                try await engine.download(origin.url("/r"))
            }

            let requests = origin.requests(for: "/r")
            #expect(requests.count == 3)
            #expect(requests[1].header("range") == resumeRange(from: resumeOffset(afterCutAt: 300_000, in: directory.path)))
            #expect(requests[2].header("range") == nil)
            #expect(body.size == 400_000)
            #expect(body.resumedBytes == 0)
        }
    }
}

@Suite struct EngineSafetyTests {
    /// Serves `content` whole with ETag "v1", and answers a range request
    /// with a 206 whose Content-Range and body `answer` makes from its start.
    private func serveRangesBadly(_ origin: TestOrigin, _ path: String, _ content: Data,
                                  answer: @escaping @Sendable (Int) -> (contentRange: String, body: Data)) {
        origin.route(path) { request in
            guard let start = askedStart(request) else {
                return OriginResponse(status: 200, headers: [("ETag", "\"v1\"")], body: content)
            }
            let (contentRange, body) = answer(start)
            return OriginResponse(status: 206, headers: [("ETag", "\"v1\""), ("Content-Range", contentRange)], body: body)
        }
    }

    @Test func aShortRangeAnswerIsNeverStoredAsComplete() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 600_000, seed: 3)
            // A server whose 206 covers only ten bytes of what was asked.
            serveRangesBadly(origin, "/short", content) { start in
                ("bytes \(start)-\(start + 9)/600000", content[start..<(start + 10)])
            }
            origin.setFault("/short", .dropAfter(bytes: 300_000), times: 1)
            var configuration = TransferConfiguration()
            configuration.retry = RetryPolicy(maxRetries: 0)
            let partials = directory.appending("tmp")
            try await withTransferEngine(configuration: configuration, partialDirectory: partials) { engine in
                await #expect(throws: TransferError.self) { try await engine.download(origin.url("/short")) }
            }

            configuration.retry = RetryPolicy(maxRetries: 2, baseDelay: 0.01, maxDelay: 0.02)
            let body = try await withTransferEngine(configuration: configuration, partialDirectory: partials) { engine in
                try await engine.download(origin.url("/short"))
            }

            // The bogus 206 was refused and the body fetched whole.
            #expect(body.sha256 == sha256(content))
            #expect(origin.requests(for: "/short").last?.header("range") == nil)
        }
    }

    @Test func aRangeAnswerWithImpossibleNumbersIsRefusedWithoutCrashing() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 600_000, seed: 41)
            // A resumed request gets a Content-Range whose end is Int64.max: adding one to it traps.
            serveRangesBadly(origin, "/huge-range", content) { start in
                ("bytes \(start)-9223372036854775807/9223372036854775807", Data(repeating: 0x78, count: 10))
            }
            origin.setFault("/huge-range", .dropAfter(bytes: 300_000), times: 1)
            var configuration = TransferConfiguration()
            configuration.retry = RetryPolicy(maxRetries: 2, baseDelay: 0.01, maxDelay: 0.02)
            let body = try await withTransferEngine(configuration: configuration, partialDirectory: directory.appending("tmp")) { engine in
                try await engine.download(origin.url("/huge-range"))
            }

            // The range was asked for, refused, and the body fetched whole.
            let ranges = origin.requests(for: "/huge-range").map { $0.header("range") }
            #expect(ranges == [nil, resumeRange(from: resumeOffset(afterCutAt: 300_000, in: directory.path)), nil])
            #expect(body.sha256 == sha256(content))
            #expect(body.resumedBytes == 0)
        }
    }

    /// A 206 must carry the validator a 200 would: one without it cannot
    /// show that its bytes are from the version whose head is held.
    @Test(arguments: ["\"v1\"", "Tue, 03 Nov 2026 10:00:00 GMT"])
    func aRangeAnswerThatDoesNotSayItsVersionIsNotStitched(validator: String) async throws {
        try await withOrigin { origin, directory in
            let versionOne = fixtureBytes(count: 600_000, seed: 44)
            let versionTwo = fixtureBytes(count: 600_000, seed: 45)
            let validatorHeader = validator.hasPrefix("\"") ? "ETag" : "Last-Modified"
            // The first answer is version 1, cut off; by the resume the file is
            // version 2, whose 206 (wrongly) carries no validator at all.
            origin.route("/changed") { request in
                if let start = askedStart(request) {
                    return OriginResponse(status: 206, headers: [("Content-Range", "bytes \(start)-599999/600000")],
                                          body: versionTwo[start...])
                }
                let served = origin.requests(for: "/changed").count
                return OriginResponse(status: 200, headers: [(validatorHeader, validator)],
                                      body: served == 1 ? versionOne : versionTwo)
            }
            origin.setFault("/changed", .dropAfter(bytes: 400_000), times: 1)
            var configuration = TransferConfiguration()
            configuration.retry = RetryPolicy(maxRetries: 3, baseDelay: 0.01, maxDelay: 0.02)
            let body = try await withTransferEngine(configuration: configuration, partialDirectory: directory.appending("tmp")) { engine in
                try await engine.download(origin.url("/changed"))
            }

            // The range was asked for with If-Range, its answer refused, and version 2 fetched whole.
            let requests = origin.requests(for: "/changed")
            let offset = resumeOffset(afterCutAt: 400_000, in: directory.path)
            #expect(requests.map { $0.header("range") } == [nil, resumeRange(from: offset), nil])
            #expect(requests[1].header("if-range") == validator)
            #expect(body.sha256 == sha256(versionTwo))
            #expect(body.resumedBytes == 0)
        }
    }

    @Test func aValidatorFromAnEarlierAttemptNeverVouchesForAnotherResponse() async throws {
        try await withOrigin { origin, directory in
            let versionA = fixtureBytes(count: 600_000, seed: 42)
            let versionB = fixtureBytes(count: 600_000, seed: 43)
            let served = Mutex(0)
            // 1st answer: version A with ETag "A", cut before any body byte.
            // 2nd answer: version B with no validator at all, cut after 300,000 bytes.
            // Later: version A again, honouring Range + If-Range "A".
            origin.route("/changing") { request in
                let number = served.withLock { count -> Int in
                    defer { count += 1 }
                    return count
                }
                switch number {
                case 0:
                    origin.setFault("/changing", .dropAfter(bytes: 300_000), times: 1)
                    return OriginResponse(status: 200, headers: [("ETag", "\"A\"")], body: versionA)
                case 1:
                    return OriginResponse(status: 200, body: versionB)
                default:
                    if let start = askedStart(request), request.header("if-range") == "\"A\"" {
                        return OriginResponse(status: 206, headers: [
                            ("ETag", "\"A\""), ("Content-Range", "bytes \(start)-599999/600000"),
                        ], body: versionA[start...])
                    }
                    return OriginResponse(status: 200, headers: [("ETag", "\"A\"")], body: versionA)
                }
            }
            origin.setFault("/changing", .dropAfter(bytes: 0), times: 1)
            let partials = directory.appending("tmp")
            var configuration = TransferConfiguration()
            configuration.retry = RetryPolicy(maxRetries: 1, baseDelay: 0.01, maxDelay: 0.02)
            try await withTransferEngine(configuration: configuration, partialDirectory: partials) { engine in
                await #expect(throws: TransferError.self) { try await engine.download(origin.url("/changing")) }
            }

            // The next run must not resume version B's bytes on the strength of version A's ETag.
            let body = try await withTransferEngine(configuration: configuration, partialDirectory: partials) { engine in
                try await engine.download(origin.url("/changing"))
            }
            #expect(origin.requests(for: "/changing").count == 3)
            #expect(origin.requests(for: "/changing").last?.header("range") == nil)
            #expect(body.sha256 == sha256(versionA))
            #expect(body.resumedBytes == 0)
        }
    }

    /// Whether `fd` can be locked now or within two seconds: a child another
    /// test is starting holds a copy of every descriptor for an instant,
    /// until its exec closes it. A lock this process kept is never let go.
    private func lockSoon(_ fd: Int32) async throws -> Bool {
        for _ in 0..<100 {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test func aFinishedBodyStaysLockedUntilReleased() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 70_000, seed: 31)
            origin.addResource("/held.jpg", data: content)
            try await withTransferEngine(partialDirectory: directory.appending("tmp")) { engine in
                let body = try await engine.download(origin.url("/held.jpg"))
                #expect(body.path.hasSuffix(".part"))
                // Another opener (another process, or another download of the
                // same URL) cannot lock it while the caller holds it.
                let other = open(body.path, O_RDWR | O_CLOEXEC)
                defer { close(other) }
                #expect(flock(other, LOCK_EX | LOCK_NB) != 0)

                // A second download of the same URL meanwhile goes to a file of its own.
                let again = try await engine.download(origin.url("/held.jpg"))
                #expect(again.path != body.path)
                #expect(again.sha256 == body.sha256)
                #expect(FileManager.default.contents(atPath: body.path) == content)
                again.file.release()

                body.file.release()
                #expect(try await lockSoon(other))
            }
        }
    }

    @Test func pastTheHoldingBudgetAFinishedBodyIsRenamedAndClosed() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 50_000, seed: 32)
            origin.addResource("/a.jpg", data: content)
            origin.addResource("/b.jpg", data: content)
            var configuration = TransferConfiguration()
            configuration.maxHeldFinishedBodies = 1
            try await withTransferEngine(configuration: configuration, partialDirectory: directory.appending("tmp")) { engine in
                let first = try await engine.download(origin.url("/a.jpg"))
                let second = try await engine.download(origin.url("/b.jpg"))
                #expect(first.path.hasSuffix(".part"))
                #expect(second.path.hasSuffix(".done"))
                // Nothing holds the renamed one: anyone may lock it.
                let fd = open(second.path, O_RDWR | O_CLOEXEC)
                defer { close(fd) }
                #expect(try await lockSoon(fd))
                #expect(FileManager.default.contents(atPath: second.path) == content)

                // Released, the place is free again.
                first.file.release()
                second.file.release()
                let third = try await engine.download(origin.url("/b.jpg"))
                #expect(third.path.hasSuffix(".part"))
                third.file.release()
            }
        }
    }

    @Test func sweepingRemovesLeftoversButNotLiveOrResumableFiles() async throws {
        try await TemporaryDirectory.with { directory in
            let tmp = directory.appending("tmp")
            try FileManager.default.createDirectory(atPath: tmp + "/3", withIntermediateDirectories: true)
            // Names as the engine gives them: a URL's 40-hex-digit key, or a UUID (early versions).
            func key(_ digit: Character) -> String { String(repeating: digit, count: 40) }
            let names: [String: String] = [
                "old.done": key("1") + ".part.4242-1.done", "old.tmp": key("2") + ".4242-2.tmp",
                "fresh.done": key("3") + ".part.4242-3.done", "orphan.part": key("4") + ".part",
                "kept.part": key("5") + ".part", "kept.part.validator": key("5") + ".part.validator",
                "ancient.part": key("6") + ".part", "ancient.part.validator": key("6") + ".part.validator",
                "lost.part.validator": key("7") + ".part.validator", "busy.tmp": key("8") + ".4242-4.tmp",
                "early.done": "0F2C9E4A-7B1D-4E3F-9A8B-5C6D7E8F9A0B.done",
                "3/old.done": "3/" + key("a") + ".part.4242-5.done", "3/orphan.part": "3/" + key("b") + ".part",
                "3/kept.part": "3/" + key("c") + ".part", "3/kept.part.validator": "3/" + key("c") + ".part.validator",
                "3/fresh.tmp": "3/" + key("d") + ".4242-6.tmp",
                // Not the engine's: a directory given as a cache by mistake keeps them, however old.
                "notes.txt": "notes.txt", "3/thesis.tex": "3/thesis.tex", "short.part": "abc.part",
                "keyed.jpg": key("e") + ".jpg", "3/early.png": "3/0F2C9E4A-7B1D-4E3F-9A8B-5C6D7E8F9A0B.png",
            ]
            func file(_ label: String, ageDays: Double) {
                let path = "\(tmp)/\(names[label] ?? label)"
                _ = FileManager.default.createFile(atPath: path, contents: Data("x".utf8))
                let when = Date().addingTimeInterval(-ageDays * 86_400)
                try? FileManager.default.setAttributes([.modificationDate: when], ofItemAtPath: path)
            }
            file("old.done", ageDays: 2)
            file("old.tmp", ageDays: 2)
            file("fresh.done", ageDays: 0)
            file("orphan.part", ageDays: 2)
            file("kept.part", ageDays: 2)
            file("kept.part.validator", ageDays: 2)
            file("ancient.part", ageDays: 9)
            file("ancient.part.validator", ageDays: 9)
            file("lost.part.validator", ageDays: 2)
            file("busy.tmp", ageDays: 2)
            file("early.done", ageDays: 2)
            // The same rules hold in the shard directories partials are in.
            file("3/old.done", ageDays: 2)
            file("3/orphan.part", ageDays: 2)
            file("3/kept.part", ageDays: 2)
            file("3/kept.part.validator", ageDays: 2)
            file("3/fresh.tmp", ageDays: 0)
            file("notes.txt", ageDays: 30)
            file("3/thesis.tex", ageDays: 30)
            file("short.part", ageDays: 30)
            file("keyed.jpg", ageDays: 30)
            file("3/early.png", ageDays: 30)
            let busy = open("\(tmp)/\(names["busy.tmp"] ?? "")", O_RDWR)
            defer { close(busy) }
            #expect(flock(busy, LOCK_EX) == 0)

            let removed = PartialFile.sweep(directory: tmp)

            let left = Set(partialDirectoryFiles(tmp))
            let expected = ["fresh.done", "kept.part", "kept.part.validator", "busy.tmp", "3/kept.part",
                            "3/kept.part.validator", "3/fresh.tmp", "notes.txt", "3/thesis.tex", "short.part",
                            "keyed.jpg", "3/early.png"]
            #expect(left == Set(expected.compactMap { names[$0] }))
            #expect(removed == 9)
        }
    }
}

/// The start a request's `Range: bytes=N-` asks for, if it asks one.
fileprivate func askedStart(_ request: OriginRequest) -> Int? {
    request.header("range").flatMap { Int($0.dropFirst(6).dropLast()) }
}

/// `request` answered from `content` under `etag`, as a server that honours
/// ranges: the whole of it, or a 206 of the rest from the start it asks.
fileprivate func answer(_ request: OriginRequest, from content: Data, etag: String) -> OriginResponse {
    guard let start = askedStart(request) else { return OriginResponse(headers: [("ETag", etag)], body: content) }
    return OriginResponse(status: 206, headers: [("ETag", etag), ("Content-Range", "bytes \(start)-\(content.count - 1)/\(content.count)")],
                          body: content.suffix(from: start))
}
