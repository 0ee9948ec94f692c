import Foundation

/// Job events as JSON lines (`--progress json`): one object a line, with an
/// `event` field, for scripts and other programs.
public enum ProgressJSON {
    /// A note on how the run goes ahead (`{"event":"note","message":…}`).
    public static func note(_ message: String) -> String? {
        encode(["event": "note", "message": message])
    }

    public static func line(for event: JobEvent) -> String? {
        var fields: [String: Any]
        switch event {
        case .progress(let progress):
            fields = [
                "event": "progress", "total": progress.total, "done": progress.done,
                "failed": progress.failed, "skipped": progress.skipped,
                "bytes": progress.bytesReceived, "bytesPerSecond": Int(progress.bytesPerSecond),
                "queued": progress.queued,
                "active": progress.active.map { transfer -> [String: Any] in
                    var item: [String: Any] = ["url": RedactedURL.of(transfer.url), "bytes": transfer.bytesReceived]
                    if let expected = transfer.bytesExpected { item["total"] = expected }
                    return item
                },
            ]
        case .stored(let url, let sha256, let size, let resumedBytes):
            fields = ["event": "stored", "url": RedactedURL.of(url), "hash": sha256, "size": size, "resumedBytes": resumedBytes]
        case .failed(let url, let reason):
            fields = ["event": "failed", "url": RedactedURL.of(url), "reason": RedactedURL.inText(reason)]
        case .retrying(let url, let attempt, let delay, let reason):
            fields = ["event": "retrying", "url": RedactedURL.of(url), "attempt": attempt, "delaySeconds": delay,
                      "reason": RedactedURL.inText(reason)]
        case .finished(let report):
            fields = [
                "event": "finished", "total": report.total, "downloaded": report.downloaded,
                "skipped": report.skipped, "failed": report.failures.count, "bytes": report.bytesReceived,
                "resumedBytes": report.resumedBytes, "seconds": report.seconds, "interrupted": report.interrupted,
            ]
        }
        return encode(fields)
    }

    private static func encode(_ fields: [String: Any]) -> String? {
        guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return nil
        }
        return String(decoding: data, as: UTF8.self)
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
        return text
    }

    /// `line` cut to fit a terminal `columns` wide, with three columns to
    /// spare: a status line that wraps leaves its first row behind on every
    /// redraw (`\r` and erase-line reach only the last row), and so does one
    /// that the `^C` a terminal echoes on Ctrl-C pushes over the edge. Nil
    /// columns (unknown width) leaves it whole; a terminal too narrow for
    /// anything gets nothing.
    public static func fitted(_ line: String, columns: Int?) -> String {
        guard let columns else { return line }
        let room = columns - 3
        guard TerminalText.displayWidth(line) > room else { return line }
        guard room >= 2 else { return "" }
        var fitted = ""
        var width = 0
        for character in line {
            let next = TerminalText.displayWidth(character)
            if width + next > room - 1 { break }
            fitted.append(character)
            width += next
        }
        return fitted + "…"
    }

    /// The one-line summary at the end.
    public static func summary(_ report: FetchReport) -> String {
        var parts = ["\(report.downloaded) downloaded"]
        parts.append("\(report.skipped) already cached")
        parts.append("\(report.failures.count) failed")
        var text = parts.joined(separator: ", ")
        text += " (\(ByteSize.format(report.bytesReceived)) in \(ByteSize.oneDecimal(report.seconds)) s"
        if report.resumedBytes > 0 { text += ", \(ByteSize.format(report.resumedBytes)) resumed" }
        text += ")"
        if report.interrupted {
            // What the next run will do: the items not finished, partials resuming.
            let left = max(0, report.total - report.downloaded - report.skipped - report.failures.count)
            text += "; interrupted with \(left) left to fetch"
        }
        return text
    }
}
