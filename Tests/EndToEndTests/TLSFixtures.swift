import Foundation

/// The test CA and the server certificate it signed for `localhost` and
/// 127.0.0.1 (Tests/Fixtures/tls), shared by the HTTPS origins of the tests.
enum TLSFixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/tls")
    static var caCertificates: String { directory.appendingPathComponent("ca.pem").path }
    static var serverCertificate: String { directory.appendingPathComponent("server.pem").path }
    static var serverKey: String { directory.appendingPathComponent("server.key").path }
}
