import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Thin wrappers over the POSIX socket calls the origin needs (Linux).
enum Socket {
    /// How long an idle keep-alive connection, or a client that stops reading, may hold
    /// a connection thread. Longer than any test needs; it only reaps forgotten
    /// connections in the long-running demo server.
    static let ioTimeoutSeconds = 60

    /// A listening TCP socket on 127.0.0.1:`port` (0 = any free port) and the port it got.
    static func listen(port: UInt16) throws -> (fd: Int32, port: UInt16) {
        try bind(port: port, listening: true)
    }

    /// A TCP socket bound to 127.0.0.1:`port` (0 = any free port) and the port it
    /// got; listening or not. One that does not listen refuses every connection
    /// and, without SO_REUSEADDR, keeps any other socket off its port.
    static func bind(port: UInt16, listening: Bool, reusingAddress: Bool = false) throws -> (fd: Int32, port: UInt16) {
        // CLOEXEC: tests spawn child processes (the CLI); they must not inherit our sockets.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestOriginError.system("socket", errno: errno) }
        do {
            if listening || reusingAddress { try setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR") }

            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian  // 127.0.0.1
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw TestOriginError.system("bind to 127.0.0.1:\(port)", errno: errno) }
            if listening, Glibc.listen(fd, 128) != 0 { throw TestOriginError.system("listen", errno: errno) }

            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            guard named == 0 else { throw TestOriginError.system("getsockname", errno: errno) }
            return (fd, UInt16(bigEndian: address.sin_port))
        } catch {
            close(fd)
            throw error
        }
    }

    /// Accepts one connection; returns the descriptor or -1 with `errno` set.
    static func accept(_ listener: Int32) -> Int32 {
        // accept4(SOCK_CLOEXEC) is not exported by the Glibc module; setting the flag
        // right after leaves only a tiny window for a concurrent fork to inherit it.
        let fd = Glibc.accept(listener, nil, nil)
        if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return fd
    }

    /// Makes `close` send a reset instead of a FIN (a linger of zero seconds).
    static func setResetOnClose(_ fd: Int32) {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    /// Per-connection options: no Nagle delay (headers and body go out as separate
    /// writes, which with Nagle plus delayed ACK would cost ~40 ms per response on a
    /// reused connection), and I/O timeouts so abandoned connections end eventually.
    static func configureConnection(_ fd: Int32) {
        _ = try? setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1, "TCP_NODELAY")
        var timeout = timeval(tv_sec: ioTimeoutSeconds, tv_usec: 0)
        let size = socklen_t(MemoryLayout<timeval>.size)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, size)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, size)
    }

    /// Sends all of `bytes`. False if the peer went away or the send timed out.
    /// MSG_NOSIGNAL turns a write to a reset connection into EPIPE instead of SIGPIPE,
    /// so a client hanging up mid-body cannot kill the process hosting the origin.
    static func sendAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard var pointer = bytes.baseAddress else { return true }
        var remaining = bytes.count
        while remaining > 0 {
            let sent = send(fd, pointer, remaining, Int32(MSG_NOSIGNAL))
            if sent < 0 {
                if errno == EINTR { continue }
                return false
            }
            remaining -= sent
            pointer += sent
        }
        return true
    }

    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { sendAll(fd, $0) }
    }

    /// Receives up to `capacity` bytes, appending them to `buffer`.
    /// Returns false on end of stream, error or timeout.
    static func receive(_ fd: Int32, into buffer: inout [UInt8], capacity: Int = 64 * 1024) -> Bool {
        var chunk = [UInt8](repeating: 0, count: capacity)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, capacity, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
    }

    private static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32, _ label: String) throws {
        var value = value
        guard setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw TestOriginError.system("setsockopt(\(label))", errno: errno)
        }
    }
}

/// A loopback port that nothing listens on for as long as this object lives:
/// a connection to it is refused at once. Unlike a port that was listened on
/// and closed, no other server (another test's origin) can be given it meanwhile.
public final class ReservedPort: Sendable {
    public let port: UInt16
    private let fd: Int32

    public init() throws {
        (fd, port) = try Socket.bind(port: 0, listening: false)
    }

    /// Holds `port`, which an origin that just shut down was listening on
    /// (its closed connections may still be waiting out their time on it):
    /// a server that goes away and comes back on the same port.
    public init(port: UInt16) throws {
        (fd, self.port) = try Socket.bind(port: port, listening: false, reusingAddress: true)
    }

    deinit { close(fd) }

    /// The bound socket, listening now, as a descriptor of its own (the
    /// reservation keeps and closes its own).
    func startListening() throws -> (fd: Int32, port: UInt16) {
        let listener = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard listener >= 0 else { throw TestOriginError.system("dup", errno: errno) }
        guard Glibc.listen(listener, 128) == 0 else {
            let code = errno
            close(listener)
            throw TestOriginError.system("listen", errno: code)
        }
        return (listener, port)
    }

    /// `http://127.0.0.1:<port><path>`.
    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }
}
