import Crypto
import Foundation
import Testing
import TestOrigin
import TestSupport

/// Interruptions and several processes on one cache.
@Suite struct SharedCacheTests {
    private func files(in directory: String) -> [String] {
        partialDirectoryFiles(directory)
    }

    /// Waits (30 s at most) until the cache's `tmp/` holds a partial of
    /// `bytes` or more; returns its name (relative to `tmp/`), or the last
    /// partial seen if none grew that far.
    private func partial(in cache: String, reaching bytes: Int) async throws -> String? {
        var found: String?
        for _ in 0..<3000 {
            found = files(in: cache + "/tmp").first { $0.hasSuffix(".part") }
            if let name = found, let size = try? FileManager.default.attributesOfItem(atPath: cache + "/tmp/" + name)[.size] as? Int,
               size >= bytes { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        return found
    }

    /// Starts `get` of `before` (URLs the origin has already) and then of a
    /// body of `size` bytes at `path` that stalls for a minute after
    /// `stallAfter` bytes, and returns once `reaching` bytes of it are on
    /// the disk: the transfer is mid-body whenever the test gets round to
    /// stopping it.
    private func startStallingGet(_ origin: TestOrigin, cache: String, before: [String] = [], path: String,
                                  size: Int, stallAfter: Int, seed: UInt64, reaching: Int) async throws -> RunningCommand {
        origin.addResource(path, data: soundFixtureBytes(count: size, seed: seed))
        origin.setFault(path, .stallAfter(bytes: stallAfter, seconds: 60), times: 1)
        let running = try BuiltProducts.start(["get", "--cache", cache, "--stall-timeout", "300"] + before + [origin.url(path)])
        _ = try await partial(in: cache, reaching: reaching)
        return running
    }

    @Test func ctrlCStopsWithStatus130AndTheNextRunResumes() async throws {
        try await withOrigin { origin, directory in
            let cache = directory.appending("cache")
            let running = try await startStallingGet(origin, cache: cache, path: "/walk.wav", size: 3_000_000,
                                                     stallAfter: 1_000_000, seed: 1, reaching: 500_000)
            running.interrupt()
            let interrupted = await running.wait()

            #expect(interrupted.status == 130)
            #expect(interrupted.stderr.contains("; interrupted with 1 left to fetch\n"), "\(interrupted.stderr)")
            // The million bytes kept to resume were received in this run, and it says so.
            #expect(interrupted.stderr.contains("0 downloaded, 0 already cached, 0 failed (976.6 KiB received in "), "\(interrupted.stderr)")
            #expect(files(in: cache + "/tmp").contains { $0.hasSuffix(".part") })

            origin.clearFaults()
            let resumed = try await BuiltProducts.run(["get", "--cache", cache, "--progress", "json", origin.url("/walk.wav")])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            let range = try #require(origin.requests(for: "/walk.wav").last?.header("range"))
            #expect(range.hasPrefix("bytes=") && range != "bytes=0-")
            #expect(files(in: cache + "/tmp").isEmpty)
        }
    }

    /// Starts `get` of a small body (`/done.jpg`) and a long one that stalls
    /// after 1 MB (`/long.wav`), and returns once half a megabyte of the long
    /// one is on the disk: a run with something finished and a partial to keep.
    private func runStoppingMidDownload(_ origin: TestOrigin, cache: String) async throws -> RunningCommand {
        origin.addResource("/done.jpg", data: fixtureBytes(count: 20_000, seed: 71))
        return try await startStallingGet(origin, cache: cache, before: [origin.url("/done.jpg")], path: "/long.wav",
                                          size: 3_000_000, stallAfter: 1_000_000, seed: 72, reaching: 500_000)
    }

    /// A stop signal stores what finished and keeps the partial (killed
    /// outright, a run lost the finished body with the process). One action
    /// often sends its signal twice within microseconds (a closed terminal's
    /// SIGHUP; `timeout -s INT`, to the child and then its group): that is
    /// one stop, not a second one that quits at once and leaves what
    /// finished unrecorded.
    @Test(arguments: [(SIGTERM, 1), (SIGHUP, 1), (SIGHUP, 2), (SIGINT, 2)])
    func aStopStoresWhatFinishedAndKeepsThePartial(signal: Int32, times: Int) async throws {
        try await withOrigin { origin, directory in
            let cache = directory.appending("cache")
            let running = try await runStoppingMidDownload(origin, cache: cache)

            for _ in 0..<times { running.send(signal) }
            let stopped = await running.wait()

            #expect(stopped.status == 130)
            #expect(!stopped.stderr.contains("interrupted again"), "\(stopped.stderr)")
            // A second SIGINT the handler saw on its own gets a note on how to quit at once.
            let lines = stopped.stderrLines.filter { !$0.hasPrefix("mediafetch: note: stopping: what finished is being stored") }
            #expect(lines.first?.hasPrefix("1 downloaded, 0 already cached, 0 failed (") == true, "\(stopped.stderr)")
            #expect(stopped.stderr.contains("interrupted with 1 left to fetch"), "\(stopped.stderr)")
            let listed = try await BuiltProducts.run(["list", "--cache", cache, "--format", "json"])
            #expect(listed.stdout.contains(origin.url("/done.jpg")))
            #expect(files(in: cache + "/tmp").contains { $0.hasSuffix(".part") })
        }
    }

    /// A run killed while another process cached the same URL left its
    /// partial to wait out the sweep's week: the next run removes it, since
    /// nothing would resume it.
    @Test func aPartialWhoseURLWasCachedSinceIsRemoved() async throws {
        try await withOrigin { origin, directory in
            let cache = directory.appending("cache")
            let killed = try await startStallingGet(origin, cache: cache, path: "/walk.wav", size: 1_000_000,
                                                    stallAfter: 300_000, seed: 75, reaching: 200_000)
            let left = try await partial(in: cache, reaching: 200_000)
            killed.send(SIGKILL)
            _ = await killed.wait()
            let name = try #require(left)
            let kept = directory.appending("kept")
            try FileManager.default.createDirectory(atPath: kept, withIntermediateDirectories: true)
            for suffix in ["", ".validator"] {
                try FileManager.default.copyItem(atPath: cache + "/tmp/" + name + suffix, toPath: kept + "/p" + suffix)
            }
            // Another process caches the URL; the killed run's partial is back where it left it.
            let finished = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/walk.wav")])
            #expect(finished.status == 0, "\(finished.stderr)")
            for suffix in ["", ".validator"] {
                try FileManager.default.copyItem(atPath: kept + "/p" + suffix, toPath: cache + "/tmp/" + name + suffix)
            }

            let next = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/walk.wav")])

            #expect(next.status == 0, "\(next.stderr)")
            #expect(partialDirectoryFiles(cache + "/tmp").isEmpty)
        }
    }

    /// A run killed (kill -9) after moving bodies into the store and before
    /// recording their rows (here: while another program holds the
    /// catalog's lock) leaves the rows for the next run, which records them
    /// and fetches none of those URLs again. They were all fetched again:
    /// the objects were there, but nothing said which URL each was.
    @Test func aRunKilledBeforeRecordingItsRowsLeavesThemToTheNext() async throws {
        try await withOrigin { origin, directory in
            let cache = directory.appending("cache")
            origin.addResource("/seed.jpg", data: fixtureBytes(count: 3_000, seed: 299))
            let seeded = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/seed.jpg")])
            #expect(seeded.status == 0, "\(seeded.stderr)")
            var hashes: [String: String] = [:]
            for index in 0..<12 {
                let body = fixtureBytes(count: 4_000 + index, seed: UInt64(300 + index))
                origin.addResource("/k\(index).jpg", data: body)
                hashes["/k\(index).jpg"] = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
            }
            let holder = try SpawnedProcess.holdingWriteLock(ofDatabase: cache + "/catalog.sqlite", seconds: 50)
            defer { kill(holder.pid, SIGKILL) }

            let killed = try BuiltProducts.start(["get", "--cache", cache] + hashes.keys.sorted().map(origin.url))
            // Bodies moved into the store, their rows waiting for the lock: as many as
            // will be (the groups after the first two wait to be moved), for half a second.
            var inStore: Set<String> = []
            var steady = 0
            while steady < 50 {
                try await Task.sleep(for: .milliseconds(10))
                let now = Set(try objectPaths(inCache: cache).compactMap { $0.split(separator: "/").last.map(String.init) })
                steady = now == inStore && now.count > 1 ? steady + 1 : 0
                inStore = now
            }
            killed.send(SIGKILL)
            _ = await killed.wait()
            kill(holder.pid, SIGKILL)
            _ = holder.waitForExit()

            let next = try await BuiltProducts.run(["get", "--cache", cache] + hashes.keys.sorted().map(origin.url))

            let moved = hashes.filter { inStore.contains($0.value) }.keys.sorted()
            #expect(!moved.isEmpty)
            #expect(next.status == 0, "\(next.stderr)")
            // Not one of them asked for again.
            #expect(moved.filter { origin.requests(for: $0).count != 1 } == [])
            if moved.count == hashes.count { #expect(next.stderr.contains("0 downloaded, 12 already cached"), "\(next.stderr)") }
            #expect(partialDirectoryFiles(cache + "/unrecorded").isEmpty)
        }
    }

    @Test func twoProcessesShareOneCache() async throws {
        try await withOrigin { origin, directory in
            var urls: [String] = []
            for index in 0..<40 {
                origin.addResource("/p/\(index).jpg", data: fixtureBytes(count: 30_000 + index, seed: UInt64(index)))
                urls.append(origin.url("/p/\(index).jpg"))
            }
            origin.addResource("/big.bin", data: fixtureBytes(count: 1_500_000, seed: 99))
            origin.setFault("/big.bin", .slow(bytesPerSecond: 3_000_000))
            urls.append(origin.url("/big.bin"))
            let input = try directory.writingList(urls)
            let cache = directory.appending("cache")

            // Both processes fetch the same list into one cache at the same time.
            let first = try BuiltProducts.start(["get", "--cache", cache, "-i", input, "--collection", "a"])
            let second = try BuiltProducts.start(["get", "--cache", cache, "-i", input, "--collection", "b"])
            let results = [await first.wait(), await second.wait()]

            for result in results { #expect(result.status == 0, "\(result.stderr)") }
            let stats = try JSONSerialization.jsonObject(with: Data(try await BuiltProducts.run(
                ["stats", "--cache", cache, "--format", "json"]).stdout.utf8)) as? [String: Any]
            #expect(stats?["objects"] as? Int == 41)
            #expect(stats?["items"] as? Int == 82)
            #expect(files(in: cache + "/tmp").isEmpty)
            let verify = try await BuiltProducts.run(["list", "--cache", cache, "--format", "json"])
            let entries = try #require(try JSONSerialization.jsonObject(with: Data(verify.stdout.utf8)) as? [[String: Any]])
            for entry in entries {
                let path = try #require(entry["path"] as? String)
                #expect((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) == entry["size"] as? Int)
            }
        }
    }

    /// A second process does not fetch a URL the first is downloading into
    /// the same cache: it fetches the rest of its list, waits for the first
    /// to store it, and counts it as cached (each fetched it before).
    @Test func aSecondProcessWaitsForAURLTheFirstIsDownloading() async throws {
        try await withOrigin { origin, directory in
            // Given a server that holds its answer for /long.wav until the test lets it go
            let gate = origin.holdAnswers("/long.wav", body: soundFixtureBytes(count: 2_000_000, seed: 43))
            let small = origin.addFixtures(count: 3, size: 4000, firstSeed: 120)
            let smallPaths = try small.map { try #require(URL(string: $0)).path }
            let cache = directory.appending("cache")
            func waitFor(_ done: () -> Bool) async throws {
                for _ in 0..<6000 where !done() { try await Task.sleep(for: .milliseconds(10)) }
            }

            // When a first process asks for it (its partial made and locked), then a second for it and three more
            let first = try BuiltProducts.start(["get", "--cache", cache, "--stall-timeout", "300", origin.url("/long.wav")])
            try await waitFor { !origin.requests(for: "/long.wav").isEmpty }
            let second = try BuiltProducts.start(["get", "--cache", cache, "--collection", "b", "--progress", "json",
                                                  origin.url("/long.wav")] + small)
            // and the answer comes once the second has fetched the other three
            try await waitFor { smallPaths.allSatisfy { !origin.requests(for: $0).isEmpty } }
            try await Task.sleep(for: .milliseconds(600))
            gate.signal()
            gate.signal()
            let results = [await first.wait(), await second.wait()]

            // Then the first stored it, and the second counted it as cached without asking for it
            #expect(results[0].status == 0, "\(results[0].stderr)")
            #expect(results[1].status == 0, "\(results[1].stderr)")
            let finished = results[1].stderr.split(separator: "\n").first { $0.contains(#""event":"finished""#) } ?? ""
            #expect(finished.contains(#""downloaded":3,"#) && finished.contains(#""skipped":1,"#), "\(results[1].stderr)")
            // and said meanwhile what it was waiting for
            #expect(results[1].stderr.contains(#""waitingForOtherProcess":1"#), "\(results[1].stderr)")
            #expect(origin.requests(for: "/long.wav").count == 1)
            let listed = try await BuiltProducts.run(["list", "--cache", cache, "--collection", "b", "--format", "csv"])
            #expect(listed.stdout.contains(origin.url("/long.wav")), "\(listed.stdout)")
            #expect(files(in: cache + "/tmp").isEmpty)
        }
    }

    /// A body that comes slowly reaches its partial 256 KiB at a time: the
    /// first process marks the partials it holds alive, and the second waits
    /// for it rather than taking an unchanged partial for a stalled one
    /// (it fetched the URL again after its stall timeout, a second request).
    @Test func aSecondProcessWaitsForASlowDownloadOfTheFirst() async throws {
        try await withOrigin { origin, directory in
            // Given a body of 300 KB that comes at 60 KB/s
            origin.addResource("/slow.wav", data: soundFixtureBytes(count: 300_000, seed: 44))
            origin.setFault("/slow.wav", .slow(bytesPerSecond: 60_000))
            let cache = directory.appending("cache")

            // When a first process downloads it, and a second that takes 1 s
            // without bytes for a stall asks for it once the first has begun
            let first = try BuiltProducts.start(["get", "--cache", cache, origin.url("/slow.wav")])
            for _ in 0..<3000 where origin.requests(for: "/slow.wav").isEmpty {
                try await Task.sleep(for: .milliseconds(10))
            }
            let second = try await BuiltProducts.run(["get", "--cache", cache, "--stall-timeout", "1", "--progress", "json",
                                                      origin.url("/slow.wav")])
            let firstResult = await first.wait()

            // Then the second waited for the first to store it, and counted it as cached
            #expect(firstResult.status == 0, "\(firstResult.stderr)")
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stderr.contains(#""skipped":1,"#), "\(second.stderr)")
            #expect(origin.requests(for: "/slow.wav").count == 1)
        }
    }

    /// A process that takes URLs over from a stopped one (its partials
    /// neither grow nor are marked alive) fetches them as many at once as
    /// it has slots: it fetched them one after another (35 s for eight
    /// bodies of 4 s at --jobs 4, now 11 s), a pause's one `startNext`
    /// standing for every place given back.
    @Test func urlsTakenOverFromAStoppedProcessAreFetchedTogether() async throws {
        try await withOrigin { origin, directory in
            // Given eight URLs whose answers the origin holds until the test lets them go
            let paths = (0..<8).map { "/over\($0).wav" }
            let gates = paths.enumerated().map { origin.holdAnswers($1, body: soundFixtureBytes(count: 5_000, seed: 300 + UInt64($0))) }
            let urls = paths.map { origin.url($0) }
            let cache = directory.appending("cache")
            func asked() -> Int { paths.filter { !origin.requests(for: $0).isEmpty }.count }

            // When a first process (all eight partials in its batch) is stopped once it has
            // asked for one (a host runs one transfer until it answers), and a second (4 slots)
            // takes them over
            let first = try BuiltProducts.start(["get", "--cache", cache, "--jobs", "2"] + urls)
            for _ in 0..<6000 where asked() < 1 { try await Task.sleep(for: .milliseconds(10)) }
            first.send(SIGSTOP)
            let second = try BuiltProducts.start(["get", "--cache", cache, "--jobs", "4", "--stall-timeout", "1"] + urls)
            for _ in 0..<6000 where asked() < 5 { try await Task.sleep(for: .milliseconds(10)) }
            let askedWhileHeld = asked()
            // Every request held is answered, and every later one: each attempt that stalled
            // meanwhile (1 s) left a request waiting here, and with four answers a URL, one asked
            // five times under load kept its live attempt held until its retries ran out.
            for gate in gates { for _ in 0..<64 { gate.signal() } }
            let result = await second.wait()
            first.send(SIGKILL)
            first.send(SIGCONT)
            _ = await first.wait()

            // Then the second asked for four of the others at once, and stored all eight
            #expect(askedWhileHeld >= 5)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.contains("8 downloaded"), "\(result.stderr)")
        }
    }

    /// An ordinary user's second process must not touch the read-only
    /// partial the first one is writing: its owner trusts that mode when it
    /// stores the body. The second waits while the partial grows, then
    /// (it stalls) downloads privately.
    @Test(.enabled(if: BuiltProducts.canRunAsAnotherUser, "needs root and setpriv to run as nobody"))
    func aSecondProcessLeavesThePartialInUseAlone() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/long.wav", data: soundFixtureBytes(count: 2_000_000, seed: 41))
            origin.setFault("/long.wav", .stallAfter(bytes: 700_000, seconds: 60), times: 1)
            let user = BuiltProducts.User.nobody
            let cache = try directory.cache(ownedBy: user)
            let arguments = ["get", "--cache", cache, "--stall-timeout", "300", origin.url("/long.wav")]

            let first = try BuiltProducts.start(arguments, as: user)
            func partial() -> (name: String, size: Int)? {
                guard let name = files(in: cache + "/tmp").first(where: { $0.hasSuffix(".part") }) else { return nil }
                let size = (try? FileManager.default.attributesOfItem(atPath: cache + "/tmp/" + name)[.size] as? Int) ?? 0
                return (name, size)
            }
            // (Waited for as long as a loaded machine takes: 30 s were not always enough in a full CI run.)
            #expect(await waitUntil(atMost: .seconds(120)) { (partial()?.size ?? 0) >= 500_000 }, "\(String(describing: partial()))")
            let name = try #require(partial()?.name)
            let second = try await BuiltProducts.run(arguments.map { $0 == "300" ? "2" : $0 }, as: user)
            #expect(partial()?.name == name)
            let modeInUse = try permissions(of: "\(cache)/tmp/\(name)")
            first.interrupt()
            let firstResult = await first.wait()

            #expect(second.status == 0, "\(second.stderr)")
            #expect(modeInUse == 0o444)
            #expect(firstResult.status == 130)
            #expect(try objectModes(inCache: cache) == [0o444])
        }
    }

    @Test func processesStartedTogetherOnANewCacheAllOpenIt() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/one.jpg", data: fixtureBytes(count: 5_000, seed: 3))
            // Eight processes create the same new cache at the same moment. The
            // race this guards against (SQLite's switch to WAL reporting "database
            // is locked" without waiting) hit about one round in twenty, so
            // several rounds are run, each on a new cache.
            for round in 0..<5 {
                let cache = directory.appending("cache-\(round)")
                let running = try (0..<8).map { index in
                    try BuiltProducts.start(["get", "--cache", cache, "--collection", "c\(index)", origin.url("/one.jpg")])
                }
                var results: [CommandResult] = []
                for process in running { results.append(await process.wait()) }
                for result in results {
                    #expect(result.status == 0, "\(result.stderr)")
                }
                let stats = try JSONSerialization.jsonObject(with: Data(try await BuiltProducts.run(
                    ["stats", "--cache", cache, "--format", "json"]).stdout.utf8)) as? [String: Any]
                #expect(stats?["objects"] as? Int == 1)
                #expect(stats?["items"] as? Int == 8)
            }
        }
    }

    @Test func aRateLimitedDownloadStillCompletes() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/r.bin", data: fixtureBytes(count: 200_000, seed: 5))
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--limit-rate", "1M",
                                                "--max-filesize", "1M", origin.url("/r.bin")])
            #expect(result.status == 0, "\(result.stderr)")
        }
    }

    /// Under `nohup` (SIGHUP ignored from the start) a closed terminal must not stop the run.
    @Test func aSignalIgnoredAtStartStaysIgnored() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/walk.wav", data: soundFixtureBytes(count: 300_000, seed: 12))
            origin.setFault("/walk.wav", .slow(bytesPerSecond: 200_000))
            let cache = directory.appending("cache")
            let running = try BuiltProducts.start(["get", "--cache", cache, origin.url("/walk.wav")], ignoring: ["HUP"])
            // Mid-transfer: neither the early handler nor the run's own may have taken it over.
            for _ in 0..<500 where !files(in: cache + "/tmp").contains(where: { $0.hasSuffix(".part") }) {
                try await Task.sleep(for: .milliseconds(10))
            }
            running.send(SIGHUP)
            let result = await running.wait()

            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.contains("1 downloaded"), "\(result.stderr)")
        }
    }

    @Test func aBodyOverMaxFilesizeFailsWithoutRetrying() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/huge.bin", data: fixtureBytes(count: 300_000, seed: 6))
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--max-filesize", "100K",
                                                origin.url("/huge.bin")])
            #expect(result.status == 1)
            #expect(result.stderrLines.contains { $0.hasSuffix("larger than the --max-filesize limit of 100.0 KiB: the server gave its size as 293.0 KiB") }, "\(result.stderr)")
            #expect(origin.requests(for: "/huge.bin").count == 1)
        }
    }
}
