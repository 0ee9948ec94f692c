import Foundation
import Synchronization
import Testing
import TestOrigin
import TestSupport
@testable import Transfer

/// A host that answers 429 Too Many Requests is paused as a whole (see
/// `HostRateLimits`): asked again once its wait is over, by one transfer,
/// and given up when it asks to wait longer than mediafetch waits.
@Suite struct RateLimitedHostTests {
    private final class Results: Sendable {
        let byIndex = Mutex<[Int: Result<DownloadedBody, TransferError>]>([:])
    }

    /// Downloads `urls` as one batch, 8 at a time against any host, with
    /// three quick retries and `longestWait` as the longest `Retry-After` honoured.
    private func download(_ urls: [String], longestWait: Double = 600,
                          directory: TemporaryDirectory) async throws -> [Int: Result<DownloadedBody, TransferError>] {
        var configuration = TransferConfiguration()
        configuration.retry = RetryPolicy(maxRetries: 3, baseDelay: 0.02, maxDelay: 0.05, maxRetryAfter: longestWait)
        configuration.maxConcurrentTransfers = 8
        configuration.maxTransfersPerHost = 8
        let engine = try TransferEngine(configuration: configuration, partialDirectory: directory.appending("tmp"))
        defer { engine.shutdown() }
        let results = Results()
        await engine.download(count: urls.count, url: { urls[$0] }) { index, result, ready in
            if case .success(let body) = result { body.file.release() }
            results.byIndex.withLock { $0[index] = result }
            ready()
        }
        return results.byIndex.withLock { $0 }
    }

    private func photos(_ count: Int, of origin: TestOrigin, named name: String = "photo") -> [String] {
        (0..<count).map { index in
            let path = "/\(name)\(index).jpg"
            origin.addResource(path, data: fixtureBytes(count: 8_000, seed: UInt64(index)))
            return origin.url(path)
        }
    }

    /// A host that serves 6 requests a second and answers the rest 429 until
    /// the second is over: each URL that waited for it asked in turn and was
    /// sent away in turn (60 URLs: 171 answers 429). Now the host is asked
    /// again by one transfer once the wait is over; another host's URLs go on meanwhile.
    @Test func aRateLimitedHostIsAskedAgainByOneTransferWhenItsWaitIsOver() async throws {
        try await withOrigin { origin, directory in
            let other = try TestOrigin()
            defer { other.shutdown() }
            origin.limitRate(to: 6, per: 1)
            let urls = photos(24, of: origin) + photos(10, of: other, named: "elsewhere")

            let results = try await download(urls, directory: directory)

            let failed = results.filter { (try? $0.value.get()) == nil }
            #expect(failed.isEmpty, "\(failed.count) failed: \(failed.first.map { "\($0.value)" } ?? "")")
            // Each window's burst sends a few away (those sent before the first
            // 429 came back: 14-17 in all); every URL waiting asked in turn before (36).
            #expect(origin.rateLimitedAnswers <= 24, "\(origin.rateLimitedAnswers) answered 429")
            #expect(origin.rateLimitedAnswers > 0) // (it was limited)
            #expect(other.requests().count == 10)
        }
    }

    /// A host that answers every request 429 held each of its URLs through
    /// up to the longest wait honoured (10 min) of its own, 8 at a time:
    /// hours for a list of hundreds. Now the host as a whole is given up
    /// once it has asked for that long, and its URLs fail at once, saying why.
    @Test func aHostThatAnswersEverything429IsGivenUpOnceItHasAskedForTheLongestWait() async throws {
        try await withOrigin { origin, directory in
            origin.limitRate(to: 0, per: 3_600, retryAfter: 1)
            let urls = photos(20, of: origin)

            let results = try await download(urls, longestWait: 2.5, directory: directory)

            #expect(results.count == 20)
            let givenUp = results.values.compactMap { result -> TransferError? in
                guard case .failure(let error) = result, error.kind == .hostGivenUp else { return nil }
                return error
            }
            #expect(results.values.allSatisfy { (try? $0.get()) == nil })
            #expect(givenUp.count >= 12, "\(results.values.map { "\($0)" })")
            #expect(givenUp.allSatisfy {
                $0.message.hasPrefix("given up: 127.0.0.1:\(origin.port) answered only 429 Too Many Requests for ")
                    && $0.message.hasSuffix("(mediafetch waits 2.5 s at most); its URLs fail at once")
            }, "\(givenUp.first.map { "\($0)" } ?? "")")
            // The first 8 at once, then one at a time each second, until 2.5 s were asked for
            // (each URL asked at least once before, and 4 times each over the waits it was allowed).
            #expect(origin.requests().count < 20, "\(origin.requests().count) requests")
        }
    }

    /// A host asking to wait longer than mediafetch waits is given up at
    /// once: the URLs waiting for it end without a request (each asked, and
    /// was sent away, in turn).
    @Test func aHostAskingForALongerWaitThanMediafetchWaitsIsGivenUpAtOnce() async throws {
        try await withOrigin { origin, directory in
            origin.limitRate(to: 0, per: 3_600, retryAfter: 7_200)
            let urls = photos(20, of: origin)

            let results = try await download(urls, directory: directory)

            #expect(results.values.allSatisfy { (try? $0.get()) == nil })
            let messages = results.values.compactMap { result -> String? in
                if case .failure(let error) = result { return error.message }
                return nil
            }
            // The first burst's own 429s say what they asked; the rest were not tried.
            let untried = messages.filter { $0.hasPrefix("given up:") }
            #expect(untried.count >= 12, "\(messages)")
            #expect(untried.allSatisfy {
                $0 == "given up: 127.0.0.1:\(origin.port) answered 429 Too Many Requests and asked to wait 2 h "
                    + "(mediafetch waits 10 min at most); its URLs fail at once"
            }, "\(untried.first ?? "")")
            #expect(origin.requests().count <= 8, "\(origin.requests().count) requests")
        }
    }
}
