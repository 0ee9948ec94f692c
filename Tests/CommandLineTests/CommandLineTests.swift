import Glibc
import Testing
@testable import mediafetch
@testable import MediaFetch
@testable import Transfer

@Suite struct CommandLineLayoutTests {
    @Test func theCacheMayComeBeforeTheCommand() {
        #expect(CommandLineLayout.placingGlobalOptions(["--cache", "/c", "stats", "--format", "json"])
                == ["stats", "--cache", "/c", "--format", "json"])
        #expect(CommandLineLayout.placingGlobalOptions(["--cache=/c", "list"]) == ["list", "--cache=/c"])
    }

    /// `mediafetch --cache` with nothing after it was called an unknown option.
    @Test func aCacheBeforeTheCommandWithNoValueIsFound() {
        #expect(CommandLineLayout.leadingOptionWithoutValue(in: ["--cache"]) == "--cache")
        #expect(CommandLineLayout.leadingOptionWithoutValue(in: ["--cache=/a", "--cache"]) == "--cache")
        #expect(CommandLineLayout.leadingOptionWithoutValue(in: ["--cache", "/c"]) == nil)
        #expect(CommandLineLayout.leadingOptionWithoutValue(in: ["--cache", "/c", "stats"]) == nil)
        #expect(CommandLineLayout.leadingOptionWithoutValue(in: ["get", "--cache"]) == nil)
    }

    /// A usage error is one line: the parser's own line breaks become spaces,
    /// a value's stays, to be shown as an escape.
    @Test func theParsersLinesAreJoinedAndAValuesLineBreakKept() {
        #expect(CommandLineLayout.joiningParserLines("Unknown option '-ifoo'\n   or: Missing value for '-i <file>'")
                == "Unknown option '-ifoo' or: Missing value for '-i <file>'")
        #expect(CommandLineLayout.joiningParserLines("for 'foo'.\nPlease use it with one of:\n    zsh bash")
                == "for 'foo'. Please use it with one of: zsh bash")
        #expect(CommandLineLayout.joiningParserLines("--cacert: cannot read /non\nexist") == "--cacert: cannot read /non\nexist")
    }

    @Test func helpNeedsNoCache() {
        #expect(CommandLineLayout.placingGlobalOptions(["--cache", "/c", "help", "get"]) == ["help", "get"])
    }

    @Test func anUnknownCommandOrHelpAboutOneIsAnError() {
        let commands = ["get", "list", "stats"]
        #expect(CommandLineLayout.unknownCommand(in: ["help", "frob"], commands: commands)
                == "unknown command 'frob' (the commands are get, list and stats)")
        #expect(CommandLineLayout.unknownCommand(in: ["help", "get", "frob"], commands: commands)
                == "Unexpected argument 'frob'")
        #expect(CommandLineLayout.unknownCommand(in: ["fetch", "x"], commands: commands)
                == "unknown command 'fetch' (the commands are get, list and stats)")
        #expect(CommandLineLayout.unknownCommand(in: ["http://h/a.jpg"], commands: commands)
                == "unknown command 'http://h/a.jpg' (to download it: mediafetch get URL)")
        // A slip of a command's name is named, as the parser names a flag's.
        #expect(CommandLineLayout.unknownCommand(in: ["gett", "http://h/a.jpg"], commands: commands)
                == "unknown command 'gett' (did you mean get? the commands are get, list and stats)")
        #expect(CommandLineLayout.unknownCommand(in: ["lsit"], commands: commands)
                == "unknown command 'lsit' (did you mean list? the commands are get, list and stats)")
        #expect(CommandLineLayout.unknownCommand(in: ["help", "stat"], commands: commands)
                == "unknown command 'stat' (did you mean stats? the commands are get, list and stats)")
        #expect(CommandLineLayout.unknownCommand(in: ["Get"], commands: commands)
                == "unknown command 'Get' (did you mean get? the commands are get, list and stats)")
        for fine in [["help"], ["help", "get"], ["help", "help"], ["help", "--cache", "X", "get"], ["help", "-h", "get"],
                     ["help", "stats", "--help"], ["get", "frob"], ["--version"], ["-h"], []] {
            #expect(CommandLineLayout.unknownCommand(in: fine, commands: commands) == nil, "\(fine)")
        }
    }

    /// Two caches named: the parser took the last and dropped the other.
    @Test func aCacheGivenTwiceDifferentlyIsAnError() {
        let laidOut = CommandLineLayout.placingGlobalOptions(["--cache", "/a", "get", "--cache", "/b", "http://h/x"])
        #expect(CommandLineLayout.repeatedGlobalOption(in: laidOut) == "--cache is given 2 times, as '/a' and '/b': give one")
        #expect(CommandLineLayout.repeatedGlobalOption(in: ["list", "--cache=/a", "--cache", "/b"])
                == "--cache is given 2 times, as '/a' and '/b': give one")
        for fine in [["get", "--cache", "/a", "--cache=/a", "http://h/x"], ["get", "--cache", "/a"], ["get", "--", "--cache", "/b"],
                     ["list", "--cache", "/a", "--", "--cache"], []] {
            #expect(CommandLineLayout.repeatedGlobalOption(in: fine) == nil, "\(fine)")
        }
    }

    @Test func anOptionWithAnEmptyValueIsFound() {
        #expect(CommandLineLayout.optionWithEmptyValue(in: ["get", "--collection=", "http://a/b"]) == "--collection")
        #expect(CommandLineLayout.optionWithEmptyValue(in: ["get", "--collection=x", "http://a/b"]) == nil)
        #expect(CommandLineLayout.optionWithEmptyValue(in: ["get", "--", "--odd="]) == nil)
        #expect(CommandLineLayout.optionWithEmptyValue(in: ["get", "--collection=aGk=", "http://h/x?a="]) == nil)
    }

    /// `--collection -x` is a missing value to the parser (`-x` reads as an
    /// option): the error says how to give such a value.
    @Test func aValueBeginningWithADashIsShownHowToBeGiven() {
        let missing = "missing value for '--collection <collection>'"
        #expect(CommandLineLayout.withDashValueHint(missing, arguments: ["get", "--collection", "-x", "http://h/a"])
                == missing + "; a value that begins with a dash is given as --collection=-x")
        #expect(CommandLineLayout.withDashValueHint("Missing value for '--collection <collection>'", arguments: ["list", "--collection", "-x"])
                == "Missing value for '--collection <collection>'; a value that begins with a dash is given as --collection=-x")
        // The last use counts, as the parser reads it.
        #expect(CommandLineLayout.withDashValueHint(missing, arguments: ["get", "--collection", "a", "--collection", "-y"])
                == missing + "; a value that begins with a dash is given as --collection=-y")
        // Nothing after it, or the end of options: nothing to add.
        #expect(CommandLineLayout.withDashValueHint(missing, arguments: ["get", "http://h/a", "--collection"]) == missing)
        #expect(CommandLineLayout.withDashValueHint(missing, arguments: ["get", "--collection", "--", "http://h/a"]) == missing)
        #expect(CommandLineLayout.withDashValueHint("unknown option '-x'", arguments: ["get", "--collection", "-x"])
                == "unknown option '-x'")
    }

    @Test func optionsTakingValuesAreReadFromTheCommandsDescription() {
        // The shape of ArgumentParser's `--experimental-dump-help`, cut down.
        let dump = """
            {"command": {"commandName": "list", "arguments": [
              {"kind": "option", "names": [{"kind": "long", "name": "collection"}, {"kind": "short", "name": "c"}]},
              {"kind": "option", "names": [{"kind": "long", "name": "input-file"}]},
              {"kind": "flag", "names": [{"kind": "long", "name": "help"}]},
              {"kind": "positional", "names": [{"kind": "long", "name": "urls"}]}
            ]}}
            """
        #expect(CommandLineLayout.longOptionsTakingValues(inHelpDump: dump) == ["--collection", "--input-file"])
        #expect(CommandLineLayout.longOptionsTakingValues(inHelpDump: "USAGE: mediafetch list").isEmpty)
        #expect(CommandLineLayout.longOptionsTakingValues(inHelpDump: #"{"command": {"arguments": 3}}"#).isEmpty)
    }

    @Test(arguments: [
        ([0x63, 0x61, 0x66, 0xE9], #"caf\xE9"#),
        // A sequence cut short at the end, an overlong '/', a UTF-16 surrogate.
        ([0x61, 0xE6, 0x9D], #"a\xE6\x9D"#),
        ([0xC0, 0xAF, 0x62], #"\xC0\xAF"# + "b"),
        ([0xED, 0xA0, 0x80], #"\xED\xA0\x80"#),
        // Valid text around a bad byte is kept as it is.
        (Array("東京".utf8) + [0xFF] + Array("/x".utf8), #"東京\xFF/x"#),
    ] as [([UInt8], String)])
    func bytesThatAreNotUTF8AreShownAsEscapes(bytes: [UInt8], shown: String) {
        #expect(CommandLineLayout.textShowingInvalidUTF8(bytes) == shown)
    }

    @Test func validUTF8IsNotFlagged() {
        for text in ["", "/tmp/café", "東京 🗺️", "http://h/a?b=c"] {
            #expect(CommandLineLayout.textShowingInvalidUTF8(Array(text.utf8)) == nil)
        }
    }

    @Test func everythingElseIsLeftForTheParser() {
        for arguments in [["stats", "--cache", "/c"], ["--cache"], ["--help"], ["get", "--cache", "/c", "http://a/b"]] {
            #expect(CommandLineLayout.placingGlobalOptions(arguments) == arguments)
        }
        // The cache with no command after it is dropped: the parser then asks for a command.
        #expect(CommandLineLayout.placingGlobalOptions(["--cache", "/c"]) == [])
        #expect(CommandLineLayout.placingGlobalOptions(["--cache", "/c", "--help"]) == ["--help"])
        #expect(CommandLineLayout.placingGlobalOptions(["--cache", "/c", "--jobs", "2", "get"]) == ["--jobs", "2", "get"])
    }
}

/// The status line as the executable draws it.
@Suite struct StatusLineTests {
    @Test func aStatusLineIsCutToTheTerminal() {
        let line = "1234/5000 items, 120 cached, 3 failed, 1023.9 MiB at 1020.0 KiB/s, 16 active"
        #expect(ProgressText.fitted(line, columns: nil) == line)
        #expect(ProgressText.fitted(line, columns: 200) == line)
        // Three columns to spare: the `^C` echoed on Ctrl-C must not wrap it either.
        let cut = ProgressText.fitted(line, columns: 40)
        #expect(cut == "1234/5000 items, 120 cached, 3 faile…")
        #expect(DisplayText.displayWidth(cut) == 37)
        #expect(DisplayText.displayWidth(ProgressText.fitted("東京 " + line, columns: 20)) <= 17)
        #expect(ProgressText.fitted(line, columns: 4) == "")
        #expect(ProgressText.fitted(line, columns: 1) == "")
        #expect(ProgressText.fitted(line, columns: 5) == "1…")
    }

    private func progress(active: [(received: Int64, expected: Int64?)] = []) -> RunProgress {
        var progress = RunProgress()
        (progress.total, progress.done, progress.skipped, progress.failed) = (40, 8, 3, 1)
        (progress.bytesReceived, progress.bytesPerSecond) = (2_202_009, 860_160)
        (progress.waitingToRetry, progress.nextRetryInSeconds) = (1, 12)
        progress.active = active.enumerated().map { index, transfer in
            TransferSnapshot(id: TransferID(rawValue: UInt64(index)), url: "http://h/\(index)",
                             bytesReceived: transfer.received, bytesExpected: transfer.expected)
        }
        return progress
    }

    /// A narrow terminal shortens or drops whole fields, the least useful
    /// first, and keeps the counts and the retry wait: at 80 columns the
    /// wait was cut off ("…, 4 w…"), at 20 the failures ("201/223 items, 1…").
    /// The wait is worded short before the running transfers are dropped:
    /// "1 waiting to retry (next in 12 s)" alone hid that 8 were running.
    @Test func aNarrowTerminalDropsTheLeastUsefulFieldsFirst() {
        let running = progress(active: Array(repeating: (100, nil), count: 8))
        #expect(ProgressText.fittedStatus(running, columns: 120)
                == "12/40 items, 3 cached, 1 failed, 2.1 MiB at 840.0 KiB/s, 8 active, 1 waiting to retry (next in 12 s)")
        // The cached count, dropped before the wait's wording was, comes back where it fits then.
        #expect(ProgressText.fittedStatus(running, columns: 90)
                == "12/40 items, 3 cached, 1 failed, 2.1 MiB at 840.0 KiB/s, 8 active, retry in 12 s")
        #expect(ProgressText.fittedStatus(running, columns: 82)
                == "12/40 items, 1 failed, 2.1 MiB at 840.0 KiB/s, 8 active, retry in 12 s")
        #expect(ProgressText.fittedStatus(running, columns: 60) == "12/40 items, 1 failed, 840.0 KiB/s, retry in 12 s")
        #expect(ProgressText.fittedStatus(running, columns: 40) == "12/40 items, 1 failed, retry in 12 s")
        // With nothing running, the wait is what moves: said at length for longer.
        let idle = progress()
        #expect(ProgressText.fittedStatus(idle, columns: 80)
                == "12/40 items, 1 failed, 840.0 KiB/s, 1 waiting to retry (next in 12 s)")
        #expect(ProgressText.fittedStatus(running, columns: 20) == "12/40 items")
        // Only the count left, and too wide: cut.
        #expect(ProgressText.fittedStatus(running, columns: 10) == "12/40 …")
        #expect(ProgressText.fittedStatus(running, columns: nil) == ProgressText.status(running))
    }

    /// Transfers whose lengths are known and that will take a while say how
    /// far they are and how long is left (a 3 MB file at 20 KB/s showed its
    /// bytes so far, for minutes); short ones, or any of unknown length, do not.
    @Test func longTransfersSayHowFarTheyAreAndWhatIsLeft() {
        var slow = progress(active: [(196_608, 3_000_000)])
        // The last item of the run: its time left is the run's.
        (slow.waitingToRetry, slow.skipped, slow.bytesPerSecond, slow.total) = (0, 0, 20_000, 10)
        #expect(ProgressText.status(slow) == "9/10 items, 1 failed, 2.1 MiB at 19.5 KiB/s, 1 active: 6% of 2.9 MiB, 2 min left")
        #expect(ProgressText.fittedStatus(slow, columns: 68) == "9/10 items, 1 failed, 2.1 MiB at 19.5 KiB/s, 1 active: 2 min left")
        #expect(ProgressText.fittedStatus(slow, columns: 60) == "9/10 items, 1 failed, 2.1 MiB at 19.5 KiB/s, 1 active")
        slow.bytesPerSecond = 100_000
        #expect(ProgressText.status(slow) == "9/10 items, 1 failed, 2.1 MiB at 97.7 KiB/s, 1 active: 6% of 2.9 MiB, 29 s left")
        slow.bytesPerSecond = 2_000_000
        #expect(ProgressText.status(slow) == "9/10 items, 1 failed, 2.1 MiB at 1.9 MiB/s, 1 active")
        slow.bytesPerSecond = 20_000
        slow.total = 11
        slow.active.append(TransferSnapshot(id: TransferID(rawValue: 9), url: "http://h/9", bytesReceived: 5, bytesExpected: nil))
        #expect(ProgressText.status(slow) == "9/11 items, 1 failed, 2.1 MiB at 19.5 KiB/s, 2 active")
    }

    /// With items not started yet, the time left is the run's, about: they
    /// count at the mean size of the items stored and running. The running
    /// ones' alone ("16 s left" of two videos with five queued) read as the
    /// run's, which took 32 s. A run of small files says it too, once long.
    @Test func theTimeLeftCountsTheItemsNotStartedYet() {
        var run = progress(active: [(196_608, 3_000_000)])
        (run.waitingToRetry, run.skipped, run.bytesPerSecond) = (0, 0, 2_000_000)
        run.bytesStored = 8 * 3_000_000
        // 30 not started at 3 MB each, and the 2.8 MB left of the one running, at 2 MB/s.
        #expect(ProgressText.status(run) == "9/40 items, 1 failed, 2.1 MiB at 1.9 MiB/s, 1 active: 6% of 2.9 MiB, about 47 s left in all")
        #expect(ProgressText.fittedStatus(run, columns: 81) == "9/40 items, 1 failed, 2.1 MiB at 1.9 MiB/s, 1 active: about 47 s left in all")
        // Those on their way into the store, and another process's, are not to start.
        (run.storing, run.waitingForOtherProcess) = (10, 10)
        #expect(ProgressText.status(run).contains("1 active: 6% of 2.9 MiB, about 17 s left in all, 10 being fetched"), "\(ProgressText.status(run))")
        // Items waiting to retry are not counted (mostly those of hosts that fail):
        // six of dead hosts made "about 106 s left" of a run with 8 s to go.
        (run.storing, run.waitingForOtherProcess, run.waitingToRetry) = (0, 0, 10)
        #expect(ProgressText.status(run).hasSuffix("1 active: 6% of 2.9 MiB, about 32 s left in all, 10 waiting to retry (next in 12 s)"),
                "\(ProgressText.status(run))")
        // A host failing meanwhile leaves the other items counted (1,000 photos of a live host
        // beside one dead URL read "8 s left" while it failed).
        run.failingHost = FailingHost(host: "127.0.0.1:1", connected: false, seconds: 4, hosts: 1)
        #expect(ProgressText.status(run) == "9/40 items, 1 failed, 2.1 MiB at 1.9 MiB/s, 1 active: 6% of 2.9 MiB, about 32 s left in all, "
                + "10 waiting to retry (next in 12 s), no connection to 127.0.0.1:1 for 4 s", "\(ProgressText.status(run))")
        // Lengths past any count (a server's Content-Length of 2^63 - 1) are added without a trap.
        var huge = run
        huge.active = [TransferSnapshot(id: TransferID(rawValue: 1), url: "http://h/1", bytesReceived: 10, bytesExpected: .max),
                       TransferSnapshot(id: TransferID(rawValue: 2), url: "http://h/2", bytesReceived: 10, bytesExpected: .max)]
        huge.bytesStored = .max
        #expect(ProgressText.status(huge).contains("2 active: 0% of "), "\(ProgressText.status(huge))")
        // Small files: 2000 of 64 KiB, 16 running, 200 stored, at 1 MiB/s.
        var small = progress(active: Array(repeating: (32_768, 65_536), count: 16))
        (small.total, small.done, small.failed, small.skipped, small.waitingToRetry) = (2000, 200, 0, 0, 0)
        (small.bytesStored, small.bytesPerSecond) = (200 * 65_536, 1_048_576)
        #expect(ProgressText.status(small).hasSuffix("16 active: 50% of 1.0 MiB, about 112 s left in all"), "\(ProgressText.status(small))")
    }

    /// A host whose URLs fail without an answer is named while they wait to
    /// retry, for how long: under --retries 1 a dead host took 30 s (its
    /// patience) with only "2 waiting to retry (next in 3 s)" to show.
    @Test func aHostFailingWithoutAnAnswerIsNamed() {
        var waiting = progress()
        (waiting.total, waiting.done, waiting.skipped, waiting.failed, waiting.waitingToRetry, waiting.nextRetryInSeconds)
            = (2, 0, 0, 0, 2, 3)
        (waiting.bytesReceived, waiting.bytesPerSecond) = (0, 0)
        waiting.failingHost = FailingHost(host: "127.0.0.1:1", connected: false, seconds: 12, hosts: 1)
        #expect(ProgressText.status(waiting)
                == "0/2 items, 0 B at 0 B/s, 2 waiting to retry (next in 3 s), no connection to 127.0.0.1:1 for 12 s")
        #expect(ProgressText.fittedStatus(waiting, columns: 60) == "0/2 items, 0 B/s, retry in 3 s, no connection for 12 s")
        #expect(ProgressText.fittedStatus(waiting, columns: 40) == "0/2 items, no connection for 12 s")
        #expect(ProgressText.fittedStatus(waiting, columns: 90)
                == "0/2 items, 2 waiting to retry (next in 3 s), no connection to 127.0.0.1:1 for 12 s")
        waiting.failingHost = FailingHost(host: "photos.example", connected: true, seconds: 75, hosts: 3)
        #expect(ProgressText.status(waiting).hasSuffix(", no answer from photos.example for 75 s (and 2 more hosts)"),
                "\(ProgressText.status(waiting))")
        let line = ProgressJSON.line(for: .progress(waiting))
        #expect(line.contains(#""failingHost":{"connected":true,"host":"photos.example","hosts":3,"seconds":75}"#), "\(line)")
    }

    /// The time left is the slowest transfer's at its own rate where that is
    /// longer: a 2 KB/s transfer beside a 20 KB/s one said "3 min left" of
    /// some 17 min, the bytes left over the rate of them all.
    @Test func theTimeLeftWaitsForTheSlowestTransfer() {
        var two = progress()
        (two.waitingToRetry, two.skipped, two.bytesPerSecond, two.total) = (0, 0, 22_000, 11)
        two.active = [TransferSnapshot(id: TransferID(rawValue: 1), url: "http://fast/a", bytesReceived: 1_800_000,
                                       bytesExpected: 2_000_000, bytesPerSecond: 20_000),
                      TransferSnapshot(id: TransferID(rawValue: 2), url: "http://slow/b", bytesReceived: 180_000,
                                       bytesExpected: 2_000_000, bytesPerSecond: 2_000)]
        #expect(ProgressText.status(two).hasSuffix("2 active: 49% of 3.8 MiB, 15 min left"), "\(ProgressText.status(two))")
        // Without a rate of its own (under a second old), the rate of them all.
        two.active[1] = TransferSnapshot(id: TransferID(rawValue: 2), url: "http://slow/b", bytesReceived: 180_000,
                                         bytesExpected: 2_000_000)
        #expect(ProgressText.status(two).hasSuffix("2 active: 49% of 3.8 MiB, 92 s left"), "\(ProgressText.status(two))")
        // The rate moves on every tick: progress unchanged but for it is the same progress
        // (passed on again, it made four JSON lines a second where one was due).
        let moving = TransferSnapshot(id: TransferID(rawValue: 3), url: "http://h/3", bytesReceived: 9, bytesExpected: 90,
                                      bytesPerSecond: 10)
        #expect(moving == TransferSnapshot(id: TransferID(rawValue: 3), url: "http://h/3", bytesReceived: 9, bytesExpected: 90,
                                           bytesPerSecond: 7))
        #expect(moving != TransferSnapshot(id: TransferID(rawValue: 3), url: "http://h/3", bytesReceived: 10, bytesExpected: 90))
    }

    /// While no running transfer gets a byte, the line says for how long
    /// instead of an estimate that grew as the rate decayed ("9 s left"
    /// with nothing coming); one transfer still moving keeps the estimate.
    @Test func aStallIsShownInsteadOfTheTimeLeft() {
        func snapshot(_ id: UInt64, silent: Int) -> TransferSnapshot {
            TransferSnapshot(id: TransferID(rawValue: id), url: "http://h/\(id)", bytesReceived: 300_000,
                             bytesExpected: 1_000_000, secondsWithoutData: silent)
        }
        var stalled = progress()
        (stalled.waitingToRetry, stalled.skipped, stalled.bytesPerSecond, stalled.total) = (0, 0, 78_000, 10)
        stalled.active = [snapshot(1, silent: 2)]
        #expect(ProgressText.status(stalled) == "9/10 items, 1 failed, 2.1 MiB at 76.2 KiB/s, 1 active: 30% of 976.6 KiB, 9 s left")
        stalled.active = [snapshot(1, silent: 8)]
        #expect(ProgressText.status(stalled) == "9/10 items, 1 failed, 2.1 MiB at 76.2 KiB/s, 1 active: no data for 8 s")
        stalled.bytesPerSecond = 0
        #expect(ProgressText.status(stalled) == "9/10 items, 1 failed, 2.1 MiB at 0 B/s, 1 active: no data for 8 s")
        stalled.total = 11
        stalled.active.append(snapshot(2, silent: 0))
        #expect(ProgressText.status(stalled) == "9/11 items, 1 failed, 2.1 MiB at 0 B/s, 2 active")
        let line = ProgressJSON.line(for: .progress(stalled))
        #expect(line.contains(#""secondsWithoutData":8"#) && line.components(separatedBy: "secondsWithoutData").count == 2)
    }

    /// Bodies that are in but wait to be stored (another process holds the
    /// catalog's lock) are counted once nothing else runs, or once they pile up.
    @Test func bodiesWaitingToBeStoredAreCounted() {
        var waiting = progress()
        (waiting.waitingToRetry, waiting.skipped, waiting.storing) = (0, 0, 50)
        #expect(ProgressText.status(waiting) == "9/40 items, 1 failed, 2.1 MiB at 840.0 KiB/s, 50 being stored")
        waiting.active = [TransferSnapshot(id: TransferID(rawValue: 1), url: "http://h/1", bytesReceived: 5, bytesExpected: nil)]
        #expect(ProgressText.status(waiting) == "9/40 items, 1 failed, 2.1 MiB at 840.0 KiB/s, 1 active")
        waiting.storing = 64
        #expect(ProgressText.status(waiting) == "9/40 items, 1 failed, 2.1 MiB at 840.0 KiB/s, 64 being stored, 1 active")
    }
}

/// The transfer flags as the engine gets them.
@Suite struct TransferOptionsTests {
    @Test func flagsBecomeTheEnginesSettings() throws {
        let options = try TransferOptions.parse([
            "--jobs", "3", "--per-host", "2", "--retries", "0", "--timeout", "5", "--connect-timeout", "2.5",
            "--stall-timeout", "7", "--max-filesize", "200K", "--limit-rate", "1M",
        ])
        let configuration = options.configuration
        #expect(configuration.maxConcurrentTransfers == 3)
        #expect(configuration.maxTransfersPerHost == 2)
        #expect(configuration.retry.maxRetries == 0)
        #expect(configuration.attemptTimeout == 5)
        #expect(configuration.connectTimeout == 2.5)
        #expect(configuration.stallTimeout == 7)
        #expect(configuration.maxFileSize == Int64(204_800))
        #expect(configuration.maxBytesPerSecond == Int64(1_048_576))
        #expect(configuration.unreachableHostPatience == 30)
        #expect(try TransferOptions.parse(["--host-patience", "45"]).configuration.unreachableHostPatience == 45)
        // 0: no patience, so --retries alone bounds a URL's attempts.
        #expect(try TransferOptions.parse(["--host-patience", "0"]).configuration.unreachableHostPatience == nil)
    }

    /// The counts read through a transform, which leaves the default out of
    /// the help: it is written there instead.
    @Test func theHelpGivesEachCountsDefault() throws {
        // Wrapped where it wraps: read as one line.
        let help = TransferOptions.helpMessage(columns: 200).split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for line in ["Concurrent transfers in total. (default: 16)", "Concurrent transfers against one host. (default: 8)",
                     "use none. (default: 4)", "no host is given up). (default: 30)", "establish a connection. (default: 15)",
                     "counts as stalled. (default: 30)"] {
            #expect(help.contains(line), "\(line)")
        }
        #expect(TransferOptions.defaultJobs == TransferConfiguration().maxConcurrentTransfers)
        #expect(TransferOptions.defaultPerHost == TransferConfiguration().maxTransfersPerHost)
        #expect(TransferOptions.defaultRetries == TransferConfiguration().retry.maxRetries)
        let defaults = TransferConfiguration()
        #expect(TransferOptions.defaultHostPatience == defaults.unreachableHostPatience)
        #expect(TransferOptions.defaultConnectTimeout == defaults.connectTimeout && TransferOptions.defaultStallTimeout == defaults.stallTimeout)
    }

    @Test(arguments: [
        (["--per-host", "0"], "--per-host must be at least 1 (got 0)"),
        (["--retries", "-1"], "--retries must not be negative (got -1)"),
        (["--host-patience", "0.5"], "--host-patience must be 0 (none) or from 1 to 86400 seconds (a day) (got 0.5)"),
        (["--host-patience", "-1"], "--host-patience must be 0 (none) or from 1 to 86400 seconds (a day) (got -1)"),
        (["--connect-timeout", "0"], "--connect-timeout must be from 0.001 to 31536000 seconds (a year) (got 0)"),
        (["--jobs", "99999999999999999999"], "The value '99999999999999999999' is invalid for '--jobs <n>': a number that large is not taken"),
        (["--per-host", "1.5"], "The value '1.5' is invalid for '--per-host <n>': not a whole number"),
        (["--limit-rate", "fast"], "--limit-rate: 'fast' is not a whole number of bytes, or one with K, M, G, T, P or E, as in 500K"),
        (["--limit-rate", "0"], "--limit-rate must be at least 1 byte a second (got 0)"),
        (["--limit-rate", "-2K"], "--limit-rate must be at least 1 byte a second (got -2K)"),
        (["--limit-rate", "-1.5"], "--limit-rate must be at least 1 byte a second (got -1.5)"),
        (["--max-filesize", "1" + String(repeating: "0", count: 400)],
         "--max-filesize: '1\(String(repeating: "0", count: 400))' is too large (it must be below 8 EiB)"),
        (["--timeout", "1" + String(repeating: "0", count: 400)],
         "The value '1\(String(repeating: "0", count: 400))' is invalid for '--timeout <seconds>': a number that large is not taken"),
        (["--limit-rate", "1.5"], "--limit-rate: '1.5' holds a fraction of a byte (a whole number of bytes, or one with K, M, G, T, P or E, as in 500K)"),
        (["--max-filesize", "9E"], "--max-filesize: '9E' is too large (it must be below 8 EiB)"),
        (["--max-filesize", "9223372036854775808"], "--max-filesize: '9223372036854775808' is too large (it must be below 8 EiB)"),
        // Swift's own reading of a Double took these as infinity and as 16.
        (["--timeout", "1e400"], "The value '1e400' is invalid for '--timeout <seconds>': not a number of seconds (as in 30 or 2.5)"),
        (["--stall-timeout", "0x10"], "The value '0x10' is invalid for '--stall-timeout <seconds>': not a number of seconds (as in 30 or 2.5)"),
        (["--connect-timeout", "."], "The value '.' is invalid for '--connect-timeout <seconds>': not a number of seconds (as in 30 or 2.5)"),
    ])
    func aBadValueSaysWhatIsWrong(arguments: [String], message: String) {
        #expect(TransferOptions.message(for: failure(arguments)) == message)
    }

    private func failure(_ arguments: [String]) -> any Error {
        do {
            _ = try TransferOptions.parse(arguments)
        } catch {
            return error
        }
        return CancellationError()
    }

    /// A stop signal during a stop quits at once only when it is Ctrl-C or
    /// SIGTERM a second or more after the first: one action's two signals
    /// are one stop, and a hang-up is nobody's impatience.
    @Test func onlyALaterSecondInterruptQuitsAtOnce() {
        #expect(!StopSignals.quitsAtOnce(SIGINT, sinceFirstStop: .zero))
        #expect(!StopSignals.quitsAtOnce(SIGINT, sinceFirstStop: .milliseconds(300)))
        #expect(StopSignals.quitsAtOnce(SIGINT, sinceFirstStop: .seconds(1)))
        #expect(StopSignals.quitsAtOnce(SIGTERM, sinceFirstStop: .seconds(5)))
        #expect(!StopSignals.quitsAtOnce(SIGHUP, sinceFirstStop: .seconds(5)))
    }
}
