import Foundation
import URLText
#if canImport(Glibc)
import Glibc
#endif

/// An open file descriptor closed when the last reference goes away, so every path
/// through the serving code (200, 206, 304, 416, a failed send) releases it.
final class OpenFile {
    let fd: Int32

    init(fd: Int32) {
        self.fd = fd
    }

    deinit {
        close(fd)
    }
}

/// A response decided by the server, written by the connection.
struct Reply {
    enum Body {
        /// No body and no `Content-Length` (304, 204, 1xx).
        case none
        case memory(Data, Range<Int>)
        case file(OpenFile, Range<Int>)

        var length: Int? {
            switch self {
            case .none: nil
            case .memory(_, let range), .file(_, let range): range.count
            }
        }
    }

    var status: Int
    var headers: [(String, String)]
    var body: Body

    /// A small text response; the body is dropped for statuses that cannot have one.
    static func text(_ status: Int, _ text: String, headers: [(String, String)] = []) -> Reply {
        guard statusAllowsBody(status) else { return Reply(status: status, headers: headers, body: .none) }
        let data = Data(text.utf8)
        return Reply(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers,
                     body: .memory(data, 0..<data.count))
    }

    static func statusAllowsBody(_ status: Int) -> Bool {
        !(100..<200).contains(status) && status != 204 && status != 304
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 203: "Non-Authoritative Information"
        case 204: "No Content"
        case 205: "Reset Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 410: "Gone"
        case 412: "Precondition Failed"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status \(status)"
        }
    }
}

extension OriginServer {
    /// Records `request`, consumes the path's fault (if any) and decides the reply.
    /// Returns the fault that must shape the body's delivery, if any.
    func reply(to request: OriginRequest) -> (Reply, bodyFault: Fault?) {
        let (fault, route, resource) = state.withLock { state in
            state.log.append(request)
            var fault: Fault?
            if let rule = state.faults[request.path] {
                fault = rule.fault
                if let remaining = rule.remaining {
                    if remaining <= 1 {
                        state.faults.removeValue(forKey: request.path)
                    } else {
                        state.faults[request.path]?.remaining = remaining - 1
                    }
                }
            }
            return (fault, state.routes[request.path], state.resources[request.path])
        }

        switch fault {
        case .status(let status, let retryAfter):
            let headers = retryAfter.map { [("Retry-After", String($0))] } ?? []
            return (.text(status, "\(status) \(Reply.reason(status)) (injected fault)\n", headers: headers), nil)
        case .html:
            let page = Data(Self.htmlFaultPage.utf8)
            return (Reply(status: 200, headers: [("Content-Type", "text/html; charset=utf-8")],
                          body: .memory(page, 0..<page.count)), nil)
        default:
            break
        }
        let bodyFault = fault.flatMap { $0.affectsBodyDelivery ? $0 : nil }
        let ignoreRange = fault == .ignoreRange

        if let route {
            return (Self.routeReply(route(request)), bodyFault)
        }
        if let resource {
            let entity = Entity(size: resource.data.count, etag: resource.etag, lastModified: resource.lastModified,
                                contentType: resource.contentType, source: .memory(resource.data), coding: resource.coding)
            return (Self.entityReply(request, entity, ignoreRange: ignoreRange), bodyFault)
        }
        switch openFile(request.path) {
        case .found(let entity):
            return (Self.entityReply(request, entity, ignoreRange: ignoreRange), bodyFault)
        case .badRequest:
            return (.text(400, "Bad request path\n"), nil)
        case .notFound:
            return (.text(404, "Not found: \(request.path)\n"), bodyFault)
        }
    }

    static let htmlFaultPage = """
        <!DOCTYPE html>
        <html><head><title>Please wait</title></head>
        <body><p>This page is not the file you asked for.</p></body></html>

        """

    private static func routeReply(_ response: OriginResponse) -> Reply {
        // The connection owns framing; drop any framing headers the handler supplied.
        let framing: Set<String> = ["content-length", "connection", "transfer-encoding", "date", "server"]
        var headers = response.headers.filter { !framing.contains($0.0.lowercased()) }
        guard Reply.statusAllowsBody(response.status) else {
            return Reply(status: response.status, headers: headers, body: .none)
        }
        if !response.body.isEmpty, response.header("Content-Type") == nil {
            headers.append(("Content-Type", "application/octet-stream"))
        }
        return Reply(status: response.status, headers: headers, body: .memory(response.body, 0..<response.body.count))
    }

    /// Conditional requests and byte ranges for a resource or file (RFC 9110 §13, §14).
    static func entityReply(_ request: OriginRequest, _ entity: Entity, ignoreRange: Bool) -> Reply {
        guard request.method == "GET" || request.method == "HEAD" else {
            return .text(405, "Method not allowed\n", headers: [("Allow", "GET, HEAD")])
        }
        let lastModified = HTTPDate.format(seconds: entity.lastModified)
        let validators = [("ETag", entity.etag), ("Last-Modified", lastModified)]

        // If-None-Match wins over If-Modified-Since, which is ignored when both are sent.
        if let noneMatch = request.header("If-None-Match") {
            if EntityTags.noneMatchHits(noneMatch, etag: entity.etag) {
                return Reply(status: 304, headers: validators, body: .none)
            }
        } else if let since = request.header("If-Modified-Since").flatMap(HTTPDate.parse),
                  entity.lastModified <= since {
            return Reply(status: 304, headers: validators, body: .none)
        }

        var headers = [("Content-Type", entity.contentType)] + validators + [("Accept-Ranges", "bytes")]
        var range = 0..<entity.size
        var status = 200
        if !ignoreRange, let rangeHeader = request.header("Range"),
           ifRangeHolds(request.header("If-Range"), entity) {
            switch ByteRangeRequest.parse(rangeHeader, size: entity.size) {
            case .ignore:
                break
            case .unsatisfiable:
                headers.append(("Content-Range", "bytes */\(entity.size)"))
                return Reply(status: 416, headers: headers, body: .memory(Data(), 0..<0))
            case .range(let satisfiable):
                status = 206
                range = satisfiable
                headers.append(("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(entity.size)"))
                if entity.coding?.labelsOnRanges == false { headers.removeAll { $0.0 == "Content-Type" } }
            }
        }
        if let coding = entity.coding, status == 200 || coding.labelsOnRanges {
            headers.append(("Content-Encoding", coding.contentEncoding))
        }
        switch entity.source {
        case .memory(let data):
            return Reply(status: status, headers: headers, body: .memory(data, range))
        case .file(let file):
            return Reply(status: status, headers: headers, body: .file(file, range))
        }
    }

    /// Whether a `Range` may be honoured given the request's `If-Range` (true if absent).
    /// An entity tag must match strongly; a date must equal `Last-Modified` exactly.
    private static func ifRangeHolds(_ ifRange: String?, _ entity: Entity) -> Bool {
        guard let ifRange = ifRange?.trimmingCharacters(in: .whitespaces) else { return true }
        if EntityTags.isEntityTag(ifRange) {
            return EntityTags.strongMatch(ifRange, etag: entity.etag)
        }
        return HTTPDate.parse(ifRange) == entity.lastModified
    }
}
