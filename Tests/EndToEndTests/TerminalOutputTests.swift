import Foundation
import MediaFetch
import SampleMedia
import Testing
import TestOrigin
import TestSupport

/// What a person sees in a terminal, read off a real tmux pane.
@Suite(.serialized) struct TerminalOutputTests {
    /// Runs a tmux client command and returns what it printed. Spawned with
    /// posix_spawn and reaped with waitpid: `new-session` forks the tmux server,
    /// which must not inherit a pipe the test waits on.
    private func tmux(_ arguments: [String], in directory: TemporaryDirectory) throws -> String {
        let outputPath = directory.appending("tmux-output")
        let output = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw TmuxError(message: "cannot open \(outputPath): \(String(cString: strerror(errno)))") }
        defer { close(output) }
        // Nothing else is open in tmux: tests run in parallel, and a descriptor open elsewhere in
        // this process (another test's output pipe) would otherwise live on in the tmux server
        // and its pane, and that test would wait for them. No signal blocked or ignored either.
        do {
            let tmux = try SpawnedProcess(["tmux", "-S", directory.appending("tmux.sock")] + arguments,
                                          environment: ["TERM": "xterm-256color", "PATH": "/usr/local/bin:/usr/bin:/bin",
                                                        "HOME": directory.path],
                                          standardOutput: output, standardError: output, searchingPath: true, signalsReset: true)
            _ = tmux.waitForExit()
        } catch {
            throw TmuxError(message: "cannot start tmux: \(error.localizedDescription)")
        }
        let data = FileManager.default.contents(atPath: outputPath) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    private struct TmuxError: Error { let message: String }

    /// Polls the pane until `condition` holds for its text, or the wait runs out.
    private func screen(_ session: String, in directory: TemporaryDirectory, until condition: (String) -> Bool) async throws -> String {
        var text = ""
        for _ in 0..<2400 {
            text = try tmux(["capture-pane", "-p", "-t", session], in: directory)
            if condition(text) { return text }
            try await Task.sleep(for: .milliseconds(50))
        }
        return text
    }

    /// Starts `mediafetch get --cache <directory>/cache <arguments>` in a new
    /// tmux session of `columns` × `rows`, which prints `EXIT=<status>` after
    /// it; returns the session's name.
    private func startGet(_ arguments: [String], columns: Int, rows: Int, terminal: String? = nil,
                          in directory: TemporaryDirectory) throws -> String {
        let session = "mf-\(UUID().uuidString.prefix(8))"
        let command = (terminal.map { "TERM=\($0) " } ?? "")
            + "\(BuiltProducts.mediafetch.path) get --cache \(directory.appending("cache")) "
            + arguments.joined(separator: " ") + "; echo EXIT=$?; sleep 60"
        _ = try tmux(["new-session", "-d", "-s", session, "-x", String(columns), "-y", String(rows), command], in: directory)
        return session
    }

    @Test func aTerminalShowsALiveStatusLineThenTheSummary() async throws {
        try await withOrigin { origin, directory in
            // The slow item answers only when the test has seen the live line,
            // so the check does not depend on how fast this machine is.
            let gate = origin.holdAnswers("/slow.bin", body: fixtureBytes(count: 300_000, seed: 1))
            origin.addResource("/fast.jpg", data: fixtureBytes(count: 5_000, seed: 2))
            let session = try startGet([origin.url("/fast.jpg"), origin.url("/slow.bin"), origin.url("/nothing.jpg"),
                                        "--retries", "0", "--stall-timeout", "300"], columns: 160, rows: 20, in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }

            // The 404 fails at once: its line goes above the status line, which stays.
            let during = try await screen(session, in: directory) { $0.contains("failed") && $0.contains("active") }
            gate.signal()
            let after = try await screen(session, in: directory) { $0.contains("EXIT=") }

            // While running: one status line with counts and a rate, under the failure.
            #expect(during.contains("/3 items"))
            #expect(during.contains("/s"))
            let shown = during.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(shown.first?.hasPrefix("mediafetch: failed ") == true, "\(shown)")
            #expect(shown.count == 2 && shown[1].contains("active"), "\(shown)")
            // At the end: the failure line, the summary, and no leftover status line.
            let lines = after.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(lines.contains("mediafetch: failed \(origin.url("/nothing.jpg")): HTTP 404 Not Found"))
            #expect(lines.contains { $0.hasPrefix("2 downloaded, 0 already cached, 1 failed (") })
            #expect(lines.contains("EXIT=1"))
            #expect(!lines.contains { $0.contains("active") })
        }
    }

    /// A damaged MP3's decoder notes (libmpg123 prints them to stderr as it
    /// decodes) do not reach the screen: it shows the two damaged sounds'
    /// refusals and the summary, each on its own line, and nothing else.
    @Test func aDamagedSoundsDecoderNotesStayOffTheScreen() async throws {
        try await withOrigin { origin, directory in
            for (format, name) in [(SoundFormat.mp3, "broken.mp3"), (.flac, "cut.flac")] {
                let path = directory.appending(name)
                try SampleSounds.write(format, to: path, seconds: format == .mp3 ? 20 : 2, seed: 90)
                var bytes = try #require(FileManager.default.contents(atPath: path))
                if format == .mp3 {
                    // Broken mid-way: libmpg123 decodes 7 s, then warns and gives up.
                    bytes.replaceSubrange(300_000..<500_000, with: Data(count: 200_000))
                } else {
                    bytes = bytes.prefix(bytes.count / 2)
                }
                origin.addResource("/\(name)", data: bytes, contentType: format == .mp3 ? "audio/mpeg" : "audio/flac")
            }
            let session = try startGet([origin.url("/broken.mp3"), origin.url("/cut.flac"), "--retries", "0"],
                                       columns: 250, rows: 20, in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }

            let after = try await screen(session, in: directory) { $0.contains("EXIT=") }

            let lines = after.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(lines.count == 4, "\(lines)")
            #expect(lines.contains { $0.hasPrefix("mediafetch: failed \(origin.url("/cut.flac")): the server sent a damaged sound "
                + "(Error : flac decoder lost sync after ") }, "\(lines)")
            #expect(lines.contains { $0.hasPrefix("mediafetch: failed \(origin.url("/broken.mp3")): the server sent a damaged sound (") }, "\(lines)")
            #expect(lines.contains { $0.hasPrefix("0 downloaded, 0 already cached, 2 failed (") }, "\(lines)")
            #expect(lines.last == "EXIT=1")
            #expect(!after.contains("Warning") && !after.contains("Note:"), "\(after)")
        }
    }

    /// A run that waits at the end of its list for another process, which
    /// is downloading one of its URLs into the same cache, says so: the
    /// status line showed nothing running and nothing waiting.
    @Test func aTerminalSaysWhenAnotherProcessIsFetchingAURL() async throws {
        try await withOrigin { origin, directory in
            let gate = origin.holdAnswers("/long.wav", body: soundFixtureBytes(count: 100_000, seed: 3))
            origin.addResource("/fast.jpg", data: fixtureBytes(count: 5_000, seed: 4))
            let first = try BuiltProducts.start(["get", "--cache", directory.appending("cache"), "--stall-timeout", "300",
                                                 origin.url("/long.wav")])
            for _ in 0..<6000 where origin.requests(for: "/long.wav").isEmpty { try await Task.sleep(for: .milliseconds(10)) }
            let session = try startGet([origin.url("/long.wav"), origin.url("/fast.jpg")], columns: 160, rows: 20, in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }

            // (Once the other URL is stored: a line drawn while it was still being stored said "0/2 items".)
            let during = try await screen(session, in: directory) { $0.contains("another process") && $0.contains("1/2 items") }
            gate.signal()
            let after = try await screen(session, in: directory) { $0.contains("EXIT=") }
            _ = await first.wait()

            let shown = during.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            // One status line: the other URL done, this one said to be another's.
            #expect(shown.count == 1 && shown[0].hasPrefix("1/2 items, ") && shown[0].hasSuffix(", 1 being fetched by another process"),
                    "\(shown)")
            let lines = after.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(lines.contains { $0.hasPrefix("1 downloaded, 1 already cached, 0 failed (") }, "\(lines)")
            #expect(lines.contains("EXIT=0"))
            #expect(!lines.contains { $0.contains("another process") })
        }
    }

    /// A terminal that cannot erase a line (TERM=dumb, as in an Emacs shell
    /// buffer) gets no status line, whose redraws would pile up on one line:
    /// only what a pipe would get.
    @Test func aDumbTerminalGetsNoStatusLine() async throws {
        try await withOrigin { origin, directory in
            let asked = DispatchSemaphore(value: 0)
            let gate = origin.holdAnswers("/held.bin", body: fixtureBytes(count: 50_000, seed: 5), asked: asked)
            let session = try startGet([origin.url("/held.bin")], columns: 160, rows: 20, terminal: "dumb", in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }

            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    _ = asked.wait(timeout: .now() + 120)
                    continuation.resume()
                }
            }
            // A status line would be drawn within a second; a quarter-second tick shows it sooner.
            try await Task.sleep(for: .seconds(1))
            let during = try tmux(["capture-pane", "-p", "-t", session], in: directory)
            gate.signal()
            let after = try await screen(session, in: directory) { $0.contains("EXIT=") }

            #expect(!during.contains("items"), "\(during)")
            let lines = after.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(lines.count == 2 && lines[0].hasPrefix("1 downloaded, 0 already cached, 0 failed ("), "\(lines)")
            #expect(lines.last == "EXIT=0")
        }
    }

    /// Ctrl-C twice in quick succession quits at once; the status line does
    /// not stay behind with the shell's next output glued to it.
    @Test func twoInterruptsLeaveNoStatusLineBehind() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/stalls.bin", data: fixtureBytes(count: 100_000, seed: 4))
            origin.setFault("/stalls.bin", .stallAfter(bytes: 1_000, seconds: 120))
            let session = try startGet([origin.url("/stalls.bin"), "--stall-timeout", "300"], columns: 160, rows: 20,
                                       in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }

            _ = try await screen(session, in: directory) { $0.contains("active") }
            _ = try tmux(["send-keys", "-t", session, "C-c", "C-c"], in: directory)
            let after = try await screen(session, in: directory) { $0.contains("EXIT=") }

            let lines = after.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(lines.contains("EXIT=130"), "\(lines)")
            let statusLeft = lines.filter { $0.contains("active") }
            #expect(statusLeft.isEmpty, "\(lines)")
            // Whichever came first: the run's own end, or the second interrupt's line.
            #expect(lines.contains { $0.contains("interrupted with 1 left to fetch") }
                || lines.contains("mediafetch: interrupted again: stopped at once (what was stored stays, partial downloads resume)"),
                "\(lines)")
        }
    }

    /// Ctrl-C while `get -i -` waits for the list on the terminal: the message
    /// starts on a line of its own after the echoed `^C`, and the exit is 130.
    @Test func anInterruptWhileTheListIsTypedSaysSoOnItsOwnLine() async throws {
        try await TemporaryDirectory.with { directory in
            let session = try startGet(["-i", "-"], columns: 100, rows: 10, in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }
            // Past start-up: one of its threads waits in read(2) on standard input.
            try await waitUntilReadingStandardInput(commandLineContaining: directory.appending("cache"))
            _ = try tmux(["send-keys", "-t", session, "C-c"], in: directory)
            let after = try await screen(session, in: directory) { $0.contains("EXIT=") }
            let lines = after.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(lines == ["^C", "mediafetch: interrupted", "EXIT=130"], "\(lines)")
        }
    }

    /// Waits (a minute at most) until a process whose command line holds
    /// `text` has a thread in read(2) on file descriptor 0.
    private func waitUntilReadingStandardInput(commandLineContaining text: String) async throws {
        for _ in 0..<1200 {
            let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            for pid in processes where pid.allSatisfy(\.isNumber) {
                guard let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
                      String(decoding: command, as: UTF8.self).contains(text) else { continue }
                let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
                for thread in threads {
                    let call = (try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/syscall", encoding: .utf8)) ?? ""
                    if call.hasPrefix("0 0x0 ") { return }
                }
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("no process reading standard input with \(text) in its command line")
    }

    /// A retry's wait shows on the status line: with nothing active and
    /// nothing moving, a long Retry-After looked like a hang.
    @Test func aRetryWaitShowsOnTheStatusLine() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/later.jpg", data: fixtureBytes(count: 5_000, seed: 3))
            origin.setFault("/later.jpg", .status(503, retryAfter: 2), times: 1)
            let session = try startGet([origin.url("/later.jpg")], columns: 160, rows: 20, in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }

            let waiting = try await screen(session, in: directory) { $0.contains("waiting to retry") || $0.contains("EXIT=") }
            let after = try await screen(session, in: directory) { $0.contains("EXIT=") }

            let shown = waiting.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            // With when the retry comes, counting down from the server's 2 s (and
            // the tenth more that spreads retries, rounded up: 3 s at first).
            #expect(shown.count == 1 && ["0", "1", "2", "3"].contains { shown[0] == "0/1 items, 0 B at 0 B/s, 1 waiting to retry (next in \($0) s)" },
                    "\(shown)")
            #expect(after.contains("1 downloaded, 0 already cached, 0 failed ("))
            #expect(after.contains("EXIT=0"))
            #expect(!after.contains("waiting to retry"))
        }
    }

    /// A note mid-run (a wait for another process's catalog lock) goes above
    /// the status line, which is drawn again below it at once: during the
    /// wait nothing changes that would redraw it, and the screen stayed
    /// blank for up to a minute.
    @Test func aNoteMidRunKeepsTheStatusLineBelowIt() async throws {
        try await withOrigin { origin, directory in
            for index in 0..<3 { origin.addResource("/p\(index).jpg", data: fixtureBytes(count: 5_000, seed: UInt64(40 + index))) }
            let cache = directory.appending("cache")
            let seeded = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/p0.jpg")])
            #expect(seeded.status == 0, "\(seeded.stderr)")
            // Another program holds the catalog's write lock for a few seconds.
            let holder = try SpawnedProcess.holdingWriteLock(ofDatabase: cache + "/catalog.sqlite", seconds: 6)
            // SIGKILL: SIGTERM may be blocked in it, as in the test process.
            defer { kill(holder.pid, SIGKILL) }

            let session = try startGet([origin.url("/p1.jpg"), origin.url("/p2.jpg")], columns: 160, rows: 20, in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }
            let during = try await screen(session, in: directory) { $0.contains("waiting for another process") }
            // Both bodies are in and wait for the lock: the line says so (it said "0/2 items" and nothing more).
            let waiting = try await screen(session, in: directory) { $0.contains("2 being stored") }
            let after = try await screen(session, in: directory) { $0.contains("EXIT=") }

            let rows = during.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            let note = try #require(rows.firstIndex { $0.contains("waiting for another process") }, "\(rows)")
            #expect(rows.count == note + 2 && rows[note + 1].hasPrefix("0/2 items"), "\(rows)")
            #expect(waiting.split(separator: "\n").contains { $0.hasPrefix("0/2 items, ") && $0.contains(", 2 being stored") },
                    "\(waiting)")
            #expect(after.contains("2 downloaded, 0 already cached, 0 failed ("), "\(after)")
            #expect(after.contains("EXIT=0"), "\(after)")
        }
    }

    /// What a host does that the run tells of in a note.
    enum HostLimit: Sendable {
        /// It takes 2 connections and resets the rest.
        case connections
        /// It serves 20 requests a second and answers the rest 429.
        case rate
    }

    /// A host that takes fewer connections than `--per-host`, or asks for
    /// fewer requests (429): the note comes once, above the status line,
    /// which stays live below it; the summary follows the note at the end.
    @Test(arguments: [HostLimit.connections, .rate])
    func aHostThatLimitsUsIsNotedAboveTheStatusLine(limit: HostLimit) async throws {
        try await withOrigin { origin, directory in
            let host = "127.0.0.1:\(origin.port)"
            let note: String
            switch limit {
            case .connections:
                origin.limitConnections(to: 2)
                note = "mediafetch: note: \(host) takes 2 connections at a time and turns more away: it gets 2 at a time "
                    + "while it does (one more is tried now and then)"
            case .rate:
                origin.limitRate(to: 20, per: 1)
                note = "mediafetch: note: \(host) answered 429 Too Many Requests: its URLs wait 1 s, then one goes first"
            }
            let urls = origin.addSlowPhotos(80, size: 3_000, seconds: 0.04)
            let list = try directory.writingList(urls, named: "list.txt")

            let session = try startGet(["--per-host", "8", "-i", list], columns: 160, rows: 20, in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }
            let during = try await screen(session, in: directory) { $0.contains("note:") || $0.contains("EXIT=") }
            let after = try await screen(session, in: directory) { $0.contains("EXIT=") }

            let rows = during.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            let noted = try #require(rows.firstIndex(of: note), "\(rows)")
            // The status line is drawn again below the note (unless the run ended meanwhile).
            #expect(rows.count == noted + 1 || rows[noted + 1].contains("/80 items"), "\(rows)")
            let end = after.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(end.filter { $0 == note }.count == 1, "\(end)")
            let summary = try #require(end.firstIndex { $0.hasPrefix("80 downloaded, 0 already cached, 0 failed (") }, "\(end)")
            #expect(end.firstIndex(of: note).map { $0 < summary } == true, "\(end)")
            #expect(!end.contains { $0.contains("/80 items") }, "a status line left behind: \(end)")
            #expect(after.contains("EXIT=0"), "\(after)")
        }
    }

    /// A large file on a slow link says how far it is and how long is left,
    /// as curl and aria2c do: its bytes so far alone said nothing for minutes.
    @Test func aSlowLargeFileSaysHowFarItIsAndWhatIsLeft() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/walk.wav", data: soundFixtureBytes(count: 800_000, seed: 5))
            origin.setFault("/walk.wav", .slow(bytesPerSecond: 50_000))
            let session = try startGet([origin.url("/walk.wav")], columns: 120, rows: 10, in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }

            let during = try await screen(session, in: directory) { $0.contains(" left") }
            _ = try tmux(["send-keys", "-t", session, "C-c"], in: directory)
            _ = try await screen(session, in: directory) { $0.contains("EXIT=") }

            let row = try #require(during.split(separator: "\n").first { $0.contains("0/1 items") }, "\(during)")
            let shown = row.trimmingCharacters(in: .whitespaces)
            #expect(shown.wholeMatch(of: /0\/1 items, [0-9.]+ KiB at [0-9.]+ KiB\/s, 1 active: [0-9]+% of 781\.3 KiB, [0-9]+ s left/) != nil,
                    "\(shown)")
        }
    }

    /// A status line wider than the terminal wraps, and `\r` with erase-line
    /// clears only its last row: every redraw left a row behind.
    /// `list` on a terminal fits each row to it, the middle of a long URL
    /// left out (its host and file name kept), and says how to see it
    /// whole; through a pipe the URL is whole. So does `list --failed` with
    /// its URLs, and a reason too long for its row goes on under itself,
    /// whole, in the reason's column.
    @Test func aListOnANarrowTerminalKeepsEachURLOnOneRow() async throws {
        try await withOrigin { origin, directory in
            let path = "/albums/2026/bratislava/old-town/night/IMG_0042.jpg"
            origin.addResource(path, data: fixtureBytes(count: 3_000, seed: 8))
            let cache = directory.appending("cache")
            let got = try await BuiltProducts.run(["get", "--cache", cache, "--collection", "night", origin.url(path)])
            #expect(got.status == 0, "\(got.stderr)")
            let missing = origin.url(path.replacingOccurrences(of: "IMG_0042", with: "IMG_0043"))
            #expect(try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0", missing]).status == 1)
            let refused = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0", "http://127.0.0.1:1/night/IMG_0044.jpg"])
            #expect(refused.status == 1 && refused.stderr.contains("Failed to connect to 127.0.0.1 port 1 "), "\(refused.stderr)")

            let session = "mf-\(UUID().uuidString.prefix(8))"
            let list = "\(BuiltProducts.mediafetch.path) list --cache \(cache)"
            _ = try tmux(["new-session", "-d", "-s", session, "-x", "80", "-y", "24",
                          "\(list); echo EXIT=$?; \(list) | cat; \(list) --failed; sleep 60"], in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }
            // Both tables on a terminal, each with its note.
            let text = try await screen(session, in: directory) { $0.components(separatedBy: "marks cut text").count == 3 }

            let rows = text.split(separator: "\n").map(String.init)
            let onTerminal = try #require(rows.first { $0.contains("…") }, "\(text)")
            #expect(onTerminal.contains("night") && onTerminal.contains("http://127.0.0.1:") && onTerminal.hasSuffix("/IMG_0042.jpg"),
                    "\(text)")
            #expect(DisplayText.displayWidth(onTerminal) <= 80, "\(text)")
            #expect(rows.filter { $0 == "mediafetch: note: … marks cut text; a pipe or CSV has it whole" }.count == 2, "\(text)")
            #expect(text.contains("EXIT=0"), "\(text)")
            // Through the pipe, whole (wrapped by the terminal onto a second row).
            let piped = rows.drop { !$0.contains("EXIT=") }.joined()
            #expect(piped.contains(origin.url(path)), "\(text)")
            // And the failed URL, with its reason, on one row.
            let failure = try #require(rows.first { $0.contains("HTTP 404") }, "\(text)")
            #expect(failure.contains("…") && failure.hasSuffix("IMG_0043.jpg  HTTP 404 Not Found"), "\(text)")
            // The refused connection's reason starts in the same column and goes on under it.
            let reasonColumn = try #require(failure.range(of: "HTTP 404").map { failure.distance(from: failure.startIndex, to: $0.lowerBound) })
            let first = try #require(rows.firstIndex { $0.contains("http://127.0.0.1:1/") && $0.contains("IMG_0044.jpg") }, "\(text)")
            #expect(rows[first].dropFirst(reasonColumn).hasPrefix("Failed to connect"), "\(text)")
            let under = rows[(first + 1)...].prefix { $0.prefix(reasonColumn).allSatisfy { $0 == " " } && $0.count > reasonColumn }
            let reason = ([rows[first]] + under).map { String($0.dropFirst(reasonColumn)) }.joined(separator: " ")
            #expect(under.count >= 2 && reason.hasPrefix("Failed to connect to 127.0.0.1 port 1 ")
                    && reason.hasSuffix("Couldn't connect to server") && !reason.contains("…"), "\(text)")
            #expect(rows.allSatisfy { DisplayText.displayWidth($0) <= 80 }, "\(text)")
        }
    }

    @Test func aNarrowTerminalKeepsTheStatusLineOnOneRow() async throws {
        try await withOrigin { origin, directory in
            // Two bodies that trickle in, so the line is redrawn many times.
            for name in ["/a.wav", "/b.wav"] {
                origin.addResource(name, data: fixtureBytes(count: 600_000, seed: 3))
                origin.setFault(name, .slow(bytesPerSecond: 100_000))
            }
            let session = try startGet([origin.url("/a.wav"), origin.url("/b.wav"), origin.url("/nothing.jpg"), "--retries", "0"],
                                       columns: 40, rows: 30, in: directory)
            defer { _ = try? tmux(["kill-server"], in: directory) }

            // Wait until the status line has been drawn for a while (a second of bytes at least).
            let during = try await screen(session, in: directory) { text in
                text.split(separator: "\n").contains { $0.contains("items") && ($0.contains("KiB/s") || $0.contains("MiB/s")) }
            }
            try await Task.sleep(for: .seconds(1.5))
            let later = try tmux(["capture-pane", "-p", "-t", session], in: directory)

            for screen in [during, later] {
                let statusRows = screen.split(separator: "\n").filter { $0.contains("/3 items") }
                #expect(statusRows.count == 1, "\(screen)")
                #expect(statusRows.allSatisfy { DisplayText.displayWidth(String($0)) < 40 }, "\(screen)")
            }
            // The run ends before the test removes its cache; no status row is left.
            let after = try await screen(session, in: directory) { $0.contains("EXIT=") }
            #expect(!after.contains("/3 items"), "\(after)")
            #expect(after.contains("EXIT=1"), "\(after)")
        }
    }
}
