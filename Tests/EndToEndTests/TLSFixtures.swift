import Foundation

/// The test CA and the server certificate it signed for `localhost` and
/// 127.0.0.1 (Tests/Fixtures/tls), shared by the HTTPS origins of the tests.
enum TLSFixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/tls")
    static var caCertificates: String { directory.appendingPathComponent("ca.pem").path }
    static var serverCertificate: String { directory.appendingPathComponent("server.pem").path }
    static var serverKey: String { directory.appendingPathComponent("server.key").path }

    static let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// A process that runs `command` so that it ends with the tests: with
    /// the process, or when the test process itself goes away (see
    /// Fixtures/with-parent.py). Not started yet.
    static func helperServer(_ command: [String]) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python ?? "/usr/bin/python3")
        let wrapper = directory.deletingLastPathComponent().appendingPathComponent("with-parent.py").path
        process.arguments = [wrapper] + command
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        return process
    }
}
