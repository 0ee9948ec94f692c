import Foundation
import Testing
import TestOrigin
import TestSupport

/// `list --failed`: which URLs failed last time, and why; a URL fetched
/// since is no longer among them.
@Suite struct ListFailedTests {
    @Test func failedURLsAreListedWithTheirReasonUntilTheyAreFetched() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/ok.jpg", data: fixtureBytes(count: 2_000, seed: 81))
            let cache = directory.appending("cache")
            let gone = origin.url("/later.jpg")
            let withPassword = origin.url("/private.jpg").replacingOccurrences(of: "http://", with: "http://ann:secret@")
            let first = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0", origin.url("/ok.jpg"), gone, withPassword])
            #expect(first.status == 1)

            let json = try await BuiltProducts.run(["list", "--cache", cache, "--failed", "--format", "json"])
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
            let table = try await BuiltProducts.run(["list", "--cache", cache, "--failed"])
            let csv = try await BuiltProducts.run(["list", "--cache", cache, "--failed", "--format", "csv"])

            #expect(json.status == 0 && table.status == 0 && csv.status == 0)
            let redacted = origin.url("/private.jpg").replacingOccurrences(of: "http://", with: "http://ann@")
            #expect(Set(rows.compactMap { $0["url"] as? String }) == [gone, redacted])
            #expect(rows.allSatisfy { ($0["reason"] as? String)?.hasPrefix("HTTP 404") == true && $0["cached"] as? Bool == false })
            #expect(rows.allSatisfy { ($0["failedAt"] as? String).flatMap(ISO8601DateFormatter().date(from:)) != nil })
            let lines = table.stdout.split(separator: "\n")
            #expect(lines.first?.hasPrefix("FAILED AT") == true)
            #expect(lines.count == 3)
            #expect(lines.dropFirst().allSatisfy { $0.contains(" HTTP 404") })
            #expect(csv.stdout.split(separator: "\n").first == "url,failedAt,reason,cached")
            for output in [json.stdout, table.stdout, csv.stdout] { #expect(!output.contains("secret")) }

            // Served now: fetched, and no longer failed.
            origin.addResource("/later.jpg", data: fixtureBytes(count: 2_000, seed: 82))
            #expect(try await BuiltProducts.run(["get", "--cache", cache, gone]).status == 0)
            let after = try await BuiltProducts.run(["list", "--cache", cache, "--failed", "--format", "json"])
            let left = try #require(try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [[String: Any]])
            #expect(left.compactMap { $0["url"] as? String } == [redacted])
        }
    }

    /// A URL with Slovak letters in its path reads as such in the failure
    /// line and the tables, as it was typed; JSON and CSV keep it as
    /// recorded (escaped).
    @Test func aSlovakPathReadsAsWrittenOnTheTerminalAndStaysEscapedInJSON() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/zvuky/ok.wav", data: soundFixtureBytes(count: 2_000, seed: 83))
            let cache = directory.appending("cache")
            let typed = origin.url("/zvuky/Štrbské-pleso-ďaleký-výhľad.wav")
            let recorded = origin.url("/zvuky/%C5%A0trbsk%C3%A9-pleso-%C4%8Falek%C3%BD-v%C3%BDh%C4%BEad.wav")

            let run = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0", "--collection", "zvuky", typed,
                                                   origin.url("/zvuky/ok.wav")])
            let failed = try await BuiltProducts.run(["list", "--cache", cache, "--failed"])
            let json = try await BuiltProducts.run(["list", "--cache", cache, "--failed", "--format", "json"])
            let csv = try await BuiltProducts.run(["list", "--cache", cache, "--failed", "--format", "csv"])

            #expect(run.status == 1)
            #expect(run.stderr.contains("failed \(typed): HTTP 404"))
            #expect(failed.stdout.contains(typed) && !failed.stdout.contains("%C5%A0"))
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
            #expect(rows.compactMap { $0["url"] as? String } == [recorded])
            #expect(csv.stdout.contains(recorded))
        }
    }

    /// A table with no row is its header alone: a note on stderr says there
    /// is nothing (CSV's header and JSON's `[]` say it themselves).
    @Test func anEmptyTableSaysSo() async throws {
        try await withOrigin { origin, directory in
            let cache = directory.appending("cache")
            let photo = origin.addFixtures(count: 1, size: 2_000, firstSeed: 83)
            #expect(try await BuiltProducts.run(["get", "--cache", cache] + photo).status == 0)

            let failed = try await BuiltProducts.run(["list", "--cache", cache, "--failed"])
            let photos = try await BuiltProducts.run(["list", "--cache", cache, "--kind", "photo"])
            let csv = try await BuiltProducts.run(["list", "--cache", cache, "--kind", "photo", "--format", "csv"])
            let files = try await BuiltProducts.run(["list", "--cache", cache, "--kind", "file"])

            #expect(failed.status == 0 && failed.stdout.split(separator: "\n").count == 1)
            #expect(failed.stderrLines == ["mediafetch: note: no URL's last fetch failed"])
            #expect(photos.stdout.split(separator: "\n").count == 1)
            #expect(photos.stderrLines == ["mediafetch: note: no items of kind photo in the cache"])
            #expect(csv.stderr.isEmpty)
            #expect(files.stderr.isEmpty && files.stdout.split(separator: "\n").count == 2)
        }
    }

    /// A run that began before another process fetched the URL, and failed
    /// it after: the fetch is the newer news. The failure stayed listed for
    /// good (the URL, cached, was never fetched again to clear it).
    @Test func aFailureOlderThanAnotherProcesssFetchIsNotListed() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/big.jpg", data: fixtureBytes(count: 300_000, seed: 83))
            let cache = directory.appending("cache")
            let url = origin.url("/big.jpg")
            // The slow run: 1 KiB/s, given up after 4 s.
            let slow = try BuiltProducts.start(["get", "--cache", cache, "--retries", "0", "--timeout", "4",
                                                "--limit-rate", "1K", "--collection", "slow", url])
            try await Task.sleep(for: .seconds(1))
            let fast = try await BuiltProducts.run(["get", "--cache", cache, "--collection", "fast", url])
            #expect(fast.status == 0, "\(fast.stderr)")
            let slowResult = await slow.wait()
            #expect(slowResult.status == 1, "\(slowResult.stderr)")

            let failed = try await BuiltProducts.run(["list", "--cache", cache, "--failed", "--format", "json"])
            #expect(failed.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[]", "\(failed.stdout)")
        }
    }

    /// A URL whose file was gone, and whose fetch then failed, is listed until
    /// a run finds its file in place again (the same bytes came from
    /// another URL): `get` said it was cached, and never fetched it to clear it.
    @Test func aFailedURLWhoseFileIsBackLeavesTheListWhenFoundCached() async throws {
        try await withOrigin { origin, directory in
            let bytes = fixtureBytes(count: 3_000, seed: 84)
            origin.addResource("/a.jpg", data: bytes)
            origin.addResource("/copy.jpg", data: bytes)
            let cache = directory.appending("cache")
            let url = origin.url("/a.jpg")
            #expect(try await BuiltProducts.run(["get", "--cache", cache, url]).status == 0)
            let listed = try await BuiltProducts.run(["list", "--cache", cache, "--format", "json"])
            let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
            let path = try #require(entries.first?["path"] as? String)
            #expect(unlink(path) == 0)
            origin.setFault("/a.jpg", .status(503))
            #expect(try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0", url]).status == 1)
            let failedBefore = try await BuiltProducts.run(["list", "--cache", cache, "--failed", "--format", "csv"])
            #expect(failedBefore.stdout.split(separator: "\n").count == 2, "\(failedBefore.stdout)")

            // The same bytes from another URL put the file back; the URL is then found cached.
            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/copy.jpg")]).status == 0)
            let again = try await BuiltProducts.run(["get", "--cache", cache, url])
            #expect(again.status == 0, "\(again.stderr)")

            let failedAfter = try await BuiltProducts.run(["list", "--cache", cache, "--failed", "--format", "csv"])
            #expect(failedAfter.stdout == "url,failedAt,reason,cached\n", "\(failedAfter.stdout)")
        }
    }

    @Test func failedTakesNoCollectionOrKind() async throws {
        try await TemporaryDirectory.with { directory in
            for extra in [["--collection", "x"], ["--kind", "photo"]] {
                let result = try await BuiltProducts.run(["list", "--cache", directory.appending("cache"), "--failed"] + extra)
                #expect(result.status == 64)
                #expect(result.stderr.contains("--failed lists URLs, which belong to no collection or kind"), "\(result.stderr)")
            }
            #expect(!FileManager.default.fileExists(atPath: directory.appending("cache")))
        }
    }
}
