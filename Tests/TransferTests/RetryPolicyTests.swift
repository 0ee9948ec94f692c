import Testing
@testable import Transfer

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy(maxRetries: 3, baseDelay: 1, maxDelay: 8)

    @Test(arguments: [408, 429, 500, 502, 503, 504])
    func transientStatusesAreRetried(status: Int) {
        let error = TransferError(.http(status: status), "HTTP \(status)")
        #expect(policy.delay(beforeRetry: 1, after: error, random: { 0 }) != nil)
    }

    @Test(arguments: [400, 401, 403, 404, 410, 451])
    func otherClientErrorsAreFinal(status: Int) {
        let error = TransferError(.http(status: status), "HTTP \(status)")
        #expect(policy.delay(beforeRetry: 1, after: error) == nil)
    }

    /// What libcurl's error codes become: only what may pass on another try is
    /// retried. (1, "unsupported protocol", is retried only for an answer
    /// that is not HTTP: see below.)
    @Test(arguments: [(60, false), (58, false), (77, false), (90, false), (3, false), (1, false), (27, false),
                      (7, true), (6, true), (28, true), (35, true), (52, true), (56, true)])
    func curlErrorsAreRetriedOnlyWhenTheyMayPass(code: Int, retryable: Bool) {
        let outcome = AttemptOutcome(curlCode: code, curlMessage: "libcurl says \(code)", head: ResponseHead(),
                                     abort: nil, effectiveURL: nil)
        guard case .failure(let error) = TransferEngine.classify(outcome) else {
            Issue.record("code \(code) classified as success")
            return
        }
        #expect(error.isRetryable == retryable, "code \(code): \(error.kind)")
        #expect(error.message.contains("libcurl says \(code)"))
    }

    /// libcurl's "unsupported protocol" at an http URL is its code for an
    /// answer that is not HTTP, whatever words it kept (the transfer's first
    /// error's: a reused connection reset before the next one's HTTP/0.9).
    /// It said "only http and https are allowed" of an http URL, at once.
    /// A redirect followed to another scheme names its target, once.
    @Test func unsupportedProtocolAtAnHTTPURLIsAnAnswerThatIsNotHTTP() {
        func classified(effectiveURL: String?, redirects: Int = 0) -> TransferError? {
            var outcome = AttemptOutcome(curlCode: 1, curlMessage: "Recv failure: Connection reset by peer", head: ResponseHead(),
                                         abort: nil, effectiveURL: effectiveURL)
            outcome.redirects = redirects
            guard case .failure(let error) = TransferEngine.classify(outcome) else { return nil }
            return error
        }
        for url in ["http://h.test/okfile", "HTTPS://h.test/a.jpg"] {
            let error = classified(effectiveURL: url)
            #expect(error?.kind == .protocolViolation)
            #expect(error?.isRetryable == true)
            #expect(error?.message == "the server's answer is not valid HTTP: Recv failure: Connection reset by peer")
        }
        // A libcurl built without https says so: final, in its words.
        var noTLS = AttemptOutcome(curlCode: 1, curlMessage: "Protocol \"https\" not supported or disabled in libcurl",
                                   head: ResponseHead(), abort: nil, effectiveURL: "https://h.test/a.jpg")
        noTLS.redirects = 0
        if case .failure(let error) = TransferEngine.classify(noTLS) {
            #expect(error.kind == .unsupportedURL && !error.isRetryable)
        } else {
            Issue.record("classified as success")
        }
        let file = classified(effectiveURL: "file:///etc/passwd", redirects: 1)
        #expect(file?.kind == .unsupportedURL)
        #expect(file?.message == "the server redirected to file:///etc/passwd: only http and https are allowed")
    }

    @Test func backoffDoublesWithJitterAndIsCapped() {
        let error = TransferError(.network(curlCode: 7), "connection refused")
        // Half the ceiling is fixed, the other half random.
        #expect(policy.delay(beforeRetry: 1, after: error, random: { 0 }) == 0.5)
        #expect(policy.delay(beforeRetry: 1, after: error, random: { 0.999999 })! < 1.0)
        #expect(policy.delay(beforeRetry: 2, after: error, random: { 0 }) == 1)
        #expect(policy.delay(beforeRetry: 3, after: error, random: { 0 }) == 2)
        let capped = RetryPolicy(maxRetries: 10, baseDelay: 1, maxDelay: 8)
        #expect(capped.delay(beforeRetry: 9, after: error, random: { 0 }) == 4)
    }

    @Test func retriesRunOut() {
        let error = TransferError(.timeout, "timed out")
        #expect(policy.delay(beforeRetry: 3, after: error) != nil)
        #expect(policy.delay(beforeRetry: 4, after: error) == nil)
    }

    @Test func retryAfterIsHonouredUpToTheCap() {
        let asked = TransferError(.http(status: 429), "HTTP 429", retryAfter: 7)
        #expect(policy.delay(beforeRetry: 1, after: asked, random: { 0 }) == 7)
        // Spread by up to a tenth of the wait, and a second at most: the items
        // one 429 sent away do not all come back in the same instant.
        let five = TransferError(.http(status: 429), "HTTP 429", retryAfter: 5)
        #expect(policy.delay(beforeRetry: 1, after: five, random: { 0.5 }) == 5.25)
        let longer = TransferError(.http(status: 429), "HTTP 429", retryAfter: 120)
        #expect(policy.delay(beforeRetry: 1, after: longer, random: { 0.5 }) == 120.5)
        let tooLong = TransferError(.http(status: 503), "HTTP 503", retryAfter: 3600)
        #expect(policy.delay(beforeRetry: 1, after: tooLong) == nil)
        // Why it gave up is told; not when it gave up for another reason.
        #expect(policy.refusedWait(before: 1, after: tooLong) == 3600)
        #expect(policy.refusedWait(before: 4, after: tooLong) == nil)
        #expect(policy.refusedWait(before: 1, after: asked) == nil)
    }

    /// `Retry-After: 0`, a negative number or a date gone by spent every
    /// retry within milliseconds: the backoff is the least wait.
    @Test(arguments: [0.0, -5.0, 0.2])
    func aRetryAfterShorterThanTheBackoffWaitsForTheBackoff(asked: Double) {
        let error = TransferError(.http(status: 503), "HTTP 503", retryAfter: asked)
        #expect(policy.delay(beforeRetry: 1, after: error, random: { 0 }) == 0.5)
        #expect(policy.delay(beforeRetry: 3, after: error, random: { 0 }) == 2)
    }

    /// libcurl's "unsupported protocol" is a scheme only when it says so; an
    /// answer that is not HTTP is the server's fault, and may pass.
    @Test func anAnswerThatIsNotHTTPIsNotCalledAScheme() {
        func classified(_ message: String) -> TransferError? {
            let outcome = AttemptOutcome(curlCode: 1, curlMessage: message, head: ResponseHead(), abort: nil, effectiveURL: nil)
            guard case .failure(let error) = TransferEngine.classify(outcome) else { return nil }
            return error
        }
        let scheme = classified(#"Protocol "ftp" not supported or disabled in libcurl"#)
        #expect(scheme?.message == #"only http and https are allowed: Protocol "ftp" not supported or disabled in libcurl"#)
        #expect(scheme?.isRetryable == false)
        let appLink = classified("The redirect target URL could not be parsed: Unsupported URL scheme")
        #expect(appLink?.kind == .unsupportedURL)
        #expect(appLink?.isRetryable == false)
        let garbage = classified("Received HTTP/0.9 when not allowed")
        #expect(garbage?.message == "the server's answer is not valid HTTP: Received HTTP/0.9 when not allowed")
        #expect(garbage?.isRetryable == true)
    }

    /// An `https` URL on a plain HTTP port was tried five times over 6 s,
    /// and failed with OpenSSL's words alone; a handshake that fails
    /// otherwise (reset mid-way) may pass on another try.
    @Test func plainHTTPWhereTLSWasAskedIsFinalAndSaidPlainly() {
        func classified(_ message: String) -> TransferError? {
            let outcome = AttemptOutcome(curlCode: 35, curlMessage: message, head: ResponseHead(), abort: nil, effectiveURL: nil)
            guard case .failure(let error) = TransferEngine.classify(outcome) else { return nil }
            return error
        }
        let plain = classified("OpenSSL/3.0.19: error:0A00010B:SSL routines::wrong version number")
        #expect(plain?.kind == .notTLS)
        #expect(plain?.isRetryable == false)
        #expect(plain?.message == "TLS handshake failed: the server did not answer in TLS (plain HTTP on this port? "
            + "then the URL is http://): OpenSSL/3.0.19: error:0A00010B:SSL routines::wrong version number")
        // One that waits for a plain request says nothing: the timeout gets the same hint, and is tried again.
        let outcome = AttemptOutcome(curlCode: 28, curlMessage: "SSL connection timeout", head: ResponseHead(), abort: nil, effectiveURL: nil)
        guard case .failure(let silent) = TransferEngine.classify(outcome) else {
            Issue.record("a timeout classified as success")
            return
        }
        #expect(silent.message == "timed out: SSL connection timeout (no TLS answer: plain HTTP on this port?)")
        #expect(silent.isRetryable)
        let reset = classified("OpenSSL SSL_connect: Connection reset by peer in connection to h.test:443")
        #expect(reset?.kind == .network(curlCode: 35))
        #expect(reset?.isRetryable == true)
    }

    /// A handshake that can never succeed (no TLS version or algorithm in
    /// common, a client certificate asked for) fails at once and says why:
    /// each was tried five times over about 5 s, in OpenSSL's words alone.
    @Test func aHopelessHandshakeIsFinalAndSaysWhy() {
        func classified(_ code: Int, _ message: String) -> TransferError? {
            let outcome = AttemptOutcome(curlCode: code, curlMessage: message, head: ResponseHead(), abort: nil, effectiveURL: nil)
            guard case .failure(let error) = TransferEngine.classify(outcome) else { return nil }
            return error
        }
        let legacy = classified(35, "OpenSSL/3.0.19: error:0A00014D:SSL routines::legacy sigalg disallowed or unsupported")
        #expect(legacy?.isRetryable == false)
        #expect(legacy?.message == "TLS handshake failed: no TLS signature algorithm in common (the server's TLS is older than "
            + "this system allows): OpenSSL/3.0.19: error:0A00014D:SSL routines::legacy sigalg disallowed or unsupported")
        let version = classified(35, "OpenSSL/3.0.19: error:0A000102:SSL routines::unsupported protocol")
        #expect(version?.isRetryable == false && version?.message.contains("no TLS version in common") == true)
        // TLS 1.3 asks for a client certificate after the handshake: libcurl says so of a receive.
        let clientCertificate = classified(56, "OpenSSL SSL_read: OpenSSL/3.0.19: error:0A00045C:SSL routines::tlsv13 alert certificate required, errno 0")
        #expect(clientCertificate?.isRetryable == false)
        #expect(clientCertificate?.message.hasPrefix("TLS handshake failed: the server asks for a client certificate, "
            + "which mediafetch does not send: ") == true)
        // A receive that failed otherwise may pass on another try.
        #expect(classified(56, "Recv failure: Connection reset by peer")?.isRetryable == true)
    }

    /// The limit and the size as given, in bytes too where rounding would
    /// make them read the same ("limit of 1.0 MiB: its size as 1.0 MiB").
    @Test func aSizeOverTheLimitIsSaidSoThatTheTwoDiffer() {
        #expect(TransferError.tooLarge(limit: 1_048_576, announced: 1_048_577).message
                == "larger than the --max-filesize limit of 1.0 MiB: the server gave its size as 1.0 MiB (1048577 bytes)")
        #expect(TransferError.tooLarge(limit: 1025, announced: 3_221_225_472).message
                == "larger than the --max-filesize limit of 1.0 KiB (1025 bytes): the server gave its size as 3.0 GiB")
        #expect(TransferError.tooLarge(limit: 500).message == "larger than the --max-filesize limit of 500 B")
    }

    @Test func sizeLimitsAndBadURLsAreFinal() {
        #expect(policy.delay(beforeRetry: 1, after: TransferError(.tooLarge, "big")) == nil)
        #expect(policy.delay(beforeRetry: 1, after: TransferError(.unsupportedURL, "ftp")) == nil)
        #expect(policy.delay(beforeRetry: 1, after: TransferError(.fileSystem(errno: 28), "disk full")) == nil)
    }
}
