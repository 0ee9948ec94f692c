import ContentStore
import Foundation
import Testing
@testable import MediaFetch
@testable import Transfer

/// `--progress json`: one compact object a line, keys sorted, passwords hidden.
@Suite struct ProgressJSONTests {
    @Test func eachEventIsOneLineWithItsFields() {
        let hash = String(repeating: "ab", count: 32)
        #expect(ProgressJSON.line(for: .stored(url: "http://ann:secret@h/a.jpg", sha256: hash, size: 5, resumedBytes: 2))
                == #"{"event":"stored","hash":"\#(hash)","resumedBytes":2,"size":5,"url":"http://ann:***@h/a.jpg"}"#)
        #expect(ProgressJSON.line(for: .failed(url: "http://h/b", reason: "HTTP 404 for \"http://ann:secret@h/b\"\n"))
                == #"{"event":"failed","reason":"HTTP 404 for \"http://ann:***@h/b\"\n","url":"http://h/b"}"#)
        #expect(ProgressJSON.line(for: .retrying(url: "http://h/c", attempt: 2, delay: 0.25, reason: "HTTP 503"))
                == #"{"attempt":2,"delaySeconds":0.25,"event":"retrying","reason":"HTTP 503","url":"http://h/c"}"#)
        var report = FetchReport()
        report.total = 3
        report.downloaded = 2
        report.failed = 1
        report.failures = [FailureRecord(url: "http://h/b", message: "HTTP 404")]
        report.bytesReceived = 1 << 20
        report.seconds = 1.5
        #expect(ProgressJSON.line(for: .finished(report))
                == #"{"awaitingRecord":0,"bytes":1048576,"catalogFailed":false,"downloaded":2,"event":"finished","failed":1,"givenUpHosts":[],"interrupted":false,"left":0,"outOfSpace":false,"overPlainHTTP":0,"repeats":0,"resumedBytes":0,"seconds":1.5,"skipped":0,"total":3}"#)
        // An interrupted run says what it leaves, as the summary does.
        report.total = 20
        report.interrupted = true
        let interrupted = ProgressJSON.line(for: .finished(report))
        #expect(interrupted.contains(#""interrupted":true"#) && interrupted.contains(#""left":\#(report.left)"#), "\(interrupted)")
        #expect(report.left == 17)
        // The hosts given up, with how many of their URLs failed so.
        report.givenUpHosts = [GivenUpHost(host: "dead.test:80", failed: 12)]
        #expect(ProgressJSON.line(for: .finished(report)).contains(#""givenUpHosts":[{"failed":12,"host":"dead.test:80"}]"#))
        // In the summary's order, the most failed URLs first.
        report.givenUpHosts = [GivenUpHost(host: "a.test:80", failed: 2), GivenUpHost(host: "b.test:80", failed: 5),
                               GivenUpHost(host: "c.test:80", failed: 2)]
        #expect(ProgressJSON.line(for: .finished(report)).contains(#""givenUpHosts":[{"failed":5,"host":"b.test:80"},"#
            + #"{"failed":2,"host":"a.test:80"},{"failed":2,"host":"c.test:80"}]"#))
        #expect(ProgressJSON.note("running 117 at once") == #"{"event":"note","message":"running 117 at once"}"#)
        #expect(ProgressJSON.error("cannot open http://ann:secret@h/list: \"gone\"")
                == #"{"event":"error","message":"cannot open http://ann:***@h/list: \"gone\""}"#)
    }

    /// The summary names the hosts given up: the one, or the three with the
    /// most URLs failed so (the first given up first among equals), and how many more.
    @Test func theSummaryNamesTheHostsGivenUp() {
        var report = FetchReport()
        report.total = 130
        report.downloaded = 10
        report.failed = 120
        report.seconds = 31
        report.givenUpHosts = [GivenUpHost(host: "dead.test:80", failed: 100)]
        #expect(ProgressText.summary(report) == "10 downloaded, 0 already cached, 120 failed (0 B received in 31.0 s); "
            + "100 of them at a host given up: dead.test:80")
        report.givenUpHosts = [GivenUpHost(host: "a.test:80", failed: 5), GivenUpHost(host: "b.test:443", failed: 60),
                               GivenUpHost(host: "c.test:80", failed: 5), GivenUpHost(host: "d.test:80", failed: 5),
                               GivenUpHost(host: "e.test:80", failed: 7)]
        #expect(ProgressText.summary(report).hasSuffix("; 82 of them at 5 hosts given up: b.test:443 (60), e.test:80 (7), "
            + "a.test:80 (5) and 2 more"))
        report.givenUpHosts = []
        #expect(!ProgressText.summary(report).contains("given up"))
    }

    /// Bodies asked for over https that a redirect sent over plain http are
    /// counted in the summary and the `finished` line: nothing else showed it.
    @Test func theSummarySaysHowManyCameOverPlainHTTP() {
        var report = FetchReport()
        report.total = 3
        report.downloaded = 3
        report.overPlainHTTP = 2
        #expect(ProgressText.summary(report) == "3 downloaded, 0 already cached, 0 failed (0 B received in 0.0 s); "
            + "2 downloaded over plain http, redirected from https")
        #expect(ProgressJSON.line(for: .finished(report)).contains(#""overPlainHTTP":2"#))
        report.overPlainHTTP = 0
        #expect(!ProgressText.summary(report).contains("plain http"))
    }

    @Test func progressListsTheActiveTransfers() {
        var progress = RunProgress()
        progress.total = 10
        progress.done = 4
        progress.bytesReceived = 4096
        progress.bytesPerSecond = 1000.9
        progress.queued = 3
        progress.active = [
            TransferSnapshot(id: TransferID(rawValue: 7), url: "http://h/big", bytesReceived: 100, bytesExpected: 1000),
            TransferSnapshot(id: TransferID(rawValue: 8), url: "http://h/chunked", bytesReceived: 50, bytesExpected: nil),
        ]

        let line = ProgressJSON.line(for: .progress(progress))

        #expect(line == #"{"active":[{"bytes":100,"total":1000,"url":"http://h/big"},{"bytes":50,"url":"http://h/chunked"}],"bytes":4096,"bytesPerSecond":1000,"done":4,"event":"progress","failed":0,"left":6,"queued":3,"resumedBytes":0,"skipped":0,"storing":0,"total":10,"waitingForOtherProcess":0,"waitingToRetry":0}"#)
        // Items sleeping before a retry are counted, with when the next comes.
        (progress.waitingToRetry, progress.nextRetryInSeconds) = (2, 12)
        let waiting = ProgressJSON.line(for: .progress(progress))
        #expect(waiting.hasSuffix(#""nextRetryInSeconds":12,"queued":3,"resumedBytes":0,"skipped":0,"storing":0,"total":10,"waitingForOtherProcess":0,"waitingToRetry":2}"#), "\(waiting)")
        // So are items another process is downloading into the same cache.
        progress.waitingForOtherProcess = 1
        #expect(ProgressJSON.line(for: .progress(progress)).hasSuffix(#""waitingForOtherProcess":1,"waitingToRetry":2}"#))
        #expect(!line.contains("\n"))
    }

    @Test func fractionsThatAreNotNumbersAreNull() {
        #expect(JSONValue.number(Double.nan) == .null)
        #expect(JSONValue.number(Double.infinity) == .null)
        #expect(JSONValue.number(1e-5) == .number("1e-05"))
        var text = ""
        JSONText.writeCompact(.array([.number(-0.5), .null, .bool(true), .object([:]), .array([])]), into: &text)
        #expect(text == "[-0.5,null,true,{},[]]")
    }
}
