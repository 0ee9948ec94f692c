import Foundation

/// One HTTP request as the origin received it.
///
/// Recorded for every request (including ones answered by a fault) and handed to
/// dynamic routes.
public struct OriginRequest: Sendable {
    /// The request method as sent, e.g. `"GET"` or `"HEAD"`.
    public let method: String
    /// The request target exactly as it appeared on the request line, e.g. `"/a%20b.bin?x=1"`.
    public let target: String
    /// The percent-decoded path without the query string, e.g. `"/a b.bin"`.
    public let path: String
    /// The query string parsed into key/value pairs (`+` decoded as space, percent-decoded).
    /// A key without `=` maps to `""`; for repeated keys the last one wins.
    public let query: [String: String]
    /// The request headers with lowercased names. Repeated headers are joined with `", "`.
    public let headers: [String: String]
    /// Which connection carried the request: 1 for the first the origin accepted, and
    /// so on (0 when built by hand). Requests with the same number shared a connection.
    public let connection: Int

    /// Creates a request value. The origin builds these itself; tests rarely need to.
    public init(method: String, target: String, path: String, query: [String: String], headers: [String: String],
                connection: Int = 0) {
        self.method = method
        self.target = target
        self.path = path
        self.query = query
        self.headers = headers
        self.connection = connection
    }

    /// The value of the header `name` (case-insensitive), or nil if the request did not carry it.
    public func header(_ name: String) -> String? {
        headers[name.lowercased()]
    }
}

/// The answer of a dynamic route (see ``TestOrigin/route(_:_:)``).
///
/// The origin adds `Content-Length`, `Connection`, `Date` and `Server` itself; values for
/// `Content-Length` and `Connection` given here are ignored. A `HEAD` request gets the
/// same headers without the body.
public struct OriginResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// Response headers, sent in this order.
    public var headers: [(String, String)]
    /// The response body.
    public var body: Data

    /// Creates a response. Without a `Content-Type` header a non-empty body is sent as
    /// `application/octet-stream`.
    public init(status: Int = 200, headers: [(String, String)] = [], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response (`Content-Type: application/json`).
    public static func json(_ data: Data, status: Int = 200) -> OriginResponse {
        OriginResponse(status: status, headers: [("Content-Type", "application/json")], body: data)
    }

    /// A JSON response from a string holding JSON text.
    public static func json(_ text: String, status: Int = 200) -> OriginResponse {
        json(Data(text.utf8), status: status)
    }

    /// A text response, `text/plain; charset=utf-8` unless another content type is given
    /// (e.g. `"application/rss+xml"` for a feed).
    public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8") -> OriginResponse {
        OriginResponse(status: status, headers: [("Content-Type", contentType)], body: Data(text.utf8))
    }

    /// A redirect to `location` (absolute URL or absolute path) with an empty body.
    public static func redirect(to location: String, status: Int = 302) -> OriginResponse {
        OriginResponse(status: status, headers: [("Location", location)])
    }

    /// The first header named `name` (case-insensitive), if any.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.0.lowercased() == wanted }?.1
    }
}

/// An error starting the origin (socket, bind or listen failed, or `root` is unusable).
public struct TestOriginError: Error, CustomStringConvertible {
    /// What went wrong, including the system error text where there is one.
    public let description: String

    init(_ description: String) {
        self.description = description
    }

    /// An error for a failed system call, with the text of the current `errno`.
    static func system(_ call: String, errno code: Int32) -> TestOriginError {
        TestOriginError("\(call) failed: \(String(cString: strerror(code))) (errno \(code))")
    }
}
