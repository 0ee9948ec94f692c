import Foundation
import Testing
import TestSupport

/// The local origin the project ships for the README's main-job command
/// (`make demo`): run as its users run it, from a shell script.
@Suite struct LocalOriginTests {
    /// Samples made, served from a port written to a file, fetched into a
    /// cache (two URLs of the same bytes stored once), and the origin stopped
    /// by SIGTERM with status 0; neither program leaves a file in the
    /// temporary directory nor a half-written port file.
    @Test func samplesAreServedAndFetchedWithoutLeavingTemporaryFiles() async throws {
        try await TemporaryDirectory.with { directory in
            let temporary = directory.appending("tmp")
            try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
            let origin = BuiltProducts.directory.appendingPathComponent("mediafetch-origin").path
            let script = """
                set -e
                D='\(directory.path)'
                '\(origin)' --make-samples "$D/media" --photos 2
                '\(origin)' --root "$D/media" --port 0 --port-file "$D/port" > "$D/origin.log" &
                served=$!
                tries=0
                until [ -s "$D/port" ]; do
                    tries=$((tries + 1)); [ $tries -lt 3000 ] || { kill $served; echo 'no port file'; exit 1; }
                    sleep 0.01
                done
                base="http://127.0.0.1:$(cat "$D/port")"
                "$MEDIAFETCH" get --cache "$D/cache" "$base/photos/000.jpg" "$base/photos/copy-of-000.jpg" "$base/sounds/02.flac"
                kill -TERM $served
                wait $served && echo "origin stopped: 0" || echo "origin stopped: $?"
                echo "left in tmp: $(ls -A "$TMPDIR" | wc -l)"
                """
            let result = try await BuiltProducts.runShell(script, environment: ["TMPDIR": temporary])
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            #expect(result.stdout.contains("origin stopped: 0"), "\(result.stdout)")
            #expect(result.stdout.contains("left in tmp: 0"), "\(result.stdout)")
            // Three URLs, two of them the same photo's bytes: two objects.
            let objects = FileManager.default.enumerator(atPath: directory.appending("cache/objects/sha256"))?
                .compactMap { $0 as? String }.filter { $0.count > 64 } ?? []
            #expect(objects.count == 2, "\(objects)")
            let port = try String(contentsOfFile: directory.appending("port"), encoding: .utf8)
            #expect(UInt16(port.trimmingCharacters(in: .newlines)) != nil, "\(port)")
            let log = try String(contentsOfFile: directory.appending("origin.log"), encoding: .utf8)
            #expect(log.hasPrefix("serving \(directory.appending("media")) at http://127.0.0.1:"), "\(log)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).allSatisfy { !$0.contains(".partial-") })
        }
    }
}
