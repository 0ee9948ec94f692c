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
            var progressFields: [String: JSONValue] = [
                "event": .string("progress"), "total": .integer(progress.total), "done": .integer(progress.done),
                "failed": .integer(progress.failed), "skipped": .integer(progress.skipped),
                "bytes": .integer(progress.bytesReceived), "bytesPerSecond": .integer(Int64(progress.bytesPerSecond)),
                "resumedBytes": .integer(progress.bytesResumed),
                "queued": .integer(progress.queued),
                "active": .array(progress.active.map { transfer in
                    var item: [String: JSONValue] = ["url": .string(RedactedURL.of(transfer.url)),
                                                     "bytes": .integer(transfer.bytesReceived)]
                    if let expected = transfer.bytesExpected { item["total"] = .integer(expected) }
                    // Whole seconds without a byte, once there is one.
                    if transfer.secondsWithoutData >= 1 { item["secondsWithoutData"] = .integer(Int64(transfer.secondsWithoutData)) }
                    return .object(item)
                }),
                // Items sleeping before their next attempt: neither active nor queued.
                "waitingToRetry": .integer(progress.waitingToRetry),
                "waitingForOtherProcess": .integer(progress.waitingForOtherProcess),
                // Downloaded, waiting to be moved into the store and recorded.
                "storing": .integer(progress.storing),
                // Not yet done, failed or cached: also those not yet started, which no other count holds.
                "left": .integer(max(0, progress.total - progress.done - progress.failed - progress.skipped)),
            ]
            if let seconds = progress.nextRetryInSeconds { progressFields["nextRetryInSeconds"] = .integer(seconds) }
            if let failing = progress.failingHost {
                progressFields["failingHost"] = .object(["host": .string(failing.host), "seconds": .integer(Int64(failing.seconds)),
                                                         "connected": .bool(failing.connected), "hosts": .integer(Int64(failing.hosts))])
            }
            fields = progressFields
        case .stored(let url, let sha256, let size, let resumedBytes):
            fields = ["event": .string("stored"), "url": .string(RedactedURL.of(url)), "hash": .string(sha256),
                      "size": .integer(size), "resumedBytes": .integer(resumedBytes)]
        case .failed(let url, let reason, _):
            fields = ["event": .string("failed"), "url": .string(RedactedURL.of(url)),
                      "reason": .string(RedactedURL.inText(reason))]
        case .retrying(let url, let attempt, let delay, let reason):
            fields = ["event": .string("retrying"), "url": .string(RedactedURL.of(url)), "attempt": .integer(attempt),
                      "delaySeconds": .number(delay), "reason": .string(RedactedURL.inText(reason))]
        case .hostLimited(let host, let connections):
            fields = ["event": .string("hostLimited"), "host": .string(host), "connections": .integer(connections)]
        case .hostPaused(let host, let seconds):
            fields = ["event": .string("hostPaused"), "host": .string(host), "seconds": .number(seconds)]
        case .finished(let report):
            fields = [
                "event": .string("finished"), "total": .integer(report.total), "downloaded": .integer(report.downloaded),
                "skipped": .integer(report.skipped), "failed": .integer(report.failed),
                "repeats": .integer(report.repeats), "bytes": .integer(report.bytesReceived), "resumedBytes": .integer(report.resumedBytes),
                "seconds": .number(report.seconds), "interrupted": .bool(report.interrupted),
                "outOfSpace": .bool(report.outOfSpace != nil), "catalogFailed": .bool(report.catalogFailure != nil),
                // What a stopped run leaves for the next: the summary's "N left to fetch" and "M stored for the next run to record".
                "left": .integer(report.left), "awaitingRecord": .integer(report.awaitingRecord),
                "overPlainHTTP": .integer(report.overPlainHTTP),
                // In the summary's order: a script taking the first names the same hosts.
                "givenUpHosts": .array(ProgressText.ranked(report.givenUpHosts).map {
                    .object(["host": .string($0.host), "failed": .integer($0.failed)])
                }),
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
    /// The note for a host that turned connections away (`JobEvent.hostLimited`).
    public static func hostLimitedNote(host: String, connections: Int) -> String {
        let many = connections == 1 ? "1 connection" : "\(connections) connections"
        return "\(host) takes \(many) at a time and turns more away: it gets \(connections) "
            + "at a time while it does (one more is tried now and then)"
    }

    /// The note for a host that answered 429 Too Many Requests (`JobEvent.hostPaused`, sent each time a
    /// pause begins; the terminal tells the first of each host).
    public static func hostPausedNote(host: String, seconds: Double) -> String {
        // Short enough for 120 columns with the prefix and a host of 25 characters.
        "\(host) answered 429 Too Many Requests: its URLs wait \(NumberText.wait(seconds)), then one goes first"
    }

    /// The live status line (no newline): every field at its longest.
    public static func status(_ progress: RunProgress) -> String {
        StatusField.joined(statusFields(progress))
    }

    /// The status line's fields, in their order: `12/40 items, 3 cached,
    /// 1 failed, 2.1 MiB at 840.0 KiB/s, 8 active: 64% of 3.0 MiB, 25 s left,
    /// 1 waiting to retry (next in 12 s)`. A narrow terminal shortens or
    /// drops the least useful first (see `StatusField`).
    public static func statusFields(_ progress: RunProgress) -> [StatusField] {
        let finished = progress.done + progress.failed + progress.skipped
        var fields = [StatusField(.items, keep: .max, ["\(finished)/\(progress.total) items"])]
        if progress.skipped > 0 { fields.append(StatusField(.cached, keep: 1, ["\(progress.skipped) cached"])) }
        if progress.failed > 0 { fields.append(StatusField(.failed, keep: 6, ["\(progress.failed) failed"])) }
        let rate = "\(ByteSize.format(Int64(progress.bytesPerSecond)))/s"
        fields.append(StatusField(.transferred, keep: 4, ["\(ByteSize.format(progress.bytesReceived)) at \(rate)", rate]))
        // Only when they pile up: a few are always on their way into the store.
        if progress.storing > 0, progress.active.isEmpty || progress.storing >= 64 {
            fields.append(StatusField(.storing, keep: 1, ["\(progress.storing) being stored"]))
        }
        if !progress.active.isEmpty {
            fields.append(StatusField(.active, keep: 3, ["\(progress.active.count) active"]))
            if let left = activeLeft(progress) { fields.append(left) }
        }
        if progress.waitingToRetry > 0 {
            // When: a long Retry-After otherwise looks like a hang (curl says "Will retry in N seconds").
            let waiting = "\(progress.waitingToRetry) waiting to retry"
            if let seconds = progress.nextRetryInSeconds {
                let next = NumberText.wait(Double(seconds))
                // Worded at length only while nothing else needs the room: with transfers
                // running, "1 waiting to retry (next in 12 s)" hid that they were.
                fields.append(StatusField(.retrying, keep: 5, longFormKeep: progress.active.isEmpty ? nil : 2,
                                          ["\(waiting) (next in \(next))", "retry in \(next)"]))
            } else {
                fields.append(StatusField(.retrying, keep: 5, [waiting]))
            }
        }
        if let failing = progress.failingHost {
            // Its URLs' failures to connect use up no retry while it is out, for the host's patience:
            // "2 waiting to retry (next in 3 s)" for 30 s, under --retries 1, said nothing of why.
            let wait = NumberText.wait(Double(failing.seconds))
            let what = "\(failing.connected ? "no answer from" : "no connection to") \(failing.host) for \(wait)"
            let more = failing.hosts > 1 ? " (and \(failing.hosts - 1) more host\(failing.hosts > 2 ? "s" : ""))" : ""
            let short = "\(failing.connected ? "no answer" : "no connection") for \(wait)"
            fields.append(StatusField(.failingHost, keep: 5, longFormKeep: 4, more.isEmpty ? [what, short] : [what + more, what, short]))
        }
        if progress.waitingForOtherProcess > 0 {
            // Else a wait at the end of the list showed nothing running and nothing said why.
            fields.append(StatusField(.otherProcess, keep: 5, ["\(progress.waitingForOtherProcess) being fetched by another process",
                                                               "\(progress.waitingForOtherProcess) held elsewhere"]))
        }
        return fields
    }

    /// How far the running transfers are, when each has said its length,
    /// and how long the run will take at the present rate, when 5 s or more:
    /// a large file otherwise showed only its bytes so far, for minutes. Items
    /// not started yet count at the mean size of those stored and running, and
    /// make the time "about … in all": the running ones' alone ("16 s left" of
    /// two videos, five more queued) read as the run's, which took 32 s.
    private static func activeLeft(_ progress: RunProgress) -> StatusField? {
        // Every running transfer silent: for how long, not an estimate that
        // grew as the rate decayed ("9 s left" while nothing came).
        if let silent = progress.active.map(\.secondsWithoutData).min(), silent >= stalledAfter {
            return StatusField(.activeLeft, keep: 2, ["no data for \(NumberText.wait(Double(silent)))"])
        }
        // Lengths are the servers' word: added up to the largest count, never past it
        // (a Content-Length of 2^63 - 1 beside another stopped the run).
        var expected: Int64 = 0, received: Int64 = 0
        // The slowest transfer's own time left: at the rate of them all, a
        // 2 KB/s one beside a 20 KB/s one said "3 min left" of 17 min.
        var slowest = 0.0
        for transfer in progress.active {
            guard let total = transfer.bytesExpected, total > 0 else { return nil }
            expected = expected.addingReportingOverflow(total).overflow ? .max : expected + total
            received = min(received + min(transfer.bytesReceived, total), expected)
            if let rate = transfer.bytesPerSecond, rate > 0 {
                slowest = max(slowest, Double(total - min(transfer.bytesReceived, total)) / rate)
            }
        }
        guard progress.bytesPerSecond > 0 else { return nil }
        let started = progress.done + progress.active.count
        // Neither finished, running, on its way into the store, another process's to fetch, nor
        // waiting to retry: those are mostly URLs of hosts that fail, which fail rather than
        // take time (six of dead hosts made "about 106 s left" of a run with 8 s to go).
        let notStarted = max(0, progress.total - progress.done - progress.failed - progress.skipped
            - progress.active.count - progress.storing - progress.waitingForOtherProcess - progress.waitingToRetry)
        let meanSize = (Double(progress.bytesStored) + Double(expected)) / Double(max(1, started))
        let bytesLeft = Double(expected - received) + Double(notStarted) * meanSize
        let seconds = max(bytesLeft / progress.bytesPerSecond, slowest).rounded(.up)
        guard seconds >= 5 else { return nil }
        let percent = Int(Double(received) * 100 / Double(expected))
        let left = notStarted > 0 ? "about \(NumberText.wait(seconds)) left in all" : "\(NumberText.wait(seconds)) left"
        // Dropped before the active count it belongs to: alone, "2 min left" read as the whole run's.
        return StatusField(.activeLeft, keep: 2, ["\(percent)% of \(ByteSize.format(expected)), \(left)", left])
    }

    /// Seconds without a byte from any running transfer after which the
    /// status line says so: longer than a server's usual pause between writes.
    static let stalledAfter = 3

    /// The one-line summary at the end.
    public static func summary(_ report: FetchReport) -> String {
        var parts = ["\(report.downloaded) downloaded"]
        parts.append("\(report.skipped) already cached")
        parts.append("\(report.failed) failed")
        // Else the counts do not add up to the list's lines, and items look lost.
        if report.repeats > 0 { parts.append("\(report.repeats) repeated in the list") }
        var text = parts.joined(separator: ", ")
        // Received, not stored: attempts cut short and thrown away count too.
        text += " (\(ByteSize.format(report.bytesReceived)) received in \(ByteSize.oneDecimal(report.seconds)) s"
        if report.resumedBytes > 0 { text += ", \(ByteSize.format(report.resumedBytes)) resumed" }
        text += ")"
        if let givenUp = givenUpText(report.givenUpHosts) { text += "; " + givenUp }
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
        if report.overPlainHTTP > 0 {
            // Said, as nothing else shows it: the item is listed under its https URL.
            text += "; \(report.overPlainHTTP) downloaded over plain http, redirected from https"
        }
        return text
    }

    /// The hosts given up, those with the most failed URLs first; hosts with
    /// as many keep the order they were given up in.
    static func ranked(_ hosts: [GivenUpHost]) -> [GivenUpHost] {
        hosts.enumerated().sorted { ($0.element.failed, $1.offset) > ($1.element.failed, $0.offset) }.map(\.element)
    }

    /// How many of the failures were URLs of hosts given up, and which hosts
    /// (those with the most first, three at most): the lines above may be
    /// thousands, one per URL.
    static func givenUpText(_ hosts: [GivenUpHost]) -> String? {
        guard !hosts.isEmpty else { return nil }
        let failed = hosts.reduce(0) { $0 + $1.failed }
        guard hosts.count > 1 else { return "\(failed) of them at a host given up: \(hosts[0].host)" }
        let named = ranked(hosts).prefix(3)
        var text = "\(failed) of them at \(hosts.count) hosts given up: "
            + named.map { "\($0.host) (\($0.failed))" }.joined(separator: ", ")
        if hosts.count > 3 { text += " and \(hosts.count - 3) more" }
        return text
    }
}

/// One field of the status line, with its shorter forms: a terminal too
/// narrow for the whole line shortens, then drops, the fields it keeps
/// least (the lowest `keep`) first, rather than cutting the line mid-field
/// ("201/223 items, 1…" for 10 failed), or losing the retry wait at the
/// end of it at 80 columns.
public struct StatusField: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case items, cached, failed, transferred, storing, active, activeLeft, retrying, failingHost, otherProcess
    }

    public let kind: Kind
    /// Kept longer than fields of a lower value; `.max` is never dropped.
    public let keep: Int
    /// How long its longest form is kept, while a shorter one is left, when
    /// that is less than `keep`: the retry wait's wording goes before the
    /// count of running transfers, its short form after.
    public let longFormKeep: Int?
    /// Its text, longest form first.
    public var forms: [String]

    public init(_ kind: Kind, keep: Int, longFormKeep: Int? = nil, _ forms: [String]) {
        self.kind = kind
        self.keep = keep
        self.longFormKeep = longFormKeep
        self.forms = forms
    }

    /// `keep` for the form it is at.
    var currentKeep: Int { forms.count > 1 ? min(keep, longFormKeep ?? keep) : keep }

    /// The fields as one line: ", " between them, but ": " between the
    /// running transfers and how far they are.
    public static func joined(_ fields: [StatusField]) -> String {
        var text = ""
        for (index, field) in fields.enumerated() {
            guard let form = field.forms.first else { continue }
            if index > 0 { text += field.kind == .activeLeft && fields[index - 1].kind == .active ? ": " : ", " }
            text += form
        }
        return text
    }

    /// The line at its longest that `fits`: the field kept least is
    /// shortened to its next form, or dropped after its last, until the
    /// line fits or only fields never dropped are left. Then a field dropped
    /// before another was shortened comes back, where it fits now: "30
    /// cached" went before the retry wait's wording did, and stayed out of
    /// an 80-column line with room for it.
    public static func shortened(_ fields: [StatusField], toFit fits: (String) -> Bool) -> String {
        // Each with its place in the line.
        var kept = Array(fields.enumerated())
        var dropped: [(offset: Int, element: StatusField)] = []
        func line() -> String { joined(kept.map(\.element)) }
        while !fits(line()) {
            guard let index = kept.indices.filter({ kept[$0].element.keep < .max })
                    .min(by: { kept[$0].element.currentKeep < kept[$1].element.currentKeep }) else { break }
            if kept[index].element.forms.count > 1 {
                kept[index].element.forms.removeFirst()
            } else {
                // Back with all its forms.
                dropped.append((kept[index].offset, fields[kept[index].offset]))
                kept.remove(at: index)
            }
        }
        // The last dropped first: those kept longest.
        for field in dropped.reversed() {
            // How far the running transfers are, only beside their count.
            if field.element.kind == .activeLeft, !kept.contains(where: { $0.element.kind == .active }) { continue }
            let place = kept.firstIndex { $0.offset > field.offset } ?? kept.endIndex
            var candidate = field
            while !candidate.element.forms.isEmpty {
                kept.insert(candidate, at: place)
                if fits(line()) { break }
                kept.remove(at: place)
                candidate.element.forms.removeFirst()
            }
        }
        return line()
    }
}
