import Foundation
import GRDB
import Testing
import TestOrigin
import TestSupport

/// A catalog that is not what this version wrote (damaged, copied without
/// its log, another program's, a newer version's) is refused with one line
/// and exit 3, and left as it was: neither `list` nor `get` makes a new
/// catalog over what could still be recovered.
@Suite struct CatalogSafetyTests {
    /// A cache with one photo, and the bytes of its files.
    private func cacheWithOnePhoto(_ origin: TestOrigin, _ directory: TemporaryDirectory) async throws -> String {
        origin.addResource("/a.jpg", data: fixtureBytes(count: 4_000, seed: 61))
        let cache = directory.appending("cache")
        let result = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])
        #expect(result.status == 0, "\(result.stderr)")
        return cache
    }

    private func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    /// Runs `stats`, `list` and a `get` of the cached photo: each must fail
    /// with `message` in its one line, and ask the origin for nothing.
    private func expectRefused(_ cache: String, _ origin: TestOrigin, saying message: String) async throws {
        let before = origin.requests().count
        for arguments in [["stats"], ["list"], ["get", origin.url("/a.jpg")]] {
            let result = try await BuiltProducts.run(arguments + ["--cache", cache])
            #expect(result.status == 3, "\(arguments[0]): \(result.stderr)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1 && result.stderr.contains(message), "\(arguments[0]): \(result.stderr)")
        }
        #expect(origin.requests().count == before)
    }

    /// A directory that holds only another program's database, where a new
    /// cache's catalog would go, is refused before anything is made in it:
    /// the cache's directories and its 1 MiB reserve were left there.
    @Test(arguments: [false, true])
    func anotherProgramsDatabaseGetsNothingMadeBesideIt(writeAheadLog: Bool) async throws {
        try await withOrigin { origin, directory in
            let cache = directory.appending("theirs")
            try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
            let other = try DatabaseQueue(path: cache + "/catalog.sqlite")
            if writeAheadLog { _ = try await other.writeWithoutTransaction { try String.fetchOne($0, sql: "PRAGMA journal_mode = WAL") } }
            try await other.write { try $0.execute(sql: "CREATE TABLE foo (x); INSERT INTO foo VALUES (1)") }
            try other.close()
            let names = try FileManager.default.contentsOfDirectory(atPath: cache).sorted()

            try await expectRefused(cache, origin, saying: "it is not a mediafetch catalog (it holds other tables: foo)")
            // (SQLite may make the empty log and index a WAL database's reader needs.)
            let sqlitesOwn: Set = ["catalog.sqlite-wal", "catalog.sqlite-shm"]
            #expect(try FileManager.default.contentsOfDirectory(atPath: cache).filter { !sqlitesOwn.contains($0) }.sorted() == names)
        }
    }

    /// A file there that cannot be read as a catalog (damaged, encrypted,
    /// or held locked by its program), with no objects/ beside it, is no
    /// cache's either: nothing is made beside it.
    @Test func anUnreadableDatabaseWithNoObjectsGetsNothingMadeBesideIt() async throws {
        try await withOrigin { origin, directory in
            let cache = directory.appending("theirs")
            try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
            try Data(fixtureBytes(count: 8192, seed: 77)).write(to: URL(fileURLWithPath: cache + "/catalog.sqlite"))
            try await expectRefused(cache, origin, saying: "it cannot be read as a catalog (")
            #expect(try FileManager.default.contentsOfDirectory(atPath: cache) == ["catalog.sqlite"])

            // Another program's database, held locked by it.
            let locked = directory.appending("locked")
            try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: true)
            let other = try DatabaseQueue(path: locked + "/catalog.sqlite")
            try await other.write { try $0.execute(sql: "CREATE TABLE notes (x)") }
            try other.close()
            // Held by another process (GRDB keeps no transaction open past an access), until it is killed.
            let holder = #"import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "#
                + #"c.execute('BEGIN EXCLUSIVE'); open(sys.argv[1] + '.held', 'w').close(); time.sleep(30)"#
            let get = try await BuiltProducts.runShell(#"python3 -c "$HOLDER" "$CACHE/catalog.sqlite" & holder=$!; "#
                + #"while [ ! -e "$CACHE/catalog.sqlite.held" ]; do sleep 0.05; done; "#
                + #""$MEDIAFETCH" get --cache "$CACHE" "$URL"; status=$?; kill -9 $holder; rm -f "$CACHE/catalog.sqlite.held"; exit $status"#,
                environment: ["HOLDER": holder, "CACHE": locked, "URL": origin.url("/a.jpg")])
            #expect(get.status == 3)
            #expect(get.stderrLines.count == 1 && get.stderr.contains("it cannot be read as a catalog (another program holds it locked)"),
                    "\(get.stderr)")
            let made: Set = ["objects", "tmp", "catalog.reserve", "catalog.sqlite.lock"]
            #expect(try FileManager.default.contentsOfDirectory(atPath: locked).filter(made.contains).isEmpty)
        }
    }

    /// An empty catalog.sqlite among another program's files is no catalog:
    /// it made the folder a cache, and the file mediafetch's.
    @Test func anEmptyCatalogAmongOtherFilesIsNoCache() async throws {
        try await withOrigin { origin, directory in
            let folder = directory.appending("project")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try "x".write(toFile: folder + "/notes.txt", atomically: true, encoding: .utf8)
            #expect(FileManager.default.createFile(atPath: folder + "/catalog.sqlite", contents: Data()))
            let result = try await BuiltProducts.run(["get", "--cache", folder, origin.url("/a.jpg")])
            #expect(result.status == 3)
            #expect(result.stderr.contains("is not a mediafetch cache") && result.stderr.contains("'notes.txt'"), "\(result.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == ["catalog.sqlite", "notes.txt"])
        }
    }

    @Test func aCatalogCopiedWithoutItsLogIsNotTakenForAnEmptyOne() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            // What `cp catalog.sqlite` takes after a run: the main file, whose commits are all in the log.
            try FileManager.default.removeItem(atPath: cache + "/catalog.sqlite-wal")
            try? FileManager.default.removeItem(atPath: cache + "/catalog.sqlite-shm")
            let main = contents(cache + "/catalog.sqlite")

            try await expectRefused(cache, origin, saying: "its write-ahead log (catalog.sqlite-wal) was not copied with it")
            #expect(contents(cache + "/catalog.sqlite") == main)
            // SQLite may have made an empty log while the catalog was opened: nothing was written to it.
            #expect((contents(cache + "/catalog.sqlite-wal") ?? Data()).isEmpty)
        }
    }

    /// A log cut short (by a copy, a full disk) or overwritten holds no
    /// commit SQLite reads, so the catalog looked new: `get` made one over
    /// it, forgot every object stored before, and wrote over the log.
    /// Sizes: inside the header, inside the first frame, inside the second
    /// (the first commit, GRDB's table of migrations, takes two), past the
    /// first commit and inside a later frame, and another file's bytes.
    @Test(arguments: [20, 1000, 32 + 4120 + 2060, 32 + 4120 * 3 + 100, -5000])
    func aCatalogBesideADamagedLogIsRefusedAndTheLogKept(size: Int) async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            let logPath = cache + "/catalog.sqlite-wal"
            if size > 0 {
                #expect(truncate(logPath, off_t(size)) == 0)
            } else {
                // Another file's bytes in its place.
                try Data(fixtureBytes(count: -size, seed: 62)).write(to: URL(fileURLWithPath: logPath))
            }
            let main = contents(cache + "/catalog.sqlite")
            let log = contents(logPath)

            try await expectRefused(cache, origin, saying: "its write-ahead log (catalog.sqlite-wal, \(abs(size)) bytes), "
                                    + "which holds every commit since the last checkpoint, is damaged")
            #expect(contents(cache + "/catalog.sqlite") == main)
            #expect(contents(logPath) == log)
        }
    }

    @Test func anEmptiedCatalogBesideItsLogIsRefusedAndTheLogKept() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            try Data().write(to: URL(fileURLWithPath: cache + "/catalog.sqlite"))
            let log = contents(cache + "/catalog.sqlite-wal")
            #expect((log?.count ?? 0) > 0)

            try await expectRefused(cache, origin, saying: "the file is empty, but its write-ahead log")
            #expect(contents(cache + "/catalog.sqlite-wal") == log)
        }
    }

    /// An empty catalog without a log, where objects/ holds files, is what
    /// a run cut off while its catalog was made leaves (the downloads begin
    /// meanwhile), and what emptying it leaves: `list` and `stats` say so
    /// and what `get` does, and `get` starts a new catalog saying so (it did
    /// without a word, and `list` had said the log was not copied with it).
    @Test func anEmptyCatalogWithoutALogIsSaidToBeSoAndGetStartsANewOne() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            origin.addResource("/b.jpg", data: fixtureBytes(count: 4_000, seed: 62))
            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/b.jpg")]).status == 0)
            for name in ["catalog.sqlite-wal", "catalog.sqlite-shm"] { try? FileManager.default.removeItem(atPath: "\(cache)/\(name)") }
            try Data().write(to: URL(fileURLWithPath: cache + "/catalog.sqlite"))

            for command in ["list", "stats"] {
                let result = try await BuiltProducts.run([command, "--cache", cache])
                #expect(result.status == 3 && result.stderrLines.count == 1, "\(command): \(result.stderr)")
                #expect(result.stderr.contains("it is empty, but objects/ holds files: its making was cut off, or it was emptied; "
                    + "restore it with its log (catalog.sqlite-wal) from a copy (or run get to start a new catalog: "
                    + "the objects are found again as their URLs are fetched)"), "\(command): \(result.stderr)")
                #expect(contents(cache + "/catalog.sqlite")?.isEmpty == true)
            }
            let got = try await BuiltProducts.run(["get", "--cache", cache, "--progress", "none", origin.url("/a.jpg")])
            #expect(got.status == 0, "\(got.stderr)")
            #expect(got.stderrLines == ["mediafetch: note: \(cache)/catalog.sqlite is empty, but objects/ holds files (its making was "
                + "cut off, or it was emptied): a new catalog is started, and the objects are found again as their URLs are fetched"])
            let listed = try await BuiltProducts.run(["list", "--cache", cache, "--format", "csv"])
            #expect(listed.status == 0 && listed.stdout.split(separator: "\n").count == 2, "\(listed.stdout)")
            // Said once: the next run finds a catalog.
            let again = try await BuiltProducts.run(["get", "--cache", cache, "--progress", "none", origin.url("/b.jpg")])
            #expect(again.status == 0 && again.stderr.isEmpty, "\(again.stderr)")
        }
    }

    @Test func anotherProgramsDatabaseIsNotMadeACatalog() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            for name in ["catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"] {
                try? FileManager.default.removeItem(atPath: "\(cache)/\(name)")
            }
            // Rollback-journal mode, as sqlite3 makes a database: opening it as a catalog switched it to WAL.
            let other = try DatabaseQueue(path: cache + "/catalog.sqlite")
            try await other.write { try $0.execute(sql: "CREATE TABLE foo (x); INSERT INTO foo VALUES (1)") }
            try other.close()
            let before = contents(cache + "/catalog.sqlite")

            try await expectRefused(cache, origin, saying: "it is not a mediafetch catalog (it holds other tables: foo)")
            #expect(contents(cache + "/catalog.sqlite") == before)
        }
    }

    @Test func aCatalogOfANewerVersionIsRefusedBeforeAnyRequest() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            let catalog = try DatabasePool(path: cache + "/catalog.sqlite")
            try await catalog.write { try $0.execute(sql: "INSERT INTO grdb_migrations VALUES ('v9: from the future')") }
            try catalog.close()

            try await expectRefused(cache, origin, saying: "written by a newer mediafetch (its schema has 'v9: from the future'")
        }
    }

    @Test func aCatalogRemovedBesideItsLogIsRefusedAndTheLogKept() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            try FileManager.default.removeItem(atPath: cache + "/catalog.sqlite")
            let log = contents(cache + "/catalog.sqlite-wal")

            try await expectRefused(cache, origin, saying: "the file is missing, but its write-ahead log")
            #expect(contents(cache + "/catalog.sqlite-wal") == log)
            #expect(!FileManager.default.fileExists(atPath: cache + "/catalog.sqlite"))
        }
    }

    /// A catalog removed with its log (after a checkpoint) from a cache that
    /// holds objects: `list` and `stats` name the lost catalog, not a missing
    /// cache; `get` starts a new one, as the README offers, and finds the
    /// objects again as their URLs are fetched.
    @Test func aCatalogRemovedWithItsLogIsNamedAsLost() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            for name in ["catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"] {
                try? FileManager.default.removeItem(atPath: "\(cache)/\(name)")
            }
            for command in ["list", "stats"] {
                let result = try await BuiltProducts.run([command, "--cache", cache])
                #expect(result.status == 3)
                #expect(result.stderrLines == ["mediafetch: no catalog at \(cache)/catalog.sqlite, but objects/ holds files: it was "
                    + "removed or moved; restore it with its log (catalog.sqlite-wal) from a copy (or run get to start a new "
                    + "catalog: the objects are found again as their URLs are fetched)"])
            }
            let again = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])
            #expect(again.status == 0, "\(again.stderr)")
            #expect(try await listJSON(cache).count == 1)
        }
    }

    @Test func anotherGRDBProgramsDatabaseIsNotTakenForANewerCatalog() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            for name in ["catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"] {
                try? FileManager.default.removeItem(atPath: "\(cache)/\(name)")
            }
            var migrator = DatabaseMigrator()
            migrator.registerMigration("notes v1") { try $0.execute(sql: "CREATE TABLE note (text)") }
            let other = try DatabasePool(path: cache + "/catalog.sqlite")
            try migrator.migrate(other)
            try other.close()

            try await expectRefused(cache, origin, saying: "it is not a mediafetch catalog (its schema has 'notes v1')")
        }
    }

    /// A first run cut off while it made the catalog (after SQLite's switch
    /// to WAL, before the tables), with objects its downloads had stored:
    /// the next run makes the catalog and goes on, as with a new one.
    /// Cut off before GRDB's table of migrations was made, or after it and
    /// before the first migration's transaction.
    @Test(arguments: [false, true])
    func aCatalogWhoseMakingWasCutOffIsMadeByTheNextRun(withMigrationsTable: Bool) async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            for name in ["catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"] {
                try? FileManager.default.removeItem(atPath: "\(cache)/\(name)")
            }
            // A process that switched to WAL, committed once (as GRDB does on opening), and was killed.
            let script = """
                import os, sqlite3, sys
                db = sqlite3.connect(sys.argv[1], isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("CREATE TABLE grdb_issue_102 (id INTEGER PRIMARY KEY)")
                db.execute("DROP TABLE grdb_issue_102")
                if sys.argv[2] == "yes":
                    db.execute("CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
                os._exit(0)
                """
            let python = try await BuiltProducts.runShell(#"python3 -c "$SCRIPT" "$CATALOG" "$TABLE""#,
                                                          environment: ["SCRIPT": script, "CATALOG": cache + "/catalog.sqlite",
                                                                        "TABLE": withMigrationsTable ? "yes" : "no"])
            #expect(python.status == 0, "\(python.stderr)")
            #expect((contents(cache + "/catalog.sqlite-wal")?.count ?? 0) > 0)

            let result = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])

            #expect(result.status == 0, "\(result.stderr)")
            #expect(try await listJSON(cache).count == 1)
        }
    }

    /// `list` and `stats` make nothing: a cache copied without its empty
    /// `tmp/` (archivers drop empty directories) is listed as it is.
    @Test func readingACacheCreatesNothingInIt() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            try FileManager.default.removeItem(atPath: cache + "/tmp")
            try? FileManager.default.removeItem(atPath: cache + "/catalog.sqlite.lock")
            // Every commit merged into the main file, as before copying a cache: the log is empty.
            let catalog = try DatabasePool(path: cache + "/catalog.sqlite")
            try await catalog.writeWithoutTransaction { try $0.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            try catalog.close()
            let main = contents(cache + "/catalog.sqlite")

            let entries = try await listJSON(cache)
            let stats = try await BuiltProducts.run(["stats", "--cache", cache])

            #expect(entries.count == 1)
            #expect(stats.status == 0, "\(stats.stderr)")
            // Read, not written: opening a pool had given the empty log a commit of its own.
            #expect(contents(cache + "/catalog.sqlite") == main)
            #expect((contents(cache + "/catalog.sqlite-wal") ?? Data()).isEmpty)
            #expect(!FileManager.default.fileExists(atPath: cache + "/tmp"))
            #expect(!FileManager.default.fileExists(atPath: cache + "/catalog.sqlite.lock"))
        }
    }

    /// A file removed by hand is not listed as cached: `list` marks it and
    /// says so in a note, `stats` counts it, and `get` fetches it again.
    @Test func aFileRemovedByHandIsShownMissing() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            let entry = try #require(try await listJSON(cache).first)
            #expect(entry["missing"] as? Bool == false)
            try FileManager.default.removeItem(atPath: try #require(entry["path"] as? String))

            let list = try await BuiltProducts.run(["list", "--cache", cache])
            let stats = try await BuiltProducts.run(["stats", "--cache", cache, "--format", "json"])
            let parsed = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any]

            #expect(list.status == 0)
            #expect(list.stdout.split(separator: "\n").last?.contains(" missing ") == true, "\(list.stdout)")
            #expect(list.stderr == "mediafetch: note: 1 of the items listed has no file in the cache (removed, or cut "
                + "short): get fetches it again\n")
            #expect(parsed?["missingObjects"] as? Int == 1)
            #expect(try await listJSON(cache).first?["missing"] as? Bool == true)
            #expect(try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")]).status == 0)
            #expect(try await listJSON(cache).first?["missing"] as? Bool == false)
            #expect(origin.requests(for: "/a.jpg").count == 2)
        }
    }

    @Test(.enabled(if: BuiltProducts.canRunAsAnotherUser, "needs root and setpriv to run as nobody"))
    func aCacheThatCannotBeEnteredIsNotCalledMissing() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            #expect(chmod(cache, 0o700) == 0)

            let result = try await BuiltProducts.run(["stats", "--cache", cache], as: .nobody)

            #expect(result.status == 3)
            #expect(result.stderr == "mediafetch: cannot read the cache at \(cache): Permission denied\n", "\(result.stderr)")
        }
    }

    /// get says what list and stats say of a cache this user may not enter
    /// (it said "cannot create …/tmp: Permission denied", of a tmp/ that was there).
    @Test(.enabled(if: BuiltProducts.canRunAsAnotherUser, "needs root and setpriv to run as nobody"))
    func getSaysACacheItCannotEnterAsStatsDoes() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            for path in [directory.path, cache] { #expect(chmod(path, path == cache ? 0o700 : 0o755) == 0) }
            let before = origin.requests().count
            let result = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")], as: .nobody)
            #expect(result.status == 3)
            #expect(result.stderr == "mediafetch: cannot read the cache at \(cache): Permission denied\n", "\(result.stderr)")
            #expect(origin.requests().count == before)
        }
    }

    /// An `objects/` that links to nothing (a disk not mounted), or that is a
    /// file, is no cache without objects: list said every item was missing,
    /// "get fetches them again", and stats that every object had no file.
    @Test(arguments: [true, false])
    func objectsThatLinkToNothingOrAreAFileAreNotCalledMissing(link: Bool) async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            let objects = cache + "/objects"
            let away = directory.appending("unmounted")
            #expect(rename(objects, away) == 0)
            let reason: String
            if link {
                #expect(symlink(away, objects) == 0)
                #expect(rename(away, away + "-gone") == 0)
                reason = "\(objects) is a link to \(away), which cannot be reached (No such file or directory)"
            } else {
                #expect(FileManager.default.createFile(atPath: objects, contents: Data("not objects".utf8)))
                reason = "\(objects) is not a directory"
            }

            for arguments in [["list"], ["list", "--format", "json"], ["stats"]] {
                let result = try await BuiltProducts.run(arguments + ["--cache", cache])
                #expect(result.status == 3)
                #expect(result.stdout.isEmpty, "\(arguments): \(result.stdout)")
                #expect(result.stderr == "mediafetch: cannot read the cache's objects: \(reason)\n", "\(arguments): \(result.stderr)")
            }
            let get = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")])
            #expect(get.status == 3)
            #expect(get.stderr == "mediafetch: cannot open the cache at \(cache): \(reason)\n", "\(get.stderr)")
        }
    }

    /// Objects another user may not look at are not missing: list and stats
    /// said every one was gone, "get fetches them again", with every file intact.
    @Test(.enabled(if: BuiltProducts.canRunAsAnotherUser, "needs root and setpriv to run as nobody"))
    func objectsThatCannotBeLookedAtAreNotCalledMissing() async throws {
        try await withOrigin { origin, directory in
            let cache = try await cacheWithOnePhoto(origin, directory)
            // The cache as another user may read it (the test's directory is the owner's alone), its objects not.
            for path in [directory.path, cache] { #expect(chmod(path, 0o755) == 0) }
            #expect(chmod(cache + "/objects", 0o700) == 0)
            // (As the owner, list finds the photo.)
            #expect(try await listJSON(cache).first?["missing"] as? Bool == false)

            for arguments in [["list"], ["list", "--format", "json"], ["list", "--format", "csv"], ["stats"]] {
                let result = try await BuiltProducts.run(arguments + ["--cache", cache], as: .nobody)
                #expect(result.status == 3)
                // Nothing on stdout: a header alone read as an empty listing.
                #expect(result.stdout.isEmpty, "\(arguments): \(result.stdout)")
                #expect(result.stderr == "mediafetch: cannot read the cache's objects: cannot read \(cache)/objects/sha256: "
                    + "Permission denied\n", "\(arguments): \(result.stderr)")
            }
            // get names the directory it cannot enter (it said "cannot create …/objects/sha256", which was there).
            let get = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")], as: .nobody)
            #expect(get.status == 3)
            #expect(get.stderr == "mediafetch: cannot open the cache at \(cache): cannot enter \(cache)/objects: Permission denied\n",
                    "\(get.stderr)")
        }
    }

    /// One of the store's fan-out directories this user may not enter is
    /// no object missing either: `get` fetched its URLs again, failed each
    /// at its store, and listed them as failed, with their files intact.
    @Test(.enabled(if: BuiltProducts.canRunAsAnotherUser, "needs root and setpriv to run as nobody"))
    func getStopsAtAnObjectItCannotLookAtAndFetchesNothing() async throws {
        try await withOrigin { origin, directory in
            origin.addResource("/a.jpg", data: fixtureBytes(count: 4_000, seed: 62))
            origin.addResource("/b.jpg", data: fixtureBytes(count: 4_000, seed: 63))
            let cache = try directory.cache(ownedBy: .nobody)
            let first = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg")], as: .nobody)
            #expect(first.status == 0, "\(first.stderr)")
            let object = try #require(try objectPaths(inCache: cache).first)
            let fanOut = (object as NSString).deletingLastPathComponent
            #expect(chmod(fanOut, 0o000) == 0)
            let asked = origin.requests().count

            let get = try await BuiltProducts.run(["get", "--cache", cache, origin.url("/a.jpg"), origin.url("/b.jpg")], as: .nobody)

            #expect(chmod(fanOut, 0o755) == 0)
            #expect(get.status == 3)
            #expect(get.stderr == "mediafetch: cannot read the cache's objects: cannot look at \(object): Permission denied\n",
                    "\(get.stderr)")
            #expect(origin.requests().count == asked)
            let failed = try await BuiltProducts.run(["list", "--cache", cache, "--failed"], as: .nobody)
            #expect(failed.status == 0 && !failed.stdout.contains("a.jpg"), "\(failed.stdout)")
        }
    }
}
