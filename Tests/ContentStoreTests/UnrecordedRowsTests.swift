import Foundation
import Testing
import TestSupport
@testable import ContentStore

#if canImport(Glibc)
import Glibc
#endif

@Suite struct UnrecordedRowsTests {
    /// How long a file this process let go may still look held: another
    /// test's spawned process holds a copy of every descriptor from its fork
    /// to its exec, and with it the file's lock (a count right after a
    /// release read 0 in a CI run). Waited for only where the file is free.
    static let childsCopyWait: Duration = .seconds(30)

    private func record(_ url: String, fetched: Bool = true) -> IngestRecord {
        IngestRecord(url: url, collection: "alps", kind: .sound, title: "Ski lift ↑", sha256: String(repeating: "c", count: 64),
                     size: 1234, contentType: "audio/flac", etag: "\"v1\"", lastModified: nil,
                     metadata: #"{"id":7}"#, fetched: fetched)
    }

    @Test func keptRowsComeBackWholeWithoutPasswordsAndTheirFileGoesOnceRecorded() async throws {
        try await TemporaryDirectory.with { directory in
            let rows = UnrecordedRows(root: directory.path)
            let fetchedAt = Date(timeIntervalSince1970: 1_790_000_000.5)
            try rows.keep([record("http://ann:hunter2@h/a.flac"), record("http://h/b.flac", fetched: false)], fetchedAt: fetchedAt)

            let names = try FileManager.default.contentsOfDirectory(atPath: rows.directory)
            #expect(names.count == 1 && names[0].hasSuffix(".jsonl"), "\(names)")
            let text = try String(contentsOfFile: "\(rows.directory)/\(names[0])", encoding: .utf8)
            #expect(!text.contains("hunter2"))

            var replayed: [([IngestRecord], Date)] = []
            #expect(rows.replay({ replayed.append(($0, $1)) }, lockWait: Self.childsCopyWait) == nil)
            #expect(replayed.count == 1)
            #expect(replayed.first?.0 == [record("http://ann@h/a.flac"), record("http://h/b.flac", fetched: false)])
            #expect(replayed.first?.1 == fetchedAt)
            #expect(try FileManager.default.contentsOfDirectory(atPath: rows.directory).isEmpty)
        }
    }

    /// The URLs of rows another live process holds (its bodies moved into
    /// the store, their rows to come) are told apart from rows kept for the
    /// next run and from this process's own; a held file is read once.
    @Test func urlsOfRowsOtherProcessesHoldAreToldFromTheRest() async throws {
        try await TemporaryDirectory.with { directory in
            let rows = UnrecordedRows(root: directory.path)
            var known: [String: Set<String>] = [:]
            #expect(rows.urlsHeldByOtherProcesses(known: &known).isEmpty)
            try rows.keep([record("http://h/kept.flac")], fetchedAt: Date())
            let own = try #require(rows.hold([record("http://h/own.flac")], fetchedAt: Date()))
            defer { own.release() }
            // Kept rows and this process's own held ones are no other process at work.
            #expect(!rows.anyHeldByOtherProcesses())
            // Another process's held file: its name carries that process's pid, and it is locked.
            let other = "\(rows.directory)/1790000000000-999999999-1-ab.jsonl"
            try Data(("{\"fetchedAt\":1}\n" + record("http://ann@h/held.flac").jsonLine + "\n"
                      + record("http://h/too.flac").jsonLine + "\n").utf8).write(to: URL(fileURLWithPath: other))
            let lock = open(other, O_RDONLY)
            #expect(flock(lock, LOCK_EX) == 0)

            #expect(rows.urlsHeldByOtherProcesses(known: &known) == ["http://ann@h/held.flac", "http://h/too.flac"])
            #expect(rows.anyHeldByOtherProcesses())
            #expect(known.keys.sorted() == ["1790000000000-999999999-1-ab.jsonl"])
            // Read once: what was read is used while the file is held.
            known[known.keys.first ?? ""] = ["http://h/as-read-before"]
            #expect(rows.urlsHeldByOtherProcesses(known: &known) == ["http://h/as-read-before"])

            close(lock)
            #expect(!rows.anyHeldByOtherProcesses())
            #expect(rows.urlsHeldByOtherProcesses(known: &known).isEmpty)
            #expect(known.isEmpty)
        }
    }

    /// The hand-written line is what `JSONEncoder` (sorted keys) writes, for
    /// every kind of text a row holds, and reads back as the same record.
    @Test func aRowsLineIsWhatTheEncoderWritesAndReadsBackTheSame() throws {
        var awkward = IngestRecord(url: "http://h/a b?q=\"x\"&p=\\", collection: "tab\there\u{1}\u{8}\u{C}\u{1F}\n\r", kind: .photo,
                                   title: "Žilina ↑ 🎿 \u{7F}", sha256: String(repeating: "a", count: 64), size: -1,
                                   contentType: "image/jpeg", etag: "W/\"v\\1\"", lastModified: "Mon, 01 Jan 2024 00:00:00 GMT",
                                   metadata: #"{"id":"7","tags":["a\/b"]}"#, fetched: false)
        awkward.replacesMissingObject = String(repeating: "b", count: 64)
        let sparse = IngestRecord(url: "", collection: "", kind: .file, sha256: "", size: Int64.max)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        for row in [awkward, sparse, record("http://h/b.flac")] {
            let encoded = String(decoding: try encoder.encode(row), as: UTF8.self)
            #expect(row.jsonLine == encoded)
            #expect(try JSONDecoder().decode(IngestRecord.self, from: Data(row.jsonLine.utf8)) == row)
        }
        // Every member of the record is written (one added later must be added to the line too).
        let members = try #require(try JSONSerialization.jsonObject(with: Data(awkward.jsonLine.utf8)) as? [String: Any])
        #expect(members.count == Mirror(reflecting: awkward).children.count)
    }

    /// `stats` says how many rows wait: counted without recording or removing anything.
    @Test func theRowsWaitingAreCountedWithoutTakingThem() async throws {
        try await TemporaryDirectory.with { directory in
            let rows = UnrecordedRows(root: directory.path)
            #expect(rows.waitingRecords().count == 0)
            try rows.keep([record("http://h/1"), record("http://h/2"), record("http://h/3")], fetchedAt: Date())
            try rows.keep([record("http://h/4"), record("http://h/5")], fetchedAt: Date())
            // A group set aside as bad is not waiting.
            try Data("garbage\n".utf8).write(to: URL(fileURLWithPath: "\(rows.directory)/9.jsonl.bad"))
            let before = try FileManager.default.contentsOfDirectory(atPath: rows.directory).sorted()

            #expect(await waitUntil { rows.waitingRecords().count == 5 })
            #expect(try FileManager.default.contentsOfDirectory(atPath: rows.directory).sorted() == before)
        }
    }

    @Test func aGroupThatCannotBeRecordedStaysAndOneHeldByAnotherProcessIsLeftAlone() async throws {
        struct Locked: Error {}
        try await TemporaryDirectory.with { directory in
            let rows = UnrecordedRows(root: directory.path)
            try rows.keep([record("http://h/a.flac")], fetchedAt: Date())
            let failure = rows.replay { _, _ in throw Locked() }
            #expect(failure is Locked)
            let names = try FileManager.default.contentsOfDirectory(atPath: rows.directory)
            #expect(names.count == 1)

            let held = open("\(rows.directory)/\(names[0])", O_RDONLY)
            defer { close(held) }
            #expect(flock(held, LOCK_EX) == 0)
            var calls = 0
            #expect(rows.replay { _, _ in calls += 1 } == nil)
            #expect(calls == 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: rows.directory).count == 1)
        }
    }

    /// Rows a process holds while it moves their objects into the store
    /// are passed by, by replays and counts, until it lets them go: released
    /// (recorded), the file goes; left (the process killed), the next replay
    /// records them.
    @Test func heldRowsWaitForTheirProcessAndAreReplayedWhenItDies() async throws {
        try await TemporaryDirectory.with { directory in
            let rows = UnrecordedRows(root: directory.path)
            var replayed: [[IngestRecord]] = []
            let recorded = try #require(rows.hold([record("http://h/1"), record("http://h/2")], fetchedAt: Date()))
            #expect(rows.replay { records, _ in replayed.append(records) } == nil)
            #expect(replayed.isEmpty && rows.waitingRecords().count == 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: rows.directory).count == 1)
            recorded.release()
            #expect(try FileManager.default.contentsOfDirectory(atPath: rows.directory).isEmpty)

            // A process killed while it held them: its descriptor closed, its lock gone.
            var left = rows.hold([record("http://ann:hunter2@h/3")], fetchedAt: Date())
            #expect(left != nil)
            left = nil
            #expect(await waitUntil { rows.waitingRecords().count == 1 })
            #expect(rows.replay({ records, _ in replayed.append(records) }, lockWait: Self.childsCopyWait) == nil)
            #expect(replayed == [[record("http://ann@h/3")]])
            #expect(try FileManager.default.contentsOfDirectory(atPath: rows.directory).isEmpty)

            // Kept for a later run (the catalog failed): the file stays, let go, and is replayed.
            let kept = try #require(rows.hold([record("http://h/4")], fetchedAt: Date()))
            #expect(kept.keepDurably())
            kept.release()
            #expect(!kept.keepDurably())
            #expect(await waitUntil { rows.waitingRecords().count == 1 })
            #expect(rows.replay({ records, _ in replayed.append(records) }, lockWait: Self.childsCopyWait) == nil)
            #expect(replayed.last == [record("http://h/4")])
        }
    }

    /// A count or another replay's look holds a file for an instant: the
    /// replay waits that out. Passed by, the file's URLs were fetched again
    /// (a `stats` loop beside a `get` made it so in 14 runs of 30).
    @Test func aFileLookedAtForAnInstantIsStillReplayed() async throws {
        try await TemporaryDirectory.with { directory in
            let rows = UnrecordedRows(root: directory.path)
            try rows.keep([record("http://h/a.flac")], fetchedAt: Date())
            let name = try #require(try FileManager.default.contentsOfDirectory(atPath: rows.directory).first)
            let look = open("\(rows.directory)/\(name)", O_RDONLY)
            #expect(flock(look, LOCK_SH) == 0)
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { close(look) }

            // (A generous wait: the look's end may come late on a loaded machine; 50 ms in use.)
            var replayed = 0
            #expect(rows.replay({ records, _ in replayed += records.count }, lockWait: .seconds(30)) == nil)

            #expect(replayed == 1)
            #expect(try FileManager.default.contentsOfDirectory(atPath: rows.directory).isEmpty)
        }
    }

    /// A temporary file a process killed while writing left goes with the
    /// next replay once a minute old; one a live process is writing (locked)
    /// or that is younger stays.
    @Test func temporaryFilesLeftByAKilledWriterAreRemoved() async throws {
        try await TemporaryDirectory.with { directory in
            let rows = UnrecordedRows(root: directory.path)
            try FileManager.default.createDirectory(atPath: rows.directory, withIntermediateDirectories: true)
            let old = Date().addingTimeInterval(-120)
            for name in [".left.tmp", ".written.tmp", ".young.tmp"] {
                #expect(FileManager.default.createFile(atPath: "\(rows.directory)/\(name)", contents: Data("{}\n".utf8)))
                if name != ".young.tmp" {
                    try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: "\(rows.directory)/\(name)")
                }
            }
            let writer = open("\(rows.directory)/.written.tmp", O_RDONLY)
            defer { close(writer) }
            #expect(flock(writer, LOCK_EX) == 0)

            #expect(rows.replay { _, _ in } == nil)

            #expect(try FileManager.default.contentsOfDirectory(atPath: rows.directory).sorted() == [".written.tmp", ".young.tmp"])
        }
    }

    @Test func aGroupTheCatalogRefusesIsSetAsideAndTheNextIsRecorded() async throws {
        struct Refused: Error {}
        try await TemporaryDirectory.with { directory in
            let rows = UnrecordedRows(root: directory.path)
            // A bad row beside a good one: the good one is recorded on its own.
            try rows.keep([record("http://h/bad.flac"), record("http://h/fine.flac")],
                          fetchedAt: Date(timeIntervalSince1970: 1000))
            try rows.keep([record("http://h/good.flac")], fetchedAt: Date(timeIntervalSince1970: 2000))
            var recorded: [String] = []

            let failure = rows.replay({ records, _ in
                if records.contains(where: { $0.url == "http://h/bad.flac" }) { throw Refused() }
                recorded += records.map(\.url)
            }, stops: { _ in false })

            #expect(failure == nil)
            #expect(recorded == ["http://h/fine.flac", "http://h/good.flac"])
            let left = try FileManager.default.contentsOfDirectory(atPath: rows.directory)
            #expect(left.count == 1 && left[0].hasSuffix(".jsonl.bad"), "\(left)")
        }
    }

    /// What else may sit in the directory: a FIFO (opening it waited for a
    /// writer, and hung the run) is passed over, a file with no readable row
    /// is set aside rather than deleted unseen.
    @Test(.timeLimit(.minutes(1)))
    func aFIFOIsPassedOverAndGarbageSetAside() async throws {
        try await TemporaryDirectory.with { directory in
            let rows = UnrecordedRows(root: directory.path)
            try rows.keep([record("http://h/a.flac")], fetchedAt: Date())
            #expect(mkfifo("\(rows.directory)/0-fifo.jsonl", 0o644) == 0)
            try Data("\u{7F}ELF garbage".utf8).write(to: URL(fileURLWithPath: "\(rows.directory)/1-garbage.jsonl"))
            var recorded: [String] = []

            #expect(rows.replay({ records, _ in recorded += records.map(\.url) }, lockWait: Self.childsCopyWait) == nil)

            #expect(recorded == ["http://h/a.flac"])
            #expect(Set(try FileManager.default.contentsOfDirectory(atPath: rows.directory))
                    == ["0-fifo.jsonl", "1-garbage.jsonl.bad"])
        }
    }

    @Test func unreadableLinesArePassedOver() {
        let data = Data(("{\"fetchedAt\":1000}\nnot json\n{\"url\":\"http://h/x\"}\n"
            + #"{"collection":"c","fetched":true,"kind":"photo","sha256":"ab","size":3,"url":"http://h/y"}"# + "\n").utf8)
        let (records, date) = UnrecordedRows.parse(data)
        #expect(records.map(\.url) == ["http://h/y"])
        #expect(date == Date(timeIntervalSince1970: 1000))
    }

    /// Rows an older version kept hold their URLs as they were given: they
    /// are replayed in the spelling the catalog now keeps (`URLSpelling`).
    @Test func keptURLsAreReplayedInTheirOneSpelling() {
        let data = Data(("{\"fetchedAt\":1000}\n"
            + #"{"collection":"c","fetched":true,"kind":"photo","sha256":"ab","size":3,"url":"HTTP://H:80/a/./%62.jpg#x"}"# + "\n").utf8)
        #expect(UnrecordedRows.parse(data).0.map(\.url) == ["http://h/a/b.jpg"])
    }
}
