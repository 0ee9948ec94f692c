/// A misbehaviour the origin can be told to show for one path (see ``TestOrigin/setFault(_:_:times:)``).
///
/// `status` and `html` replace the whole response. `dropAfter`, `slow`, `stallAfter` and
/// `trickle` change how the body of the normal response is sent (they do nothing for `HEAD`).
/// `ignoreRange` changes how resources and files answer a `Range` request.
public enum Fault: Sendable, Equatable {
    /// Answer with this status and a small text body, e.g. 429 or 503 with
    /// `Retry-After: seconds`, or 404 / 500.
    case status(Int, retryAfter: Int? = nil)
    /// Send the headers with the full `Content-Length`, then only `bytes` bytes of the
    /// body, then close the connection. The client sees a truncated transfer of exactly
    /// `bytes` body bytes (the close is an orderly FIN, so nothing already sent is lost).
    case dropAfter(bytes: Int)
    /// Send the body at about this many bytes per second, in small paced chunks.
    case slow(bytesPerSecond: Int)
    /// Send `bytes` bytes of the body, pause for `seconds` (a stalled transfer), then send
    /// the rest. With `bytes: 0` the pause comes right after the headers.
    case stallAfter(bytes: Int, seconds: Double)
    /// Send the body one byte at a time, `seconds` apart: a server that never
    /// falls silent for long, yet sends next to nothing.
    case trickle(seconds: Double)
    /// Answer `200 text/html` with a small HTML page instead of the resource (like a
    /// captive portal or an error page served with a success status).
    case html
    /// Serve the full body with `200` even when a valid `Range` is asked, like servers
    /// without range support. `Accept-Ranges: bytes` is still advertised, so a client
    /// that trusts it must cope with the `200`.
    case ignoreRange
    /// After the true `Content-Length`, send a second one claiming `bytes` (a
    /// broken server, or a proxy adding its own): the body's length is
    /// ambiguous. The whole body is sent, then the connection is closed.
    case secondLength(bytes: Int)
    /// Send `text` as the only `Content-Length` (a broken server or proxy:
    /// `1e3`, a number past 2^63), then the whole body, then close the
    /// connection: what frames the body is anybody's guess.
    case lengthText(String)
    /// Send the body in chunks (`Transfer-Encoding: chunked`), and with it a
    /// `Content-Length` claiming `claimedLength` when given (a misconfigured
    /// server or proxy: the chunks frame the body, RFC 9112 6.3).
    case chunked(claimedLength: Int?)
    /// Never finish the response's head: send `103 Early Hints` again and
    /// again (`interim`), or a `200` status line and then one header line,
    /// `seconds` apart, until the client leaves (a broken proxy, or a
    /// server that holds a client's slot on purpose). Bounded: 10,000 sends.
    case endlessHead(interim: Bool, seconds: Double)
    /// Answer in full, keeping the connection open (no `Connection: close`),
    /// then reset it, unanswered, when the client sends its next request on
    /// it: a server that dropped an idle connection just as the client
    /// reused it.
    case resetNextRequest
    /// Send the first `bytes` bytes of the response's head, then close the
    /// connection: a server or proxy that died mid-answer.
    case cutHead(bytes: Int)
    /// Send no `Content-Length`: the body ends with the connection (HTTP/1.0
    /// servers, some proxies), after `dropAfter` bytes when given, which the
    /// client cannot tell from the body's end.
    case noLength(dropAfter: Int?)
    /// Take the response's place among those `limitResponses` counts, then
    /// wait `seconds` before its head: a server slow to start its answers
    /// (a backend's fetch), whose refusals of the requests past its limit
    /// come first.
    case lateHead(seconds: Double)
}

/// A fault installed for a path, with how many more requests it applies to.
struct FaultRule: Sendable {
    let fault: Fault
    /// nil = forever.
    var remaining: Int?
}

extension Fault {
    /// Whether this fault alters how a body is written (as opposed to what is answered).
    var affectsBodyDelivery: Bool {
        switch self {
        case .dropAfter, .slow, .stallAfter, .trickle, .secondLength, .lengthText, .chunked, .endlessHead, .resetNextRequest,
             .cutHead, .noLength, .lateHead: true
        case .status, .html, .ignoreRange: false
        }
    }
}
