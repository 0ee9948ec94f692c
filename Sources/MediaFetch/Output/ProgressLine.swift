import Foundation
import Transfer

/// Job events as JSON lines (`--progress json`): one object a line, with an
/// `event` field, for scripts and other programs.
public enum ProgressJSON {
    /// A note on how the run goes ahead (`{"event":"note","message":…}`).
    public static func note(_ message: String) -> String {
        encode(["event": .string("note"), "message": .string(message)])
    }

    /// Why the run could not go on, as its last line
    /// (`{"event":"error","message":…}`): a list that cannot be read, a cache
    /// that cannot be opened. Passwords in URLs are hidden.
    public static func error(_ message: String) -> String {
        encode(["event": .string("error"), "message": .string(RedactedURL.inText(message))])
    }

    public static func line(for event: JobEvent) -> String {
        let fields: [String: JSONValue]
        switch event {
        case .progress(let progress):
            fields = [
                "event": .string("progress"), "total": .integer(progress.total), "done": .integer(progress.done),
                "failed": .integer(progress.failed), "skipped": .integer(progress.skipped),
                "bytes": .integer(progress.bytesReceived), "bytesPerSecond": .integer(Int64(progress.bytesPerSecond)),
                "queued": .integer(progress.queued),
                "active": .array(progress.active.map { transfer in
                    var item: [String: JSONValue] = ["url": .string(RedactedURL.of(transfer.url)),
                                                     "bytes": .integer(transfer.bytesReceived)]
                    if let expected = transfer.bytesExpected { item["total"] = .integer(expected) }
                    return .object(item)
                }),
            ]
        case .stored(let url, let sha256, let size, let resumedBytes):
            fields = ["event": .string("stored"), "url": .string(RedactedURL.of(url)), "hash": .string(sha256),
                      "size": .integer(size), "resumedBytes": .integer(resumedBytes)]
        case .failed(let url, let reason):
            fields = ["event": .string("failed"), "url": .string(RedactedURL.of(url)),
                      "reason": .string(RedactedURL.inText(reason))]
        case .retrying(let url, let attempt, let delay, let reason):
            fields = ["event": .string("retrying"), "url": .string(RedactedURL.of(url)), "attempt": .integer(attempt),
                      "delaySeconds": .number(delay), "reason": .string(RedactedURL.inText(reason))]
        case .finished(let report):
            fields = [
                "event": .string("finished"), "total": .integer(report.total), "downloaded": .integer(report.downloaded),
                "skipped": .integer(report.skipped), "failed": .integer(report.failed),
                "bytes": .integer(report.bytesReceived), "resumedBytes": .integer(report.resumedBytes),
                "seconds": .number(report.seconds), "interrupted": .bool(report.interrupted),
                "outOfSpace": .bool(report.outOfSpace != nil), "catalogFailed": .bool(report.catalogFailure != nil),
            ]
        }
        return encode(fields)
    }

    /// One line, written by `JSONText` (`JSONSerialization` cost about 40 µs
    /// more a line: with a line per stored file, CPU the downloads need).
    private static func encode(_ fields: [String: JSONValue]) -> String {
        var text = ""
        JSONText.writeCompact(.object(fields), into: &text)
        return text
    }
}

/// Human lines for a terminal: a status line redrawn in place, and the summary.
public enum ProgressText {
    /// The live status line (no newline).
    public static func status(_ progress: RunProgress) -> String {
        let finished = progress.done + progress.failed + progress.skipped
        var text = "\(finished)/\(progress.total) items"
        if progress.skipped > 0 { text += ", \(progress.skipped) cached" }
        if progress.failed > 0 { text += ", \(progress.failed) failed" }
        text += ", \(ByteSize.format(progress.bytesReceived)) at \(ByteSize.format(Int64(progress.bytesPerSecond)))/s"
        if !progress.active.isEmpty { text += ", \(progress.active.count) active" }
        if progress.waitingToRetry > 0 {
            // When: a long Retry-After otherwise looks like a hang (curl says "Will retry in N seconds").
            text += ", \(progress.waitingToRetry) waiting to retry"
            if let seconds = progress.nextRetryInSeconds { text += " (next in \(NumberText.wait(Double(seconds))))" }
        }
        return text
    }

    /// The one-line summary at the end.
    public static func summary(_ report: FetchReport) -> String {
        var parts = ["\(report.downloaded) downloaded"]
        parts.append("\(report.skipped) already cached")
        parts.append("\(report.failed) failed")
        var text = parts.joined(separator: ", ")
        text += " (\(ByteSize.format(report.bytesReceived)) in \(ByteSize.oneDecimal(report.seconds)) s"
        if report.resumedBytes > 0 { text += ", \(ByteSize.format(report.resumedBytes)) resumed" }
        text += ")"
        if report.outOfSpace != nil {
            text += "; stopped with \(report.left) left to fetch: no room left for the cache"
        } else if report.catalogFailure != nil {
            text += "; stopped, as the catalog cannot record: \(report.left) left to fetch"
        } else if report.interrupted {
            // What the next run will do: the items not finished, partials resuming.
            text += "; interrupted with \(report.left) left to fetch"
        }
        if report.awaitingRecord > 0 {
            // Stored, with their rows in unrecorded/ (see `UnrecordedRows`).
            text += ", \(report.awaitingRecord) stored for the next run to record"
        }
        return text
    }
}
