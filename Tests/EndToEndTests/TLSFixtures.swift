import Foundation
import TestSupport

/// The test CA and the server certificate it signed for `localhost` and
/// 127.0.0.1 (Tests/Fixtures/tls), shared by the HTTPS origins of the tests.
enum TLSFixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/tls")
    static var caCertificates: String { directory.appendingPathComponent("ca.pem").path }
    static var serverCertificate: String { directory.appendingPathComponent("server.pem").path }
    static var serverKey: String { directory.appendingPathComponent("server.key").path }

    static let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Starts a process that runs `command` so that it ends with the tests:
    /// with the process, or when the test process itself goes away (see
    /// Fixtures/with-parent.py). Its output goes to /dev/null.
    static func helperServer(_ command: [String]) throws -> SpawnedProcess {
        let wrapper = directory.deletingLastPathComponent().appendingPathComponent("with-parent.py").path
        return try SpawnedProcess([python ?? "/usr/bin/python3", wrapper] + command,
                                  environment: ProcessInfo.processInfo.environment)
    }
}
