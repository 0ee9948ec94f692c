import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A port on 127.0.0.1 that takes connections and never says a word: a
/// server whose workers are all stuck, or a tarpit. What a client sends is
/// read and dropped until it closes (so a TLS handshake never completes,
/// and an HTTP request never gets a response); or, `closing`, the
/// connection is closed once the request is read (a crashed backend behind
/// a proxy). Counts the connections.
public final class SilentServer: Sendable {
    public let port: UInt16
    private let listener: Int32
    private let closing: Bool
    private let counts = Mutex((open: 0, peak: 0, accepted: 0))
    /// Set once by `stop`, under its lock, as the listener is shut down: the
    /// accept loop closes the listener only after, so the shutdown never
    /// reaches a descriptor number reused by another server meanwhile.
    private let stopped = Mutex(false)

    public init(closing: Bool = false) throws {
        (listener, port) = try Socket.listen(port: 0)
        self.closing = closing
        Thread { [self] in acceptLoop() }.start()
    }

    /// `http://127.0.0.1:<port><path>`.
    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// How many connections came, and the most that were open at the same moment.
    public var accepted: Int { counts.withLock { $0.accepted } }
    public var peakOpen: Int { counts.withLock { $0.peak } }

    /// Stops taking connections (those open stay open until their client closes them).
    public func stop() {
        stopped.withLock { stopped in
            guard !stopped else { return }
            stopped = true
            Glibc.shutdown(listener, Int32(SHUT_RDWR))
        }
    }

    private func acceptLoop() {
        while true {
            let fd = Socket.accept(listener)
            guard fd >= 0 else {
                let code = errno
                if stopped.withLock({ $0 }) { break }
                // Out of descriptors or memory for a moment (a full test run at once on
                // two cores): back off and go on, as TestOrigin does, rather than stop
                // taking connections, which left a test waiting for one for 30 s.
                if code != EINTR, code != ECONNABORTED { usleep(10_000) }
                continue
            }
            counts.withLock { counts in
                counts.open += 1
                counts.accepted += 1
                counts.peak = max(counts.peak, counts.open)
            }
            Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while recv(fd, &buffer, buffer.count, 0) > 0, !closing {}
                close(fd)
                counts.withLock { $0.open -= 1 }
            }.start()
        }
        close(listener)
    }
}
