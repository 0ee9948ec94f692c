import Foundation
import Synchronization
import Testing
import TestSupport
import URLText
@testable import Transfer

@Suite struct ResponseHeadTests {
    private func head(_ lines: [String]) -> ResponseHead {
        var head = ResponseHead()
        for line in lines { head.consume(line: Substring(line + "\r\n")) }
        return head
    }

    /// Only an empty line ends a head; fields after it (trailers) are not the
    /// response's; a value with a control byte in it is taken as absent.
    @Test func onlyAnEmptyLineEndsTheHeadAndTrailersAreNotItsFields() {
        var partial = head(["HTTP/1.1 206 Partial Content", "Content-Length: 10", " \t", "ETag: \"v1\"",
                            "Content-Range: bytes 5-14/15"])
        #expect(!partial.isComplete)
        partial.consume(line: "\r\n")
        #expect(partial.isComplete)
        #expect(partial.etag == "\"v1\"")
        #expect(partial.contentRange.map { [$0.start, $0.end] } == [5, 14])
        // Trailers after the body.
        partial.consume(line: "ETag: \"other\"\r\n")
        partial.consume(line: "Retry-After: 60\r\n")
        #expect(partial.etag == "\"v1\"")
        #expect(partial.retryAfter(now: Date()) == nil)
        // A bare CR inside a value: no validator to echo back.
        #expect(head(["HTTP/1.1 200 OK", "ETag: \"a\rb\"", ""]).etag == nil)
        #expect(head(["HTTP/1.1 200 OK", "ETag: \"a\tb\"", ""]).etag == "\"a\tb\"")
    }

    /// A reason phrase is quoted in failure lines and kept in the catalog: a
    /// server's 20,000 characters are cut to 120 (`…` the last).
    @Test func aLongReasonPhraseIsCut() {
        let long = head(["HTTP/1.1 500 " + String(repeating: "Ошибка ", count: 3000)])
        #expect(long.reason.count == 120 && long.reason.hasSuffix("…") && long.reason.hasPrefix("Ошибка Ошибка"))
        #expect(head(["HTTP/1.1 404 Not Found"]).reason == "Not Found")
        let edge = String(repeating: "x", count: 120)
        #expect(head(["HTTP/1.1 500 " + edge]).reason == edge)
    }

    @Test func aContentLengthMustBeACountOfBytesThatFits() {
        func length(_ values: String...) -> (Int64?, Bool, Bool) {
            let h = head(["HTTP/1.1 200 OK"] + values.map { "Content-Length: \($0)" } + [""])
            return (h.contentLength, h.lengthIsNoCount, h.lengthsDisagree)
        }
        #expect(length("5000") == (5000, false, false))
        #expect(length(" 5000 ") == (5000, false, false))
        #expect(length("9223372036854775807") == (Int64.max, false, false))
        #expect(length() == (nil, false, false))
        for odd in ["1e3", "9223372036854775808", "-1", "+5", "0x10", "5000 bytes", ""] {
            #expect(length(odd) == (nil, true, false), "\(odd)")
        }
        // Two values: the disagreement is what is said.
        #expect(length("5000", "1e3") == (nil, false, true))
        #expect(length("1e3", "1e3") == (nil, false, true))
        // Chunks frame the body: its Content-Length says nothing.
        let chunked = head(["HTTP/1.1 200 OK", "Transfer-Encoding: chunked", "Content-Length: 1e3", ""])
        #expect(!chunked.lengthIsNoCount)
    }

    /// The redirects followed name the route by their paths only.
    @Test func theRouteIsThePathsOfTheRedirectsFollowed() {
        func route(_ locations: String...) -> String {
            head(locations.flatMap { ["HTTP/1.1 302 Found", "Location: \($0)", ""] } + ["HTTP/1.1 200 OK", ""]).route
        }
        #expect(route() == "")
        #expect(route("/img/a.jpg").count == 16)
        // A signed link's query, a mirror's host, the form of the address: one file.
        #expect(route("https://a.test/img/a.jpg?sig=1") == route("http://b.test:8080/img/a.jpg?sig=2#x"))
        #expect(route("/img/a.jpg") == route("//cdn.test/img/a.jpg"))
        // Another path, or another way through, is another route.
        #expect(route("/img/a.jpg") != route("/img/b.jpg"))
        #expect(route("/img/a.jpg") != route("/go", "/img/a.jpg"))
        // The last one's path is where the answer came from (`ResumeAnswer.redirectedTo`).
        let through = head(["HTTP/1.1 302 Found", "Location: /go", "", "HTTP/1.1 301 Moved", "Location: https://cdn.test/x/3.jpg?sig=1", "",
                            "HTTP/1.1 200 OK", ""])
        #expect(through.lastRedirectPath == "/x/3.jpg" && head(["HTTP/1.1 200 OK", ""]).lastRedirectPath == nil)
        // A 100 Continue between them changes nothing.
        let continued = head(["HTTP/1.1 302 Found", "Location: /img/a.jpg", "", "HTTP/1.1 100 Continue", "",
                              "HTTP/1.1 200 OK", ""])
        #expect(continued.route == route("/img/a.jpg"))
    }

    /// A validator or a range sent twice with different values is none: the
    /// last one was taken, and a 206 whose second `Content-Range` or `ETag`
    /// matched what was asked for had other bytes stitched on. The same value
    /// twice is that value; codings sent in several fields are one list.
    @Test func aFieldRepeatedWithAnotherValueIsTakenAsAbsent() {
        let ranges = head(["HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-99/200", "Content-Range: bytes 100-199/200", ""])
        #expect(ranges.contentRange == nil)
        let unsatisfied = head(["HTTP/1.1 416 Range Not Satisfiable", "Content-Range: bytes */100", "Content-Range: bytes */200", ""])
        #expect(unsatisfied.unsatisfiedRangeLength == nil)
        let tags = head(["HTTP/1.1 206 Partial Content", "ETag: \"other\"", "ETag: \"vv\"", "Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT",
                         "Last-Modified: Tue, 02 Jan 2024 00:00:00 GMT", ""])
        #expect(tags.etag == nil && tags.lastModified == nil)
        let same = head(["HTTP/1.1 206 Partial Content", "Content-Range: bytes 100-199/200", "content-range: bytes 100-199/200",
                         "ETag: \"vv\"", "ETag: \"vv\"", "Content-Encoding: gzip", "Content-Encoding: br", ""])
        #expect(same.contentRange?.start == 100 && same.contentRange?.end == 199 && same.etag == "\"vv\"")
        #expect(same.contentEncoding == "gzip, br")
        #expect(head(["HTTP/1.1 200 OK", "Transfer-Encoding: gzip, Chunked", ""]).isChunked)
        #expect(!head(["HTTP/1.1 200 OK", "Transfer-Encoding: identity", ""]).isChunked)
        // A redirect's fields are not the final response's.
        let redirected = head(["HTTP/1.1 302 Found", "Location: /b", "ETag: \"a\"", "", "HTTP/1.1 200 OK", "ETag: \"b\"", ""])
        #expect(redirected.etag == "\"b\"")
    }

    @Test func aContentRangeMustBeOrderedAndInsideTheFile() {
        func range(_ value: String) -> (start: Int64, end: Int64, total: Int64?)? {
            head(["HTTP/1.1 206 Partial Content", "Content-Range: \(value)", ""]).contentRange
        }
        #expect(range("bytes 100-199/200").map { [$0.start, $0.end, $0.total] } == [100, 199, 200])
        #expect(range("bytes 100-199/*").map { [$0.start, $0.end] } == [100, 199])
        #expect(range("bytes 0-0/1") != nil)
        // Numbers no file has: refused before anyone adds one to them.
        #expect(range("bytes 300000-9223372036854775807/9223372036854775807") == nil)
        #expect(range("bytes 200-100/300") == nil)
        #expect(range("bytes 100-200/200") == nil)
        #expect(range("bytes 100-9223372036854775808/200") == nil)
        #expect(range("items 1-2/3") == nil)
    }

    /// An HTTP/2 stream is never paused (see `Attempt.receiveBody`): the version comes from the final status line.
    @Test func theStatusLineSaysWhetherTheResponseIsAStream() {
        #expect(head(["HTTP/2 200", ""]).majorVersion == 2)
        #expect(head(["HTTP/1.1 200 OK", ""]).majorVersion == 1)
        #expect(head(["HTTP/1.0 200 OK", ""]).majorVersion == 1)
        #expect(head(["HTTP/3 200", ""]).majorVersion == 3)
        // A redirect over HTTP/1.1 to an HTTP/2 host: the final response counts.
        #expect(head(["HTTP/1.1 302 Found", "Location: https://b.test/x", "", "HTTP/2 200", ""]).majorVersion == 2)
        #expect(head(["HTTP/2 301", "Location: http://c.test/x", "", "HTTP/1.1 200 OK", ""]).majorVersion == 1)
    }

    @Test func anEmptyContentTypeIsNone() {
        #expect(head(["HTTP/1.1 200 OK", "Content-Type:", ""]).contentType == nil)
        #expect(head(["HTTP/1.1 200 OK", "Content-Type:   ", ""]).contentType == nil)
        #expect(head(["HTTP/1.1 200 OK", "Content-Type: audio/flac", ""]).contentType == "audio/flac")
    }

    @Test func aNegativeContentLengthIsNoLength() {
        #expect(head(["HTTP/1.1 200 OK", "Content-Length: -5", ""]).contentLength == nil)
        #expect(head(["HTTP/1.1 200 OK", "Content-Length: 9223372036854775807", ""]).contentLength == .max)
    }

    /// Two different lengths make the body's end a guess; one length given
    /// twice (in two fields or a list) is that length.
    @Test func twoDifferentLengthsAreNoLength() {
        let twoFields = head(["HTTP/1.1 200 OK", "Content-Length: 5000", "Content-Length: 4000", ""])
        #expect(twoFields.lengthsDisagree)
        #expect(twoFields.contentLength == nil)
        #expect(twoFields.fields["content-length"] == "5000, 4000")
        #expect(head(["HTTP/1.1 200 OK", "Content-Length: 10,20", ""]).lengthsDisagree)
        // A second value that is no count is no agreement either.
        #expect(head(["HTTP/1.1 200 OK", "Content-Length: 5000", "Content-Length: 5000x", ""]).lengthsDisagree)
        #expect(head(["HTTP/1.1 200 OK", "Content-Length: 5000", "Content-Length:", ""]).lengthsDisagree)
        #expect(!head(["HTTP/1.1 200 OK", "Content-Length: abc", ""]).lengthsDisagree)

        let repeated = head(["HTTP/1.1 200 OK", "Content-Length: 10", "Content-Length: 10, 10", ""])
        #expect(!repeated.lengthsDisagree)
        #expect(repeated.contentLength == 10)
        // A redirect's length is not the final response's.
        let redirected = head(["HTTP/1.1 302 Found", "Location: /b", "Content-Length: 3", "",
                               "HTTP/1.1 200 OK", "Content-Length: 10", ""])
        #expect(!redirected.lengthsDisagree)
        #expect(redirected.contentLength == 10)
    }

    /// Chunks frame a body whatever `Content-Length` says beside them (RFC 9112 6.3).
    @Test func aTransferEncodingOverridesTheLength() {
        let chunked = head(["HTTP/1.1 200 OK", "Transfer-Encoding: chunked", "Content-Length: 7000", ""])
        #expect(chunked.contentLength == nil)
        #expect(!head(["HTTP/1.1 200 OK", "Content-Length: 7", "Content-Length: 9", "Transfer-Encoding: chunked", ""])
            .lengthsDisagree)
    }

    @Test func theExpectedSizeOfARangeAnswerNeverOverflows() {
        #expect(Attempt.expectedSize(contentLength: 100, status: 206, requestedOffset: 50) == 150)
        #expect(Attempt.expectedSize(contentLength: 100, status: 200, requestedOffset: 50) == 100)
        #expect(Attempt.expectedSize(contentLength: nil, status: 206, requestedOffset: 50) == nil)
        // An error page or a redirect says nothing of the body's size.
        #expect(Attempt.expectedSize(contentLength: 512, status: 503, requestedOffset: 10_000_000) == nil)
        #expect(Attempt.expectedSize(contentLength: 150, status: 302, requestedOffset: 0) == nil)
        // A server's Content-Length near the limit: unknown rather than a trap on the loop thread.
        #expect(Attempt.expectedSize(contentLength: .max, status: 206, requestedOffset: 300_000) == nil)
    }

    @Test func headersOfARedirectDoNotLeakIntoTheFinalResponse() {
        let parsed = head([
            "HTTP/1.1 301 Moved Permanently", "Location: /b", "ETag: \"old\"", "",
            "HTTP/1.1 200 OK", "Content-Length: 10", "Content-Type: image/jpeg", "",
        ])
        #expect(parsed.isComplete)
        #expect(parsed.status == 200)
        #expect(parsed.etag == nil)
        #expect(parsed.contentLength == 10)
        #expect(parsed.contentType == "image/jpeg")
    }

    @Test func fieldNamesMatchInAnyCaseAndOnlyWholeNamesAreKept() {
        let parsed = head([
            "HTTP/1.1 200 OK", "CONTENT-LENGTH: 7", "eTaG:\t\"v1\"  ", "X-ETag: \"other\"", "Content-Lengths: 9",
            "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT", "Content-Type image/png", "",
        ])
        #expect(parsed.contentLength == 7)
        #expect(parsed.etag == "\"v1\"")
        #expect(parsed.lastModified == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(parsed.contentType == nil)
        #expect(parsed.fields.count == 3)
    }

    @Test func aRedirectBlockAloneIsNotComplete() {
        let parsed = head(["HTTP/1.1 302 Found", "Location: /elsewhere", ""])
        #expect(!parsed.isComplete)
    }

    @Test func continueBlocksAreSkipped() {
        let parsed = head(["HTTP/1.1 100 Continue", "", "HTTP/1.1 404 Not Found", "Content-Length: 0", ""])
        #expect(parsed.isComplete)
        #expect(parsed.status == 404)
        #expect(parsed.reason == "Not Found")
    }

    @Test func http2StatusLinesHaveNoReason() {
        let parsed = head(["HTTP/2 206", "content-range: bytes 100-199/1000", ""])
        #expect(parsed.status == 206)
        #expect(parsed.contentRange?.start == 100)
        #expect(parsed.contentRange?.total == 1000)
    }

    /// Only a block's first line may be a status line: a header line or a
    /// trailer beginning `HTTP/` reset the head (and its clock).
    @Test func aLineBeginningHTTPInsideABlockIsNoNewResponse() {
        var inside = head(["HTTP/1.1 200 OK", "HTTP/1.1 500 Oops", "Content-Length: 5", ""])
        #expect(inside.status == 200 && inside.isComplete && inside.contentLength == 5)
        // A trailer after the whole head.
        let trailer = Array("HTTP/1.1 500 x\r\n".utf8)
        trailer.withUnsafeBytes { inside.consume(bytes: $0) }
        #expect(inside.status == 200 && inside.isComplete)
        // After a 1xx's blank line, the next block's status line is read.
        let interim = head(["HTTP/1.1 100 Continue", "", "HTTP/1.1 204 No Content", ""])
        #expect(interim.status == 204 && interim.isComplete)
    }

    @Test func retryAfterInSecondsOrAsADate() {
        #expect(head(["HTTP/1.1 429 Too Many Requests", "Retry-After: 12", ""]).retryAfter() == 12)
        let now = Date(timeIntervalSince1970: 784_111_717) // Sun, 06 Nov 1994 08:48:37 GMT
        let dated = head(["HTTP/1.1 503 Service Unavailable", "Retry-After: Sun, 06 Nov 1994 08:49:37 GMT", ""])
        #expect(dated.retryAfter(now: now) == 60)
        #expect(head(["HTTP/1.1 503 x", "Retry-After: soon", ""]).retryAfter() == nil)
        #expect(head(["HTTP/1.1 503 x", "Retry-After: 1.5", ""]).retryAfter() == 1.5)
        for odd in ["nan", "inf", "-5", "1e3", ""] {
            #expect(head(["HTTP/1.1 503 x", "Retry-After: \(odd)", ""]).retryAfter() == nil, "\(odd)")
        }
        // Held, but never below what reads as "a very long time": held at 10^9 s, it
        // was said as a wait of 11574 days, which the server never asked for.
        let endless = head(["HTTP/1.1 429 x", "Retry-After: 99999999999999999999999", ""]).retryAfter()
        #expect(endless.map(NumberText.wait) == "a very long time")
        #expect(head(["HTTP/1.1 429 x", "Retry-After: 999999999", ""]).retryAfter().map(NumberText.wait) == "11574 days")
    }

    /// A date counts from the server's clock (its `Date`), not this machine's.
    @Test func aRetryAfterDateCountsFromTheResponsesDate() {
        let now = Date(timeIntervalSince1970: 784_111_717) // Sun, 06 Nov 1994 08:48:37 GMT
        // The server 700 s ahead asks for 3 s.
        let ahead = head(["HTTP/1.1 429 Too Many Requests", "Date: Sun, 06 Nov 1994 09:00:17 GMT",
                          "Retry-After: Sun, 06 Nov 1994 09:00:20 GMT", ""])
        #expect(ahead.retryAfter(now: now) == 3)
        // An hour behind, it asks for 30 s.
        let behind = head(["HTTP/1.1 503 Service Unavailable", "Date: Sun, 06 Nov 1994 07:48:37 GMT",
                           "Retry-After: Sun, 06 Nov 1994 07:49:07 GMT", ""])
        #expect(behind.retryAfter(now: now) == 30)
        // A Date that cannot be read leaves this machine's clock to count from.
        let unreadable = head(["HTTP/1.1 503 x", "Date: yesterday", "Retry-After: Sun, 06 Nov 1994 08:49:37 GMT", ""])
        #expect(unreadable.retryAfter(now: now) == 60)
    }
}

@Suite struct RedirectHeadTests {
    /// A redirect libcurl follows may lead to a new connection: the stall
    /// clock waits for it as for the first (the connect timeout rules).
    @Test func aFollowedRedirectIsTold() {
        var head = ResponseHead()
        for line in ["HTTP/1.1 302 Found", "Location: http://other/x", ""] { head.consume(line: Substring(line)) }
        #expect(head.endedInRedirect)
        #expect(!head.isComplete)
        head.consume(line: "HTTP/1.1 200 OK")
        #expect(!head.endedInRedirect)
        head.consume(line: "")
        #expect(head.isComplete)
        var noLocation = ResponseHead()
        for line in ["HTTP/1.1 304 Not Modified", ""] { noLocation.consume(line: Substring(line)) }
        #expect(!noLocation.endedInRedirect)
        #expect(noLocation.isComplete)
    }
}

@Suite struct RequestTargetTests {
    /// A host key is shown as a person reads it: percent-encoding decoded
    /// where that gives text, else as the URL spells it; the key itself stays.
    @Test func aHostKeyIsShownDecoded() throws {
        let encoded = try RequestTarget("http://%62adgu.invalid/a.jpg")
        #expect(encoded.hostKey == "%62adgu.invalid:80")
        #expect(RequestTarget.readable(hostKey: encoded.hostKey) == "badgu.invalid:80")
        #expect(RequestTarget.readable(hostKey: "example.org:443") == "example.org:443")
        #expect(RequestTarget.readable(hostKey: "b%C3%BCcher.example:80") == "bücher.example:80")
        // An IDN's ASCII form, its top-level name too, reads as its letters.
        #expect(RequestTarget.readable(hostKey: "xn--80aafi6cg.xn--p1ai:443") == "правда.рф:443")
        #expect(RequestTarget.readable(hostKey: "[::1]:80") == "[::1]:80")
        // Not text, or a control character: left as it is.
        #expect(RequestTarget.readable(hostKey: "bad%ff.example:80") == "bad%ff.example:80")
        #expect(RequestTarget.readable(hostKey: "a%0ab.example:80") == "a%0ab.example:80")
        #expect(RequestTarget.readable(hostKey: "a%E2%80%AEb.example:80") == "a%E2%80%AEb.example:80")
        // Given up, the host is named so too.
        var reachability = HostReachability(patience: .seconds(30), leastFailures: 5)
        let now = ContinuousClock.now
        reachability.failedWithoutAnswer(encoded.hostKey, transfer: TransferID(rawValue: 1), reason: "Could not resolve host: badgu.invalid",
                                         noSuchName: true, started: now, at: now)
        let refusal = reachability.refusal(for: encoded.hostKey, transfer: TransferID(rawValue: 2), at: now)
        #expect(refusal?.message.hasPrefix("given up: badgu.invalid:80 has no such name (Could not resolve host: badgu.invalid)") == true)
    }

    @Test func httpAndHttpsAreAccepted() throws {
        #expect(try RequestTarget("http://Example.com/a.jpg").hostKey == "example.com:80")
        #expect(try RequestTarget("https://example.com:8443/a").hostKey == "example.com:8443")
        #expect(try RequestTarget("https://example.com/a").hostKey == "example.com:443")
        #expect(try RequestTarget("http://user:pw@Host.example:8080?q=1").hostKey == "host.example:8080")
        // Leading zeros in a port are allowed (RFC 3986), as libcurl allows them.
        #expect(try RequestTarget("http://example.com:018080/a").hostKey == "example.com:18080")
        #expect(try RequestTarget("http://example.com:00080/a").hostKey == "example.com:80")
        for bad in ["http://example.com:0000/a", "http://example.com:065536/a", "http://example.com:1x/a"] {
            #expect(throws: TransferError.self, "\(bad)") { try RequestTarget(bad) }
        }
        #expect(try RequestTarget("http://[::1]:9000/x").hostKey == "[::1]:9000")
        #expect(try RequestTarget("  http://h/x  ").url == "http://h/x")
        // Any case of the scheme; the host as the URL spells it (one host, one key):
        // an IDN in its ASCII form, an address in one form; an IDN left as written lower-cased beyond ASCII too.
        #expect(try RequestTarget("HtTpS://H/x").hostKey == "h:443")
        #expect(try RequestTarget("http://BÜCHER.example/x").hostKey == "xn--bcher-kva.example:80")
        #expect(try RequestTarget("http://127.1:8080/x").hostKey == "127.0.0.1:8080")
        #expect(try RequestTarget("http://STRAẞE.example/x").hostKey == "straße.example:80")
        for (other, scheme) in [("httpx://h/x", "httpx"), ("htt://h/x", "htt"), ("HTTPS1://h/x", "https1"), ("Ftp://h/x", "ftp")] {
            let error = #expect(throws: TransferError.self) { try RequestTarget(other) }
            #expect(error?.message == "unsupported scheme '\(scheme)' (only http and https): \(other)")
        }
        let hostAndPort = #expect(throws: TransferError.self) { try RequestTarget("Example.com:8080/x") }
        #expect(hostAndPort?.message == "not a URL, it has no scheme (write http:// or https:// before it): Example.com:8080/x")
    }

    @Test func oneResourceHasOneSpelling() throws {
        // The fragment is never sent; scheme and host are case-blind; the rest
        // is not (further spellings: URLSpellingTests).
        #expect(try RequestTarget("http://h/a.jpg#top").url == "http://h/a.jpg")
        #expect(try RequestTarget("HTTP://Example.COM:8080/Path/A.JPG?Q=1#x").url == "http://example.com:8080/Path/A.JPG?Q=1")
        #expect(try RequestTarget("http://Ann:PW@Host/x").url == "http://Ann:PW@host/x")
        #expect(try RequestTarget("http://h/#").url == "http://h/")
        #expect(try RequestTarget("http://h#frag").url == "http://h/")
        #expect(try RequestTarget("http://h:80/a/./b/../%7Ec.jpg").url == "http://h/a/~c.jpg")
        #expect(try RequestTarget("http://[::1]:9000/x#y").url == "http://[::1]:9000/x")
        let plain = "http://h/already/normal.jpg?x=1"
        #expect(try RequestTarget(plain).url == plain)
    }

    @Test(arguments: ["ftp://example.com/a", "file:///etc/passwd", "example.com/a.jpg", "http:///nohost", "", "gopher://x",
                      "http://h:99999/x", "http://h:8o/x", "http://h/a b", "http:/h/x", "1http://h/x", "http://[::1/x"])
    func everythingElseIsRefused(text: String) {
        #expect(throws: TransferError.self) { try RequestTarget(text) }
    }

    /// Hosts libcurl refuses once the list is under way (the run then ended
    /// as if an item had failed, exit 1): refused before anything is fetched.
    @Test(arguments: ["http://host:80:80/x", "http://127.0.0.1:8080:/x", "http://a<b/x", #"http://a"b/x"#, #"http://x\y/"#,
                      "http://[zz]/x", "http://a%00b/x", "http://a{b}/x", "http://a!b/x", "http://a%3Cb/x", "http://a%20b/x",
                      "http://a%C3b/x", "http://[127.0.0.1]/x", "http://[1]/x", "http://[::1.2.3.4.5]/x", "http://[]/x",
                      "http://user:p@ss@h/x", "http://[::1%]/x",
                      // No host name holds these (libcurl took them, then failed each URL on its own):
                      "http://a%7Fb/x", "http://a%C2%85b/x", "http://a%E2%80%AEb/x", "http://a%C2%A0b/x", "http://a\u{2028}b/x"])
    func hostsLibcurlRefusesAreRefusedFirst(text: String) {
        #expect(throws: TransferError.self) { try RequestTarget(text) }
    }

    /// What libcurl takes: percent-encoded names (it decodes them), IDN, zones.
    @Test(arguments: ["http://loc%61lhost:1/", "http://bücher.localhost/x", "http://b%C3%BCcher.localhost/x",
                      "http://[::1%25lo]:1/", "http://[::1%lo]:1/", "http://[fe80::1%eth0]/x", "http://ex_ample/x",
                      "http://user:p%40ss@h/x", "http://[::ffff:1.2.3.4]/", "http://a%25b/x", "http://a%zz/x", "http://h./x"])
    func hostsLibcurlTakesAreTaken(text: String) throws {
        _ = try RequestTarget(text)
    }
}

@Suite struct CACertificatesTests {
    @Test func aFileOfCertificatesIsKnownByItsPEMHeader() {
        #expect(CACertificates.holdsPEMCertificate(Data("# bundle\n-----BEGIN CERTIFICATE-----\nMIIB...\n".utf8)))
        #expect(CACertificates.holdsPEMCertificate(Data("-----BEGIN TRUSTED CERTIFICATE-----\n".utf8)))
        #expect(CACertificates.holdsPEMCertificate(Data("-----BEGIN X509 CERTIFICATE-----\n".utf8)))
        #expect(!CACertificates.holdsPEMCertificate(Data()))
        #expect(!CACertificates.holdsPEMCertificate(Data("-----BEGIN PRIVATE KEY-----\n".utf8)))
        #expect(!CACertificates.holdsPEMCertificate(Data([0x30, 0x82, 0x01, 0x0A])))
    }
}

@Suite struct ValidatorLengthTests {
    private func head(_ lines: [String]) -> ResponseHead {
        var head = ResponseHead()
        for line in lines + [""] { head.consume(line: Substring(line + "\r\n")) }
        return head
    }

    /// Runs `body` with a file sink over a new partial for `url`, and a
    /// write of 1000 bytes to hand it; the partial is removed afterwards.
    private func withSink(_ url: String, resumableThreshold: Int64 = 0, resumeAnswerCheck: ResumeAnswerCheck? = nil,
                          _ body: (FileSink, () -> BodyWrite) throws -> Void) async throws {
        try await TemporaryDirectory.with { directory in
            let partial = try PartialFile(directory: directory.path, url: url)
            defer { partial.close(discard: true) }
            let sink = try FileSink(partial: partial, maxFileSize: nil, resumableThreshold: resumableThreshold,
                                    budget: FinishedFile.Budget(limit: 4), directIO: false, resumeAnswerCheck: resumeAnswerCheck)
            let bytes = [UInt8](repeating: 1, count: 1000)
            try body(sink) { bytes.withUnsafeBytes { sink.write($0, mayPause: false, giveUp: { true }) } }
        }
    }

    /// Begins `head` at `offset`, hands the sink one write and fails the
    /// attempt, as a dropped connection does: the bytes held then.
    private func holdAfterOneWrite(_ sink: FileSink, _ write: () -> BodyWrite, _ head: ResponseHead, at offset: Int64 = 0) -> Int64 {
        #expect(sink.begin(head, requestedOffset: offset) == nil)
        _ = write()
        sink.attemptFailed()
        return sink.bytesHeld
    }

    /// Dates are read in every form HTTP allows.
    @Test func datesAreReadInEveryForm() {
        let expected = Date(timeIntervalSince1970: 784_111_777)
        #expect(HTTPDate.date("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
        #expect(HTTPDate.date("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
        #expect(HTTPDate.date("Sun Nov  6 08:49:37 1994") == expected)
        #expect(HTTPDate.date("Tue, 29 Feb 2028 23:59:59 GMT") == Date(timeIntervalSince1970: 1_835_481_599))
        for bad in ["Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 0x Nov 1994 08:49:37 GMT", "yesterday", ""] {
            #expect(HTTPDate.date(bad) == nil, "\(bad)")
        }
    }

    /// A body that began chunked (no length) is held to the first length a
    /// range answer gives: a later range answer for another length is
    /// another version under the same ETag, and is not stitched on.
    @Test func aBodyOfNoLengthIsHeldToTheFirstLengthARangeAnswerGives() async throws {
        try await withSink("http://example.test/chunked.bin") { sink, write in
            let held = holdAfterOneWrite(sink, write, head(["HTTP/1.1 200 OK", "ETag: \"same\"", "Transfer-Encoding: chunked"]))
            #expect(held > 0)
            let first = head(["HTTP/1.1 206 Partial Content", "ETag: \"same\"", "Content-Range: bytes \(held)-4999/5000"])
            let more = holdAfterOneWrite(sink, write, first, at: held)
            let other = head(["HTTP/1.1 206 Partial Content", "ETag: \"same\"", "Content-Range: bytes \(more)-7999/8000"])

            let error = sink.begin(other, requestedOffset: more)

            #expect(error?.message.hasPrefix("the file changed on the server while resuming (8000 bytes long now, 5000 before") == true,
                    "\(error?.message ?? "accepted")")
            #expect(sink.bytesHeld == 0)
        }
    }

    /// Only a part a later run could resume waits for the answer to its
    /// resume to be judged (a refusal says it is kept): with fewer bytes
    /// held than the threshold, a whole answer starts over unasked.
    @Test func onlyAPartALaterRunCouldResumeWaitsForItsAnswerToBeJudged() async throws {
        let asked = Mutex(0)
        try await withSink("http://example.test/small.jpg", resumableThreshold: 5000,
                           resumeAnswerCheck: { _ in asked.withLock { $0 += 1 }; return "a page" }) { sink, write in
            let small = holdAfterOneWrite(sink, write, head(["HTTP/1.1 200 OK", "ETag: \"v1\"", "Content-Length: 8000"]))
            #expect(sink.begin(head(["HTTP/1.1 200 OK", "ETag: \"v2\"", "Content-Type: text/html"]), requestedOffset: small) == nil)
            #expect(write() == .taken)
            #expect(sink.bytesHeld == 1000)
            #expect(asked.withLock { $0 } == 0)

            for _ in 0..<5 { _ = write() }
            sink.attemptFailed()
            let held = sink.bytesHeld
            #expect(held >= 5000)
            #expect(sink.begin(head(["HTTP/1.1 200 OK", "ETag: \"v3\"", "Content-Type: text/html"]), requestedOffset: held) == nil)
            #expect(write() == .refused(TransferError(.notTheFile, "a page")))
            #expect(asked.withLock { $0 } == 1)
            #expect(sink.bytesHeld == held)
        }
    }

    /// A whole body that answers a resume under the validator of the bytes
    /// held is that version, whose length is known: one that ends sooner was
    /// cut (a body ended by the connection's close, with no length, was
    /// stored truncated), and one of another length is refused.
    @Test func aWholeBodyUnderTheHeldValidatorIsHeldToItsLength() async throws {
        try await withSink("http://example.test/whole.bin") { sink, write in
            let held = holdAfterOneWrite(sink, write, head(["HTTP/1.1 200 OK", "ETag: \"v1\"", "Content-Length: 5000"]))

            // Sent whole again, ended by the connection's close: 5000 bytes are due.
            #expect(sink.begin(head(["HTTP/1.0 200 OK", "ETag: \"v1\""]), requestedOffset: held) == nil)
            #expect(sink.expectedTotal == 5000)
            _ = write()
            sink.attemptFailed()
            let again = sink.bytesHeld
            // And with another length under the same validator.
            let error = sink.begin(head(["HTTP/1.1 200 OK", "ETag: \"v1\"", "Content-Length: 20"]), requestedOffset: again)
            #expect(error?.message == "the file changed on the server while resuming (20 bytes long now, 5000 before, under the same validator)")
            // Another validator is another version, of any length.
            #expect(sink.begin(head(["HTTP/1.1 200 OK", "ETag: \"v2\"", "Content-Length: 20"]), requestedOffset: 0) == nil)
            #expect(sink.expectedTotal == 20)
        }
    }
}
