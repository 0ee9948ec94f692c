import Crypto
import Foundation
import Testing
import TestSupport
@testable import Transfer

#if canImport(Glibc)
import Glibc
#endif

@Suite struct PartialFileTests {
    private func mode(_ path: String) throws -> Int {
        try #require(try permissions(of: path))
    }

    @Test func aPartialThatCannotBeMadeNamesItselfAndTheReason() async throws {
        try await TemporaryDirectory.with { directory in
            let missing = directory.appending("gone")
            #expect {
                _ = try PartialFile(directory: missing, url: "http://example.test/new")
            } throws: { error in
                // Not a private file tried after it, as if another process held the URL.
                let message = (error as? TransferError)?.message ?? ""
                return message.hasPrefix("cannot create \(missing)/") && message.hasSuffix(".part: No such file or directory")
            }
        }
    }

    /// The key of `url`'s partial and its shard directory in `directory`, made.
    private func shard(of url: String, in directory: TemporaryDirectory) -> (key: Substring, shard: String) {
        let key = PartialFile.key(for: url)
        let shard = PartialFile.shardDirectory(directory.path, key: key)
        #expect(mkdir(shard, 0o777) == 0)
        return (key, shard)
    }

    /// Another of the user's files, outside the partial directory: "private\n".
    private func victim(in directory: TemporaryDirectory) throws -> String {
        let victim = directory.appending("victim.txt")
        try Data("private\n".utf8).write(to: URL(fileURLWithPath: victim))
        return victim
    }

    /// A partial held by another process is said to be (`heldElsewhere`),
    /// for the batch to wait for it; one this process holds (the same URL
    /// twice in a list, with two passwords) is not: a private file instead.
    @Test func aPartialHeldByAnotherProcessIsToldFromOneHeldHere() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://ann:one@example.test/photo.jpg"
            let (key, shard) = shard(of: url, in: directory)

            // Held here: the second open goes private, as before, and the name is free again once closed.
            let first = try PartialFile(directory: directory.path, url: url)
            let second = try PartialFile(directory: directory.path, url: "http://ann:two@example.test/photo.jpg", privateIfHeld: false)
            #expect(first.path == "\(shard)/\(key).part")
            #expect(second.path.hasSuffix(".tmp"))
            second.close(discard: true)
            first.close(discard: true)
            #expect(PartialFile.lockedHere.withLock { !$0.contains(first.path) })

            // Held by a lock this process did not take through a partial: another process's, as far as it can tell.
            let fd = open("\(shard)/\(key).part", O_RDWR | O_CREAT, 0o444)
            #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            defer { close(fd) }
            #expect(throws: PartialFile.heldElsewhere) {
                _ = try PartialFile(directory: directory.path, url: url, privateIfHeld: false)
            }
        }
    }

    /// The shared partials held here are marked alive for a process waiting
    /// for them, but those of transfers that received nothing since the last
    /// mark: their holder's transfer stalled, as a stopped process's would.
    /// Only those in the engine's directory: another engine's tick (another
    /// test's, in this process) marked this test's quiet one.
    @Test func partialsHeldHereAreMarkedAliveButQuietOnes() async throws {
        try await TemporaryDirectory.with { directory in
            let moving = try PartialFile(directory: directory.path, url: "http://example.test/moving.wav")
            let quiet = try PartialFile(directory: directory.path, url: "http://example.test/quiet.wav")
            defer {
                moving.close(discard: true)
                quiet.close(discard: true)
            }
            // Both last written an hour ago
            var anHourAgo = [timespec(tv_sec: time(nil) - 3600, tv_nsec: 0), timespec(tv_sec: time(nil) - 3600, tv_nsec: 0)]
            for path in [moving.path, quiet.path] { #expect(utimensat(AT_FDCWD, path, &anHourAgo, 0) == 0) }
            func seen(_ url: String) -> PartialFile.SharedProgress? {
                PartialFile.sharedProgress(directory: directory.path, url: url)
            }
            let before = seen("http://example.test/quiet.wav")

            PartialFile.markAlive(in: directory.path, except: [quiet.path])

            let marked = try #require(seen("http://example.test/moving.wav"))
            #expect(marked.modified > Int64(time(nil) - 60) * 1_000_000_000)
            #expect(marked.size == 0)
            #expect(seen("http://example.test/quiet.wav") == before)
        }
    }

    /// A finished body's name is no longer this process's once the body is
    /// about to leave it (moved into the store): a partial another process
    /// makes there is neither marked alive by this one nor taken for its own.
    /// Put back should the move fail and the body stay for the next run.
    @Test func aFinishedBodyLeavesThePartialsHeldHereAsItLeavesItsName() async throws {
        try await TemporaryDirectory.with { directory in
            let partial = try PartialFile(directory: directory.path, url: "http://example.test/done.wav")
            partial.recordValidator("\"v1\"", total: 0, route: "", labels: BodyLabels())
            let finished = try partial.complete(budget: FinishedFile.Budget(limit: 4))
            func listed() -> Bool { PartialFile.lockedHere.withLock { $0.contains(finished.path) } }
            #expect(listed())

            finished.forgetValidator()
            #expect(!listed())
            #expect(finished.keepForResume())
            #expect(listed())
            finished.release()
            #expect(!listed())
        }
    }

    /// A validator file keeps the response's content type and coding
    /// beside the validator, length and route, and the next run reads them
    /// back; one that could not go on one line is left out, and a file of an
    /// older version (without either line) is still resumable, with none.
    @Test func theBodysLabelsComeBackWithTheValidator() async throws {
        try await TemporaryDirectory.with { directory in
            let cases: [(given: BodyLabels, expected: BodyLabels)] = [
                (BodyLabels(contentType: "image/jpeg", contentEncoding: "br"), BodyLabels(contentType: "image/jpeg", contentEncoding: "br")),
                (BodyLabels(contentType: "image/jpeg"), BodyLabels(contentType: "image/jpeg")),
                (BodyLabels(contentType: "a\u{7}b", contentEncoding: String(repeating: "x", count: 256)), BodyLabels()),
                (BodyLabels(), BodyLabels()),
            ]
            for (index, (given, expected)) in cases.enumerated() {
                let url = "http://example.test/photo\(index).jpg"
                let partial = try PartialFile(directory: directory.path, url: url)
                partial.recordValidator("\"v1\"", total: 3, route: "", labels: given)
                #expect(write(partial.descriptor, "abc", 3) == 3)
                partial.close(discard: false)

                let again = try PartialFile(directory: directory.path, url: url)
                #expect(again.resumable?.validator == "\"v1\"")
                #expect(again.resumable?.total == 3)
                #expect(again.resumable?.labels == expected, "case \(index)")
                again.close(discard: false)
            }
            // Files of older versions: without the coding line (this version's first), and without either.
            for (name, rest, expected) in [("type-only", "\"v1\"\n3\n\nimage/png\n", BodyLabels(contentType: "image/png")),
                                           ("older", "\"v1\"\n3\n\n", BodyLabels())] {
                let url = "http://example.test/\(name).jpg"
                let (key, shard) = shard(of: url, in: directory)
                try Data("abc".utf8).write(to: URL(fileURLWithPath: "\(shard)/\(key).part"))
                try Data("\(url)\n\(rest)".utf8).write(to: URL(fileURLWithPath: "\(shard)/\(key).part.validator"))
                let older = try PartialFile(directory: directory.path, url: url)
                #expect(older.resumable?.validator == "\"v1\"" && older.resumable?.labels == expected, "\(name)")
                older.close(discard: false)
            }
        }
    }

    /// A link put at a partial's name (the temporary directory is writable
    /// by everyone sharing the cache, and the name is the URL's hash) is
    /// removed, not followed: the download was written over the link's
    /// target, another of the user's files, and made it readable to all.
    /// The same for the validator's temporary name.
    @Test func aLinkAtAPartialsNameIsRemovedNotFollowed() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/photo.jpg"
            let (key, shard) = shard(of: url, in: directory)
            let victim = try self.victim(in: directory)
            #expect(chmod(victim, 0o600) == 0)
            #expect(symlink(victim, "\(shard)/\(key).part") == 0)
            #expect(symlink(victim, "\(shard)/\(key).part.validator.\(getpid())") == 0)

            let partial = try PartialFile(directory: directory.path, url: url)
            #expect(partial.path == "\(shard)/\(key).part")
            // Made afresh where the link was, as a partial no one held.
            #expect(partial.opened != .unknown && partial.resumable == nil)
            partial.recordValidator("\"v1\"", total: 3, route: "", labels: BodyLabels())
            #expect(write(partial.descriptor, "abc", 3) == 3)
            partial.close(discard: false)

            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "private\n")
            #expect(try mode(victim) == 0o600)
            var info = stat()
            #expect(lstat("\(shard)/\(key).part", &info) == 0 && info.st_mode & S_IFMT == S_IFREG)
            #expect(PartialFile.readValidatorFile("\(shard)/\(key).part.validator")?.hasPrefix(url) == true)
        }
    }

    /// A hard link at a partial's name to another of the user's files (where
    /// the system allows one) is not written through: the download goes to
    /// a private file, and the linked file keeps its bytes.
    @Test func aHardLinkAtAPartialsNameIsNotWrittenThrough() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/linked.jpg"
            let (key, shard) = shard(of: url, in: directory)
            let victim = try self.victim(in: directory)
            #expect(link(victim, "\(shard)/\(key).part") == 0)

            let partial = try PartialFile(directory: directory.path, url: url)
            #expect(partial.path.hasSuffix(".tmp"))
            #expect(write(partial.descriptor, "abc", 3) == 3)
            partial.close(discard: true)
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "private\n")
        }
    }

    /// A FIFO at a validator's name is not read: opening it waited for a
    /// writer for ever.
    @Test(.timeLimit(.minutes(1)))
    func aFIFOAtAValidatorsNameIsNotRead() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/fifo.jpg"
            let (key, shard) = shard(of: url, in: directory)
            try Data(count: 4096).write(to: URL(fileURLWithPath: "\(shard)/\(key).part"))
            #expect(mkfifo("\(shard)/\(key).part.validator", 0o666) == 0)
            #expect(PartialFile.readValidatorFile("\(shard)/\(key).part.validator") == nil)
            let partial = try PartialFile(directory: directory.path, url: url)
            #expect(partial.resumable == nil)
            partial.close(discard: true)
        }
    }

    /// A link at a shard directory's name is removed when an engine starts,
    /// not followed: partials were written through it into another
    /// directory, and the sweep looked there for files to remove.
    @Test func aLinkAtAShardsNameIsRemovedNotFollowed() async throws {
        try await TemporaryDirectory.with { directory in
            let tmp = directory.appending("tmp"), elsewhere = directory.appending("elsewhere")
            #expect(mkdir(tmp, 0o777) == 0 && mkdir(elsewhere, 0o777) == 0)
            let key = PartialFile.key(for: "http://example.test/x.jpg")
            let stale = "\(elsewhere)/\(String(repeating: "0", count: 40)).part"
            try Data(count: 10).write(to: URL(fileURLWithPath: stale))
            let weekAgo = timespec(tv_sec: time(nil) - 8 * 86_400, tv_nsec: 0)
            #expect([weekAgo, weekAgo].withUnsafeBufferPointer { utimensat(AT_FDCWD, stale, $0.baseAddress, 0) } == 0)
            #expect(symlink(elsewhere, "\(tmp)/0") == 0)
            #expect(PartialFile.sweep(directory: tmp) == 0)
            #expect(access(stale, F_OK) == 0)

            #expect(symlink(elsewhere, PartialFile.shardDirectory(tmp, key: key)) == 0 || key.hasPrefix("0"))
            PartialFile.makeShardDirectories(in: tmp)
            for name in PartialFile.shardNames {
                var info = stat()
                #expect(lstat("\(tmp)/\(name)", &info) == 0 && info.st_mode & S_IFMT == S_IFDIR, "\(name)")
            }
            let partial = try PartialFile(directory: tmp, url: "http://example.test/x.jpg")
            #expect(partial.path.hasPrefix(tmp + "/"))
            partial.close(discard: true)
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere) == [String(repeating: "0", count: 40) + ".part"])
        }
    }

    /// Anything else at the name that is not a file (a directory, a FIFO) is
    /// left alone: the download goes to a private file beside it.
    @Test func aPartialsNameHeldByAFIFOGivesAPrivateFile() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/sound.wav"
            let (key, shard) = shard(of: url, in: directory)
            #expect(mkfifo("\(shard)/\(key).part", 0o666) == 0)
            let partial = try PartialFile(directory: directory.path, url: url)
            #expect(partial.path.hasSuffix(".tmp"))
            partial.close(discard: true)
        }
    }

    @Test func aNewPartialIsReadOnlyAndSaysSoWhenComplete() async throws {
        try await TemporaryDirectory.with { directory in
            let partial = try PartialFile(directory: directory.path, url: "http://example.test/new")
            #expect(try mode(partial.path) == 0o444)
            let finished = try partial.complete(budget: FinishedFile.Budget(limit: 4))
            defer { finished.release() }
            #expect(finished.isReadOnly)
        }
    }

    @Test func aPartialWhoseModeChangedIsNotCountedReadOnly() async throws {
        try await TemporaryDirectory.with { directory in
            // A umask or a default ACL can give a new file another mode than asked for.
            let partial = try PartialFile(directory: directory.path, url: "http://example.test/changed")
            #expect(fchmod(partial.descriptor, 0o640) == 0)
            let finished = try partial.complete(budget: FinishedFile.Budget(limit: 4))
            defer { finished.release() }
            #expect(!finished.isReadOnly)
        }
    }

    /// A finished body renamed to a private name (past the holding budget)
    /// is unlocked until the store takes it; one resumed from an old partial
    /// gets no new bytes, and must not look a day old to another process's sweep.
    @Test func aFinishedBodyPastTheBudgetIsDatedNowForTheSweep() async throws {
        try await TemporaryDirectory.with { directory in
            let partial = try PartialFile(directory: directory.path, url: "http://example.test/old")
            partial.recordValidator("\"v1\"", total: 5000, route: "", labels: BodyLabels())
            let body = [UInt8](repeating: 9, count: 5000)
            #expect(body.withUnsafeBytes { write(partial.descriptor, $0.baseAddress, $0.count) } == body.count)
            // Written a week ago, as a partial left by an earlier run.
            let weekAgo = timespec(tv_sec: time(nil) - 8 * 86_400, tv_nsec: 0)
            let times = [weekAgo, weekAgo]
            #expect(futimens(partial.descriptor, times) == 0)
            let finished = try partial.complete(budget: FinishedFile.Budget(limit: 0))
            defer { finished.release() }
            #expect(finished.path.hasSuffix(".done"))
            #expect(PartialFile.sweep(directory: directory.path) == 0)
            #expect(FileManager.default.contents(atPath: finished.path) == Data(body))
        }
    }

    /// A private temporary's finished body waits for the store unlocked:
    /// under its `.tmp` name, another process's sweep took it for one a
    /// killed run left once ten minutes old, and removed it before it was stored.
    @Test func aPrivateBodyWaitingForTheStoreOutlivesTheSweepOfAbandonedFiles() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/private.jpg"
            let (key, shard) = shard(of: url, in: directory)
            #expect(mkfifo("\(shard)/\(key).part", 0o666) == 0)
            let partial = try PartialFile(directory: directory.path, url: url)
            #expect(partial.path.hasSuffix(".tmp"))
            let body = [UInt8](repeating: 5, count: 3000)
            #expect(body.withUnsafeBytes { write(partial.descriptor, $0.baseAddress, $0.count) } == body.count)
            let finished = try partial.complete(budget: FinishedFile.Budget(limit: 4))
            defer { finished.release() }

            #expect(finished.path.hasSuffix(".done"))
            #expect(PartialFile.sweep(directory: directory.path, now: Date() + 3_600) == 0)
            #expect(FileManager.default.contents(atPath: finished.path) == Data(body))
        }
    }

    /// Leaves a partial of `bytes` bytes for `url` with its validator, as an interrupted run does.
    private func leavePartial(in directory: String, url: String, bytes: Int, validator: String,
                              total: Int64? = 4000) throws -> String {
        let partial = try PartialFile(directory: directory, url: url)
        partial.recordValidator(validator, total: total, route: "", labels: BodyLabels())
        let body = [UInt8](repeating: 7, count: bytes)
        #expect(body.withUnsafeBytes { write(partial.descriptor, $0.baseAddress, $0.count) } == bytes)
        partial.close(discard: false)
        return partial.path
    }

    @Test func aValidatorACrashLeftBesideANewPartialDoesNotMakeItResumable() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/large.wav"
            // A validator whose partial is gone (a crash between the two removals).
            let leftover = try leavePartial(in: directory.path, url: url, bytes: 1000, validator: "\"old\"")
            #expect(unlink(leftover) == 0)

            // A new partial gets bytes of a response that recorded no validator, and fails.
            let partial = try PartialFile(directory: directory.path, url: url)
            let body = [UInt8](repeating: 9, count: 500)
            #expect(body.withUnsafeBytes { write(partial.descriptor, $0.baseAddress, $0.count) } == 500)
            partial.close(discard: false)

            // The old validator must not vouch for the new bytes: nothing is kept.
            #expect(access(partial.path, F_OK) != 0)
            #expect(access(partial.path + ".validator", F_OK) != 0)
        }
    }

    @Test func aRecordedValidatorMakesThePartialResumable() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/large.wav"
            _ = try leavePartial(in: directory.path, url: url, bytes: 1000, validator: "\"v1\"")
            let again = try PartialFile(directory: directory.path, url: url)
            defer { again.close(discard: true) }
            #expect(again.resumable?.size == 1000)
            #expect(again.resumable?.validator == "\"v1\"")
            #expect(again.resumable?.total == 4000)
        }
    }

    /// The body's length is kept with its validator; a length not given is
    /// kept as unknown, and a file an older version wrote (no length line) is read.
    @Test func theLengthIsKeptWithTheValidatorWhenKnown() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/chunked.wav"
            let path = try leavePartial(in: directory.path, url: url, bytes: 1000, validator: "\"v1\"", total: nil)
            #expect(try String(contentsOfFile: path + ".validator", encoding: .utf8) == "\(url)\n\"v1\"\n\n\n\n\n")
            let unknown = try PartialFile(directory: directory.path, url: url)
            #expect(unknown.resumable?.validator == "\"v1\"" && unknown.resumable?.size == 1000)
            #expect(unknown.resumable?.total == nil)
            unknown.close(discard: false)

            try Data("\(url)\n\"v1\"\n".utf8).write(to: URL(fileURLWithPath: path + ".validator"))
            let older = try PartialFile(directory: directory.path, url: url)
            #expect(older.resumable?.validator == "\"v1\"" && older.resumable?.total == nil)
            older.close(discard: false)

            // One without the route line: no redirect led to it.
            try Data("\(url)\n\"v1\"\n1000\n".utf8).write(to: URL(fileURLWithPath: path + ".validator"))
            let unrouted = try PartialFile(directory: directory.path, url: url)
            #expect(unrouted.resumable?.total == 1000 && unrouted.resumable?.route == "")
            unrouted.close(discard: false)

            // The route is kept as written.
            try Data("\(url)\n\"v1\"\n1000\n0123456789abcdef\n".utf8).write(to: URL(fileURLWithPath: path + ".validator"))
            let routed = try PartialFile(directory: directory.path, url: url)
            #expect(routed.resumable?.route == "0123456789abcdef")
            routed.close(discard: false)

            // An older version's date is not trusted (it may not be a strong validator).
            try Data("\(url)\nSun, 06 Nov 1994 08:49:37 GMT\n".utf8).write(to: URL(fileURLWithPath: path + ".validator"))
            let dated = try PartialFile(directory: directory.path, url: url)
            #expect(dated.resumable == nil)
            dated.close(discard: false)

            // The bytes again (the refused partial was emptied), and a length that is no number.
            try Data(repeating: 7, count: 1000).write(to: URL(fileURLWithPath: path))
            try Data("\(url)\n\"v1\"\nlots\n".utf8).write(to: URL(fileURLWithPath: path + ".validator"))
            let garbled = try PartialFile(directory: directory.path, url: url)
            defer { garbled.close(discard: true) }
            #expect(garbled.resumable == nil)
        }
    }

    @Test func aValidatorCutShortIsRefusedAndThePartialStartsOver() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/large.wav"
            let path = try leavePartial(in: directory.path, url: url, bytes: 1000, validator: "\"v1\"")
            // A crash while the validator was written: its last line has no newline.
            #expect(FileManager.default.createFile(atPath: path + ".validator", contents: Data("\(url)\n\"v".utf8)))
            let again = try PartialFile(directory: directory.path, url: url)
            defer { again.close(discard: true) }
            #expect(again.resumable == nil)
            var info = stat()
            #expect(fstat(again.descriptor, &info) == 0 && info.st_size == 0)
        }
    }

    @Test func neitherTheNameNorTheValidatorFileHoldsAPassword() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://ann:hunter2@example.test/a.jpg"
            #expect(PartialFile.key(for: url) == PartialFile.key(for: "http://ann@example.test/a.jpg"))
            let partial = try PartialFile(directory: directory.path, url: url)
            partial.recordValidator("\"v1\"", total: 3, route: "", labels: BodyLabels())
            #expect(partial.descriptor >= 0 && write(partial.descriptor, "abc", 3) == 3)
            partial.close(discard: false)
            let validator = try String(contentsOfFile: partial.path + ".validator", encoding: .utf8)
            #expect(validator == "http://ann@example.test/a.jpg\n\"v1\"\n3\n\n\n\n")
            // Resumed under either password: the bytes belong to the resource, the validator decides.
            let again = try PartialFile(directory: directory.path, url: "http://ann:other@example.test/a.jpg")
            defer { again.close(discard: true) }
            #expect(again.resumable?.size == 3)
            #expect(again.resumable?.validator == "\"v1\"")
        }
    }

    /// A copy of a partial's descriptor held elsewhere (a process being
    /// spawned holds one until it execs) does not keep its lock once the
    /// partial is closed: it is resumed, not started over in a private file.
    @Test func aPartialClosedWhileACopyOfItsDescriptorIsHeldIsResumed() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/a.jpg"
            let partial = try PartialFile(directory: directory.path, url: url)
            partial.recordValidator("\"v1\"", total: 3, route: "", labels: BodyLabels())
            #expect(write(partial.descriptor, "abc", 3) == 3)
            let copy = dup(partial.descriptor)
            defer { close(copy) }
            partial.close(discard: false)

            let again = try PartialFile(directory: directory.path, url: url)
            defer { again.close(discard: true) }
            #expect(again.path == partial.path)
            #expect(again.resumable?.size == 3)
        }
    }

    /// A partial an older version named after the URL as it was written
    /// (before URLs were spelt one way) is moved to its spelt URL's name, its
    /// validator quoting that spelling, and resumed from there.
    @Test func aPartialNamedAfterAnOldSpellingIsMovedToItsSpeltName() async throws {
        try await TemporaryDirectory.with { directory in
            let written = "http://Example.test:80/a/./%62.jpg"
            let key = PartialFile.key(for: written)
            let shard = PartialFile.shardDirectory(directory.path, key: key)
            try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
            let old = "\(shard)/\(key).part"
            try Data("abcd".utf8).write(to: URL(fileURLWithPath: old))
            try Data("\(written)\n\"v1\"\n".utf8).write(to: URL(fileURLWithPath: old + ".validator"))

            PartialFile.sweep(directory: directory.path)

            #expect(!FileManager.default.fileExists(atPath: old) && !FileManager.default.fileExists(atPath: old + ".validator"))
            let resumed = try PartialFile(directory: directory.path, url: "http://example.test/a/b.jpg")
            defer { resumed.close(discard: true) }
            #expect(resumed.resumable?.size == 4)
            #expect(resumed.resumable?.validator == "\"v1\"")
        }
    }

    @Test func aPartialAnOlderVersionNamedAfterAPasswordIsMovedToTheNameWithoutIt() async throws {
        try await TemporaryDirectory.with { directory in
            // As versions before this kept them: named by the whole URL's hash, which the validator quotes.
            func leftByAnOlderVersion(_ url: String, bytes: String) throws -> String {
                let path = "\(directory.path)/\(SHA256.hash(data: Data(url.utf8)).hexString.prefix(40)).part"
                try Data(bytes.utf8).write(to: URL(fileURLWithPath: path))
                try Data("\(url)\n\"v1\"\n".utf8).write(to: URL(fileURLWithPath: path + ".validator"))
                return path
            }
            let moved = try leftByAnOlderVersion("http://ann:hunter2@example.test/a.jpg", bytes: "abc")
            // This one's new name is taken by a partial of the same URL: it goes.
            let taken = try PartialFile(directory: directory.path, url: "http://bob@example.test/b.jpg")
            taken.recordValidator("\"v2\"", total: nil, route: "", labels: BodyLabels())
            #expect(write(taken.descriptor, "xy", 2) == 2)
            taken.close(discard: false)
            let dropped = try leftByAnOlderVersion("http://bob:hunter2@example.test/b.jpg", bytes: "abcdef")

            PartialFile.sweep(directory: directory.path)

            let names = partialDirectoryFiles(directory.path)
            #expect(names.count == 4, "\(names)")
            for name in names {
                let contents = try Data(contentsOf: URL(fileURLWithPath: directory.appending(name)))
                #expect(contents.range(of: Data("hunter2".utf8)) == nil, "\(name) holds the password")
            }
            #expect(!FileManager.default.fileExists(atPath: moved) && !FileManager.default.fileExists(atPath: dropped))
            let resumed = try PartialFile(directory: directory.path, url: "http://ann:hunter2@example.test/a.jpg")
            defer { resumed.close(discard: true) }
            #expect(resumed.resumable?.size == 3)
            #expect(resumed.resumable?.validator == "\"v1\"")
            let kept = try PartialFile(directory: directory.path, url: "http://bob:hunter2@example.test/b.jpg")
            defer { kept.close(discard: true) }
            #expect(kept.resumable?.size == 2)
            #expect(kept.resumable?.validator == "\"v2\"")
        }
    }

    /// What a killed run leaves that nobody resumes (an empty partial with
    /// no validator, a private temporary) goes after ten minutes unheld, not
    /// a day: killed runs on a shared cache left a thousand such files. A
    /// private temporary in use is locked, and stays.
    @Test func abandonedFilesGoAfterTenMinutesUnlessHeld() async throws {
        try await TemporaryDirectory.with { directory in
            let url = "http://example.test/a.jpg"
            let key = PartialFile.key(for: url)
            let shard = "\(directory.path)/\(key.prefix(1))"
            try FileManager.default.createDirectory(atPath: shard, withIntermediateDirectories: true)
            let emptyPart = "\(shard)/\(key).part"
            let privateLeft = "\(shard)/\(key).4242-1.tmp"
            let halfPart = "\(shard)/\(PartialFile.key(for: "http://example.test/b.jpg")).part"
            try Data().write(to: URL(fileURLWithPath: emptyPart))
            // Empty, beside its validator: a run killed between the validator and the first bytes (nothing to resume).
            let emptyURL = "http://example.test/d.jpg"
            let emptyKey = PartialFile.key(for: emptyURL)
            let emptyWithValidator = "\(PartialFile.shardDirectory(directory.path, key: emptyKey))/\(emptyKey).part"
            try FileManager.default.createDirectory(atPath: (emptyWithValidator as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try Data().write(to: URL(fileURLWithPath: emptyWithValidator))
            try Data("\(emptyURL)\n\"v1\"\n".utf8).write(to: URL(fileURLWithPath: emptyWithValidator + ".validator"))
            #expect(HeldPartials(in: directory.path).resumable == 0)
            try Data("abc".utf8).write(to: URL(fileURLWithPath: privateLeft))
            try Data("abc".utf8).write(to: URL(fileURLWithPath: halfPart))
            // One in use: another process holds the URL's partial, so this one writes privately.
            let heldURL = "http://example.test/c.jpg"
            let shared = try PartialFile(directory: directory.path, url: heldURL)
            defer { shared.close(discard: true) }
            let inUse = try PartialFile(directory: directory.path, url: heldURL)
            defer { inUse.close(discard: true) }
            #expect(inUse.path.hasSuffix(".tmp"))
            let later = { (minutes: Double) in Date().addingTimeInterval(minutes * 60) }

            #expect(PartialFile.sweep(directory: directory.path, now: later(5)) == 0)
            #expect(PartialFile.sweep(directory: directory.path, now: later(11)) == 4)

            let left = Set(partialDirectoryFiles(directory.path).map { directory.appending($0) })
            #expect(!left.contains(emptyPart) && !left.contains(privateLeft))
            #expect(!left.contains(emptyWithValidator) && !left.contains(emptyWithValidator + ".validator"))
            // A partial with bytes but no validator waits the day, as before; the ones in use stay.
            #expect(left.contains(halfPart) && left.contains(inUse.path) && left.contains(shared.path))
        }
    }

    @Test func aPartialAtTheTopLeftByAVersionWithoutShardDirectoriesIsMovedIntoItsOwnAndResumes() async throws {
        try await TemporaryDirectory.with { directory in
            // Given partials where versions before the shard directories kept them: at the top
            let url = "http://example.test/long.flac"
            let key = PartialFile.key(for: url)
            let top = "\(directory.path)/\(key).part"
            try Data("abcd".utf8).write(to: URL(fileURLWithPath: top))
            try Data("\(url)\n\"v1\"\n".utf8).write(to: URL(fileURLWithPath: top + ".validator"))
            // and one that another process holds: it stays where it is for now
            let busyURL = "http://example.test/busy.flac"
            let busyTop = "\(directory.path)/\(PartialFile.key(for: busyURL)).part"
            try Data("xyz".utf8).write(to: URL(fileURLWithPath: busyTop))
            try Data("\(busyURL)\n\"v1\"\n".utf8).write(to: URL(fileURLWithPath: busyTop + ".validator"))
            let busy = open(busyTop, O_RDONLY)
            defer { close(busy) }
            #expect(flock(busy, LOCK_EX) == 0)

            // When the partial directory is swept (as each run starts)
            let removed = PartialFile.sweep(directory: directory.path)

            // Then the free one is in its shard directory with its validator, nothing else changed
            let shard = key.prefix(1)
            #expect(Set(partialDirectoryFiles(directory.path)) == [
                "\(shard)/\(key).part", "\(shard)/\(key).part.validator",
                "\(PartialFile.key(for: busyURL)).part", "\(PartialFile.key(for: busyURL)).part.validator",
            ])
            #expect(removed == 1)
            // and a download of its URL resumes from its bytes
            let resumed = try PartialFile(directory: directory.path, url: url)
            defer { resumed.close(discard: true) }
            #expect(resumed.path == "\(directory.path)/\(shard)/\(key).part")
            #expect(resumed.resumable?.size == 4)
            #expect(resumed.resumable?.validator == "\"v1\"")
        }
    }

    /// A partial whose URL is cached now (another process finished it while
    /// the run that left it was killed) goes, unless a process holds it; one
    /// whose URL is not cached stays to be resumed.
    @Test func thePartialsOfCachedURLsGoUnlessHeld() async throws {
        try await TemporaryDirectory.with { directory in
            func leave(_ url: String) throws -> String {
                let partial = try PartialFile(directory: directory.path, url: url)
                partial.recordValidator("\"v1\"", total: nil, route: "", labels: BodyLabels())
                #expect(write(partial.descriptor, "abcd", 4) == 4)
                let path = partial.path
                partial.close(discard: false)
                return path
            }
            let cached = try leave("http://ann:pw@example.test/cached.flac")
            let notCached = try leave("http://example.test/other.flac")
            let held = try leave("http://example.test/held.flac")
            let holder = open(held, O_RDONLY)
            defer { close(holder) }
            #expect(flock(holder, LOCK_EX) == 0)
            var asked: [String] = []

            let removed = PartialFile.removeStored(directory: directory.path) { urls in
                asked = urls
                return ["http://ann@example.test/cached.flac", "http://example.test/held.flac"]
            }

            // Asked once, with the URLs as the catalog keeps them (no password).
            #expect(Set(asked) == ["http://ann@example.test/cached.flac", "http://example.test/other.flac",
                                   "http://example.test/held.flac"])
            #expect(removed == 2)
            #expect(!FileManager.default.fileExists(atPath: cached) && !FileManager.default.fileExists(atPath: cached + ".validator"))
            #expect(FileManager.default.fileExists(atPath: notCached) && FileManager.default.fileExists(atPath: notCached + ".validator"))
            #expect(FileManager.default.fileExists(atPath: held))
        }
    }

    @Test func newPartialsAreSpreadOverSixteenShardDirectories() async throws {
        try await TemporaryDirectory.with { directory in
            var shards = Set<String>()
            for index in 0..<200 {
                let partial = try PartialFile(directory: directory.path, url: "http://example.test/\(index).jpg")
                let key = PartialFile.key(for: "http://example.test/\(index).jpg")
                #expect(partial.path == "\(directory.path)/\(key.prefix(1))/\(key).part")
                shards.insert(String(key.prefix(1)))
                partial.close(discard: true)
            }
            #expect(shards.count == 16)
            #expect(Set(try FileManager.default.contentsOfDirectory(atPath: directory.path)) == shards)
            #expect(partialDirectoryFiles(directory.path).isEmpty)
        }
    }

    @Test func theKeyIsTheURLsSHA256() {
        // Partials left by earlier versions are found by this name.
        let url = "http://example.test/sound.flac"
        #expect(PartialFile.key(for: url) == SHA256.hash(data: Data(url.utf8)).hexString.prefix(40))
    }
}

