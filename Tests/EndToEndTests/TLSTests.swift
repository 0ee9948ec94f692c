import Crypto
import Foundation
import Testing
import TestOrigin
import TestSupport

/// An HTTPS origin whose certificate a test CA signed (Tests/Fixtures/tls):
/// Python's TLS server, started per test, stopped when the test ends.
private final class TLSOrigin: Sendable {
    let port: Int
    private let process: SpawnedProcess

    init(bodyBytes: Int, in directory: TemporaryDirectory) async throws {
        let portFile = directory.appending("tls-origin.port")
        let process = try TLSFixtures.helperServer([TLSFixtures.python ?? "/usr/bin/python3",
                                                    TLSFixtures.directory.appendingPathComponent("serve.py").path,
                                                    String(bodyBytes), portFile])
        // The server writes its port (by a rename, so never half a line) once it listens.
        var port: Int?
        for _ in 0..<1000 where process.isRunning {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8) {
                port = Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        guard let port else {
            kill(process.pid, SIGKILL)
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: portFile])
        }
        self.port = port
        self.process = process
    }

    func url(_ path: String) -> String { "https://localhost:\(port)\(path)" }

    /// The variables that name CA certificates, emptied: the system's are trusted.
    static let noCAVariables = ["CURL_CA_BUNDLE": "", "SSL_CERT_FILE": ""]

    /// The bytes the server sends for any path.
    static func body(_ count: Int) -> Data { Data((0..<count).map { UInt8(($0 * 31 + 7) % 256) }) }

    deinit {
        // SIGKILL: a process started from a Dispatch thread inherits its blocked SIGTERM.
        kill(process.pid, SIGKILL)
        _ = process.waitForExit()
    }
}

@Suite(.enabled(if: TLSFixtures.python != nil, "needs python3 for the TLS origin"))
struct TLSTests {
    private func sha256(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    @Test func anUntrustedCertificateFailsAtOnceWithOneLine() async throws {
        try await TemporaryDirectory.with { directory in
            let origin = try await TLSOrigin(bodyBytes: 10_000, in: directory)
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--progress", "json",
                                                      origin.url("/photo.jpg")], environment: TLSOrigin.noCAVariables)
            #expect(result.status == 1)
            #expect(!result.stderr.contains("\"retrying\""), "a certificate error was retried")
            let failed = result.stderrLines.filter { $0.hasPrefix(#"{"event":"failed","#) }
            #expect(failed.count == 1, "\(result.stderrLines)")
            #expect(failed.first?.lowercased().contains("certificate") == true, "\(failed)")
        }
    }

    @Test func aPrivateCAIsTrustedWithCacertOrCurlsVariables() async throws {
        try await TemporaryDirectory.with { directory in
            let origin = try await TLSOrigin(bodyBytes: 70_000, in: directory)
            let expected = sha256(TLSOrigin.body(70_000))
            // CURL_CA_BUNDLE comes first, as with curl (empty counts as unset).
            let ways: [(arguments: [String], environment: [String: String])] = [
                (["--cacert", TLSFixtures.caCertificates], TLSOrigin.noCAVariables),
                ([], ["CURL_CA_BUNDLE": TLSFixtures.caCertificates, "SSL_CERT_FILE": "/nonexistent"]),
                ([], ["CURL_CA_BUNDLE": "", "SSL_CERT_FILE": TLSFixtures.caCertificates]),
            ]
            for (index, way) in ways.enumerated() {
                let cache = directory.appending("cache-\(index)")
                let result = try await BuiltProducts.run(["get", "--cache", cache] + way.arguments + [origin.url("/album/1.jpg")],
                                                         environment: way.environment)
                #expect(result.status == 0, "\(way): \(result.stderr)")
                #expect(try objectPaths(inCache: cache).map { URL(fileURLWithPath: $0).lastPathComponent } == [expected])
            }
        }
    }

    @Test func anUnreadableCAFileIsAUsageError() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                      "--cacert", "/nonexistent/ca.pem", "https://localhost:1/x"])
            #expect(result.status == 64)
            #expect(result.stderrLines == usageError("--cacert: cannot read /nonexistent/ca.pem: No such file or directory"))
            let directoryGiven = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                             "--cacert", "/etc", "https://localhost:1/x"])
            #expect(directoryGiven.status == 64)
            #expect(directoryGiven.stderrLines == usageError("--cacert: /etc is not a file of certificates (a directory?)"))
            // Nor a pipe (--cacert <(cat ca.pem)) or a device: libcurl reads the file for every connection.
            let device = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--retries", "0",
                                                      "--cacert", "/dev/null", "https://localhost:1/x"])
            #expect(device.status == 64)
            #expect(device.stderrLines == usageError("--cacert: /dev/null is not a regular file (it is read again for every connection)"))
            // An empty or garbled file failed every https URL on a line of its own.
            for contents in ["", "not a certificate\n"] {
                let garbled = directory.appending("garbled.pem")
                try contents.write(toFile: garbled, atomically: true, encoding: .utf8)
                let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                          "--cacert", garbled, "https://localhost:1/x", "https://localhost:1/y"])
                #expect(result.status == 64)
                #expect(result.stderrLines == usageError("--cacert: \(garbled) holds no PEM certificate (-----BEGIN CERTIFICATE-----)"))
            }
        }
    }

    @Test func aStaleCAVariableDoesNotStopPlainHTTP() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/plain.jpg", data: fixtureBytes(count: 2000, seed: 56))
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), origin.url("/plain.jpg")],
                                                     environment: ["CURL_CA_BUNDLE": "/nonexistent/bundle.pem"])
            #expect(result.status == 0, "\(result.stderr)")
        }
    }

    /// A stale variable with an https URL in the list is one line naming the
    /// variable, before any request: it failed every https URL on a line of its own.
    @Test func aStaleCAVariableWithHTTPSIsOneLineNamingIt() async throws {
        try await TemporaryDirectory.with { directory in
            for (name, other) in [("CURL_CA_BUNDLE", "SSL_CERT_FILE"), ("SSL_CERT_FILE", "CURL_CA_BUNDLE")] {
                let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                          "HTTPS://localhost:1/x", "https://localhost:1/y"],
                                                         environment: [name: "/etc/passwd", other: ""])
                #expect(result.status == 64)
                #expect(result.stderrLines == ["mediafetch: \(name): /etc/passwd holds no PEM certificate "
                    + "(-----BEGIN CERTIFICATE-----) (unset it, or give --cacert FILE)"])
            }
        }
    }
}
