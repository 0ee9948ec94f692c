import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A real HTTP/1.1 server on 127.0.0.1 for tests and demos (Linux, POSIX sockets).
///
/// It serves files under a root directory and in-memory resources with strong ETags,
/// `Last-Modified`, single byte ranges, `If-Range`, `If-None-Match` / `If-Modified-Since`
/// and persistent connections; dynamic routes answer anything else; per-path faults
/// make it misbehave on purpose. Every request is recorded.
///
/// Each connection is served by its own thread. The origin stops on ``shutdown()`` or
/// when the last reference to it goes away.
public final class TestOrigin: Sendable {
    private let server: OriginServer

    /// Binds 127.0.0.1 on `port` (0 = random free port) and starts accepting.
    /// Serves files under `root` (if given) at their relative path, plus any added resources.
    /// - Throws: ``TestOriginError`` if `root` is not a readable directory or the port cannot be bound.
    public init(root: URL? = nil, port: UInt16 = 0) throws {
        server = try OriginServer(root: root, port: port)
        server.start()
    }

    /// Serves on a port held by `reserved`, which refused connections until
    /// now: a server that comes back on the same port, with no other test's
    /// origin able to take the port meanwhile.
    public init(root: URL? = nil, takingOver reserved: ReservedPort) throws {
        server = try OriginServer(root: root, port: reserved.port, reserved: reserved)
        server.start()
    }

    deinit {
        server.shutdown()
    }

    /// The TCP port the origin listens on.
    public var port: UInt16 { server.port }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// `baseURL` followed by `path` (a leading `/` is added if missing).
    public func url(_ path: String) -> String {
        baseURL + OriginServer.normalize(path)
    }

    /// Adds an in-memory resource at `path`, or replaces the one already there.
    ///
    /// `etag` defaults to a strong ETag derived from the content (`"<hash hex>-<size>"`),
    /// so replacing the content changes the ETag. `lastModified` defaults to a fixed date;
    /// when a resource is replaced by different content without an explicit date, the
    /// previous date plus one hour is used instead, so date validators
    /// (`If-Range` with a date, `If-Modified-Since`) see the change too.
    ///
    /// `coding`: the bytes are sent with that `Content-Encoding` (they are given coded).
    public func addResource(_ path: String, data: Data, contentType: String = "application/octet-stream",
                            etag: String? = nil, lastModified: Date? = nil, coding: ResourceCoding? = nil) {
        server.addResource(OriginServer.normalize(path), data: data, contentType: contentType,
                           etag: etag, lastModified: lastModified, coding: coding)
    }

    /// Removes the in-memory resource at `path`; requests for it then fall through to the
    /// root directory (if any) or get 404.
    public func removeResource(_ path: String) {
        server.state.withLock { _ = $0.resources.removeValue(forKey: OriginServer.normalize(path)) }
    }

    /// Installs a dynamic route for exactly `path` (any method; the query string does not
    /// take part in matching and is available parsed in ``OriginRequest/query``). Routes
    /// take precedence over resources and files; installing a route again replaces it.
    /// The handler runs on the connection's thread, outside the origin's lock.
    public func route(_ path: String, _ handler: @escaping @Sendable (OriginRequest) -> OriginResponse) {
        server.state.withLock { $0.routes[OriginServer.normalize(path)] = handler }
    }

    /// Answers `path` with `body` only once the returned gate is signalled
    /// (once per request held; two minutes at most), so that a test does not
    /// depend on how fast the machine is. `asked` is signalled as each request comes.
    public func holdAnswers(_ path: String, body: Data, asked: DispatchSemaphore? = nil) -> DispatchSemaphore {
        let gate = DispatchSemaphore(value: 0)
        route(path) { _ in
            asked?.signal()
            _ = gate.wait(timeout: .now() + 120)
            return OriginResponse(status: 200, body: body)
        }
        return gate
    }

    /// Removes the route for `path`: its resource (or file) answers again.
    public func removeRoute(_ path: String) {
        server.state.withLock { _ = $0.routes.removeValue(forKey: OriginServer.normalize(path)) }
    }

    /// Makes requests for `path` misbehave as `fault` describes.
    ///
    /// `times` is how many requests it applies to before the path behaves normally again
    /// (nil = forever). Each request for the path counts, whatever its method. Setting a
    /// fault replaces any fault already set for that path.
    public func setFault(_ path: String, _ fault: Fault, times: Int? = nil) {
        server.state.withLock { state in
            let key = OriginServer.normalize(path)
            if let times, times <= 0 {
                state.faults.removeValue(forKey: key)
            } else {
                state.faults[key] = FaultRule(fault: fault, remaining: times)
            }
        }
    }

    /// Removes all faults.
    public func clearFaults() {
        server.state.withLock { $0.faults.removeAll() }
    }

    /// Every request seen, in arrival order, optionally only those for `path`
    /// (compared with the percent-decoded path, without the query).
    public func requests(for path: String? = nil) -> [OriginRequest] {
        let log = server.state.withLock { $0.log }
        guard let path else { return log }
        let wanted = OriginServer.normalize(path)
        return log.filter { $0.path == wanted }
    }

    /// Serves at most `limit` connections at once, as a server with a limit
    /// per client does; each connection over it is ended as `excess` says the
    /// moment it is accepted. nil (the default) takes every connection.
    public func limitConnections(to limit: Int?, excess: ExcessConnection = .reset) {
        server.state.withLock { $0.connectionLimit = limit.map { (max(0, $0), excess) } }
    }

    /// Sends at most `limit` successful responses at once, as nginx's
    /// `limit_conn` does; a request that comes while that many are being
    /// sent is answered 503 at once. nil (the default) sends them all.
    public func limitResponses(to limit: Int?) {
        server.state.withLock { $0.responseLimit = limit.map { max(0, $0) } }
    }

    /// Sends at most `requests` successful responses in each window of
    /// `seconds` (the first begins with the first request after this call), as
    /// a rate-limited API or CDN does; a request over it is answered 429,
    /// with `Retry-After` giving the seconds left in the window (rounded up)
    /// or `retryAfter` when given, or no `Retry-After` at all when
    /// `sendsRetryAfter` is false. nil (the default) sends them all.
    public func limitRate(to requests: Int?, per seconds: Double = 1, retryAfter: Int? = nil, sendsRetryAfter: Bool = true) {
        server.state.withLock { state in
            state.rateLimit = requests.map {
                RateLimit(requests: max(0, $0), window: .milliseconds(Int(seconds * 1000)),
                          retryAfter: retryAfter, sendsRetryAfter: sendsRetryAfter)
            }
        }
    }

    /// Requests answered 429 by `limitRate(to:per:retryAfter:sendsRetryAfter:)`.
    public var rateLimitedAnswers: Int {
        server.state.withLock { $0.rateLimitedAnswers }
    }

    /// Requests answered 503 by `limitResponses(to:)`.
    public var busyAnswers: Int {
        server.state.withLock { $0.busyAnswers }
    }

    /// Connections ended on arrival by `limitConnections(to:excess:)`.
    public var connectionsTurnedAway: Int {
        server.state.withLock { $0.turnedAway }
    }

    /// The most responses that were being sent at the same moment since the
    /// origin started (each counts from its status line to its last byte).
    public var peakConcurrentResponses: Int {
        server.state.withLock { $0.peakResponding }
    }

    /// Stops the origin: closes the listener and all open connections and waits (up to a
    /// few seconds) for their threads to end. Idempotent. Called automatically on deinit.
    public func shutdown() {
        server.shutdown()
    }
}

/// How a server at its connection limit ends a connection over it.
public enum ExcessConnection: Sendable {
    /// Closed with a reset (`SO_LINGER` of 0): the client reads ECONNRESET.
    case reset
    /// Closed in order before a word: the client reads an empty reply.
    case close
}

/// A limit of successful responses in each window of time (see `TestOrigin.limitRate`).
struct RateLimit: Sendable {
    let requests: Int
    let window: Duration
    let retryAfter: Int?
    let sendsRetryAfter: Bool
    var windowStart: ContinuousClock.Instant?
    var sent = 0

    init(requests: Int, window: Duration, retryAfter: Int?, sendsRetryAfter: Bool) {
        self.requests = requests
        self.window = window
        self.retryAfter = retryAfter
        self.sendsRetryAfter = sendsRetryAfter
    }

    /// Counts a response about to be sent at `now`: nil when it may be, else
    /// the `Retry-After` to refuse it with ("" for none).
    mutating func refusal(at now: ContinuousClock.Instant) -> String? {
        if windowStart.map({ now - $0 >= window }) ?? true {
            windowStart = now
            sent = 0
        }
        guard sent >= requests else {
            sent += 1
            return nil
        }
        guard sendsRetryAfter else { return "" }
        if let retryAfter { return String(retryAfter) }
        let left = window - (now - (windowStart ?? now))
        return String(max(1, Int((Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18).rounded(.up))))
    }
}

/// The state shared by the accept thread, the connection threads and the public API.
struct ServerState: Sendable {
    /// At most this many open connections; the rest are ended on arrival.
    var connectionLimit: (count: Int, excess: ExcessConnection)?
    var turnedAway = 0
    /// At most this many successful responses at once; the rest are answered 503.
    var responseLimit: Int?
    var busyAnswers = 0
    /// At most so many successful responses a window; the rest are answered 429.
    var rateLimit: RateLimit?
    var rateLimitedAnswers = 0
    var resources: [String: MemoryResource] = [:]
    var routes: [String: @Sendable (OriginRequest) -> OriginResponse] = [:]
    var faults: [String: FaultRule] = [:]
    var log: [OriginRequest] = []
    /// Responses being written now, and the most there ever were at once.
    var responding = 0
    var peakResponding = 0
    /// Accepted, not yet closed connections; shutdown() wakes them with shutdown(2).
    var connections: Set<Int32> = []
    /// Connections accepted since the start.
    var accepted = 0
    /// Threads serving connections, so shutdown() called from a route handler does not wait for itself.
    var workerThreads: Set<pthread_t> = []
    var listenerOpen = true
    var isShutdown = false
}

/// The server proper. `TestOrigin` wraps it so that the threads, which keep the server
/// alive while they run, do not keep the public object alive: its deinit can then shut
/// the server down when a test forgets to.
final class OriginServer: Sendable {
    let port: UInt16
    /// The root directory with symlinks resolved, without a trailing slash.
    let rootPath: String?
    let state = Mutex(ServerState())
    private let listener: Int32
    /// Entered for the accept thread and for each connection thread.
    private let threads = DispatchGroup()

    init(root: URL?, port requestedPort: UInt16, reserved: ReservedPort? = nil) throws {
        if let root {
            guard let resolved = realpath(root.path, nil) else {
                throw TestOriginError.system("realpath(\(root.path))", errno: errno)
            }
            defer { free(resolved) }
            var isDirectory: ObjCBool = false
            let path = String(cString: resolved)
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw TestOriginError("root \(root.path) is not a directory")
            }
            rootPath = path == "/" ? "" : path
        } else {
            rootPath = nil
        }
        if let reserved {
            (listener, port) = try reserved.startListening()
        } else {
            (listener, port) = try Socket.listen(port: requestedPort)
        }
    }

    static func normalize(_ path: String) -> String {
        path.hasPrefix("/") ? path : "/" + path
    }

    var isShutdown: Bool {
        state.withLock { $0.isShutdown }
    }

    func start() {
        threads.enter()
        let thread = Thread { [self] in
            acceptLoop()
            threads.leave()
        }
        thread.start()
    }

    func shutdown() {
        let me = pthread_self()
        let onWorkerThread = state.withLock { state -> Bool in
            if !state.isShutdown {
                state.isShutdown = true
                // shutdown(2) wakes threads blocked in accept/recv/send on these sockets.
                // The owning threads close the descriptors themselves, under this lock,
                // so a descriptor number is never closed twice or reused under our feet.
                if state.listenerOpen { _ = Glibc.shutdown(listener, Int32(SHUT_RDWR)) }
                for fd in state.connections { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
                // Handlers often capture the TestOrigin; dropping them breaks that cycle.
                state.routes.removeAll()
            }
            return state.workerThreads.contains(me)
        }
        // From a route handler the calling thread is one of ours and cannot be waited for.
        if !onWorkerThread {
            // Bounded: a route handler that blocks must not hang the test calling shutdown().
            _ = threads.wait(timeout: .now() + 5)
        }
    }

    private func acceptLoop() {
        while true {
            let fd = Socket.accept(listener)
            if fd < 0 {
                let code = errno
                if isShutdown { break }
                if code == EINTR || code == ECONNABORTED { continue }
                // Out of descriptors or similar: back off instead of spinning.
                usleep(10_000)
                continue
            }
            let number = state.withLock { state -> Int? in
                guard !state.isShutdown else { return nil }
                if let limit = state.connectionLimit, state.connections.count >= limit.count {
                    state.turnedAway += 1
                    if limit.excess == .reset { Socket.setResetOnClose(fd) }
                    close(fd)
                    return 0
                }
                state.connections.insert(fd)
                state.accepted += 1
                return state.accepted
            }
            guard let number else {
                close(fd)
                break
            }
            if number == 0 { continue } // turned away
            Socket.configureConnection(fd)
            threads.enter()
            let thread = Thread { [self] in
                let me = pthread_self()
                state.withLock { _ = $0.workerThreads.insert(me) }
                var connection = Connection(fd: fd, server: self, number: number)
                connection.run()
                state.withLock { state in
                    state.workerThreads.remove(me)
                    state.connections.remove(fd)
                    close(fd)
                }
                threads.leave()
            }
            thread.start()
        }
        state.withLock { state in
            state.listenerOpen = false
            close(listener)
        }
    }
}
