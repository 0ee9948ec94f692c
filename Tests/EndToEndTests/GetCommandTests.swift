import Crypto
import Foundation
import GRDB
import Testing
import TestOrigin
import TestSupport

/// The built `mediafetch` binary against a loopback origin, each test with its own cache.
@Suite struct GetCommandTests {
    private func statsJSON(_ cache: String) async throws -> [String: Any] {
        let result = try await BuiltProducts.run(["stats", "--cache", cache, "--format", "json"])
        #expect(result.status == 0, "stats failed: \(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    private func jsonLines(_ stderr: String) -> [[String: Any]] {
        stderr.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    private static let notADatabase = "not a database\n"

    /// A cache whose catalog file holds text, not SQLite.
    private func cacheWithACatalogThatIsNotADatabase(in directory: TemporaryDirectory) throws -> String {
        let cache = directory.appending("cache")
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        try Self.notADatabase.write(toFile: cache + "/catalog.sqlite", atomically: true, encoding: .utf8)
        return cache
    }

    /// The run ended with exit 3 and one line naming the catalog of `cache`.
    private func expectCatalogCannotOpen(_ result: CommandResult, cache: String) {
        #expect(result.status == 3)
        #expect(result.stderrLines.count == 1, "\(result.stderrLines)")
        #expect(result.stderr.hasPrefix("mediafetch: cannot open the catalog at \(cache)/catalog.sqlite: "))
    }

    /// A list piped in (`-i -`), then `stats` as a person reads it, and as JSON.
    @Test func aListOnStandardInputIsFetchedAndStatsShowsTheCache() async throws {
        try await withOrigin { origin, directory in
            let bytes = fixtureBytes(count: 3000, seed: 64)
            origin.addResource("/a.jpg", data: bytes)
            origin.addResource("/copy.jpg", data: bytes)
            origin.addResource("/b.jpg", data: fixtureBytes(count: 1000, seed: 65))
            let cache = directory.appending("cache")

            let fetched = try await BuiltProducts.runShell(
                #"printf '%s\n' '# photos' "$A" "$COPY" '' "$B" | "$MEDIAFETCH" get --cache "$CACHE" -i - --collection trip"#,
                environment: ["CACHE": cache, "A": origin.url("/a.jpg"), "COPY": origin.url("/copy.jpg"), "B": origin.url("/b.jpg")])

            #expect(fetched.status == 0, "\(fetched.stderr)")
            #expect(fetched.stderr.hasPrefix("3 downloaded, 0 already cached, 0 failed"), "\(fetched.stderr)")
            let table = try await BuiltProducts.run(["stats", "--cache", cache])
            #expect(table.status == 0)
            #expect(table.stdout == """
                cache                    \(cache)
                objects                  2 (3.9 KiB)
                items                    3 (6.8 KiB): 3 files
                collections              1
                sources                  3 (0 failed last time)
                saved by de-duplication  2.9 KiB

                """)
            let json = try await statsJSON(cache)
            #expect(json["cache"] as? String == cache)
            #expect(json.compactMapValues { $0 as? Int } == [
                "objects": 2, "bytes": 4000, "items": 3, "logicalBytes": 7000, "collections": 1, "sources": 3,
                "failedSources": 0, "bytesSavedByDeduplication": 3000, "missingObjects": 0, "missingBytes": 0, "awaitingRecord": 0,
                "partialDownloads": 0, "partialBytes": 0, "resumablePartials": 0,
                "photoItems": 0, "soundItems": 0, "fileItems": 3,
            ])
        }
    }

    /// A `~` the shell left (quoted, or from a unit file) names a directory,
    /// as it does to curl: `get` once wrote to the home directory, where
    /// `list` and `stats` did not look.
    @Test func aTildeTheShellLeftNamesADirectoryForEveryCommand() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 2000, seed: 67))
            let home = directory.appending("home")
            let work = directory.appending("work")
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            let environment = ["HOME": home, "WORK": work, "URL": origin.url("/a.jpg")]

            let fetched = try await BuiltProducts.runShell(#"cd "$WORK" && "$MEDIAFETCH" get --cache '~/photos' "$URL""#,
                                                           environment: environment)
            let listed = try await BuiltProducts.runShell(#"cd "$WORK" && "$MEDIAFETCH" list --cache '~/photos' --format csv"#,
                                                          environment: environment)
            let fromVariable = try await BuiltProducts.runShell(#"cd "$WORK" && MEDIAFETCH_CACHE='~/photos' "$MEDIAFETCH" stats"#,
                                                                environment: environment)

            #expect(fetched.status == 0, "\(fetched.stderr)")
            #expect(FileManager.default.fileExists(atPath: work + "/~/photos/catalog.sqlite"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: home).isEmpty)
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(listed.stdout.contains(origin.url("/a.jpg")))
            #expect(fromVariable.status == 0, "\(fromVariable.stderr)")
            #expect(fromVariable.stdout.hasPrefix("cache                    \(work)/~/photos\n"), "\(fromVariable.stdout)")
        }
    }

    /// A directory given as a cache by mistake (`--cache ~/thesis`) is
    /// refused, not filled with a cache's files, and nothing in it is
    /// touched; one that only has a `tmp/` of its own keeps what is in it.
    @Test func aDirectoryThatIsNotACacheKeepsItsFiles() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 2000, seed: 66))
            let old = Date().addingTimeInterval(-3 * 86_400)
            let project = directory.appending("thesis")
            try FileManager.default.createDirectory(atPath: project + "/tmp/c", withIntermediateDirectories: true)
            for name in ["notes.txt", "tmp/draft.txt", "tmp/c/chapter1.tex"] {
                try Data(name.utf8).write(to: URL(fileURLWithPath: project + "/" + name))
                try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: project + "/" + name)
            }

            let refused = try await BuiltProducts.run(["get", "--cache", project, origin.url("/a.jpg")])

            #expect(refused.status == 3)
            #expect(refused.stderrLines == ["mediafetch: \(project) is not a mediafetch cache (it has no catalog.sqlite) and "
                + "holds other files ('notes.txt'): give a new or empty directory for a cache"])
            #expect(try FileManager.default.contentsOfDirectory(atPath: project).sorted() == ["notes.txt", "tmp"])
            #expect(try FileManager.default.subpathsOfDirectory(atPath: project + "/tmp").sorted()
                    == ["c", "c/chapter1.tex", "draft.txt"])
            #expect(origin.requests(for: "/a.jpg").isEmpty)

            // Only a tmp/ of its own: a cache is made there, and the old files in tmp/ are not swept.
            try FileManager.default.removeItem(atPath: project + "/notes.txt")
            let made = try await BuiltProducts.run(["get", "--cache", project, origin.url("/a.jpg")])
            #expect(made.status == 0, "\(made.stderr)")
            #expect(FileManager.default.contents(atPath: project + "/tmp/draft.txt") == Data("tmp/draft.txt".utf8))
            #expect(FileManager.default.contents(atPath: project + "/tmp/c/chapter1.tex") == Data("tmp/c/chapter1.tex".utf8))

            // A disk of its own mounted as the cache has a lost+found, and one used elsewhere
            // hidden files and Windows' folders: those are no one else's.
            let disk = directory.appending("disk")
            for name in ["lost+found", "System Volume Information", ".Trash-1000"] {
                try FileManager.default.createDirectory(atPath: disk + "/" + name, withIntermediateDirectories: true)
            }
            try Data().write(to: URL(fileURLWithPath: disk + "/.DS_Store"))
            let onDisk = try await BuiltProducts.run(["get", "--cache", disk, origin.url("/a.jpg")])
            #expect(onDisk.status == 0, "\(onDisk.stderr)")
        }
    }

    @Test func getStoresEveryURLAndListShowsThem() async throws {
        try await withOrigin { origin, directory in
            let first = fixtureBytes(count: 120_000, seed: 1)
            origin.addResource("/a.jpg", data: first)
            origin.addResource("/b.mp3", data: soundFixtureBytes(count: 50_000, seed: 2), contentType: "audio/mpeg")
            let cache = directory.appending("cache")

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--collection", "bratislava",
                                                origin.url("/a.jpg"), origin.url("/b.mp3")])

            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.contains("2 downloaded, 0 already cached, 0 failed"))
            let entries = try await listJSON(cache)
            #expect(entries.count == 2)
            let entry = try #require(entries.first { $0["url"] as? String == origin.url("/a.jpg") })
            #expect(entry["collection"] as? String == "bratislava")
            // Its name says a photo, but its bytes are no image's, and its type claims none: a file.
            #expect(entry["kind"] as? String == "file")
            #expect(entry["size"] as? Int == 120_000)
            // A sound, with what libsndfile found in it.
            let sound = try #require(entries.first { $0["url"] as? String == origin.url("/b.mp3") })
            #expect(sound["kind"] as? String == "sound")
            #expect(sound["format"] as? String == "wav")
            #expect(sound["sampleRate"] as? Int == 44_100)
            #expect(sound["channels"] as? Int == 2)
            #expect(sound["durationSeconds"] as? Double == 0.283)
            #expect(entry.keys.contains("title"))
            let hash = try #require(entry["hash"] as? String)
            let path = try #require(entry["path"] as? String)
            #expect(path == "\(cache)/objects/sha256/\(hash.prefix(2))/\(hash)")
            #expect(FileManager.default.contents(atPath: path) == first)
            // Objects are read-only: partials are created so, and the store leaves their mode alone.
            #expect(try objectModes(inCache: cache) == [0o444])
        }
    }

    @Test func aSecondRunDownloadsNothing() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 10_000, seed: 3))
            let cache = directory.appending("cache")
            let arguments = ["get", "--cache", cache, origin.url("/a.jpg")]
            #expect(try await BuiltProducts.run(arguments).status == 0)

            let again = try await BuiltProducts.run(arguments)

            #expect(again.status == 0)
            #expect(again.stderr.contains("0 downloaded, 1 already cached"))
            #expect(origin.requests(for: "/a.jpg").count == 1)
        }
    }

    @Test func theCacheComesFromTheEnvironmentWhenNoFlagIsGiven() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/e", data: Data("env".utf8))
            let cache = directory.appending("from-env")
            let result = try await BuiltProducts.run(["get", origin.url("/e")], environment: ["MEDIAFETCH_CACHE": cache])
            #expect(result.status == 0)
            #expect(FileManager.default.fileExists(atPath: cache + "/catalog.sqlite"))
        }
    }

    @Test func theCacheMayBeGivenBeforeTheCommand() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/first.jpg", data: fixtureBytes(count: 2000, seed: 40))
            let cache = directory.appending("cache")
            let got = try await BuiltProducts.run(["--cache", cache, "get", origin.url("/first.jpg")])
            #expect(got.status == 0)
            let stats = try await BuiltProducts.run(["--cache=\(cache)", "stats", "--format", "json"])
            #expect(stats.status == 0)
            let fields = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
            #expect(fields["objects"] as? Int == 1)
        }
    }

    @Test func failedItemsAreNamedAndTheRestStayCached() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/ok.jpg", data: fixtureBytes(count: 1000, seed: 4))
            let cache = directory.appending("cache")

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0",
                                                origin.url("/ok.jpg"), origin.url("/gone.jpg")])

            #expect(result.status == 1)
            #expect(result.stderrLines.contains("mediafetch: failed \(origin.url("/gone.jpg")): HTTP 404 Not Found"))
            #expect(try await listJSON(cache).map { $0["url"] as? String } == [origin.url("/ok.jpg")])
            #expect(try await statsJSON(cache)["failedSources"] as? Int == 1)
        }
    }

    @Test func jsonProgressIsOneJSONObjectALineFailuresIncluded() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/ok.jpg", data: fixtureBytes(count: 1000, seed: 52))
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--retries", "0",
                                                      "--progress", "json", origin.url("/ok.jpg"), origin.url("/gone.jpg")])
            #expect(result.status == 1)
            let lines = result.stderrLines
            #expect(jsonLines(result.stderr).count == lines.count, "not JSON: \(lines.filter { !$0.hasPrefix("{") })")
            let failed = jsonLines(result.stderr).filter { $0["event"] as? String == "failed" }
            #expect(failed.count == 1)
            #expect(failed.first?["url"] as? String == origin.url("/gone.jpg"))
            #expect(failed.first?["reason"] as? String == "HTTP 404 Not Found")
            // The last progress line is the final count: nothing running, every byte counted.
            let last = try #require(jsonLines(result.stderr).last { $0["event"] as? String == "progress" })
            #expect((last["active"] as? [Any])?.isEmpty == true)
            #expect(last["bytes"] as? Int == 1000)
        }
    }

    /// A host that never answers is named in the progress (`failingHost`)
    /// while its URL waits to retry, and not once that URL has failed for
    /// good: the status line named it for two seconds more, beside "1 failed".
    @Test func aFailingHostIsNamedUntilItsLastURLFails() async throws {
        try await withOrigin { origin, directory in
            // Twelve seconds of download beside it, so that progress goes on after the
            // failure (its five attempts take 3.75 to 7.5 s; it is named from 3 s on).
            origin.addResource("/long.bin", data: fixtureBytes(count: 192_000, seed: 53))
            origin.setFault("/long.bin", .slow(bytesPerSecond: 16_000))
            let dead = "http://127.0.0.1:1/a.jpg"
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                      "--progress", "json", origin.url("/long.bin"), dead])

            #expect(result.status == 1, "\(result.stderr)")
            let events = jsonLines(result.stderr)
            let failure = try #require(events.firstIndex { $0["event"] as? String == "failed" }, "\(result.stderr)")
            #expect(events[failure]["url"] as? String == dead)
            func namesTheDeadHost(_ event: [String: Any]) -> Bool {
                (event["failingHost"] as? [String: Any])?["host"] as? String == "127.0.0.1:1"
            }
            #expect(events[..<failure].contains(where: namesTheDeadHost), "\(result.stderr)")
            // (The first after it may be a snapshot taken as the last attempt ended, before the
            // failure was final; the grace named it for a second, some four more.)
            let after = events[(failure + 1)...].filter { $0["event"] as? String == "progress" }.dropFirst()
            #expect(after.count >= 4, "\(result.stderr)")
            #expect(!after.contains { $0["failingHost"] != nil }, "\(result.stderr)")
        }
    }

    /// A server that takes 2 connections and resets the rest: every URL
    /// arrives, and the run says once (as a note, and as a JSON event) that
    /// the host gets 2 at a time (once two tries of a third were turned away).
    @Test(arguments: ["auto", "json"])
    func aHostThatTurnsConnectionsAwayIsToldOfOnceAndLosesNothing(progress: String) async throws {
        try await withOrigin { origin, directory in
            origin.limitConnections(to: 2)
            let urls = origin.addSlowPhotos(60, size: 3_000, seconds: 0.03)
            let cache = directory.appending("cache")
            let result = try await BuiltProducts.run(["get", "--cache", cache, "--per-host", "8", "--progress", progress] + urls)

            #expect(result.status == 0, "\(result.stderr)")
            #expect(try await statsJSON(cache)["objects"] as? Int == 60)
            let host = "127.0.0.1:\(origin.port)"
            if progress == "json" {
                let told = jsonLines(result.stderr).filter { $0["event"] as? String == "hostLimited" }
                #expect(told.count == 1, "\(result.stderr)")
                #expect(told.first?["host"] as? String == host)
                #expect(told.first?["connections"] as? Int == 2)
            } else {
                let notes = result.stderrLines.filter { $0.hasPrefix("mediafetch: note: ") }
                #expect(notes == ["mediafetch: note: \(host) takes 2 connections at a time and turns more away: "
                                  + "it gets 2 at a time while it does (one more is tried now and then)"])
            }
        }
    }

    /// A host that serves 5 requests a second and answers the rest 429:
    /// every URL arrives, and the run says once that the host is paused
    /// (a note, or a JSON event each time a pause begins).
    @Test(arguments: ["auto", "json"])
    func aRateLimitedHostIsToldOfOnceAndLosesNothing(progress: String) async throws {
        try await withOrigin { origin, directory in
            origin.limitRate(to: 5, per: 1)
            let urls = origin.addSlowPhotos(15, size: 3_000, seconds: 0.02)
            let cache = directory.appending("cache")
            let result = try await BuiltProducts.run(["get", "--cache", cache, "--progress", progress] + urls)

            #expect(result.status == 0, "\(result.stderr)")
            #expect(try await statsJSON(cache)["objects"] as? Int == 15)
            let host = "127.0.0.1:\(origin.port)"
            if progress == "json" {
                let paused = jsonLines(result.stderr).filter { $0["event"] as? String == "hostPaused" }
                #expect(!paused.isEmpty, "\(result.stderr)")
                #expect(paused.allSatisfy { $0["host"] as? String == host && ($0["seconds"] as? Double ?? 0) >= 1 }, "\(paused)")
            } else {
                let notes = result.stderrLines.filter { $0.hasPrefix("mediafetch: note: ") }
                #expect(notes == ["mediafetch: note: \(host) answered 429 Too Many Requests: its URLs wait 1 s, "
                                  + "then one goes first"])
            }
        }
    }

    /// Under `--retries 0` a lone URL answered 429 fails at once: the run
    /// says so, and no note says its URLs wait (there are none left).
    @Test func aLoneURLAnswered429UnderNoRetriesIsNotSaidToWait() async throws {
        try await withOrigin { origin, directory in
            origin.limitRate(to: 0, per: 2)
            let url = origin.addSlowPhotos(1, size: 3_000, seconds: 0)[0]
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--retries", "0", url])

            #expect(result.status == 1)
            #expect(result.stderrLines.filter { $0.hasPrefix("mediafetch: failed \(url): HTTP 429") }.count == 1, "\(result.stderr)")
            #expect(result.stderrLines.filter { $0.hasPrefix("mediafetch: note: ") } == [], "\(result.stderr)")
        }
    }

    /// A host that asks to wait two hours: mediafetch waits 10 min at most,
    /// so the host is given up at its first answers, every URL fails with one
    /// line saying why, and the summary names the host.
    @Test func aHostAskingToWaitHoursIsGivenUpAndEveryURLSaysWhy() async throws {
        try await withOrigin { origin, directory in
            origin.limitRate(to: 0, per: 3_600, retryAfter: 7_200)
            let urls = origin.addSlowPhotos(20, size: 3_000, seconds: 0.02)
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache")] + urls)

            #expect(result.status == 1)
            let host = "127.0.0.1:\(origin.port)"
            let failures = result.stderrLines.filter { $0.hasPrefix("mediafetch: failed ") }
            #expect(failures.count == 20, "\(result.stderr)")
            // Those whose own 429 gave the host up (or came in the same burst) say so too,
            // and are counted with it: the summary said "12 of them" of 20.
            // The first line says why; the others name the host only (20,000 URLs wrote it 20,000 times).
            #expect(failures.first?.hasSuffix(": given up: \(host) answered 429 Too Many Requests and asked to wait 2 h "
                                              + "(mediafetch waits 10 min at most); its URLs fail at once") == true, "\(failures)")
            #expect(failures.dropFirst().allSatisfy { $0.hasSuffix(": its host, \(host), is given up (as above)") }, "\(failures)")
            #expect(origin.requests().count <= 8)
            #expect(result.stderr.contains("0 downloaded, 0 already cached, 20 failed"), "\(result.stderr)")
            #expect(result.stderr.contains("20 of them at a host given up: \(host)"), "\(result.stderr)")
        }
    }

    /// An address written as other numbers is the same URL: fetched once,
    /// asked for with its host in dotted decimal, listed once.
    @Test func anAddressWrittenAnotherWayIsTheSameURL() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/pin.jpg", data: fixtureBytes(count: 3000, seed: 56))
            let cache = directory.appending("cache")
            let first = try await BuiltProducts.run(["get", "--cache", cache, "http://127.1:\(origin.port)/pin.jpg"])
            let second = try await BuiltProducts.run(["get", "--cache", cache, "http://0x7f.0.0.1:\(origin.port)/pin.jpg",
                                                      "http://127.0.0.1:\(origin.port)/pin.jpg"])
            let listed = try await BuiltProducts.run(["list", "--cache", cache, "--format", "csv"])

            #expect(first.status == 0, "\(first.stderr)")
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stderr.contains("0 downloaded, 1 already cached"), "\(second.stderr)")
            #expect(origin.requests(for: "/pin.jpg").map { $0.header("host") } == ["127.0.0.1:\(origin.port)"])
            #expect(listed.stdout.split(separator: "\n").filter { $0.contains("/pin.jpg") }.count == 1, "\(listed.stdout)")
            #expect(listed.stdout.contains("http://127.0.0.1:\(origin.port)/pin.jpg"))
        }
    }

    @Test func anInternationalHostNameWorksInAnyLocale() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/mapa.jpg", data: fixtureBytes(count: 4000, seed: 54))
            // *.localhost is loopback to libcurl; the name has to become xn--bcher-kva first.
            let url = "http://bücher.localhost:\(origin.port)/mapa.jpg"
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--retries", "0", url],
                                                     environment: ["LC_ALL": "C", "LANG": "C"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(origin.requests(for: "/mapa.jpg").first?.header("host") == "xn--bcher-kva.localhost:\(origin.port)")
            // Its ASCII form is the same URL: cached already, listed once, shown by its letters.
            let again = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                     "http://xn--bcher-kva.localhost:\(origin.port)/mapa.jpg"])
            #expect(again.stderr.contains("0 downloaded, 1 already cached"), "\(again.stderr)")
            #expect(origin.requests(for: "/mapa.jpg").count == 1)
            let table = try await BuiltProducts.run(["list", "--cache", directory.appending("cache")])
            let csv = try await BuiltProducts.run(["list", "--cache", directory.appending("cache"), "--format", "csv"])
            #expect(table.stdout.contains(url), "\(table.stdout)")
            #expect(csv.stdout.contains("http://xn--bcher-kva.localhost:\(origin.port)/mapa.jpg"), "\(csv.stdout)")
        }
    }

    @Test func aPasswordInAURLIsNotPrinted() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/private.jpg", data: fixtureBytes(count: 3000, seed: 55))
            let cache = directory.appending("cache")
            let port = origin.port
            let stored = try await BuiltProducts.run(["get", "--cache", cache, "--progress", "json",
                                                      "http://ann:hunter2@127.0.0.1:\(port)/private.jpg"])
            let failed = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0",
                                                      "http://ann:hunter2@127.0.0.1:\(port)/missing.jpg"])
            #expect(stored.status == 0)
            #expect(failed.status == 1)
            #expect(failed.stderrLines.contains("mediafetch: failed http://ann:***@127.0.0.1:\(port)/missing.jpg: HTTP 404 Not Found"))
            var shown = stored.stdout + stored.stderr + failed.stdout + failed.stderr
            for format in ["table", "json", "csv"] {
                shown += try await BuiltProducts.run(["list", "--cache", cache, "--format", format]).stdout
            }
            #expect(!shown.contains("hunter2"))
            #expect(origin.requests(for: "/private.jpg").first?.header("authorization") != nil)

            // Nor is it kept: the catalog knows the URL without it (the user
            // stays), and no file in the cache has the password's bytes.
            #expect(try await listJSON(cache).map { $0["url"] as? String } == ["http://ann@127.0.0.1:\(port)/private.jpg"])
            let secret = Data("hunter2".utf8)
            let files = FileManager.default.enumerator(atPath: cache)?.allObjects.compactMap { $0 as? String } ?? []
            #expect(files.contains("catalog.sqlite"))
            for file in files {
                let contents = FileManager.default.contents(atPath: cache + "/" + file) ?? Data()
                #expect(contents.range(of: secret) == nil, "\(file) holds the password")
            }
            // The same URL with another password is the same item: cached, not fetched again.
            let again = try await BuiltProducts.run(["get", "--cache", cache, "http://ann:other@127.0.0.1:\(port)/private.jpg"])
            #expect(again.status == 0, "\(again.stderr)")
            #expect(origin.requests(for: "/private.jpg").count == 1)
            // A URL refused for a space in its password is quoted without it.
            let refused = try await BuiltProducts.run(["get", "--cache", cache, "http://ann:hunter 2@127.0.0.1:\(port)/x.jpg"])
            #expect(refused.status != 0)
            #expect(refused.stderrLines == ["mediafetch: not a URL, it holds a space (write it as %20): "
                + "http://ann:***@127.0.0.1:\(port)/x.jpg"])
        }
    }

    @Test func aDeadHostFailsWithAClearLine() async throws {
        try await TemporaryDirectory.with { directory in
            // A port nobody listens on, held so that no other test's origin gets it.
            let closed = try ReservedPort()
            let url = closed.url("/x.jpg")
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--retries", "0", url])
            #expect(result.status == 1)
            let line = try #require(result.stderrLines.first { $0.hasPrefix("mediafetch: failed") })
            #expect(line.contains(url))
            #expect(line.lowercased().contains("connect"))
            withExtendedLifetime(closed) {}
        }
    }

    /// A host whose name does not exist (a typo) fails each of its URLs in
    /// one line at its first attempt, where they were retried until the
    /// host's patience ran out (50 URLs: 30 s); so does one spelt in Unicode
    /// or percent-encoded (libcurl names it converted, or decoded); the other
    /// URLs are fetched. Run where this machine's resolver says `.invalid`
    /// names (reserved never to exist) do not exist. (The host's patience is
    /// long enough that a lookup the resolver drops cannot give the host up
    /// for want of an answer first.)
    @Test(.enabled(if: SystemResolver.saysNoSuchName("no-such-host.invalid")))
    func aHostNameThatDoesNotExistFailsItsURLsAtOnce() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/ok.jpg", data: fixtureBytes(count: 1000, seed: 61))
            let cache = directory.appending("cache")
            let typos = (1...20).map { "http://no-such-host.invalid/\($0).jpg" }
            let spelt = ["http://bücher-no-such-host.invalid/a.jpg": "xn--bcher-no-such-host-m6b.invalid",
                         "http://%6eo-such-host-2.invalid/a.jpg": "no-such-host-2.invalid"]
            let input = directory.appending("urls.txt")
            try (typos + spelt.keys.sorted() + [origin.url("/ok.jpg")]).joined(separator: "\n")
                .write(toFile: input, atomically: true, encoding: .utf8)

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--host-patience", "10",
                                                      "--input-file", input], environment: SystemResolver.quickRetries)

            #expect(result.status == 1)
            let failures = result.stderrLines.filter { $0.hasPrefix("mediafetch: failed ") }
            let failed = failures.compactMap { $0.split(separator: " ").dropFirst(2).first.map { String($0.dropLast()) } }
            #expect(Set(failed) == Set(typos + spelt.keys))
            #expect(failures.count == typos.count + spelt.count)
            for line in failures where typos.contains(where: { line.hasPrefix("mediafetch: failed \($0): ") }) {
                #expect(line.hasSuffix(": Could not resolve host: no-such-host.invalid (no such name: not tried again)")
                    || line.contains(": given up: no-such-host.invalid:80 has no such name (Could not resolve host: no-such-host.invalid)")
                    || line.hasSuffix(": its host, no-such-host.invalid:80, is given up (as above)"), "\(line)")
            }
            for (url, name) in spelt {
                #expect(failures.contains("mediafetch: failed \(url): Could not resolve host: \(name) (no such name: not tried again)"),
                        "\(result.stderr)")
            }
            #expect(!result.stderr.contains("attempts"), "\(result.stderr)")
            #expect(try await listJSON(cache).map { $0["url"] as? String } == [origin.url("/ok.jpg")])
        }
    }

    @Test func aCatalogThatIsNotADatabaseStopsTheRunBeforeAnyDownload() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 1000, seed: 30))
            let cache = try cacheWithACatalogThatIsNotADatabase(in: directory)

            let result = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])

            expectCatalogCannotOpen(result, cache: cache)
            #expect(origin.requests(for: "/a.jpg").isEmpty)
            #expect(try String(contentsOfFile: cache + "/catalog.sqlite", encoding: .utf8) == Self.notADatabase)
        }
    }

    /// `--progress bar` into a file or a pipe redraws with carriage returns
    /// and blanks only: `ESC [ K` showed on every line of a log in `less`.
    @Test func aStatusLineIntoAFileHoldsNoEscapeSequences() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/slow.wav", data: soundFixtureBytes(count: 150_000, seed: 32))
            origin.setFault("/slow.wav", .slow(bytesPerSecond: 150_000))
            let cache = directory.appending("cache")

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--progress", "bar", origin.url("/slow.wav"),
                                                      origin.url("/missing.jpg"), "--retries", "0"])

            #expect(result.status == 1)
            #expect(result.stderr.contains("\r"), "\(result.stderr.debugDescription)")
            #expect(result.stderr.contains("/2 items"), "\(result.stderr.debugDescription)")
            #expect(!result.stderr.contains("\u{1B}"), "\(result.stderr.debugDescription)")
            #expect(result.stderr.contains("mediafetch: failed \(origin.url("/missing.jpg")): HTTP 404"))
        }
    }

    /// After an item's last failure the status line is not drawn again as it
    /// was before it: "1 waiting to retry" came back under the failure line
    /// of the item that had been waiting (until the next progress event).
    @Test func noStaleStatusLineIsDrawnUnderAFailure() async throws {
        try await withOrigin { origin, directory in
            origin.route("/e500.jpg") { _ in OriginResponse(status: 500, body: Data("oops".utf8)) }
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--progress", "bar",
                                                      "--retries", "1", origin.url("/e500.jpg")])

            #expect(result.status == 1)
            let failure = try #require(result.stderr.range(of: "mediafetch: failed "), "\(result.stderr.debugDescription)")
            let before = result.stderr[..<failure.lowerBound]
            let after = result.stderr[failure.upperBound...]
            // It did wait to retry, and said so, before its last attempt.
            #expect(before.contains("1 waiting to retry"), "\(result.stderr.debugDescription)")
            #expect(!after.contains("waiting to retry"), "\(result.stderr.debugDescription)")
            #expect(after.contains("1 failed"), "\(result.stderr.debugDescription)")
        }
    }

    /// The status line is not written again when nothing in it changed:
    /// progress repeats once a second while a server is quiet, which into
    /// a log was a line a second for the whole wait.
    @Test func anUnchangedStatusLineIsNotWrittenAgain() async throws {
        try await withOrigin { origin, directory in
            origin.route("/late.bin") { _ in
                usleep(3_500_000)
                return OriginResponse(body: Data("late".utf8))
            }
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--progress", "bar",
                                                      origin.url("/late.bin")])

            #expect(result.status == 0)
            let drawn = result.stderr.split(separator: "\r").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                .filter { !$0.isEmpty }
            let repeats = zip(drawn, drawn.dropFirst()).filter { $0 == $1 }.count
            #expect(repeats == 0, "\(drawn)")
        }
    }

    /// A directory where the catalog goes is named as such: SQLite said only
    /// "disk I/O error".
    @Test func aDirectoryInTheCatalogsPlaceIsNamed() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 1000, seed: 31))
            let cache = directory.appending("cache")
            try FileManager.default.createDirectory(atPath: cache + "/catalog.sqlite", withIntermediateDirectories: true)

            for command in [["get", origin.url("/a.jpg")], ["list"], ["stats"]] {
                let result = try await BuiltProducts.run(Array(command.prefix(1)) + ["--cache", cache] + command.dropFirst())
                #expect(result.status == 3)
                #expect(result.stderrLines == ["mediafetch: cannot open the catalog at \(cache)/catalog.sqlite: it is a "
                    + "directory, not a file"], "\(command)")
            }
            #expect(origin.requests(for: "/a.jpg").isEmpty)
            // Said before anything is made beside it.
            #expect(try FileManager.default.contentsOfDirectory(atPath: cache) == ["catalog.sqlite"])
            // A FIFO there is named too, not opened (which would wait for a writer).
            let fifo = directory.appending("fifo")
            try FileManager.default.createDirectory(atPath: fifo, withIntermediateDirectories: true)
            #expect(mkfifo(fifo + "/catalog.sqlite", 0o600) == 0)
            let result = try await BuiltProducts.run(["get", "--cache", fifo, origin.url("/a.jpg")])
            #expect(result.status == 3)
            #expect(result.stderrLines == ["mediafetch: cannot open the catalog at \(fifo)/catalog.sqlite: it is not a regular file"])
            #expect(try FileManager.default.contentsOfDirectory(atPath: fifo) == ["catalog.sqlite"])
        }
    }

    @Test func aNewCatalogThatCannotBeCreatedStopsTheDownloadsItOverlapped() async throws {
        try await withOrigin { origin, directory in
            // A new cache starts downloading while its catalog is created:
            // when the catalog cannot be, the run stops with one line, and no
            // object is left without a row.
            // Each body takes five seconds: the catalog fails long before the
            // first wave (8 at once against one host) is done, and the rest
            // are never asked for.
            for index in 0..<40 {
                origin.addResource("/\(index).jpg", data: fixtureBytes(count: 20_000, seed: UInt64(100 + index)))
                origin.setFault("/\(index).jpg", .slow(bytesPerSecond: 4_000))
            }
            let cache = directory.appending("cache")
            // SQLite cannot make its write-ahead log where a directory stands.
            try FileManager.default.createDirectory(atPath: cache + "/catalog.sqlite-wal", withIntermediateDirectories: true)

            let result = try await BuiltProducts.run(["get", "--cache", cache] + (0..<40).map { origin.url("/\($0).jpg") })

            expectCatalogCannotOpen(result, cache: cache)
            #expect(origin.requests().count <= 8, "downloads went on after the catalog failed")
            #expect(try objectPaths(inCache: cache).isEmpty)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func itemsThatFinishedBeforeTheNewCatalogFailedAreNotListedOneByOne() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 5, size: 3000, firstSeed: 200, prefix: "/")
            let cache = directory.appending("cache")
            try FileManager.default.createDirectory(atPath: cache + "/catalog.sqlite-wal", withIntermediateDirectories: true)
            // The catalog is opened under this lock: held here, the run
            // downloads everything and waits to record it; let go, the
            // catalog fails (a directory where its WAL goes).
            let lock = open(cache + "/catalog.sqlite.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            try #require(lock >= 0 && flock(lock, LOCK_EX) == 0)
            let run = try BuiltProducts.start(["get", "--cache", cache] + urls)
            // Every body asked for and one stored: not all five, as a third group's moves wait
            // for the second's rows, which wait for the lock (bodies that came in three groups
            // never were, and a CI run waited out the time limit). A run that ended early fails
            // the test with what it said, rather than hanging it.
            while run.isRunning, origin.requests().count < urls.count || ((try? objectPaths(inCache: cache)) ?? []).isEmpty {
                try await Task.sleep(for: .milliseconds(20))
            }
            let stillRunning = run.isRunning
            close(lock)
            let result = await run.wait()

            #expect(stillRunning, "the run ended before its files were stored: \(result.status) \(result.stderr)")
            // A wait past two seconds is said first (how long this one is depends on the machine).
            let notice = "mediafetch: note: waiting for another process that holds the catalog's lock (for up to 60 s)"
            let lines = result.stderrLines.filter { $0 != notice }
            #expect(result.status == 3)
            #expect(lines.count == 1, "\(result.stderrLines)")
            #expect(lines.first?.hasPrefix("mediafetch: cannot open the catalog at \(cache)/catalog.sqlite: ") == true)
        }
    }

    @Test func aMalformedInputFileIsRejectedAndChangesNothing() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 1000, seed: 5))
            origin.addResource("/b.jpg", data: fixtureBytes(count: 1000, seed: 6))
            let cache = directory.appending("cache")
            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")]).status == 0)
            let before = try await statsJSON(cache)
            let input = directory.appending("urls.txt")
            try "# pins\n\(origin.url("/b.jpg"))\nftp://example.com/c.jpg\n".write(toFile: input, atomically: true, encoding: .utf8)

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--input-file", input])

            #expect(result.status == 2)
            #expect(result.stderrLines == ["mediafetch: \(input):3: unsupported scheme 'ftp' (only http and https): ftp://example.com/c.jpg"])
            #expect(origin.requests(for: "/b.jpg").isEmpty)
            #expect(NSDictionary(dictionary: try await statsJSON(cache)) == NSDictionary(dictionary: before))

            // Every list's bad lines are named, and a bad URL argument too, in one run.
            let other = directory.appending("more.txt")
            try "not a url\n".write(toFile: other, atomically: true, encoding: .utf8)
            let both = try await BuiltProducts.run(["get", "--cache", cache, "gopher://x/", "-i", input, "-i", other])
            #expect(both.status == 2)
            #expect(both.stderrLines == ["mediafetch: unsupported scheme 'gopher' (only http and https): gopher://x/",
                                         "mediafetch: \(input):3: unsupported scheme 'ftp' (only http and https): ftp://example.com/c.jpg",
                                         "mediafetch: \(other):1: not a URL: not a url"])
        }
    }

    /// A list of only comments and blank lines asks for nothing: one note,
    /// exit 0, and no cache made for it.
    @Test func aListWithNoURLIsANoteAndMakesNoCache() async throws {
        try await TemporaryDirectory.with { directory in
            let input = directory.appending("empty.txt")
            try "# nothing yet\n\n".write(toFile: input, atomically: true, encoding: .utf8)
            let cache = directory.appending("cache")

            let result = try await BuiltProducts.run(["get", "--cache", cache, "-i", input])

            #expect(result.status == 0)
            #expect(result.stderrLines == ["mediafetch: note: nothing to fetch: no URL in \(input)"])
            #expect(access(cache, F_OK) != 0)
            // Nothing piped in (a grep that found nothing): the same, naming standard input.
            let piped = try await BuiltProducts.runShell(#"printf '' | "$MEDIAFETCH" get --cache "$CACHE" -i -"#,
                                                         environment: ["CACHE": cache])
            #expect(piped.status == 0)
            #expect(piped.stderrLines == ["mediafetch: note: nothing to fetch: no URL in standard input"])
            #expect(access(cache, F_OK) != 0)
            // A reader of --progress json gets the run's last event, as from any run.
            let json = try await BuiltProducts.run(["get", "--cache", cache, "-i", input, "--progress", "json"])
            #expect(json.status == 0)
            let events = json.stderrLines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(events.count == 2)
            #expect(events.map { $0["event"] as? String } == ["note", "finished"])
            #expect(events.last?["total"] as? Int == 0 && events.last?["failed"] as? Int == 0)
            #expect(access(cache, F_OK) != 0)
        }
    }

    @Test func anInputFileWithCommentsIsRead() async throws {
        try await withOrigin { origin, directory in
            for index in 0..<5 { origin.addResource("/p\(index).jpg", data: fixtureBytes(count: 2000, seed: UInt64(10 + index))) }
            let input = directory.appending("urls.txt")
            let lines = ["# five photos", ""] + (0..<5).map { origin.url("/p\($0).jpg") } + [origin.url("/p0.jpg")]
            try lines.joined(separator: "\r\n").write(toFile: input, atomically: true, encoding: .utf8)

            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "-i", input])

            #expect(result.status == 0, "\(result.stderr)")
            // The URL listed twice is one item, fetched once.
            #expect(result.stderr.hasPrefix("5 downloaded, 0 already cached, 0 failed"), "\(result.stderr)")
            #expect(origin.requests(for: "/p0.jpg").count == 1)
        }
    }

    @Test func aDroppedConnectionResumesWhereItStopped() async throws {
        try await withOrigin { origin, directory in
            let content = soundFixtureBytes(count: 2_000_000, seed: 7)
            origin.addResource("/sound.wav", data: content)
            origin.setFault("/sound.wav", .dropAfter(bytes: 700_000), times: 1)

            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--progress", "json",
                                                origin.url("/sound.wav")])

            #expect(result.status == 0, "\(result.stderr)")
            let requests = origin.requests(for: "/sound.wav")
            #expect(requests.count == 2)
            // From the last block boundary before the cut, where direct I/O is used.
            let offset = resumeOffset(afterCutAt: 700_000, in: directory.path)
            #expect(requests.last?.header("range") == resumeRange(from: offset))
            let events = jsonLines(result.stderr)
            #expect(events.contains { $0["event"] as? String == "retrying" })
            let stored = try #require(events.first { $0["event"] as? String == "stored" })
            #expect(stored["resumedBytes"] as? Int == offset)
            #expect(stored["size"] as? Int == 2_000_000)
            #expect(events.last?["event"] as? String == "finished")
        }
    }

    /// The next run resumes after a failed one; one cut again before the
    /// file is whole says it resumed all the same (the bytes were counted
    /// only once a resumed body was stored: such a run read as having
    /// started over), and the run after it finishes the file.
    @Test func theNextRunResumesAfterAFailedOne() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/long.flac", data: soundFixtureBytes(count: 3_000_000, seed: 8))
            origin.setFault("/long.flac", .dropAfter(bytes: 600_000), times: 2)
            let arguments = ["get", "--cache", directory.appending("cache"), "--retries", "0", origin.url("/long.flac")]

            let first = try await BuiltProducts.run(arguments)
            let held = resumeOffset(afterCutAt: 600_000, in: directory.path)
            let cutAgain = try await BuiltProducts.run(arguments + ["--progress", "json"])
            let third = try await BuiltProducts.run(arguments)

            #expect(first.status == 1)
            #expect(!first.stderr.contains("resumed"), "\(first.stderr)")
            #expect(cutAgain.status == 1)
            let requests = origin.requests(for: "/long.flac")
            #expect(requests.count == 3)
            #expect(requests.dropFirst().first?.header("range") == resumeRange(from: held))
            let finished = try #require(jsonLines(cutAgain.stderr).last)
            #expect(finished["event"] as? String == "finished")
            #expect(finished["resumedBytes"] as? Int == held, "\(cutAgain.stderr)")
            #expect(finished["downloaded"] as? Int == 0)
            #expect(third.status == 0, "\(third.stderr)")
            #expect(requests.last?.header("range") != nil)
            #expect(third.stderr.contains("resumed"))
            // The resumed partial was reopened for writing: the store makes it read-only.
            #expect(try objectModes(inCache: directory.appending("cache")) == [0o444])
        }
    }

    /// A login page that answers a resume (200, `text/html`, as a server
    /// that lost the session sends for any URL) fails the photo and leaves
    /// the part already fetched; the run after, with the photo served
    /// again, resumes from it. The page replaced the partial before, and the
    /// next run fetched the photo from byte zero.
    @Test func aLoginPageThatAnswersAResumeLeavesThePartToResume() async throws {
        try await withOrigin { origin, directory in
            // Bytes whose type claims no image (labelled image/jpeg, they would be refused for that).
            let photo = fixtureBytes(count: 1_500_000, seed: 41)
            origin.addResource("/album/summit.jpg", data: photo)
            origin.setFault("/album/summit.jpg", .dropAfter(bytes: 600_000), times: 1)
            let arguments = ["get", "--cache", directory.appending("cache"), "--retries", "0", origin.url("/album/summit.jpg")]
            let first = try await BuiltProducts.run(arguments)
            let held = resumeOffset(afterCutAt: 600_000, in: directory.path)

            origin.route("/album/summit.jpg") { _ in
                OriginResponse(headers: [("Content-Type", "text/html; charset=utf-8")],
                               body: Data("<!DOCTYPE html><html><body>Please log in</body></html>".utf8))
            }
            let refused = try await BuiltProducts.run(arguments)
            let partialsAfterPage = partialDirectoryFiles(directory.appending("cache/tmp")).filter { $0.hasSuffix(".part") }
            origin.removeRoute("/album/summit.jpg")
            let resumed = try await BuiltProducts.run(arguments)

            #expect(first.status == 1)
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("the server answered the resume with a web page (text/html) where a .jpg file was asked for; "
                + "the part already fetched is kept for the next run"), "\(refused.stderr)")
            #expect(partialsAfterPage.count == 1)
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(origin.requests(for: "/album/summit.jpg").last?.header("range") == resumeRange(from: held))
            #expect(resumed.stderr.contains("resumed"))
            let hash = SHA256.hash(data: photo).map { String(format: "%02x", $0) }.joined()
            #expect(try objectPaths(inCache: directory.appending("cache")).map { $0.split(separator: "/").last.map(String.init) } == [hash])
        }
    }

    /// A login page that answers a resume at a URL that names no media
    /// (`/media/9`) is refused all the same: the part held is a photo's, no
    /// text; and a 403 (a signed URL past its time) leaves the part for a
    /// run that gets the file. Both replaced or dropped it.
    @Test func aPartHeldOfAFileThatIsNotTextOutlivesAPageAndA403() async throws {
        try await withOrigin { origin, directory in
            let photo = Data([0xFF, 0xD8, 0xFF, 0xE0]) + fixtureBytes(count: 1_500_000, seed: 44)
            origin.addResource("/media/9", data: photo, contentType: "image/jpeg")
            origin.setFault("/media/9", .dropAfter(bytes: 600_000), times: 1)
            let arguments = ["get", "--cache", directory.appending("cache"), "--retries", "0", origin.url("/media/9")]
            _ = try await BuiltProducts.run(arguments)
            let held = resumeOffset(afterCutAt: 600_000, in: directory.path)

            origin.route("/media/9") { _ in
                OriginResponse(headers: [("Content-Type", "text/html")], body: Data("<html><body>Sign in</body></html>".utf8))
            }
            let page = try await BuiltProducts.run(arguments)
            // (403 to the resume and to the whole body it then asks for.)
            origin.setFault("/media/9", .status(403), times: 2)
            origin.removeRoute("/media/9")
            let forbidden = try await BuiltProducts.run(arguments)
            let forbiddenAsked = origin.requests(for: "/media/9").suffix(2).map { $0.header("range") }
            let resumed = try await BuiltProducts.run(arguments)

            #expect(page.status == 1)
            #expect(page.stderr.contains("the server answered the resume with a web page (text/html) where a file whose first bytes are not text "
                + "was asked for"), "\(page.stderr)")
            #expect(forbidden.status == 1)
            #expect(forbiddenAsked == [resumeRange(from: held), nil])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(origin.requests(for: "/media/9").last?.header("range") == resumeRange(from: held))
            let hash = SHA256.hash(data: photo).map { String(format: "%02x", $0) }.joined()
            #expect(try objectPaths(inCache: directory.appending("cache")).map { $0.split(separator: "/").last.map(String.init) } == [hash])
        }
    }

    /// A whole body that answers a resume is judged by its first bytes as
    /// well as its type: a changed photo that a server labels `text/plain`
    /// (nginx's default type) replaces the part fetched and is stored, where
    /// it was refused run after run; a login page labelled
    /// `application/octet-stream` keeps the part, where it replaced it.
    @Test func aResumeAnswerIsJudgedByItsFirstBytes() async throws {
        try await withOrigin { origin, directory in
            let photo = fixtureBytes(count: 1_500_000, seed: 42)
            let changed = Data([0xFF, 0xD8, 0xFF, 0xE0]) + fixtureBytes(count: 1_200_000, seed: 43)
            origin.addResource("/a/old.jpg", data: photo, contentType: "image/jpeg")
            origin.addResource("/a/new.jpg", data: photo, contentType: "image/jpeg")
            for path in ["/a/old.jpg", "/a/new.jpg"] { origin.setFault(path, .dropAfter(bytes: 600_000), times: 1) }
            let cache = directory.appending("cache")
            let first = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0",
                                                     origin.url("/a/old.jpg"), origin.url("/a/new.jpg")])
            origin.route("/a/old.jpg") { _ in
                OriginResponse(headers: [("Content-Type", "application/octet-stream")],
                               body: Data("\n<html><body>Session expired</body></html>".utf8))
            }
            origin.route("/a/new.jpg") { _ in OriginResponse(headers: [("Content-Type", "text/plain")], body: changed) }
            let second = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0",
                                                      origin.url("/a/old.jpg"), origin.url("/a/new.jpg")])
            let partials = partialDirectoryFiles(cache + "/tmp").filter { $0.hasSuffix(".part") }

            #expect(first.status == 1)
            #expect(second.status == 1)
            #expect(second.stderr.contains("the server answered the resume with a web page (application/octet-stream) "
                + "where a .jpg file was asked for"), "\(second.stderr)")
            #expect(!second.stderr.contains("/a/new.jpg"), "\(second.stderr)")
            #expect(partials.count == 1)
            let hash = SHA256.hash(data: changed).map { String(format: "%02x", $0) }.joined()
            #expect(try objectPaths(inCache: cache).map { $0.split(separator: "/").last.map(String.init) } == [hash])
        }
    }

    /// Partials are created read-only; an ordinary user (root ignores modes)
    /// must still reopen one to resume it.
    @Test(.enabled(if: BuiltProducts.canRunAsAnotherUser, "needs root and setpriv to run as nobody"))
    func anOrdinaryUserResumesAReadOnlyPartial() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/long.flac", data: soundFixtureBytes(count: 1_500_000, seed: 31))
            origin.setFault("/long.flac", .dropAfter(bytes: 600_000), times: 1)
            let user = BuiltProducts.User.nobody
            let cache = try directory.cache(ownedBy: user)
            let arguments = ["get", "--cache", cache, "--retries", "0", origin.url("/long.flac")]

            let first = try await BuiltProducts.run(arguments, as: user)
            let partials = partialDirectoryFiles(cache + "/tmp").filter { $0.hasSuffix(".part") }
            let partial = try #require(partials.first)
            let mode = try permissions(of: "\(cache)/tmp/\(partial)")
            let second = try await BuiltProducts.run(arguments, as: user)

            #expect(first.status == 1)
            #expect(mode == 0o444)
            #expect(second.status == 0, "\(second.stderr)")
            #expect(origin.requests(for: "/long.flac").last?.header("range")
                == resumeRange(from: resumeOffset(afterCutAt: 600_000, in: cache)))
            #expect(second.stderr.contains("resumed"))
            #expect(try objectModes(inCache: cache) == [0o444])
        }
    }

    /// A whole body the store cannot take (here: no fan-out directory can be
    /// made) stays as a partial the next run proves complete, not fetched again.
    @Test(.enabled(if: BuiltProducts.canRunAsAnotherUser, "needs root and setpriv to run as nobody"))
    func aBodyTheStoreCannotTakeIsKeptAndNotFetchedAgain() async throws {
        try await withOrigin { origin, directory in
            // A whole number of blocks, so that the partial is kept whole.
            let body = soundFixtureBytes(count: 704_512, seed: 33)
            origin.addResource("/walk.flac", data: body)
            let user = BuiltProducts.User.nobody
            let cache = try directory.cache(ownedBy: user)
            let arguments = ["get", "--cache", cache, "--retries", "0", origin.url("/walk.flac")]
            let hash = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
            origin.addResource("/pin.jpg", data: fixtureBytes(count: 2000, seed: 34))
            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/pin.jpg")], as: user).status == 0)
            // The body's fan-out directory takes no names (as a full disk or a
            // stranger's directory would refuse them).
            let fanOut = cache + "/objects/sha256/" + hash.prefix(2)
            #expect(mkdir(fanOut, 0o755) == 0 || errno == EEXIST)
            #expect(chmod(fanOut, 0o555) == 0)
            let first = try await BuiltProducts.run(arguments, as: user)
            let unrecordedAfterFirst = (try? FileManager.default.contentsOfDirectory(atPath: cache + "/unrecorded")) ?? []
            #expect(chmod(fanOut, 0o777) == 0)
            let second = try await BuiltProducts.run(arguments, as: user)

            #expect(first.status == 1)
            // One line naming the URL once and the directory that refused the name.
            #expect(first.stderrLines.contains { $0.hasPrefix("mediafetch: failed \(origin.url("/walk.flac")): cannot store it: cannot move ")
                && $0.hasSuffix(" into \(fanOut): Permission denied") }, "\(first.stderr)")
            // The rows it held while the body was moved went with it: left, `stats` said it was stored.
            #expect(unrecordedAfterFirst.isEmpty, "\(unrecordedAfterFirst)")
            #expect(second.status == 0, "\(second.stderr)")
            // Asked for the last 4 KiB of the whole body again, to compare: nothing else came again.
            #expect(origin.requests(for: "/walk.flac").last?.header("range") == resumeRange(from: 704_512))
            let stored = try objectPaths(inCache: cache).map { URL(fileURLWithPath: $0).lastPathComponent }
            #expect(stored.contains(hash))
            #expect(stored.count == 2)
        }
    }

    /// A limit on processes (`ulimit -u`) too low for the threads a run
    /// starts is one line and exit 3, before anything is made or fetched:
    /// under `ulimit -u 3`, `get` hung for ever (libdispatch waiting for a
    /// thread), and a download needs its writers and its transfer thread.
    @Test(.enabled(if: BuiltProducts.canRunAsAnotherUser, "needs root and setpriv to run as another user"))
    func aLimitOnProcessesTooLowForTheRunIsOneLineAndExit3() async throws {
        // A user of its own: the limit counts every process of the user, and other tests run as nobody meanwhile.
        let user = BuiltProducts.User(uid: 64011, gid: 64011)
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 3000, seed: 1))
            #expect(chmod(directory.path, 0o777) == 0)
            let cache = directory.appending("cache")
            let anyCommand = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")], as: user, processLimit: 3)
            #expect(anyCommand.status == 3)
            #expect(anyCommand.stderrLines.count == 1, "\(anyCommand.stderrLines)")
            #expect(anyCommand.stderr.hasPrefix("mediafetch: the limit on processes is 3 (ulimit -u, the hard limit: "))
            #expect(anyCommand.stderr.contains("and mediafetch starts about 8 threads: raise it where it is set (limits.conf nproc, LimitNPROC=)"))
            // Enough to start, too few for four transfers' threads.
            let download = try await BuiltProducts.run(["get", "--cache", cache, "--jobs", "4", origin.url("/a.jpg")],
                                                       as: user, processLimit: 20)
            #expect(download.status == 3)
            #expect(download.stderrLines.count == 1, "\(download.stderrLines)")
            #expect(download.stderr.contains("mediafetch starts about 36 threads for 4 transfers at once: raise it where it is set "
                + "(limits.conf nproc, LimitNPROC=), or give fewer --jobs"))
            #expect(!FileManager.default.fileExists(atPath: cache))
            #expect(origin.requests(for: "/a.jpg").isEmpty)
            // With room for them, the same run goes on.
            let roomy = try await BuiltProducts.run(["get", "--cache", cache, "--jobs", "4", origin.url("/a.jpg")],
                                                    as: user, processLimit: 200)
            #expect(roomy.status == 0, "\(roomy.stderr)")
            #expect(try objectPaths(inCache: cache).count == 1)
        }
    }

    @Test(.enabled(if: BuiltProducts.canRunAsAnotherUser, "needs root and setpriv to run as nobody"))
    func aCacheTheUserCannotWriteIsOneLineAndExit3() async throws {
        try await withOrigin { origin, directory in
            for name in ["a", "b", "c"] { origin.addResource("/\(name).jpg", data: fixtureBytes(count: 3000, seed: UInt64(name.utf8.first ?? 0))) }
            // Someone else's cache (root's), reachable but not writable by nobody.
            #expect(chmod(directory.path, 0o755) == 0)
            let cache = directory.appending("cache")
            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")]).status == 0)

            // New URLs, and one already cached (whose row would be touched).
            let result = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg"),
                                                      origin.url("/b.jpg"), origin.url("/c.jpg")], as: .nobody)
            #expect(result.status == 3)
            #expect(result.stderrLines == ["mediafetch: cannot write to the cache at \(cache): \(cache)/tmp: Permission denied"])
            #expect(origin.requests(for: "/b.jpg").isEmpty)
            #expect(try objectPaths(inCache: cache).count == 1)
            // What is cached already needs no writing: asked for alone, it is found.
            let cached = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")], as: .nobody)
            #expect(cached.status == 0, "\(cached.stderr)")
            #expect(cached.stderrLines.first?.hasPrefix("0 downloaded, 1 already cached, 0 failed") == true)
            #expect(origin.requests(for: "/a.jpg").count == 1)

            // Another SQLite client that closes the catalog takes its log and shared memory away,
            // which nobody cannot make again there: the catalog is still read.
            let closing = try await BuiltProducts.runShell(#"""
                python3 -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute("PRAGMA wal_checkpoint(TRUNCATE)"); db.close()' "$CATALOG"
                """#, environment: ["CATALOG": cache + "/catalog.sqlite"])
            #expect(closing.status == 0, "\(closing.stderr)")
            #expect(!FileManager.default.fileExists(atPath: cache + "/catalog.sqlite-shm"))
            let list = try await BuiltProducts.run(["list", "--cache", cache, "--format", "csv"], as: .nobody)
            #expect(list.status == 0, "\(list.stderr)")
            #expect(list.stdout.contains(origin.url("/a.jpg")))
            let again = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")], as: .nobody)
            #expect(again.status == 0, "\(again.stderr)")
        }
    }

    /// A umask that takes read bits away must not make objects private:
    /// the store then sets their mode itself.
    @Test func objectsAreReadableByEveryoneWhateverTheUmask() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 5000, seed: 32))
            origin.addResource("/b.jpg", data: fixtureBytes(count: 300_000, seed: 33))
            let cache = directory.appending("cache")

            let result = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg"), origin.url("/b.jpg")],
                                                     umask: 0o077)

            #expect(result.status == 0, "\(result.stderr)")
            #expect(try objectModes(inCache: cache) == [0o444])
        }
    }

    /// More jobs than the open-file limit allows ran out of descriptors and
    /// failed items; now the run uses fewer transfers and says so. Under a
    /// very low limit items failed by the hundred, and libdispatch sometimes
    /// aborted the process (SIGILL) when it could not open a file of its
    /// own: a run with under 56 descriptors free is refused before anything
    /// is made, and one with 56 fetches all.
    @Test func moreJobsThanTheOpenFileLimitAllowsAreCappedWithANote() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 300, size: 2000, firstSeed: 500, prefix: "/n/")
            let input = try directory.writingList(urls)
            let cache = directory.appending("cache")

            let refused = try await BuiltProducts.run(["get", "--cache", cache, "-i", input], openFileLimit: 40)
            #expect(refused.status == 3)
            #expect(refused.stderrLines == ["mediafetch: the limit on open files is 40 (the hard limit, ulimit -Hn), and a "
                + "download needs at least 56: raise it where it is set (limits.conf, LimitNOFILE=, docker --ulimit)"])
            #expect(access(cache, F_OK) != 0)
            #expect(origin.requests().isEmpty)
            let least = try await BuiltProducts.run(["get", "--cache", cache + "-56", "-i", input], openFileLimit: 56)
            #expect(least.status == 0, "\(least.stderr)")
            #expect(least.stderrLines.last?.hasPrefix("300 downloaded, 0 already cached, 0 failed") == true, "\(least.stderr)")

            let result = try await BuiltProducts.run(["get", "--cache", cache, "-i", input, "--jobs", "400", "--per-host", "400"],
                                                     openFileLimit: 256)

            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.contains("mediafetch: note: --jobs 400 needs more open files than the limit of 256 allows: running 21 at once; "
                + "that is the hard limit (ulimit -Hn), as the soft one was raised to it: raise it where it is set (limits.conf, "
                + "LimitNOFILE=, docker --ulimit)"), "\(result.stderr)")
            #expect(result.stderr.contains("300 downloaded, 0 already cached, 0 failed"))

            // Nothing to download (every URL cached): nothing to say of how many run at once.
            let again = try await BuiltProducts.run(["get", "--cache", cache, "-i", input, "--jobs", "400"], openFileLimit: 256)
            #expect(again.status == 0)
            #expect(again.stderrLines.count == 1, "\(again.stderr)")
            #expect(again.stderrLines.first?.hasPrefix("0 downloaded, 300 already cached, 0 failed") == true, "\(again.stderr)")

            // With --progress json the note is a JSON line like the rest.
            let json = try await BuiltProducts.run(["get", "--cache", cache + "-json", "-i", input, "--jobs", "400", "--progress", "json"],
                                                   openFileLimit: 256)
            #expect(json.status == 0)
            #expect(jsonLines(json.stderr).count == json.stderrLines.count)
            #expect(jsonLines(json.stderr).contains { $0["event"] as? String == "note" })
        }
    }

    /// Under a handful of open files no command can run (libdispatch aborted
    /// `--version` with SIGILL under 4; `list` and `stats` could not open
    /// the catalog under 12): every command says so in one line, and from 16
    /// on they run.
    @Test func underAHandfulOfOpenFilesEveryCommandSaysSo() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 1000, seed: 91))
            let cache = directory.appending("cache")
            let stored = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])
            #expect(stored.status == 0, "\(stored.stderr)")
            for arguments in [["--version"], ["list", "--cache", cache], ["stats", "--cache", cache]] {
                for limit in [4, 8, 15] {
                    let refused = try await BuiltProducts.run(arguments, openFileLimit: limit)
                    #expect(refused.status == 3, "\(arguments) \(limit): \(refused.stderr)")
                    #expect(refused.stderrLines == ["mediafetch: the limit on open files is \(limit) (the hard limit, ulimit -Hn), "
                        + "and mediafetch needs at least 16: raise it where it is set (limits.conf, LimitNOFILE=, docker --ulimit)"],
                            "\(arguments) \(limit)")
                }
                let runs = try await BuiltProducts.run(arguments, openFileLimit: 16)
                #expect(runs.status == 0, "\(arguments): \(runs.stderr)")
            }
        }
    }

    /// Descriptors mediafetch is started with (a shell, a CI runner or a
    /// program that leaves some open) count against the limit: with 20 of
    /// them under a limit of 64 most items failed with "Too many open
    /// files"; now the run is refused at once, saying why, and with a few
    /// it fetches all.
    @Test func descriptorsMediafetchIsStartedWithCountAgainstTheLimit() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addFixtures(count: 60, size: 2000, firstSeed: 900, prefix: "/i/")
            let input = try directory.writingList(urls)
            let cache = directory.appending("cache")
            func run(openingDescriptors count: Int) async throws -> CommandResult {
                // bash: sh takes single-digit descriptors only.
                let opens = (3..<(3 + count)).map { "exec \($0)</dev/null" }
                let script = (["ulimit -n 64"] + opens + [#"exec "$MEDIAFETCH" get --cache "$CACHE" -i "$INPUT""#]).joined(separator: " && ")
                return try await BuiltProducts.runShell(#"exec bash -c "$SCRIPT""#,
                                                        environment: ["SCRIPT": script, "CACHE": cache, "INPUT": input])
            }

            let refused = try await run(openingDescriptors: 20)
            #expect(refused.status == 3)
            #expect(refused.stderrLines == ["mediafetch: the limit on open files is 64 (the hard limit, ulimit -Hn; 20 of them "
                + "taken by descriptors mediafetch was started with), and a download needs at least 76: close those or raise it "
                + "where it is set (limits.conf, LimitNOFILE=, docker --ulimit)"])
            #expect(access(cache, F_OK) != 0)
            #expect(origin.requests().isEmpty)

            let few = try await run(openingDescriptors: 4)
            #expect(few.status == 0, "\(few.stderr)")
            #expect(few.stderrLines.last?.hasPrefix("60 downloaded, 0 already cached, 0 failed") == true, "\(few.stderr)")
        }
    }

    /// A proxy from the environment that is down is named, with its variable:
    /// libcurl's words alone named an address the user never typed.
    @Test func aProxyThatIsDownIsNamed() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 1000, seed: 90))
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--retries", "0",
                                                      origin.url("/a.jpg")], environment: ["http_proxy": "http://127.0.0.1:1"])
            #expect(result.status == 1)
            #expect(result.stderrLines.first?.hasSuffix("(the proxy 127.0.0.1:1, from $http_proxy)") == true, "\(result.stderr)")
            #expect(origin.requests().isEmpty)

            // Its URLs' host given up for it: the line names the proxy as the one that is down.
            let many = origin.addFixtures(count: 8, size: 1000, firstSeed: 95)
            let givenUp = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--host-patience", "1"] + many,
                                                      environment: ["http_proxy": "http://127.0.0.1:1"])
            #expect(givenUp.status == 1)
            let line = try #require(givenUp.stderrLines.first {
                $0.contains(": given up: no connection to 127.0.0.1:\(origin.port) through the proxy 127.0.0.1:1, from $http_proxy, in ")
            }, "\(givenUp.stderr)")
            #expect(line.contains("(Failed to connect to 127.0.0.1 port 1 "), "\(line)")
            #expect(line.contains("); its URLs fail at once until the proxy answers again"), "\(line)")
        }
    }

    /// A proxy whose name does not exist (a typo in `http_proxy`, or in a
    /// SOCKS proxy's `all_proxy`, which libcurl reports as the host's name)
    /// fails each URL at its first attempt, naming the variable: the URLs
    /// were retried until their host was given up, after 30 s, as if the
    /// server were down. Run where this machine's resolver says so (see
    /// `aHostNameThatDoesNotExistFailsItsURLsAtOnce`).
    @Test(.enabled(if: SystemResolver.saysNoSuchName("no-such-proxy.invalid")), arguments: [("http_proxy", "http://no-such-proxy.invalid:3128", "Could not resolve proxy: no-such-proxy.invalid"),
                      ("all_proxy", "socks5h://no-such-proxy.invalid:1080", "Could not resolve host: no-such-proxy.invalid")])
    func aProxyNameThatDoesNotExistFailsEachURLAtOnce(variable: String, proxy: String, failure: String) async throws {
        try await withOrigin { origin, directory in
            // Thirty, run at once: none is held against the origin (given up, blamed).
            let urls = origin.addFixtures(count: 30, size: 1000, firstSeed: 91)
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"),
                                                      "--host-patience", "10"] + urls,
                                                     environment: SystemResolver.quickRetries.merging([variable: proxy]) { $1 })
            #expect(result.status == 1)
            let failures = result.stderrLines.filter { $0.hasPrefix("mediafetch: failed ") }
            #expect(failures.count == urls.count)
            for line in failures {
                #expect(line.hasSuffix(": \(failure) (the proxy from $\(variable) has no such name: not tried again)"), "\(line)")
            }
            #expect(origin.requests().isEmpty)
        }
    }

    @Test func retryAfterOn429IsHonoured() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/busy.jpg", data: fixtureBytes(count: 3000, seed: 9))
            origin.setFault("/busy.jpg", .status(429, retryAfter: 1), times: 1)

            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--progress", "json",
                                                origin.url("/busy.jpg")])

            #expect(result.status == 0, "\(result.stderr)")
            let retry = try #require(jsonLines(result.stderr).first { $0["event"] as? String == "retrying" })
            // The second asked for, and at most a tenth of it more (the spread).
            let delay = try #require(retry["delaySeconds"] as? Double)
            #expect(delay >= 1 && delay <= 1.1)
            #expect((retry["reason"] as? String)?.hasPrefix("HTTP 429") == true)
            let requests = origin.requests(for: "/busy.jpg")
            #expect(requests.count == 2)
        }
    }

    /// A URL whose object was removed and whose fetch then fails stays
    /// listed, as missing: its item is not dropped from its collection.
    @Test func anObjectRemovedByHandStaysListedWhenItsURLFailsToFetchIt() async throws {
        try await withOrigin { origin, directory in
            // Two URLs with the same bytes share one object.
            let bytes = fixtureBytes(count: 5000, seed: 53)
            for path in ["/lost.jpg", "/twin.jpg", "/again.jpg"] { origin.addResource(path, data: bytes) }
            let cache = directory.appending("cache")
            let urls = ["/lost.jpg", "/twin.jpg", "/again.jpg"].map { origin.url($0) }
            #expect(try await BuiltProducts.run(["get", "--cache", cache] + urls).status == 0)
            let object = try #require(try objectPaths(inCache: cache).first)
            #expect(unlink(object) == 0)

            // Fetching one of them again fails: all three stay listed, as missing.
            origin.setFault("/lost.jpg", .status(404))
            let failed = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0", urls[0]])
            #expect(failed.status == 1)
            let listed = try await listJSON(cache)
            #expect(listed.compactMap { $0["url"] as? String }.sorted() == urls.sorted())
            #expect(listed.allSatisfy { $0["missing"] as? Bool == true })
            // Its failure is not of a cached URL: its file is gone.
            let failures = try await BuiltProducts.run(["list", "--cache", cache, "--failed", "--format", "json"])
            let failedEntries = try #require(try JSONSerialization.jsonObject(with: Data(failures.stdout.utf8)) as? [[String: Any]])
            #expect(failedEntries.map { $0["url"] as? String } == [urls[0]])
            #expect(failedEntries.first?["cached"] as? Bool == false)

            // Fetching another again stores the object anew; the URLs that share it point at it, the failed one too.
            let fetched = try await BuiltProducts.run(["get", "--cache", cache, urls[2]])
            #expect(fetched.status == 0)
            let after = try await listJSON(cache)
            #expect(after.compactMap { $0["url"] as? String }.sorted() == urls.sorted())
            #expect(after.allSatisfy { $0["missing"] as? Bool == false })
            #expect(try await statsJSON(cache)["objects"] as? Int == 1)
        }
    }

    /// An object file cut short from outside (a disk fault, a careless
    /// script) is not "already cached": its URL is fetched again, and the
    /// good copy replaces the damaged file, also when it comes from another URL.
    @Test func anObjectCutShortIsFetchedAgainAndRepaired() async throws {
        try await withOrigin { origin, directory in
            let bytes = fixtureBytes(count: 50_000, seed: 59)
            for path in ["/cut.jpg", "/copy.jpg"] { origin.addResource(path, data: bytes) }
            let cache = directory.appending("cache")
            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/cut.jpg")]).status == 0)
            let object = try #require(try objectPaths(inCache: cache).first)
            // Objects are read-only: a test run by another user than root makes it writable first.
            #expect(chmod(object, 0o644) == 0)
            #expect(truncate(object, 20_000) == 0)

            // Another URL with the same bytes: its copy replaces the damaged file.
            let other = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/copy.jpg")])
            #expect(other.status == 0, "\(other.stderr)")
            #expect(FileManager.default.contents(atPath: object) == bytes)

            #expect(chmod(object, 0o644) == 0)
            #expect(truncate(object, 0) == 0)
            let again = try await BuiltProducts.run(["get", "--cache", cache, "--progress", "json", origin.url("/cut.jpg")])
            #expect(again.status == 0, "\(again.stderr)")
            #expect(jsonLines(again.stderr).last?["skipped"] as? Int == 0)
            #expect(origin.requests(for: "/cut.jpg").count == 2)
            #expect(FileManager.default.contents(atPath: object) == bytes)
            let stats = try await statsJSON(cache)
            #expect(stats["objects"] as? Int == 1)
            #expect(stats["items"] as? Int == 2)
        }
    }

    /// An empty 200 or a 204 is no body to cache: a cached empty photo would
    /// never be fetched again. Through the batch path `get` uses, also after
    /// a failed first attempt (the writer of an empty body stayed sealed).
    @Test func anEmptyBodyIsNeverStored() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/empty.jpg", data: Data())
            origin.route("/none.jpg") { _ in OriginResponse(status: 204, body: Data()) }
            origin.addResource("/later.jpg", data: Data())
            origin.setFault("/later.jpg", .status(503), times: 1)
            let cache = directory.appending("cache")

            let result = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "2", origin.url("/empty.jpg"),
                                                      origin.url("/none.jpg"), origin.url("/later.jpg")])

            #expect(result.status == 1)
            #expect(result.stderrLines.contains("mediafetch: failed \(origin.url("/empty.jpg")): the server sent an empty body (HTTP 200 OK): nothing to store (after 3 attempts)"))
            #expect(result.stderrLines.contains("mediafetch: failed \(origin.url("/none.jpg")): HTTP 204 No Content: no body to store"))
            #expect(result.stderrLines.contains("mediafetch: failed \(origin.url("/later.jpg")): the server sent an empty body (HTTP 200 OK): nothing to store (after 3 attempts)"))
            #expect(origin.requests(for: "/empty.jpg").count == 3)
            #expect(origin.requests(for: "/none.jpg").count == 1)
            #expect(try objectPaths(inCache: cache).isEmpty)
            #expect(try await statsJSON(cache)["items"] as? Int == 0)
        }
    }

    /// A disk that fills up stops the run with one line and exit 3 instead
    /// of requesting and failing every item left; what was stored is whole,
    /// and a run with room fetches the rest.
    @Test(.enabled(if: SmallFilesystem.canMount))
    func aFullDiskStopsTheRunAndTheNextFinishesIt() async throws {
        try await withOrigin { origin, _ in
            let bodies = (0..<40).map { fixtureBytes(count: 100_000, seed: UInt64(700 + $0)) }
            for (index, body) in bodies.enumerated() { origin.addResource("/big\(index).jpg", data: body) }
            let urls = bodies.indices.map { origin.url("/big\($0).jpg") }
            let firstBody = fixtureBytes(count: 1_000, seed: 699)
            origin.addResource("/first.jpg", data: firstBody)
            try await SmallFilesystem.with(kilobytes: 1024) { mountPoint, remount in
                let cache = mountPoint + "/cache"
                // The cache exists first: a new one starts downloading while
                // its catalog is made, and on a busy machine the disk could
                // fill before that (one line too, but naming the catalog).
                let first = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/first.jpg")])
                #expect(first.status == 0, "\(first.stderr)")
                let full = try await BuiltProducts.run(["get", "--cache", cache, "--jobs", "2"] + urls)

                #expect(full.status == 3, "\(full.stderr)")
                // The summary and one line: no line for each item that found no room.
                #expect(full.stderrLines.count == 2, "\(full.stderr)")
                let last = try #require(full.stderrLines.last)
                #expect(last.hasPrefix("mediafetch: no room left for the cache ("), "\(full.stderr)")
                #expect(last.contains("No space left on device") || last.contains("database or disk is full"))
                let stopped = try #require(last.range(of: "): stopped with "))
                #expect(Int(last[stopped.upperBound...].prefix { $0.isNumber }) ?? 0 > 20, "\(full.stderr)")
                #expect(last.hasSuffix(" left to fetch; free some space and run again (what finished is stored, partial downloads resume)"))
                #expect(origin.requests().count < 21)
                let stored = try objectPaths(inCache: cache)
                #expect(stored.allSatisfy { FileManager.default.contents(atPath: $0).map((bodies + [firstBody]).contains) == true })

                #expect(remount("size=8192k"))
                let rest = try await BuiltProducts.run(["get", "--cache", cache] + urls)
                #expect(rest.status == 0, "\(rest.stderr)")
                #expect(Set(try objectPaths(inCache: cache).compactMap { FileManager.default.contents(atPath: $0) })
                        == Set(bodies + [firstBody]))
                #expect(try await statsJSON(cache)["items"] as? Int == 41)
            }
        }
    }

    /// On a disk with room for a fraction of the catalog's reserve (a small
    /// tmpfs), a body that fills the disk does not leave the objects stored
    /// before it without their rows: the reserve held is a quarter of the
    /// room free, given up for the rows. (None was held there: the rows of
    /// 20 photos were lost, the run said "0 downloaded", and the next run
    /// fetched them all again.)
    @Test(.enabled(if: SmallFilesystem.canMount))
    func aSmallDiskThatFillsKeepsTheRowsOfWhatWasStored() async throws {
        try await withOrigin { origin, _ in
            let photos = (0..<20).map { fixtureBytes(count: 5_000, seed: UInt64(900 + $0)) }
            var urls = photos.indices.map { origin.url("/photo\($0).jpg") }
            for (index, photo) in photos.enumerated() { origin.addResource("/photo\(index).jpg", data: photo) }
            origin.addResource("/sound.flac", data: soundFixtureBytes(count: 2_300_000, seed: 920))
            urls.append(origin.url("/sound.flac"))
            try await SmallFilesystem.with(kilobytes: 2048) { mountPoint, _ in
                let cache = mountPoint + "/cache"

                let full = try await BuiltProducts.run(["get", "--cache", cache] + urls)

                // Then every object on the disk has its row, and the summary counts them
                #expect(full.status == 3, "\(full.stderr)")
                let stored = try objectPaths(inCache: cache)
                #expect(stored.count >= 10, "\(full.stderr)")
                let stats = try await statsJSON(cache)
                #expect(stats["objects"] as? Int == stored.count, "\(stats)")
                #expect(stats["items"] as? Int == stored.count, "\(stats)")
                #expect(stats["awaitingRecord"] as? Int == 0, "\(stats)")
                #expect(full.stderr.hasPrefix("\(stored.count) downloaded, "), "\(full.stderr)")
                #expect(full.stderrLines.last?.contains("stopped with \(21 - stored.count) left to fetch") == true, "\(full.stderr)")
            }
        }
    }

    /// Thousands of small files filling a small disk, one run and then two at
    /// once: every object on the disk has its row. The catalog's log grows a
    /// page a row, and the rows of bodies moved into the store after the
    /// disk first filled found no room (the reserve already given up, or
    /// taken by the other run's downloads): 16–77 objects of one run, up to
    /// 274 of two, stored with no row, so no run would ever find them.
    @Test(.enabled(if: SmallFilesystem.canMount))
    func manySmallFilesFillingADiskLeaveNoObjectWithoutARow() async throws {
        try await withOrigin { origin, directory in
            let urls = (0..<3000).map { index -> String in
                origin.addResource("/s\(index).bin", data: fixtureBytes(count: 800, seed: UInt64(10_000 + index)))
                return origin.url("/s\(index).bin")
            }
            for processes in [1, 1, 2] {
                try await SmallFilesystem.with(kilobytes: processes == 1 ? 2048 : 3072) { mountPoint, _ in
                    let cache = mountPoint + "/cache"
                    let halves = processes == 1 ? [urls] : [Array(urls[..<1500]), Array(urls[1500...])]
                    let lists = try halves.enumerated().map { index, half in
                        try directory.writingList(half, named: "list-\(index).txt")
                    }
                    let results = try await withThrowingTaskGroup(of: CommandResult.self) { group in
                        for list in lists { group.addTask { try await BuiltProducts.run(["get", "--cache", cache, "-i", list]) } }
                        return try await group.reduce(into: []) { $0.append($1) }
                    }
                    #expect(results.contains { $0.status == 3 }, "\(results.map(\.stderr))")
                    // Every object on the disk has its row, in the catalog or kept
                    // in unrecorded/ for the next run (the catalog's lock, held by
                    // the other run, may keep it out), and no row points to a missing one.
                    let stored = Set(try objectPaths(inCache: cache).map { ($0 as NSString).lastPathComponent })
                    let recorded = Set(try await listJSON(cache).compactMap { $0["hash"] as? String })
                    let stats = try await statsJSON(cache)
                    let awaiting = stats["awaitingRecord"] as? Int ?? -1
                    #expect(recorded.isSubset(of: stored), "\(processes) at once: \(recorded.subtracting(stored).count) rows without an object")
                    #expect(stored.count == recorded.count + awaiting,
                            "\(processes) at once: \(stored.count) objects, \(recorded.count) rows, \(awaiting) kept for the next run")
                    #expect(stats["missingObjects"] as? Int == 0, "\(stats)")
                }
            }
        }
    }

    /// A cache copied to read-only media for offline use can be listed,
    /// also when its write-ahead log was checkpointed away (SQLite could not
    /// make the shared-memory file a WAL database needs). get succeeds there
    /// when everything asked for is cached, and says it cannot write when
    /// something is not (or is new in the collection asked for).
    @Test(.enabled(if: SmallFilesystem.canMount))
    func aCacheOnReadOnlyMediaCanBeListed() async throws {
        try await withOrigin { origin, _ in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 4000, seed: 61))
            origin.addResource("/b.jpg", data: fixtureBytes(count: 4000, seed: 63))
            try await SmallFilesystem.with(kilobytes: 4096, name: "read only") { mountPoint, remount in
                let cache = mountPoint + "/cache"
                #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")]).status == 0)
                // What copying the catalog leaves: the rows in the main file, no log beside it.
                let checkpoint = try await BuiltProducts.runShell(#"""
                    python3 -c 'import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute("PRAGMA wal_checkpoint(TRUNCATE)"); db.close()' "$CATALOG"
                    """#, environment: ["CATALOG": cache + "/catalog.sqlite"])
                #expect(checkpoint.status == 0, "\(checkpoint.stderr)")
                #expect(!FileManager.default.fileExists(atPath: cache + "/catalog.sqlite-wal"))
                #expect(remount("ro"))

                let list = try await BuiltProducts.run(["list", "--cache", cache, "--format", "csv"])
                #expect(list.status == 0, "\(list.stderr)")
                #expect(list.stdout.contains(origin.url("/a.jpg")))
                #expect(try await statsJSON(cache)["items"] as? Int == 1)
                let cached = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])
                #expect(cached.status == 0, "\(cached.stderr)")
                #expect(cached.stderrLines.count == 1)
                #expect(cached.stderrLines.first?.hasPrefix("0 downloaded, 1 already cached, 0 failed (0 B received in ") == true,
                        "\(cached.stderr)")
                let json = try await BuiltProducts.run(["get", "--cache", cache, "--progress", "json", origin.url("/a.jpg")])
                #expect(json.status == 0)
                #expect(json.stderrLines.last?.contains(#""event":"finished""#) == true, "\(json.stderr)")
                #expect(json.stderrLines.last?.contains(#""skipped":1"#) == true, "\(json.stderr)")
                let requestsBefore = origin.requests().count
                let unwritable = "mediafetch: cannot write to the cache at \(cache): \(cache)/tmp: Read-only file system"
                for arguments in [[origin.url("/a.jpg"), origin.url("/b.jpg")], ["--collection", "alps", origin.url("/a.jpg")]] {
                    let get = try await BuiltProducts.run(["get", "--cache", cache] + arguments)
                    #expect(get.status == 3)
                    #expect(get.stderrLines == [unwritable], "\(arguments)")
                }
                #expect(origin.requests().count == requestsBefore)
            }
        }
    }

    /// Objects on another filesystem than tmp/ (a symlink to another disk)
    /// cannot be renamed into place: one line before any download, not a
    /// failure per item after each one.
    @Test(.enabled(if: SmallFilesystem.canMount))
    func objectsOnAnotherFilesystemThanTmpAreOneLineBeforeAnyDownload() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 4000, seed: 64))
            try await SmallFilesystem.with(kilobytes: 1024) { mountPoint, _ in
                let cache = directory.appending("cache")
                try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
                try FileManager.default.createSymbolicLink(atPath: cache + "/objects", withDestinationPath: mountPoint)

                let result = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])

                #expect(result.status == 3)
                #expect(result.stderrLines == ["mediafetch: cannot open the cache at \(cache): \(cache)/tmp and "
                    + "\(cache)/objects/sha256 are on different filesystems (downloads are renamed from one into the "
                    + "other): keep them on one"])
                #expect(origin.requests().isEmpty)
            }
        }
    }

    /// A new cache on a disk with no room for its catalog: one line that
    /// says the disk is full and what to do, not SQLite's words alone
    /// (which, as the room left varies, are "database or disk is full" or
    /// "disk I/O error": a shared-memory file it could not grow); once there
    /// is room, the same command works.
    @Test(.enabled(if: SmallFilesystem.canMount), arguments: [4, 16, 24, 40])
    func aNewCatalogOnAFullDiskSaysTheDiskIsFull(kilobytesFree: Int) async throws {
        try await withOrigin { origin, _ in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 4000, seed: 66))
            try await SmallFilesystem.with(kilobytes: 2048) { mountPoint, _ in
                let cache = mountPoint + "/cache"
                let filler = mountPoint + "/filler"
                #expect(FileManager.default.createFile(atPath: filler, contents: Data(count: try freeBytes(mountPoint) - kilobytesFree * 1024)))

                let full = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])

                #expect(full.status == 3, "\(full.stderr)")
                #expect(full.stderrLines.count == 1, "\(full.stderr)")
                let line = try #require(full.stderrLines.first)
                #expect(line.hasPrefix("mediafetch: cannot open the catalog at \(cache)/catalog.sqlite: the disk holding "
                    + "the cache is full (SQLite error "), "\(line)")
                #expect(line.hasSuffix("): free some space and run again"), "\(line)")
                try FileManager.default.removeItem(atPath: filler)
                let again = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])
                #expect(again.status == 0, "\(again.stderr)")
                #expect(try objectPaths(inCache: cache).count == 1)
            }
        }
    }

    /// A catalog whose log another program merged and closed (sqlite3, a
    /// copy), on a disk that filled since: SQLite cannot grow the shared
    /// memory it needs to open it (an "I/O error"), so the room held back for
    /// the catalog is given up, and the cache can still be listed and used.
    @Test(.enabled(if: SmallFilesystem.canMount))
    func aMergedCatalogOnAFullDiskOpensWithTheRoomHeldForIt() async throws {
        try await withOrigin { origin, _ in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 4000, seed: 67))
            origin.addResource("/b.jpg", data: fixtureBytes(count: 4000, seed: 68))
            try await SmallFilesystem.with(kilobytes: 2048) { mountPoint, _ in
                let cache = mountPoint + "/cache"
                let first = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])
                #expect(first.status == 0, "\(first.stderr)")
                do {
                    // Read and closed by another program: the log merged, it and the shared memory removed.
                    let other = try DatabaseQueue(path: cache + "/catalog.sqlite")
                    let items = try await other.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM item") }
                    #expect(items == 1)
                }
                #expect(!FileManager.default.fileExists(atPath: cache + "/catalog.sqlite-shm"))
                #expect(FileManager.default.createFile(atPath: mountPoint + "/filler", contents: Data(count: try freeBytes(mountPoint))))

                let list = try await BuiltProducts.run(["list", "--cache", cache, "--format", "csv"])
                #expect(list.status == 0, "\(list.stderr)")
                #expect(list.stdout.contains(origin.url("/a.jpg")))
                let stats = try await BuiltProducts.run(["stats", "--cache", cache])
                #expect(stats.status == 0, "\(stats.stderr)")
                let second = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/b.jpg")])
                #expect(second.status == 0, "\(second.stderr)")
                #expect(try objectPaths(inCache: cache).count == 2)
            }
        }
    }

    /// Bytes this process may still write under `directory`.
    private func freeBytes(_ directory: String) throws -> Int {
        var info = statvfs()
        guard statvfs(directory, &info) == 0 else { throw CocoaError(.fileReadUnknown) }
        return Int(info.f_bavail) * Int(info.f_frsize)
    }

    /// Under umask 002 (a cache a group shares) what mediafetch makes is
    /// writable by the group: directories, the catalog and the files SQLite
    /// makes beside it. Objects stay read-only.
    @Test func theUmaskDecidesTheModesSoAGroupCanShareACache() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 4000, seed: 65))
            let cache = directory.appending("cache")
            let result = try await BuiltProducts.runShell(#"umask 002 && exec "$MEDIAFETCH" get --cache "$CACHE" "$URL""#,
                                                          environment: ["CACHE": cache, "URL": origin.url("/a.jpg")])
            #expect(result.status == 0, "\(result.stderr)")
            let object = try #require(try objectPaths(inCache: cache).first)
            let shards = try FileManager.default.contentsOfDirectory(atPath: cache + "/tmp").map { cache + "/tmp/" + $0 }
            #expect(shards.count == 16)
            for path in [cache, cache + "/tmp", cache + "/objects", cache + "/objects/sha256",
                         URL(fileURLWithPath: object).deletingLastPathComponent().path] + shards {
                #expect(try permissions(of: path) == 0o775, "\(path)")
            }
            for path in [cache + "/catalog.sqlite", cache + "/catalog.sqlite-wal", cache + "/catalog.sqlite-shm",
                         cache + "/catalog.sqlite.lock"] {
                #expect(try permissions(of: path) == 0o664, "\(path)")
            }
            #expect(try permissions(of: object) == 0o444)
        }
    }

    /// A copy whose log was not merged and whose shared-memory file was left
    /// behind cannot be read on read-only media: one line says what to do.
    @Test(.enabled(if: SmallFilesystem.canMount))
    func aCacheOnReadOnlyMediaWithAnUnmergedLogSaysWhatToDo() async throws {
        try await withOrigin { origin, _ in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 4000, seed: 62))
            try await SmallFilesystem.with(kilobytes: 4096) { mountPoint, remount in
                let cache = mountPoint + "/cache"
                #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")]).status == 0)
                #expect(unlink(cache + "/catalog.sqlite-shm") == 0)
                #expect(remount("ro"))

                let list = try await BuiltProducts.run(["list", "--cache", cache])

                #expect(list.status == 3)
                #expect(list.stderrLines == ["mediafetch: cannot open the catalog at \(cache)/catalog.sqlite: it is on a "
                    + "read-only filesystem with commits in its write-ahead log and no shared-memory file beside it, which "
                    + "SQLite cannot read there: merge the log where the cache was written (sqlite3 catalog.sqlite "
                    + "'PRAGMA wal_checkpoint(TRUNCATE)') before copying it"], "\(list.stderr)")
            }
        }
    }

    @Test func anObjectRemovedByHandAndFetchedAgainWithOtherBytesLeavesNoRowBehind() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/changing.jpg", data: fixtureBytes(count: 5000, seed: 57))
            let cache = directory.appending("cache")
            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/changing.jpg")]).status == 0)
            #expect(unlink(try #require(try objectPaths(inCache: cache).first)) == 0)

            origin.addResource("/changing.jpg", data: fixtureBytes(count: 6000, seed: 58))
            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/changing.jpg")]).status == 0)
            // The old object's row stayed for good, counted in stats with no file behind it.
            let stats = try await statsJSON(cache)
            #expect(stats["objects"] as? Int == 1)
            #expect(stats["bytes"] as? Int == 6000)
        }
    }

    @Test func theSameBytesFromTwoURLsAreStoredOnce() async throws {
        try await withOrigin { origin, directory in
            let content = fixtureBytes(count: 40_000, seed: 11)
            origin.addResource("/one.jpg", data: content)
            origin.addResource("/mirror/one.jpg", data: content)
            let cache = directory.appending("cache")

            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/one.jpg"), origin.url("/mirror/one.jpg")]).status == 0)

            let stats = try await statsJSON(cache)
            #expect(stats["objects"] as? Int == 1)
            #expect(stats["items"] as? Int == 2)
            #expect(stats["bytesSavedByDeduplication"] as? Int == 40_000)
        }
    }

    @Test func listFiltersAndFormats() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/x,1.jpg", data: fixtureBytes(count: 100, seed: 12))
            origin.addResource("/y.jpg", data: fixtureBytes(count: 100, seed: 13))
            let cache = directory.appending("cache")
            #expect(try await BuiltProducts.run(["get", "--cache", cache, "--collection", "alps", origin.url("/x,1.jpg")]).status == 0)
            #expect(try await BuiltProducts.run(["get", "--cache", cache, "--collection", "tatry", origin.url("/y.jpg")]).status == 0)

            #expect(try await listJSON(cache, ["--collection", "tatry"]).map { $0["url"] as? String } == [origin.url("/y.jpg")])
            #expect(try await listJSON(cache, ["--kind", "sound"]).isEmpty)
            let csv = try await BuiltProducts.run(["list", "--cache", cache, "--format", "csv", "--collection", "alps"])
            let rows = csv.stdout.split(separator: "\n")
            #expect(rows.first == "hash,size,kind,collection,title,url,path,missing,contentType,addedAt,durationSeconds,sampleRate,channels,format")
            #expect(rows.count == 2)
            #expect(rows.last?.contains("\"\(origin.url("/x,1.jpg"))\"") == true)
            let table = try await BuiltProducts.run(["list", "--cache", cache])
            #expect(table.stdout.hasPrefix("HASH"))
            #expect(table.stdout.contains("tatry"))
        }
    }

    @Test(arguments: [
        ["get", "--progress", "fancy", "http://127.0.0.1:1/x"],
        ["get", "--jobs", "0", "http://127.0.0.1:1/x"],
        ["get", "--max-filesize", "lots", "http://127.0.0.1:1/x"],
        // Every download would fail.
        ["get", "--max-filesize", "0", "http://127.0.0.1:1/x"],
        ["get", "--timeout", "nan", "http://127.0.0.1:1/x"],
        ["get", "--stall-timeout", "1e300", "http://127.0.0.1:1/x"],
        ["get", "--collection", " \t", "http://127.0.0.1:1/x"],
        ["list", "--format", "yaml"],
        ["list", "--kind", "video"],
        ["get"],
        // An unset variable in --collection="$NAME": the parser took the next URL as the name.
        ["get", "--collection=", "http://127.0.0.1:1/x", "http://127.0.0.1:1/y"],
        ["--cache=", "list"],
        // A negative number is a bad value, not a missing one.
        ["get", "--jobs", "-1", "http://127.0.0.1:1/x"],
        ["get", "--timeout", "-5", "http://127.0.0.1:1/x"],
    ])
    func badFlagsAreUsageErrors(arguments: [String]) async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await BuiltProducts.run(arguments + ["--cache", directory.appending("cache")])
            #expect(result.status == 64)
            // One line, pointing at the command's help, wherever the mistake was found.
            let command = try #require(arguments.first { ["get", "list", "stats"].contains($0) })
            #expect(result.stderrLines.count == 1, "\(result.stderr)")
            #expect(result.stderr.hasPrefix("mediafetch: "), "\(result.stderr)")
            #expect(result.stderr.hasSuffix(" (see 'mediafetch \(command) --help')\n"), "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: directory.appending("cache")))
        }
    }

    /// Under --progress json every stderr line is a JSON object, also when
    /// the run cannot start: the reason comes as an `error` event.
    @Test func aRunThatCannotStartSaysWhyInJSON() async throws {
        try await TemporaryDirectory.with { directory in
            let missingList = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "--progress", "json",
                                                           "-i", directory.appending("no-such-list.txt")])
            let notACache = directory.appending("file")
            try "not a directory".write(toFile: notACache, atomically: true, encoding: .utf8)
            let badCache = try await BuiltProducts.run(["get", "--cache", notACache, "--progress", "json",
                                                        "http://ann:secret@127.0.0.1:1/x"])

            for (result, status) in [(missingList, Int32(2)), (badCache, Int32(3))] {
                #expect(result.status == status, "\(result.stderr)")
                #expect(!result.stderrLines.isEmpty)
                #expect(jsonLines(result.stderr).count == result.stderrLines.count, "\(result.stderr)")
                #expect(jsonLines(result.stderr).last?["event"] as? String == "error")
                #expect(!result.stderr.contains("secret"))
            }
            #expect((jsonLines(missingList.stderr).last?["message"] as? String)?.contains("no-such-list.txt") == true)
        }
    }

    @Test func everyInputFileGivenIsRead() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 3_000, seed: 41))
            origin.addResource("/b.jpg", data: fixtureBytes(count: 3_000, seed: 42))
            let first = directory.appending("photos.txt"), second = directory.appending("more.txt")
            try "\(origin.url("/a.jpg"))\n".write(toFile: first, atomically: true, encoding: .utf8)
            try "\(origin.url("/b.jpg"))\n".write(toFile: second, atomically: true, encoding: .utf8)
            let cache = directory.appending("cache")

            let result = try await BuiltProducts.run(["get", "--cache", cache, "-i", first, "--input-file", second])

            #expect(result.status == 0, "\(result.stderr)")
            #expect(Set(try await listJSON(cache).compactMap { $0["url"] as? String }) == [origin.url("/a.jpg"), origin.url("/b.jpg")])
        }
    }

    @Test func listingAnUnknownCollectionSaysSo() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 3_000, seed: 43))
            let cache = directory.appending("cache")
            #expect(try await BuiltProducts.run(["get", "--cache", cache, "--collection", "tatry", origin.url("/a.jpg")]).status == 0)

            let typo = try await BuiltProducts.run(["list", "--cache", cache, "--collection", "tatri", "--format", "json"])

            #expect(typo.status == 2)
            #expect(typo.stdout.isEmpty)
            #expect(typo.stderrLines == ["mediafetch: no collection named 'tatri' (the cache has 'tatry')"])
        }
    }

    @Test(arguments: ["list", "stats"])
    func readingCommandsDoNotCreateAMissingCache(command: String) async throws {
        try await TemporaryDirectory.with { directory in
            let typo = directory.appending("Cahce")
            let result = try await BuiltProducts.run([command, "--cache", typo])
            #expect(result.status == 3)
            #expect(result.stderrLines == ["mediafetch: no cache at \(typo) (give --cache DIR or set MEDIAFETCH_CACHE)"])
            #expect(!FileManager.default.fileExists(atPath: typo))
            // A file given for the directory is named as such.
            let file = directory.appending("pins.txt")
            #expect(FileManager.default.createFile(atPath: file, contents: Data("http://a/1\n".utf8)))
            let onAFile = try await BuiltProducts.run([command, "--cache", file])
            #expect(onAFile.status == 3)
            #expect(onAFile.stderrLines == ["mediafetch: no cache at \(file): it is not a directory (give --cache DIR or set MEDIAFETCH_CACHE)"])
        }
    }

    @Test(arguments: ["list", "stats"])
    func readingCommandsNameACatalogThatIsNotADatabase(command: String) async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try cacheWithACatalogThatIsNotADatabase(in: directory)
            let result = try await BuiltProducts.run([command, "--cache", cache])
            expectCatalogCannotOpen(result, cache: cache)
            #expect(result.stdout.isEmpty)
            #expect(try String(contentsOfFile: cache + "/catalog.sqlite", encoding: .utf8) == Self.notADatabase)
        }
    }

    /// A stop signal while the list is still being read (`get -i -` waiting
    /// for the terminal, or for a pipe) ends the run with 130 and says so,
    /// rather than ending it without a word. SIGTERM: a background job of a
    /// non-interactive shell starts with SIGINT ignored.
    /// Under `--progress json` the line is JSON, as every stderr line then is.
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func aStopSignalWhileTheListIsReadSaysSo(json: Bool) async throws {
        try await TemporaryDirectory.with { directory in
            // A FIFO held open for writing: standard input that never ends.
            let result = try await BuiltProducts.runShell(#"""
                mkfifo "$FIFO" && exec 3<>"$FIFO"
                "$MEDIAFETCH" get --cache "$CACHE" --progress "$PROGRESS" -i - <"$FIFO" 2>"$ERR" &
                pid=$!
                # Until one of its threads waits in read(2) on standard input
                # (syscall 0, fd 0): past start-up, on a busy machine too.
                tries=0
                until cat /proc/$pid/task/*/syscall 2>/dev/null | grep -q '^0 0x0 ' || [ $tries -ge 400 ]; do
                    sleep 0.05; tries=$((tries + 1))
                done
                kill -TERM "$pid"
                wait "$pid"
                echo "exit $?"
                exec 3>&-
                cat "$ERR"
                """#, environment: ["CACHE": directory.appending("cache"), "ERR": directory.appending("err"),
                                  "FIFO": directory.appending("list"), "PROGRESS": json ? "json" : "auto"])
            let said = json ? #"{"event":"error","message":"interrupted"}"# : "mediafetch: interrupted"
            #expect(result.stdout.split(separator: "\n").map(String.init) == ["exit 130", said])
        }
    }

    /// A reader of stderr that goes away mid-run (`2>&1 | head`, a pager
    /// quit) stops the run as SIGHUP does: exit 130, what finished recorded,
    /// the rest left for the next run. Killed by SIGPIPE, a run left finished
    /// bodies unrecorded and no summary.
    @Test func aRunWhoseStderrReaderGoesAwayStopsAsOnHangUp() async throws {
        try await withOrigin { origin, directory in
            let urls = origin.addSlowPhotos(200, size: 20_000, seconds: 0.3)
            let list = directory.appending("list.txt")
            try Data((urls.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: list))
            let cache = directory.appending("cache")
            // The first event lines, then the reader leaves.
            let result = try await BuiltProducts.runShell(#"""
                { "$MEDIAFETCH" get --cache "$CACHE" --jobs 4 --progress json -i "$LIST" 2>&1 >/dev/null; echo "exit $?" >"$STATUS"; } | head -c 300 >/dev/null
                cat "$STATUS"
                """#, environment: ["CACHE": cache, "LIST": list, "STATUS": directory.appending("status")])
            let stats = try await BuiltProducts.run(["stats", "--cache", cache, "--format", "json"])
            let rest = try await BuiltProducts.run(["get", "--cache", cache, "-i", list])

            #expect(result.stdout == "exit 130\n", "\(result.stdout) \(result.stderr)")
            let counts = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any]
            #expect(counts?["awaitingRecord"] as? Int == 0, "\(stats.stdout)")
            #expect((counts?["items"] as? Int ?? 0) < 200, "\(stats.stdout)")
            #expect(rest.status == 0, "\(rest.stderr)")
            // Some were left to the next run: the first stopped.
            #expect(rest.stderrLines.last?.hasPrefix("0 downloaded") == false, "\(rest.stderr)")
        }
    }

    @Test func noCommandIsAUsageErrorAndHelpTakesTheCacheBeforeIt() async throws {
        let none = try await BuiltProducts.run([])
        #expect(none.status == 64)
        #expect(none.stderrLines == usageError("give a command: get, list or stats", command: nil))
        let help = try await BuiltProducts.run(["--cache", "/nonexistent", "help", "get"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("USAGE: mediafetch get"))
        // A misspelt command is not answered with the top-level help and success.
        let unknown = try await BuiltProducts.run(["help", "frob"])
        #expect(unknown.status == 64)
        #expect(unknown.stdout.isEmpty)
        #expect(unknown.stderrLines == usageError("unknown command 'frob' (the commands are get, list and stats)", command: nil))
        // And one used as such (it said "2 unexpected arguments: 'fetch', 'x'").
        let misspelt = try await BuiltProducts.run(["--cache", "/nonexistent", "fetch", "x"])
        #expect(misspelt.status == 64)
        #expect(misspelt.stderrLines == usageError("unknown command 'fetch' (the commands are get, list and stats)", command: nil))
    }

    /// A run from another directory than usual made a new ./Cache there
    /// without a word: the first `get` into a default cache it makes says
    /// where, once; a cache named by --cache or MEDIAFETCH_CACHE is not remarked.
    @Test func aNewDefaultCacheIsNamed() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 1000, seed: 92))
            let script = #"cd "$DIR" && exec "$MEDIAFETCH" get "$URL""#
            let environment = ["DIR": directory.path, "URL": origin.url("/a.jpg")]
            let first = try await BuiltProducts.runShell(script, environment: environment)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stderrLines.first == "mediafetch: note: a new cache at \(directory.path)/Cache (give --cache DIR, "
                + "or set MEDIAFETCH_CACHE, for another)", "\(first.stderr)")
            #expect(try objectPaths(inCache: directory.appending("Cache")).count == 1)
            let again = try await BuiltProducts.runShell(script, environment: environment)
            #expect(again.status == 0)
            #expect(!again.stderr.contains("new cache"), "\(again.stderr)")
            let named = try await BuiltProducts.run(["get", "--cache", directory.appending("named"), origin.url("/a.jpg")])
            #expect(!named.stderr.contains("new cache"), "\(named.stderr)")
        }
    }

    @Test func usageErrorsSayWhatIsWrongWithTheValue() async throws {
        // A cache of its own, never made: a usage error changes nothing, and a
        // check that let the run go on must not find the developer's ./Cache.
        let cache = NSTemporaryDirectory() + "mediafetch-usage-\(getpid())-never-made"
        defer { #expect(access(cache, F_OK) != 0) }
        let empty = try await BuiltProducts.run(["get", "--cache", cache, "--collection=", "http://127.0.0.1:1/x", "http://127.0.0.1:1/y"])
        #expect(empty.status == 64)
        #expect(empty.stderrLines == usageError("--collection needs a value (--collection= gives none)"))
        // A value that begins with a dash reads as an option: the line says how to give it.
        let dash = try await BuiltProducts.run(["get", "--cache", cache, "--collection", "-x", "http://127.0.0.1:1/x"])
        #expect(dash.status == 64)
        #expect(dash.stderrLines == usageError("missing value for '--collection <collection>'; a value that begins with a dash "
            + "is given as --collection=-x"))
        // A name read from a CRLF file ends in CR: a second collection that looks like the first.
        let carriageReturn = try await BuiltProducts.run(["get", "--cache", cache, "--collection", "bratislava\r", "http://127.0.0.1:1/x"])
        #expect(carriageReturn.status == 64)
        #expect(carriageReturn.stderrLines
                == usageError("--collection must not hold control or invisible characters (got 'bratislava\\u{D}')"))
        let trailing = try await BuiltProducts.run(["get", "--cache", cache, "--collection", "bratislava\u{A0}", "http://127.0.0.1:1/x"])
        #expect(trailing.status == 64)
        #expect(trailing.stderrLines == usageError("--collection must not begin or end with white space (got 'bratislava\\u{A0}')"))
        let blank = try await BuiltProducts.run(["get", "--cache", cache, "--collection", "  ", "http://127.0.0.1:1/x"])
        #expect(blank.status == 64)
        #expect(blank.stderrLines == usageError("--collection must not be empty"))
        // An unset variable in --cache "$DIR": not ./Cache by surprise.
        let noCache = try await BuiltProducts.run(["get", "--cache", "", "http://127.0.0.1:1/x"])
        #expect(noCache.status == 64)
        #expect(noCache.stderrLines == usageError("--cache must not be empty"))
        let noList = try await BuiltProducts.run(["get", "--cache", cache, "-i", ""])
        #expect(noList.status == 64)
        #expect(noList.stderrLines == usageError("--input-file must not be empty"))
        let stdinTwice = try await BuiltProducts.run(["get", "--cache", cache, "-i", "-", "--input-file", "-"])
        #expect(stdinTwice.status == 64)
        #expect(stdinTwice.stderrLines == usageError("--input-file - (standard input) is given twice: it can be read once"))
        let negative = try await BuiltProducts.run(["get", "--cache", cache, "--jobs", "-1", "http://127.0.0.1:1/x"])
        #expect(negative.status == 64)
        #expect(negative.stderrLines == usageError("--jobs must be at least 1 (got -1)"))
        // A size option takes a value that starts with '-' as its value: "Missing value" named no problem.
        let negativeSize = try await BuiltProducts.run(["get", "--cache", cache, "--max-filesize", "-1", "http://127.0.0.1:1/x"])
        #expect(negativeSize.status == 64)
        #expect(negativeSize.stderrLines == usageError("--max-filesize must be at least 1 byte (got -1)"))
        // A bound, not the sign, is what a tiny or huge number misses.
        let tiny = try await BuiltProducts.run(["get", "--cache", cache, "--timeout", "0.0001", "http://127.0.0.1:1/x"])
        #expect(tiny.status == 64)
        #expect(tiny.stderrLines == usageError("--timeout must be from 0.001 to 31536000 seconds (a year) (got 0.0001)"))
        // The parser's words in lower case, as the rest; a value of thousands of digits not echoed whole.
        let huge = try await BuiltProducts.run(["get", "--cache", cache, "--jobs", String(repeating: "9", count: 5000), "http://127.0.0.1:1/x"])
        #expect(huge.status == 64)
        #expect(huge.stderrLines.count == 1 && huge.stderr.count < 500, "\(huge.stderr.count)")
        #expect(huge.stderr.hasPrefix("mediafetch: the value '999") && huge.stderr.contains("…"), "\(huge.stderr)")
        #expect(huge.stderr.hasSuffix("a number that large is not taken (see 'mediafetch get --help')\n"), "\(huge.stderr)")
    }

    /// `mediafetch --collection tatry get URL` was "unknown option
    /// '--collection'", though get knows it: it is said to go after the command.
    @Test func anOptionOfACommandBeforeItIsSaidToGoAfterIt() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = directory.appending("cache")
            let collection = try await BuiltProducts.run(["--cache", cache, "--collection", "tatry", "get", "http://127.0.0.1:1/x"])
            #expect(collection.status == 64)
            #expect(collection.stderrLines == usageError("--collection is an option of get: write it after 'get'"))
            // A value that names a command is the option's value; a short option and a flag are options too.
            for (arguments, option, command) in [(["--collection", "list", "get", "http://127.0.0.1:1/x"], "--collection", "get"),
                                                 (["-i", "list", "get"], "-i", "get"), (["--format=json", "list"], "--format", "list"),
                                                 (["--failed", "list"], "--failed", "list")] {
                let misplaced = try await BuiltProducts.run(["--cache", cache] + arguments)
                #expect(misplaced.status == 64)
                #expect(misplaced.stderrLines == usageError("\(option) is an option of \(command): write it after '\(command)'", command: command))
            }
            // An option no command after it has is the parser's unknown option.
            let bogus = try await BuiltProducts.run(["--failed", "get", "http://127.0.0.1:1/x"])
            #expect(bogus.status == 64)
            #expect(bogus.stderrLines == usageError("unknown option '--failed'", command: nil))
            #expect(!FileManager.default.fileExists(atPath: cache))
        }
    }

    /// `--name=` is "needs a value" only for an option that takes one; any
    /// other name is the parser's unknown option.
    @Test func anUnknownOptionWithAnEmptyValueIsUnknown() async throws {
        let unknown = try await BuiltProducts.run(["list", "--bogus=", "--cache", "/nonexistent"])
        #expect(unknown.status == 64)
        #expect(unknown.stderrLines == usageError("unknown option '--bogus'", command: "list"))
        let known = try await BuiltProducts.run(["list", "--kind=", "--cache", "/nonexistent"])
        #expect(known.stderrLines == usageError("--kind needs a value (--kind= gives none)", command: "list"))
    }

    /// `get --bogus` names the unknown option, URLs or not: it said "give
    /// URLs" (the parser validates before it names an unknown option).
    @Test func anUnknownOptionOfGetIsNamedWithoutURLsToo() async throws {
        let unknown = try await BuiltProducts.run(["get", "--bogus"])
        #expect(unknown.status == 64)
        #expect(unknown.stderrLines == usageError("unknown option '--bogus'. Did you mean '--jobs'?"), "\(unknown.stderr)")
        let nothing = try await BuiltProducts.run(["get"])
        #expect(nothing.status == 64)
        #expect(nothing.stderrLines == usageError("give URLs or --input-file FILE"))
    }

    /// A bad URL ends a run a moment after it began setting up libcurl and
    /// TLS on another thread (`TransferEngine.warmUp`), and so does a list
    /// of nothing but comments, by the other way out (a normal return).
    /// Exiting while that set-up ran would run TLS's clean-up under it:
    /// without the wait for it, 52 of 200 such runs of the debug build (21 of
    /// 300 of the release build) died of SIGSEGV instead of saying what was wrong.
    @Test func aRunThatEndsAtOnceEndsCleanlyWhileDownloadsAreBeingSetUp() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = directory.appending("cache")
            let comments = directory.appending("comments.txt")
            try "# nothing yet\n\n".write(toFile: comments, atomically: true, encoding: .utf8)
            for _ in 0..<30 {
                let badURL = try await BuiltProducts.run(["get", "--cache", cache, "ftp://example.com/a.jpg"])
                try #require(badURL.status == 2, "\(badURL.status): \(badURL.stderr)")
                #expect(badURL.stderrLines == ["mediafetch: unsupported scheme 'ftp' (only http and https): ftp://example.com/a.jpg"])
                let nothing = try await BuiltProducts.run(["get", "--cache", cache, "-i", comments])
                try #require(nothing.status == 0, "\(nothing.status): \(nothing.stderr)")
                #expect(nothing.stderrLines == ["mediafetch: note: nothing to fetch: no URL in \(comments)"])
            }
            #expect(!FileManager.default.fileExists(atPath: cache))
        }
    }

    /// A line break in a URL or a file's name was shown as a space: the
    /// message named `a b.jpg`, a file that is not there.
    @Test func aLineBreakInAnArgumentIsShownAsAnEscape() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = directory.appending("cache")
            let url = try await BuiltProducts.run(["get", "--cache", cache, "http://127.0.0.1:1/a\nb.jpg"])
            #expect(url.status == 2)
            #expect(url.stderrLines == [#"mediafetch: not a URL, it holds a control character: http://127.0.0.1:1/a\u{A}b.jpg"#])
            // A URL given where a command or a value was keeps its password hidden in the usage error.
            for arguments in [["http://ann:secret@127.0.0.1:1/a.jpg"], ["get", "--jobs", "http://ann:secret@127.0.0.1:1/a.jpg"],
                              ["list", "--cache", cache, "http://ann:secret@127.0.0.1:1/a.jpg"],
                              // Mistyped: no scheme, with a URL in its query; and as an option's value.
                              ["ann:secret@127.0.0.1:1/a.jpg?r=http://x/"], ["get", "--jobs", "ann:secret@127.0.0.1:1"],
                              ["list", "--cache", cache, "ann:secret@127.0.0.1:1/a.jpg?r=http://x/"],
                              // A quote in an earlier value does not shift which values are read as URLs.
                              ["list", "--cache", cache, "it's", "ann:secret@127.0.0.1:1/a.jpg"]] {
                let misplaced = try await BuiltProducts.run(arguments)
                #expect(misplaced.status == 64 && misplaced.stderr.contains("ann:***@") && !misplaced.stderr.contains("secret"),
                        "\(misplaced.stderr)")
            }
            // The second of two URLs a line break joins keeps its password hidden, in text and in JSON.
            for progress in ["auto", "json"] {
                let two = try await BuiltProducts.run(["get", "--cache", cache, "--progress", progress,
                                                       "http://127.0.0.1:1/a.jpg\nhttp://ann:secret@127.0.0.1:1/b.jpg"])
                #expect(two.status == 2 && two.stderr.contains("ann:***@") && !two.stderr.contains("secret"), "\(two.stderr)")
            }
            let list = try await BuiltProducts.run(["get", "--cache", cache, "-i", directory.appending("a\nb.txt")])
            #expect(list.status == 2)
            #expect(list.stderrLines == ["mediafetch: \(directory.path)/a\\u{A}b.txt: cannot read the file: No such file or directory"])
            #expect(!FileManager.default.fileExists(atPath: cache))
        }
    }

    /// Swift would read such bytes as U+FFFD: a cache at `caf\xE9` would be
    /// made as another directory, and a list file looked for under another name.
    @Test func argumentsThatAreNotUTF8AreRefusedAndShown() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await BuiltProducts.runShell(#"exec "$MEDIAFETCH" get --cache "$DIR/$(printf 'caf\351')" http://127.0.0.1:1/x"#,
                                                          environment: ["DIR": directory.path])
            #expect(result.status == 64)
            #expect(result.stderrLines == usageError("argument 3 is not valid UTF-8: \(directory.path)/caf\\xE9 "
                                                      + "(mediafetch takes paths, URLs and names in UTF-8)", command: nil))
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)

            let variable = try await BuiltProducts.runShell(#"MEDIAFETCH_CACHE="$(printf '/tmp/\377')" exec "$MEDIAFETCH" stats"#)
            #expect(variable.status == 64)
            #expect(variable.stderrLines == usageError(#"MEDIAFETCH_CACHE is not valid UTF-8: /tmp/\xFF"#, command: "stats"))
            // Only where it would be used: not with --cache, nor for --version.
            for arguments in [#"stats --cache "$DIR/none""#, "--version"] {
                let unused = try await BuiltProducts.runShell(#"MEDIAFETCH_CACHE="$(printf '/tmp/\377')" exec "$MEDIAFETCH" "# + arguments,
                                                              environment: ["DIR": directory.path])
                #expect(unused.status == (arguments == "--version" ? 0 : 3), "\(unused.stderr)")
                #expect(!unused.stderr.contains("UTF-8"))
            }
        }
    }

    /// Help and the version go through stdout's buffer, written at exit: a
    /// stdout that refuses them is said, as `list`'s is, and not status 0.
    @Test(arguments: [["--help"], ["--version"], ["help", "get"], ["list", "--help"]])
    func helpThatCannotBeWrittenIsExit74(arguments: [String]) async throws {
        let result = try await BuiltProducts.run(arguments, stdoutTo: "/dev/full")
        #expect(result.status == 74)
        #expect(result.stderrLines == ["mediafetch: cannot write the output: No space left on device"])
        let shown = try await BuiltProducts.run(arguments)
        #expect(shown.status == 0)
        #expect(!shown.stdout.isEmpty)
    }

    @Test func aCacheThatIsAFileIsNamedWithTheReason() async throws {
        try await TemporaryDirectory.with { directory in
            let file = directory.appending("afile")
            #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
            let result = try await BuiltProducts.run(["get", "--cache", file, "http://127.0.0.1:1/x"])
            #expect(result.status == 3)
            // Of the directory given (it said "cannot create …/tmp: Not a directory").
            #expect(result.stderrLines == ["mediafetch: cannot use the cache at \(file): it is not a directory"])
        }
    }

    /// Under an address-space limit too low for a run (`ulimit -v`), every
    /// command says so in one line and makes nothing: a run hung for ever
    /// (a thread that never started) or crashed.
    @Test func anAddressSpaceLimitTooLowIsOneLine() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = directory.appending("cache")
            // A download needs more than a command that only reads.
            let cases = [(#"get --cache "$CACHE" http://127.0.0.1:1/a.jpg"#, 200_000, "196 MiB", "288 MiB"),
                         (#"stats --cache "$CACHE""#, 150_000, "147 MiB", "192 MiB"), ("--version", 150_000, "147 MiB", "192 MiB")]
            for (command, limit, shown, needed) in cases {
                let result = try await BuiltProducts.runShell("ulimit -v \(limit) && exec \"$MEDIAFETCH\" " + command,
                                                              environment: ["CACHE": cache])
                #expect(result.status == 3, "\(command)")
                #expect(result.stderrLines == ["mediafetch: the address-space limit is \(shown) (ulimit -v, the hard limit: the soft "
                    + "one was raised to it), and mediafetch needs about \(needed): raise it where it is set (limits.conf as, LimitAS=)"],
                        "\(command)")
            }
            let version = try await BuiltProducts.runShell(#"ulimit -v 200000 && exec "$MEDIAFETCH" --version"#)
            #expect(version.status == 0)
            #expect(access(cache, F_OK) != 0)
            // Enough for 16 transfers, not for the 100 asked for.
            let many = try await BuiltProducts.runShell(#"ulimit -v 300000 && exec "$MEDIAFETCH" get --cache "$CACHE" --jobs 100 "#
                + "http://127.0.0.1:1/a.jpg", environment: ["CACHE": cache])
            #expect(many.status == 3)
            #expect(many.stderrLines.first?.hasSuffix("needs about 582 MiB with --jobs 100: raise it where it is set "
                + "(limits.conf as, LimitAS=), or give fewer --jobs") == true, "\(many.stderr)")
            #expect(access(cache, F_OK) != 0)
            // A list too long for the limit is said to be before it is read (one of 145 MiB under 439 MiB died
            // of a failed allocation, a trace and all): 50 MiB of URLs, held twice, past 342 MiB.
            let list = directory.appending("long.txt")
            let line = "http://127.0.0.1:1/x.jpg?pad=" + String(repeating: "p", count: 2_530) + "\n"
            try Data(String(repeating: line, count: 20 * 1024).utf8).write(to: URL(fileURLWithPath: list))
            let long = try await BuiltProducts.runShell(#"ulimit -v 350000 && exec "$MEDIAFETCH" get --cache "$CACHE" -i "$LIST""#,
                                                        environment: ["CACHE": cache, "LIST": list])
            #expect(long.status == 3)
            #expect(long.stderrLines == ["mediafetch: the address-space limit is 342 MiB (ulimit -v, the hard limit: the soft one was "
                + "raised to it), and mediafetch needs about 388 MiB for a list of 50 MiB: raise it where it is set (limits.conf as, "
                + "LimitAS=)"], "\(long.stderr)")
            #expect(access(cache, F_OK) != 0)
        }
    }

    /// A standard descriptor closed at start is said to be closed: with
    /// standard input closed, `-i -` read from libdispatch's epoll
    /// descriptor, which took its number; with standard output closed,
    /// `list` wrote its rows to a timer.
    @Test func aClosedStandardDescriptorIsNamed() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = directory.appending("cache")
            let input = try await BuiltProducts.runShell(#"exec "$MEDIAFETCH" get --cache "$CACHE" -i - <&-"#,
                                                         environment: ["CACHE": cache])
            #expect(input.status == 2)
            #expect(input.stderrLines == ["mediafetch: standard input: it is closed (give the list in a file, or pipe it in)"])
            #expect(access(cache, F_OK) != 0)
            let made = try await BuiltProducts.runShell(#""$MEDIAFETCH" get --cache "$CACHE" --retries 0 http://127.0.0.1:1/a "#
                + #">/dev/null 2>&1; "$MEDIAFETCH" list --cache "$CACHE" >&-"#, environment: ["CACHE": cache])
            #expect(made.stderrLines.last == "mediafetch: cannot write the output: standard output is closed")
            #expect(made.status == 74)
            // What is printed through the C library fails as on the closed descriptor (the
            // placeholder takes no writes), and is said in the same words.
            let version = try await BuiltProducts.runShell(#"exec "$MEDIAFETCH" --version >&-"#)
            #expect(version.status == 74)
            #expect(version.stderrLines == ["mediafetch: cannot write the output: standard output is closed"])
        }
    }

    /// A cache given as a link to nothing (a disk not mounted) is named as
    /// such, not as "cannot create …/tmp: No such file or directory".
    @Test func aCacheThatLinksToNothingIsNamedWithTheReason() async throws {
        try await TemporaryDirectory.with { directory in
            let link = directory.appending("cache")
            #expect(symlink("/nonexistent/mediafetch-cache", link) == 0)
            let get = try await BuiltProducts.run(["get", "--cache", link, "http://127.0.0.1:1/x"])
            #expect(get.status == 3)
            #expect(get.stderrLines == ["mediafetch: cannot open the cache at \(link): it is a symbolic link to "
                + "'/nonexistent/mediafetch-cache', which does not exist"])
            let list = try await BuiltProducts.run(["list", "--cache", link])
            #expect(list.status == 3)
            #expect(list.stderrLines == ["mediafetch: no cache at \(link): it is a symbolic link to "
                + "'/nonexistent/mediafetch-cache', which does not exist (give --cache DIR or set MEDIAFETCH_CACHE)"])
            var info = stat()
            #expect(lstat(link, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK)
        }
    }

    @Test func errorLinesShowControlCharactersAsEscapes() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "ftp://host/a\u{1B}[31mred",
                                                      "http://host/1\r.jpg"])
            #expect(result.status == 2)
            // A CR too (it was taken for a line break, and shown as a space).
            #expect(result.stderrLines == ["mediafetch: unsupported scheme 'ftp' (only http and https): ftp://host/a\\u{1B}[31mred",
                                           "mediafetch: not a URL, it holds a control character: http://host/1\\u{D}.jpg"])
        }
    }

    @Test func anUnsupportedURLOnTheCommandLineIsBadInput() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await BuiltProducts.run(["get", "--cache", directory.appending("cache"), "file:///etc/passwd"])
            #expect(result.status == 2)
            #expect(result.stderrLines == ["mediafetch: unsupported scheme 'file' (only http and https): file:///etc/passwd"])
        }
    }

    @Test(arguments: [["list"], ["list", "--format", "json"], ["stats"], ["stats", "--format", "json"]])
    func outputThatCannotBeWrittenIsOneLineAndExit74(command: [String]) async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 1000, seed: 51))
            let cache = directory.appending("cache")
            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")]).status == 0)

            // A full disk behind `> list.txt`: FileHandle's write trapped (SIGILL, a backtrace).
            let result = try await BuiltProducts.run(command + ["--cache", cache], stdoutTo: "/dev/full")
            #expect(result.status == 74)
            #expect(result.stderrLines == ["mediafetch: cannot write the output: No space left on device"])
        }
    }

    @Test func aStderrThatCannotBeWrittenDoesNotStopTheRun() async throws {
        try await withOrigin { origin, directory in
            for index in 0..<20 { origin.addResource("/p\(index).jpg", data: fixtureBytes(count: 2000, seed: UInt64(60 + index))) }
            let cache = directory.appending("cache")
            let urls = (0..<20).map { origin.url("/p\($0).jpg") } + [origin.url("/gone.jpg")]

            // `2>>job.log` on a full disk: the failure line cannot be written.
            let result = try await BuiltProducts.run(["get", "--cache", cache, "--retries", "0", "--progress", "none"] + urls,
                                                     stderrTo: "/dev/full")
            #expect(result.status == 1)
            #expect(try await listJSON(cache).count == 20)
        }
    }

    /// `stats` takes list's formats: CSV is a header and one row, as the JSON's fields.
    @Test func statsOffersTheFormatsListHas() async throws {
        try await TemporaryDirectory.with { directory in
            let help = try await BuiltProducts.run(["stats", "--help"])
            #expect(help.stdout.replacingOccurrences(of: "\n", with: " ").split(separator: " ").joined(separator: " ").contains("(values: table, json, csv;"))
            let cache = directory.appending("cache")
            _ = try await BuiltProducts.run(["get", "--cache", cache, "http://127.0.0.1:1/x", "--retries", "0"])
            let csv = try await BuiltProducts.run(["stats", "--cache", cache, "--format", "csv"])
            #expect(csv.status == 0)
            let lines = csv.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 2)
            #expect(lines.first?.hasPrefix("cache,objects,bytes,items,") == true)
            let json = try await BuiltProducts.run(["stats", "--cache", cache, "--format", "json"])
            let fields = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            let header = lines[0].split(separator: ",").map(String.init)
            #expect(Set(header) == Set(fields.keys))
            let row = lines[1].split(separator: ",").map(String.init)
            #expect(row.count == header.count)
            #expect(zip(header, row).allSatisfy { key, value in key == "cache" ? value == cache : "\(fields[key] ?? "")" == value })
            let wrong = try await BuiltProducts.run(["stats", "--cache", cache, "--format", "xml"])
            #expect(wrong.status == 64)
        }
    }

    @Test func helpDocumentsTheExitCodes() async throws {
        let result = try await BuiltProducts.run(["--help"])
        #expect(result.status == 0)
        for code in ["0 ", "1 ", "2 ", "3 ", "64 ", "74 ", "130 "] {
            #expect(result.stdout.contains("  \(code)"), "exit code \(code) undocumented")
        }
    }
}
