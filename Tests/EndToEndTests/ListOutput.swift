import Foundation
import Testing
import TestSupport

/// `mediafetch list --format json` on `cache` (with `extra` options), parsed:
/// one dictionary per entry. Records an issue when the command fails.
func listJSON(_ cache: String, _ extra: [String] = []) async throws -> [[String: Any]] {
    let result = try await BuiltProducts.run(["list", "--cache", cache, "--format", "json"] + extra)
    #expect(result.status == 0, "list failed: \(result.stderr)")
    let parsed = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
    return try #require(parsed as? [[String: Any]])
}
