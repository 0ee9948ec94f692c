import Crypto
import Foundation
import SampleMedia
import Synchronization
import Testing
import TestOrigin
import TestSupport

/// nginx serving HTTPS with HTTP/2 on loopback (the test CA's certificate, as
/// in TLSTests), started per test with its own directory, stopped when the
/// test ends. Its access log names the connection and protocol of every request.
private final class HTTP2Origin: Sendable {
    static let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) }

    let port: Int
    let accessLog: String
    /// The SHA-256 of every file served (`/0.bin`, `/1.bin`, …).
    let hashes: Set<String>
    private let process: SpawnedProcess

    /// Serves `count` generated files of about `bytes` each (no two alike), from
    /// `directory`/www, each response at most `bytesPerSecond` fast when given;
    /// paths under `/origin/` are passed on to plain HTTP on `proxiedPort`
    /// when given, and those under `/plain/` redirected there; runs from
    /// `directory`/nginx.
    init(files count: Int, bytes: Int, seed: UInt64, bytesPerSecond: Int? = nil, proxiedPort: UInt16? = nil,
         in directory: TemporaryDirectory) async throws {
        let www = directory.appending("www")
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        var hashes: Set<String> = []
        for index in 0..<count {
            let body = fixtureBytes(count: bytes + index, seed: seed + UInt64(index))
            try body.write(to: URL(fileURLWithPath: "\(www)/\(index).bin"))
            hashes.insert(SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined())
        }
        self.hashes = hashes
        let home = directory.appending("nginx")
        try FileManager.default.createDirectory(atPath: home + "/temp", withIntermediateDirectories: true)
        accessLog = home + "/access.log"
        // nginx cannot report a port it was given 0 for: take a free one, and
        // try another should someone bind it first.
        for _ in 0..<5 {
            let port = try Self.freePort()
            let configuration = home + "/nginx.conf"
            try Self.configuration(port: port, home: home, root: www, bytesPerSecond: bytesPerSecond, proxiedPort: proxiedPort)
                .write(toFile: configuration, atomically: true, encoding: .utf8)
            let process = try TLSFixtures.helperServer([Self.nginx ?? "/usr/sbin/nginx",
                                                        "-p", home + "/", "-e", home + "/error.log", "-c", configuration])
            for _ in 0..<500 where process.isRunning {
                if Self.accepts(port) {
                    self.port = port
                    self.process = process
                    return
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            kill(process.pid, SIGKILL)
            _ = process.waitForExit()
        }
        let errors = (try? String(contentsOfFile: home + "/error.log", encoding: .utf8)) ?? ""
        throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "nginx did not start: \(errors)"])
    }

    deinit {
        // SIGKILL: a process started from a Dispatch thread inherits its blocked SIGTERM.
        kill(process.pid, SIGKILL)
        _ = process.waitForExit()
    }

    /// The URLs of the files served, in order.
    var urls: [String] { (0..<hashes.count).map { "https://localhost:\(port)/\($0).bin" } }

    /// Each request nginx logged: the connection's serial number and the protocol.
    func requests() throws -> [(connection: String, protocol: String, status: String)] {
        try String(contentsOfFile: accessLog, encoding: .utf8).split(separator: "\n").map { line in
            let fields = line.split(separator: " ").map(String.init)
            return (fields[0], fields[1], fields[2])
        }
    }

    private static func configuration(port: Int, home: String, root: String, bytesPerSecond: Int?, proxiedPort: UInt16?) -> String {
        """
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(home)/nginx.pid;
        error_log \(home)/error.log warn;
        events { worker_connections 256; }
        http {
            log_format streams '$connection $server_protocol $status $request_uri';
            access_log \(home)/access.log streams;
            client_body_temp_path \(home)/temp/body;
            proxy_temp_path \(home)/temp/proxy;
            fastcgi_temp_path \(home)/temp/fastcgi;
            uwsgi_temp_path \(home)/temp/uwsgi;
            scgi_temp_path \(home)/temp/scgi;
            server {
                listen 127.0.0.1:\(port) ssl http2;
                ssl_certificate \(TLSFixtures.serverCertificate);
                ssl_certificate_key \(TLSFixtures.serverKey);
                root \(root);
                \(bytesPerSecond.map { "limit_rate \($0);" } ?? "")
                \(proxiedPort.map { "location /origin/ { proxy_pass http://127.0.0.1:\($0); }" } ?? "")
                \(proxiedPort.map { "location /plain/ { return 302 http://127.0.0.1:\($0)$request_uri; }" } ?? "")
            }
        }

        """
    }

    private static func freePort() throws -> Int {
        let (socket, port) = try LoopbackSocket.bound()
        close(socket)
        return port
    }

    private static func accepts(_ port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// A TCP socket bound to a free port on 127.0.0.1.
private enum LoopbackSocket {
    static func bound() throws -> (socket: Int32, port: Int) {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0
            }
        }
        guard bound else {
            close(socket)
            throw POSIXError(.EADDRINUSE)
        }
        return (socket, Int(UInt16(bigEndian: address.sin_port)))
    }
}

/// How transfers use connections: reused over HTTP/1.1, one multiplexed
/// connection where the server speaks HTTP/2.
@Suite struct ConnectionTests {
    /// The names (hashes) of the objects in the cache at `cache`.
    private func storedHashes(_ cache: String) throws -> Set<String> {
        Set(try objectPaths(inCache: cache).map { URL(fileURLWithPath: $0).lastPathComponent })
    }

    @Test func http11ConnectionsAreReusedAcrossTransfers() async throws {
        try await withOrigin { origin, directory in
            var urls: [String] = []
            for index in 0..<30 {
                origin.addResource("/photo/\(index).jpg", data: fixtureBytes(count: 20_000, seed: UInt64(300 + index)))
                urls.append(origin.url("/photo/\(index).jpg"))
            }
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                      "--jobs", "3", "--per-host", "3"] + urls)
            #expect(result.status == 0, "\(result.stderr)")
            let requests = origin.requests()
            #expect(requests.count == 30)
            // Three transfers at a time: three connections, each carrying about ten requests.
            let connections = Set(requests.map(\.connection))
            #expect(connections.count <= 3, "30 requests came on \(connections.count) connections")
        }
    }

    /// A list that goes round more hosts than two a transfer keeps a
    /// connection to each: with two a transfer cached, each new connection
    /// pushed out another host's, and nearly every URL paid for a new one
    /// (and, over HTTPS, a TLS handshake).
    @Test func aListGoingRoundManyHostsReusesAConnectionToEach() async throws {
        try await TemporaryDirectory.with { directory in
            let origins = try (0..<30).map { _ in try TestOrigin() }
            defer { for origin in origins { origin.shutdown() } }
            var urls: [String] = []
            for round in 0..<8 {
                for (index, origin) in origins.enumerated() {
                    origin.addResource("/\(round).jpg", data: fixtureBytes(count: 2_000, seed: UInt64(5_000 + 100 * index + round)))
                    urls.append(origin.url("/\(round).jpg"))
                }
            }
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                      "--jobs", "2", "--per-host", "1"] + urls)
            #expect(result.status == 0, "\(result.stderr)")
            let connections = origins.map { Set($0.requests().map(\.connection)).count }
            #expect(connections.reduce(0, +) <= 2 * origins.count, "240 requests to 30 hosts came on \(connections) connections")
        }
    }

    @Test(.enabled(if: HTTP2Origin.nginx != nil && TLSFixtures.python != nil, "needs nginx and python3 for the HTTP/2 origin"))
    func http2TransfersShareOneConnection() async throws {
        try await TemporaryDirectory.with { directory in
            let origin = try await HTTP2Origin(files: 24, bytes: 40_000, seed: 400, in: directory)
            let cache = directory.appending("cache")

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--cacert", TLSFixtures.caCertificates,
                                                      "--per-host", "8"] + origin.urls)

            #expect(result.status == 0, "\(result.stderr)")
            #expect(try storedHashes(cache) == origin.hashes)
            let requests = try origin.requests()
            #expect(requests.count == 24)
            #expect(requests.allSatisfy { $0.protocol == "HTTP/2.0" && $0.status == "200" }, "\(requests)")
            // Eight at a time, yet one connection: the first eight waited for it to
            // say it multiplexes rather than each opening a connection of its own.
            let connections = Set(requests.map(\.connection))
            #expect(connections.count == 1, "24 requests came on \(connections.count) connections")
        }
    }

    /// The host's first transfer goes alone only until its connection is
    /// made: a first URL whose answer takes seconds (here 3 s, from the
    /// origin behind nginx) no longer holds up the host's other transfers,
    /// which share its HTTP/2 connection and finish first.
    @Test(.enabled(if: HTTP2Origin.nginx != nil && TLSFixtures.python != nil, "needs nginx and python3 for the HTTP/2 origin"))
    func aSlowFirstAnswerDoesNotHoldUpTheHost() async throws {
        try await withOrigin { backend, directory in
            backend.route("/origin/slow.bin") { _ in
                Thread.sleep(forTimeInterval: 3)
                return OriginResponse(body: fixtureBytes(count: 5_000, seed: 700))
            }
            let origin = try await HTTP2Origin(files: 8, bytes: 20_000, seed: 710, proxiedPort: backend.port, in: directory)
            let slow = "https://localhost:\(origin.port)/origin/slow.bin"

            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                      "--cacert", TLSFixtures.caCertificates, slow] + origin.urls)

            #expect(result.status == 0, "\(result.stderr)")
            // nginx logs a request when its answer is sent: every other file before the slow one.
            let requests = try origin.requests()
            #expect(requests.count == 9)
            #expect(requests.allSatisfy { $0.status == "200" }, "\(requests)")
            #expect(try String(contentsOfFile: origin.accessLog, encoding: .utf8).split(separator: "\n").last?
                .hasSuffix("/origin/slow.bin") == true, "\(requests)")
            #expect(Set(requests.map(\.connection)).count == 1, "\(requests)")
        }
    }

    /// A file asked for over https that a redirect sends over plain http is
    /// stored (as curl does), and the summary says so: nothing else showed
    /// it, and the item is listed under its https URL.
    @Test(.enabled(if: HTTP2Origin.nginx != nil && TLSFixtures.python != nil, "needs nginx and python3 for the HTTPS origin"))
    func aFileRedirectedFromHTTPSToPlainHTTPIsSaidToBe() async throws {
        try await withOrigin { backend, directory in
            backend.addResource("/plain/photo.jpg", data: SamplePhotos.photo(720), contentType: "image/jpeg")
            let origin = try await HTTP2Origin(files: 1, bytes: 20_000, seed: 721, proxiedPort: backend.port, in: directory)

            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--cacert", TLSFixtures.caCertificates,
                                                      "https://localhost:\(origin.port)/plain/photo.jpg"] + origin.urls)

            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderrLines.last?.hasSuffix("; 1 downloaded over plain http, redirected from https") == true, "\(result.stderr)")
            #expect(backend.requests(for: "/plain/photo.jpg").count == 1)
        }
    }

    @Test func aHostThatNeverFinishesTLSFailsItsTransfersTogetherNotOneByOne() async throws {
        try await TemporaryDirectory.with { directory in
            let silent = try SilentServer()
            defer { silent.stop() }
            let urls = (0..<4).map { "https://127.0.0.1:\(silent.port)/\($0).jpg" }
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                      "--connect-timeout", "1", "--retries", "0"] + urls)
            #expect(result.status == 1)
            #expect(result.stderrLines.filter { $0.hasPrefix("mediafetch: failed https://127.0.0.1:") }.count == 4,
                    "\(result.stderr)")
            // The first connection goes alone to learn what the host speaks; once it
            // timed out, the other three tried at the same time, not one after another
            // (the first may not look closed yet from here: three or four at once).
            // Counted by the listener's own threads: looked at once they have caught up.
            #expect(await waitUntil { silent.accepted == 4 }, "\(silent.accepted) connections accepted")
            #expect(silent.peakOpen >= 3, "at most \(silent.peakOpen) connections were open at once")
        }
    }

    @Test(.enabled(if: HTTP2Origin.nginx != nil && TLSFixtures.python != nil, "needs nginx and python3 for the HTTP/2 origin"))
    func underARateLimitEachTransferHasAConnectionOfItsOwn() async throws {
        // libcurl limits a stream's rate by not reading its connection; streams
        // sharing it would starve (one advancing, the others silent, then retried as stalled).
        try await TemporaryDirectory.with { directory in
            let origin = try await HTTP2Origin(files: 3, bytes: 1_500_000, seed: 500, in: directory)
            let cache = directory.appending("cache")
            let result = try await BuiltProducts.run(["get", "--cache", cache, "--cacert", TLSFixtures.caCertificates,
                                                      "--limit-rate", "3M", "--progress", "json"] + origin.urls)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(!result.stderr.contains("\"retrying\""), "\(result.stderr)")
            #expect(try storedHashes(cache) == origin.hashes)
            let requests = try origin.requests()
            #expect(requests.count == 3)
            #expect(Set(requests.map(\.connection)).count == 3, "\(requests)")
        }
    }

    @Test(.enabled(if: HTTP2Origin.nginx != nil && TLSFixtures.python != nil, "needs nginx and python3 for the HTTP/2 origin"))
    func moreThanAHundredTransfersAtOnceStillShareOneConnection() async throws {
        // Slow responses, so that all 120 are in flight together: past libcurl's
        // default of 100 streams a connection, each would open one of its own.
        try await TemporaryDirectory.with { directory in
            let origin = try await HTTP2Origin(files: 120, bytes: 60_000, seed: 600, bytesPerSecond: 100_000, in: directory)
            let cache = directory.appending("cache")
            let result = try await BuiltProducts.run(["get", "--cache", cache, "--cacert", TLSFixtures.caCertificates,
                                                      "--jobs", "120", "--per-host", "120"] + origin.urls)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(try storedHashes(cache) == origin.hashes)
            let requests = try origin.requests()
            #expect(requests.count == 120)
            #expect(Set(requests.map(\.connection)).count == 1, "120 requests came on \(Set(requests.map(\.connection)).count) connections")
        }
    }
}
