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
