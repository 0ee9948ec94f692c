import Foundation
import URLText
#if canImport(Glibc)
import Glibc
#endif

/// Serves the requests of one client connection, one after another, on its own thread.
/// The descriptor is owned (and closed) by the thread that runs it.
struct Connection {
    /// Larger request heads are answered with 431.
    static let maxHeadSize = 64 * 1024
    /// Bodies are read from disk and sent in pieces of this size, so files of any size
    /// are served with constant memory.
    static let chunkSize = 256 * 1024

    let fd: Int32
    let server: OriginServer
    /// This connection's place in the order of acceptance, from 1.
    let number: Int
    /// Bytes received but not yet consumed (the start of the next request, if pipelined).
    private var buffer: [UInt8] = []

    init(fd: Int32, server: OriginServer, number: Int) {
        self.fd = fd
        self.server = server
        self.number = number
    }

    /// Handles requests until the client closes, asks to close, misbehaves, or the
    /// server shuts down. The caller closes the descriptor afterwards.
    mutating func run() {
        // Set by `resetNextRequest`: the next request is met with a reset.
        var resetNext = false
        defer { if !resetNext { finish() } }
        while !server.isShutdown {
            let bytes: [UInt8]
            switch readHead() {
            case .closed:
                return
            case .tooLarge:
                sendError(431, "Request head too large\n")
                return
            case .head where resetNext:
                // Closed with a reset, unanswered: no drain, no FIN first.
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                return
            case .head(let head):
                bytes = head
            }
            guard let head = RequestHead.parse(bytes[...]) else {
                sendError(400, "Malformed request\n")
                return
            }
            guard skipRequestBody(head) else { return }

            let (path, query) = URLParts.split(target: head.target)
            let request = OriginRequest(method: head.method, target: head.target, path: path,
                                        query: query, headers: head.headers, connection: number)
            let keepAlive = head.wantsKeepAlive
            let (reply, bodyFault) = server.reply(to: request)
            guard write(reply, headOnly: head.method == "HEAD", keepAlive: keepAlive,
                        http10: head.isHTTP10, bodyFault: bodyFault), keepAlive else { return }
            if bodyFault == .resetNextRequest { resetNext = true }
        }
    }

    /// Half-closes and drains what the client still sends before the descriptor is closed.
    /// Closing with unread input makes the kernel send a reset, which can destroy a
    /// response (an error page, or the truncated body of `dropAfter`) still in flight.
    private func finish() {
        guard !server.isShutdown else { return }
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(2)
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        while clock.now < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { return }
            guard poller.revents != 0 else { continue }
            let count = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return }
        }
    }

    // MARK: Reading

    private enum HeadRead {
        case head([UInt8])
        case closed
        case tooLarge
    }

    /// Reads up to the blank line that ends a request head and consumes it.
    private mutating func readHead() -> HeadRead {
        while true {
            // Empty lines before a request line are to be ignored (RFC 9112 §2.2).
            while buffer.count >= 2, buffer[0] == 0x0D, buffer[1] == 0x0A {
                buffer.removeFirst(2)
            }
            if let end = headTerminator() {
                guard end <= Self.maxHeadSize else { return .tooLarge }
                let head = Array(buffer[0..<end])
                buffer.removeFirst(end + 4)
                return .head(head)
            }
            if buffer.count > Self.maxHeadSize { return .tooLarge }
            guard Socket.receive(fd, into: &buffer) else { return .closed }
        }
    }

    /// The index of the CRLFCRLF ending the head, if it has arrived.
    private func headTerminator() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for index in 0...(buffer.count - 4)
        where buffer[index] == 0x0D && buffer[index + 1] == 0x0A && buffer[index + 2] == 0x0D && buffer[index + 3] == 0x0A {
            return index
        }
        return nil
    }

    /// Reads and discards a request body so the next request can be parsed.
    /// False if the connection cannot continue (answered with an error, or the client left).
    private mutating func skipRequestBody(_ head: RequestHead) -> Bool {
        if head.headers["transfer-encoding"] != nil {
            // Chunked request bodies are not needed by any client of this origin.
            sendError(501, "Request bodies with Transfer-Encoding are not supported\n")
            return false
        }
        guard let lengthText = head.headers["content-length"] else { return true }
        guard let length = Int(lengthText), length >= 0 else {
            sendError(400, "Invalid Content-Length\n")
            return false
        }
        guard length > 0 else { return true }
        // curl waits (up to a second) for this interim response before sending a large body.
        if head.headers["expect"]?.lowercased() == "100-continue", buffer.isEmpty {
            guard Socket.sendAll(fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return false }
        }
        var remaining = length
        while true {
            let take = min(remaining, buffer.count)
            buffer.removeFirst(take)
            remaining -= take
            if remaining == 0 { return true }
            guard Socket.receive(fd, into: &buffer) else { return false }
        }
    }

    // MARK: Writing

    /// Answers a request that cannot be processed; the connection is closed afterwards.
    private func sendError(_ status: Int, _ message: String) {
        _ = write(.text(status, message), headOnly: false, keepAlive: false, http10: false, bodyFault: nil)
    }

    /// Writes the status line, headers and (unless `headOnly`) the body.
    /// Returns false if the connection must not be used any more.
    private func write(_ reply: Reply, headOnly: Bool, keepAlive: Bool, http10: Bool, bodyFault: Fault?) -> Bool {
        let refusal = server.state.withLock { state -> Reply? in
            if (200...299).contains(reply.status), let retryAfter = state.rateLimit?.refusal(at: .now) {
                state.rateLimitedAnswers += 1
                return .text(429, "slow down\n", headers: retryAfter.isEmpty ? [] : [("Retry-After", retryAfter)])
            }
            if let limit = state.responseLimit, state.responding >= limit, (200...299).contains(reply.status) {
                state.busyAnswers += 1
                return .text(503, "busy\n")
            }
            state.responding += 1
            state.peakResponding = max(state.peakResponding, state.responding)
            return nil
        }
        if let refusal {
            return write(refusal, headOnly: headOnly, keepAlive: keepAlive, http10: http10, bodyFault: nil)
        }
        defer { server.state.withLock { $0.responding -= 1 } }
        if case .lateHead(let seconds) = bodyFault, !sleep(seconds: seconds) { return false }
        if case .endlessHead(let interim, let seconds) = bodyFault {
            if !interim, !Socket.sendAll(fd, Array("HTTP/1.1 200 OK\r\n".utf8)) { return false }
            for count in 0..<10_000 {
                let text = interim ? "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" : "X-Wait: \(count)\r\n"
                guard Socket.sendAll(fd, Array(text.utf8)), sleep(seconds: seconds) else { return false }
            }
            return false
        }
        var head = "HTTP/1.1 \(reply.status) \(Reply.reason(reply.status))\r\n"
        head += "Date: \(HTTPDate.format(Date()))\r\nServer: TestOrigin\r\n"
        for (name, value) in reply.headers {
            head += "\(name): \(value)\r\n"
        }
        if case .chunked(let claimed) = bodyFault, reply.body.length != nil {
            head += "Transfer-Encoding: chunked\r\n"
            if let claimed { head += "Content-Length: \(claimed)\r\n" }
        } else if case .lengthText(let text) = bodyFault, reply.body.length != nil {
            head += "Content-Length: \(text)\r\n"
        } else if case .noLength = bodyFault {
            // The body ends with the connection.
        } else if let length = reply.body.length {
            head += "Content-Length: \(length)\r\n"
            if case .secondLength(let claimed) = bodyFault { head += "Content-Length: \(claimed)\r\n" }
        }
        if !keepAlive {
            head += "Connection: close\r\n"
        } else if http10 {
            head += "Connection: keep-alive\r\n"
        }
        head += "\r\n"
        if case .cutHead(let bytes) = bodyFault {
            _ = Socket.sendAll(fd, Array(head.utf8.prefix(max(0, bytes))))
            return false
        }
        guard Socket.sendAll(fd, Array(head.utf8)) else { return false }
        if headOnly { return true }
        return writeBody(reply.body, fault: bodyFault)
    }

    /// Sends the body, shaped by a `dropAfter`, `slow`, `stallAfter`, `trickle`,
    /// `secondLength`, `lengthText` or `chunked` fault if given. Returns false if the
    /// connection must be closed (the client left, the file changed under
    /// us, the fault dropped it or made what follows unreadable, or the
    /// server is shutting down).
    private func writeBody(_ body: Reply.Body, fault: Fault?) -> Bool {
        let range: Range<Int>
        switch body {
        case .none: return true
        case .memory(_, let bodyRange), .file(_, let bodyRange): range = bodyRange
        }

        var dropAt: Int?
        var stall: (at: Int, seconds: Double)?
        var bytesPerSecond: Int?
        var trickle: Double?
        // What follows a body of ambiguous length cannot be read as the next response.
        var closeAfter = false
        var chunked = false
        switch fault {
        case .dropAfter(let bytes): dropAt = max(0, bytes)
        case .stallAfter(let bytes, let seconds): stall = (max(0, bytes), seconds)
        case .slow(let rate): bytesPerSecond = max(1, rate)
        case .trickle(let seconds): trickle = max(0, seconds)
        case .secondLength, .lengthText: closeAfter = true
        case .noLength(let drop):
            dropAt = drop.map { max(0, $0) }
            closeAfter = true
        case .chunked: chunked = true
        default: break
        }

        let clock = ContinuousClock()
        let started = clock.now
        var fileBuffer = [UInt8]()
        var sent = 0
        while sent < range.count {
            if let pause = stall, sent >= pause.at {
                guard sleep(seconds: pause.seconds) else { return false }
                stall = nil
            }
            if let dropAt, sent >= dropAt { return false }

            var count = min(Self.chunkSize, range.count - sent)
            if let dropAt { count = min(count, dropAt - sent) }
            if let pause = stall { count = min(count, pause.at - sent) }
            // About 20 paced chunks per second.
            if let bytesPerSecond { count = min(count, max(1, bytesPerSecond / 20)) }
            if trickle != nil { count = 1 }

            let offset = range.lowerBound + sent
            if chunked, !Socket.sendAll(fd, Array((String(count, radix: 16) + "\r\n").utf8)) { return false }
            switch body {
            case .none:
                return true
            case .memory(let data, _):
                let ok = data.withUnsafeBytes { raw in
                    Socket.sendAll(fd, UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + count)]))
                }
                guard ok else { return false }
            case .file(let file, _):
                if fileBuffer.count < count { fileBuffer = [UInt8](repeating: 0, count: count) }
                let read = fileBuffer.withUnsafeMutableBytes { pread(file.fd, $0.baseAddress, count, off_t(offset)) }
                // The file shrank under us: the promised Content-Length cannot be kept.
                // In chunks, the size line is sent already: a short read cannot be told.
                guard read > 0, !chunked || read == count else { return false }
                count = read
                guard fileBuffer.withUnsafeBytes({ Socket.sendAll(fd, UnsafeRawBufferPointer(rebasing: $0[0..<read])) })
                else { return false }
            }
            if chunked, !Socket.sendAll(fd, Array("\r\n".utf8)) { return false }
            sent += count

            if let trickle, sent < range.count {
                guard sleep(seconds: trickle) else { return false }
            }
            // (Not after the last chunk: the response is over, and counts as sent.)
            if let bytesPerSecond, sent < range.count {
                let due = Double(sent) / Double(bytesPerSecond)
                let elapsed = started.duration(to: clock.now)
                let elapsedSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
                if due > elapsedSeconds {
                    guard sleep(seconds: due - elapsedSeconds) else { return false }
                }
            }
        }
        if chunked, !Socket.sendAll(fd, Array("0\r\n\r\n".utf8)) { return false }
        // A dropAfter beyond the body's end still ends the connection, as the fault promises.
        return dropAt == nil && !closeAfter
    }

    /// Sleeps until `seconds` from now, in steps of 50 ms at most so that
    /// shutdown() is not held up; false if the server is shutting down. To a
    /// deadline: on a loaded machine each wake-up comes late, and summed
    /// steps made a 1.5 s pause 2 s long.
    private func sleep(seconds: Double) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(max(0, seconds))
        while !server.isShutdown {
            let left = clock.now.duration(to: deadline)
            guard left > .zero else { return true }
            let microseconds = left.components.seconds * 1_000_000 + left.components.attoseconds / 1_000_000_000_000
            usleep(UInt32(max(1, min(microseconds, 50_000))))
        }
        return false
    }
}
