import CFileSync
import CSQLiteTuning
import Foundation
import GRDB
import URLText

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The SQLite catalog (`catalog.sqlite`, WAL): objects, the URLs they came
/// from, collections and their items. Knows nothing of the network.
///
/// Several processes may open the same catalog: WAL lets readers run beside
/// the one writer, and writers wait for each other (busy timeout) instead of failing.
public final class Catalog: Sendable {
    /// A pool (WAL: readers beside the writer), or on read-only media a
    /// read-only queue (see `openOnReadOnlyMedium`).
    private let database: any DatabaseWriter
    public let path: String
    private let lockWait: LockWait
    /// How many writes gave up waiting for another process's lock.
    public var lockWaitsGivenUp: Int { lockWait.givenUp.load(ordering: .relaxed) }
    /// Whether opening made the database or its WAL file: their names must be
    /// made durable too (a whole-filesystem flush may never have come).
    private let createsFiles: Bool

    /// How long a writer waits for another process's write transaction.
    public static let busySeconds = 60

    /// An error of the catalog in one short line: SQLite's code and words,
    /// without the statement GRDB quotes (a query over many URLs quoted a
    /// kilobyte of SQL); a lock held past `busySeconds` says so (plain
    /// SQLITE_BUSY is what the wait ends with; its other forms come at once).
    public static func describe(_ error: any Error) -> String {
        guard let error = error as? DatabaseError else { return "\(error)" }
        let reason = "SQLite error \(error.resultCode.rawValue): \(error.message ?? "unknown")"
        if error.extendedResultCode == .SQLITE_BUSY {
            return "another process has held it locked for over \(busySeconds) s (\(reason))"
        }
        return reason
    }

    /// Whether `error` is a wait for another process's lock that ended without it.
    public static func isLockTimeout(_ error: any Error) -> Bool {
        (error as? DatabaseError)?.resultCode == .SQLITE_BUSY
    }

    /// Whether `error` came from the catalog as a whole rather than from one
    /// row: a lock held past the wait, a full disk, a damaged file, no
    /// permission, no memory. Trying each row of a group on its own then only
    /// repeats it, once a row (a lock that stayed cost another minute per
    /// item), and the rows are not kept for the next run.
    public static func failsEveryRow(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return true }
        switch error.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_FULL, .SQLITE_IOERR, .SQLITE_CORRUPT, .SQLITE_NOTADB,
             .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_NOMEM, .SQLITE_PROTOCOL, .SQLITE_NOLFS,
             .SQLITE_INTERRUPT:
            return true
        default:
            return false
        }
    }

    /// Opens (creating and migrating if needed) the catalog at `path`. A
    /// writer waits up to `lockWaitLimit` (`busySeconds`, unless a test
    /// shortens it) for another process's lock; `onLockWait` is called once
    /// if a wait lasts longer than `noticeAfter`. `stop` ends the waits
    /// early, those of the opening too, once its owner stops it (a run
    /// interrupted, or one done with the catalog before it opened).
    ///
    /// A file that holds no catalog (no tables) is given one, unless
    /// `refusingNewSchema` says why not; it is asked when reading only, and
    /// when the file has a header but no log beside it (or an empty or a
    /// damaged one), as a copy made without its log has. A file with tables of
    /// something else, or with migrations of a newer mediafetch, is refused
    /// before anything is written to it. `readingOnly`: the opening makes no
    /// lock file of its own (another user's cache, or root listing it, must
    /// not leave one its owner cannot open).
    public init(path: String, lockWaitLimit: Duration = .seconds(busySeconds), noticeAfter: Duration = .seconds(2),
                onLockWait: (@Sendable () -> Void)? = nil, stop: LockWaitStop = LockWaitStop(),
                readingOnly: Bool = false, refusingNewSchema: () -> String? = { nil }) throws {
        self.path = path
        var configuration = Configuration()
        let lockWait = LockWait(limit: lockWaitLimit, noticeAfter: noticeAfter, onLongWait: onLockWait, stop: stop)
        self.lockWait = lockWait
        configuration.busyMode = .callback { tries in lockWait.shouldTryAgain(tries: tries) }
        configuration.foreignKeysEnabled = true
        // WAL with synchronous=NORMAL: a commit is atomic and consistent without
        // an fsync of its own; the store's next group flush (when it syncs the
        // whole filesystem), or `makeDurable` at the end of a job, makes it
        // durable. A power cut before that may
        // lose the last commits, never corrupt the file; rows only ever point
        // at objects already flushed, so what is lost is a record of a stored
        // object: the next run downloads that URL again and stores nothing new.
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // A log that grew large (a big group, a migration) is cut back to
            // this when it is next emptied, instead of keeping its size.
            try db.execute(sql: "PRAGMA journal_size_limit = \(Catalog.largeLog)")
            // No checkpoint on close: every run would end with two fsyncs and
            // a copy of the WAL (see mf_sqlite_skip_checkpoint_on_close).
            if let connection = db.sqliteConnection {
                _ = mf_sqlite_skip_checkpoint_on_close(UnsafeMutableRawPointer(connection))
            }
        }
        // Two processes opening a new cache at once would race: switching a
        // new file to WAL takes an exclusive lock that SQLite reports as busy
        // without waiting, and both would see an empty schema and create it.
        // An exclusive file lock around the whole opening makes them take turns.
        // Files are made with the umask's mode (SQLite's own default is 0644,
        // which the umask cannot widen): a group's shared cache (umask 002)
        // needs the catalog writable by the group, and SQLite gives its log
        // and shared-memory file the catalog's mode.
        let lock = readingOnly ? open(path + ".lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            : open(path + ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o666)
        defer { if lock >= 0 { _ = mf_close_unlocking(lock) } }
        // Waited for as for the catalog's own lock: a process stuck while it
        // held this one had every later opening wait in silence, for ever.
        var tries = 0
        while lock >= 0, flock(lock, LOCK_EX | LOCK_NB) != 0, errno == EWOULDBLOCK || errno == EINTR {
            guard lockWait.shouldTryAgain(tries: tries) else {
                throw DatabaseError(resultCode: .SQLITE_BUSY, message: "catalog.sqlite.lock is held while it is opened")
            }
            tries += 1
        }
        try Self.rollBackJournalLeftByAKill(path)
        createsFiles = access(path, F_OK) != 0 || access(Self.writeAheadLog(of: path), F_OK) != 0
        // A main file with a header and no log beside it (or an empty one:
        // SQLite makes one when it only reads) may be a copy without its
        // log. A first opening cut off after its switch to WAL has a log
        // already (GRDB's first commit), and one being made here is empty.
        // A damaged log is passed over by SQLite as an empty one: a log cut
        // short by a copy, with every commit of a small catalog in it, had a
        // new catalog made over it, and its objects forgotten.
        var main = stat()
        let mayHaveLostItsLog = stat(path, &main) == 0 && main.st_size > 0 && Self.writeAheadLogState(of: path) != .frames
        // SQLite's own journal: not a file this catalog made (it is always in
        // WAL mode), and opening it would switch it to WAL, a write: looked at first.
        if Self.isInRollbackJournalMode(path) {
            let other = try DatabaseQueue(path: path, configuration: Self.readOnlyConfiguration)
            let problem = try other.read { try Self.schemaProblem($0) }
            try other.close()
            if let problem { throw CatalogRefusal(problem) }
        }
        if readingOnly, let reader = try Self.openReadingOnly(path, configuration,
                                                              ifNoSchema: { refusingNewSchema() ?? "it holds no catalog" }) {
            database = reader
            return
        }
        // GRDB's pool gives a missing or empty log a commit of its own: a
        // catalog copied without its log is looked at before, read-only.
        if mayHaveLostItsLog, let reader = try Self.openReadingOnly(path, configuration, ifNoSchema: refusingNewSchema) {
            try reader.close()
        }
        if access(path, F_OK) != 0 {
            // An empty file is an empty database to SQLite. Where it cannot be made, SQLite says why.
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
            if fd >= 0 { close(fd) }
        }
        do {
            database = try DatabasePool(path: path, configuration: configuration)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CANTOPEN || error.resultCode == .SQLITE_READONLY {
            guard let readOnly = try Self.openOnReadOnlyMedium(path) else { throw error }
            database = readOnly
        }
        let (problem, hasSchema, removesPasswords, rewritesTables) = try database.read { db in
            let applied = try db.tableExists("grdb_migrations") ? try Self.migrator.appliedIdentifiers(db) : []
            return (try Self.schemaProblem(db), try Self.hasSchema(db),
                    try db.tableExists("source") && !applied.contains(Self.passwordsMigration),
                    // Only rows to rewrite take room: a new catalog whose making a full disk
                    // cut short after v2 was refused the 4 MiB of a rewrite on a 2 MiB disk.
                    try db.tableExists("item") && !applied.contains(Self.itemsByURLMigration)
                        && (try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM item)") ?? false)
                    || (try db.tableExists("object") && !applied.contains(Self.objectsByHashMigration)
                        && (try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM object)") ?? false)))
        }
        if let problem { throw CatalogRefusal(problem) }
        if rewritesTables, let refusal = Self.roomToRekeyProblem(path) { throw CatalogRefusal(refusal) }
        if !hasSchema, readingOnly || mayHaveLostItsLog, let refusal = refusingNewSchema() { throw CatalogRefusal(refusal) }
        try Self.migrator.migrate(database)
        // Opening made the shared-memory file: its holes are filled now, while there is room.
        try OutOfSpace.allocateSharedMemory(path + "-shm")
        if removesPasswords {
            // The old pages, passwords and all, are still in the write-ahead
            // log (closing does not checkpoint) and in the main file: copy
            // the rewritten pages over them and empty the log.
            try database.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        }
        // Best effort: a disk filled meanwhile must not refuse a catalog that works.
        try? Self.compact(database, path: path)
    }

    private static let passwordsMigration = "v2: URLs without passwords"
    private static let itemsByURLMigration = "v3: items keyed by URL, without a rowid"
    private static let objectsByHashMigration = "v5: objects keyed by hash, without a rowid"

    /// Why the disk holding the catalog at `path` has too little room to
    /// rekey its items (v3) or its objects (v5), which writes a new table as
    /// large as the old one to the log, and then to the file: as much as the catalog's file
    /// and log, and 4 MiB (a catalog of 139 MB took 111 MB of log and 12 MB
    /// more of file). On a full disk the migration filled it and was rolled
    /// back, or was committed with its pages left in a log that could not
    /// be emptied (emptying it needs room in the file too).
    static func roomToRekeyProblem(_ path: String) -> String? {
        let needed = fileSize(path) + fileSize(writeAheadLog(of: path)) + (4 << 20)
        guard let free = freeBytesBeside(path), free < needed else { return nil }
        let mebibytes = { (bytes: Int64) in (bytes + (1 << 20) - 1) >> 20 }
        return "this version keeps its rows another way, and rewriting them needs about \(mebibytes(needed)) MiB "
            + "free on its disk, which has \(mebibytes(max(0, free))) MiB: free some space and run again"
    }

    /// The size of the file at `path`; 0 when there is none.
    private static func fileSize(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : 0
    }

    /// The bytes free on the disk holding the file at `path`.
    private static func freeBytesBeside(_ path: String) -> Int64? {
        let directory = (path as NSString).deletingLastPathComponent
        return OutOfSpace.freeBytes(directory: directory.isEmpty ? "." : directory)
    }

    /// A log left larger than `largeLog` is emptied into the file at opening.
    static let largeLog: Int64 = 64 << 20
    /// A catalog holding at most this many bytes of pages in use is vacuumed
    /// at opening when a quarter of its pages (8 MiB at least) are free.
    static let vacuumLimit: Int64 = 128 << 20

    /// Gives back the room a rebuilt table leaves, whenever it is found (a
    /// run killed or out of room after the rebuild's commit left it for the
    /// next): the old table's pages are free pages of the file, and the new
    /// one's are in the log, which closing does not empty. A log past
    /// `largeLog` is emptied into the file; a file with a quarter of its
    /// pages free (8 MiB at least), whose pages in use are `vacuumLimit` at
    /// most (a second or so, once), is vacuumed when the disk has room for
    /// two more copies of them; a larger one keeps its free pages for the
    /// rows to come (`VACUUM` in sqlite3 gives them back).
    private static func compact(_ database: any DatabaseWriter, path: String) throws {
        let logSize = fileSize(writeAheadLog(of: path))
        let (pageSize, pages, freePages) = try database.read { db in
            (try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 4096, try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0,
             try Int64.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0)
        }
        let inUse = (pages - freePages) * pageSize
        let vacuums = freePages * 4 >= pages && freePages * pageSize >= 8 << 20 && inUse <= vacuumLimit
            && (freeBytesBeside(path) ?? 0) > 2 * inUse + (64 << 20)
        guard vacuums || logSize > largeLog else { return }
        try database.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            guard vacuums else { return }
            try db.execute(sql: "VACUUM")
            try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
        }
    }

    /// The catalog opened to be read only (`list`, `stats`), on a read-only
    /// connection: nothing is written to it (GRDB's pool gives an empty log
    /// a commit of its own, and a read-only medium is opened as before;
    /// SQLite itself may make an empty log and shared-memory file beside
    /// it). An older catalog is read as it is, not migrated: the migrations
    /// so far change nothing these commands need (v2 only removes
    /// passwords, which they never show; v3 and v5 only rekey the items and
    /// the objects; v4 and v6 only respell URLs, which are then shown as they were written). Nil
    /// when it has no tables and `ifNoSchema` has no reason to refuse it:
    /// the caller opens it to write.
    private static func openReadingOnly(_ path: String, _ configuration: Configuration,
                                        ifNoSchema: () -> String?) throws -> DatabaseQueue? {
        var configuration = configuration
        configuration.readonly = true
        let reader: DatabaseQueue
        do {
            reader = try DatabaseQueue(path: path, configuration: configuration)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CANTOPEN || error.resultCode == .SQLITE_READONLY {
            guard let readOnly = try openOnReadOnlyMedium(path) else { throw error }
            reader = readOnly
        }
        let (problem, hasSchema) = try reader.read { db in (try schemaProblem(db), try Self.hasSchema(db)) }
        if let problem { throw CatalogRefusal(problem) }
        if !hasSchema, let refusal = ifNoSchema() { throw CatalogRefusal(refusal) }
        guard hasSchema else {
            try reader.close()
            return nil
        }
        return reader
    }

    /// Why the database `db` is not a catalog this version may use, or nil:
    /// one with tables of something else, or one a newer mediafetch
    /// migrated further than this version knows (its rows would not fit
    /// this version's statements). No tables at all is no problem: a new catalog.
    static func schemaProblem(_ db: Database) throws -> String? {
        // GRDB makes its table of migrations before the first one's
        // transaction: an opening cut off in between leaves it empty, and
        // that is a new catalog still.
        let applied = try db.tableExists("grdb_migrations") ? try migrator.appliedIdentifiers(db) : []
        guard !applied.isEmpty else {
            let tables = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' "
                + "AND name != 'grdb_migrations' ORDER BY name")
            guard !tables.isEmpty else { return nil }
            let shown = tables.prefix(3).joined(separator: ", ") + (tables.count > 3 ? ", …" : "")
            return "it is not a mediafetch catalog (it holds other tables: \(shown)); give another cache directory"
        }
        // Another program that migrates with GRDB has this table too, without our first migration.
        guard let first = migrator.migrations.first, applied.contains(first) else {
            let shown = applied.sorted().prefix(3).map { "'\($0)'" }.joined(separator: ", ")
            return "it is not a mediafetch catalog (its schema has \(shown)); "
                + "give another cache directory"
        }
        let known = Set(migrator.migrations)
        let unknown = applied.filter { !known.contains($0) }.sorted()
        guard !unknown.isEmpty else { return nil }
        return "it was written by a newer mediafetch (its schema has \(unknown.map { "'\($0)'" }.joined(separator: ", ")), "
            + "which this version does not know): use that version"
    }

    /// Whether `db` holds a catalog: a migration of ours, at least, was applied.
    static func hasSchema(_ db: Database) throws -> Bool {
        try db.tableExists("grdb_migrations") && !migrator.appliedIdentifiers(db).isEmpty
    }

    /// Why the SQLite file at `path`, found where a cache that does not
    /// exist yet would keep its catalog (no `objects/` beside it), is no
    /// catalog to make a cache around: another program's (see
    /// `schemaProblem`), or one that cannot be read (damaged, encrypted, or
    /// held locked by its program); nil when it is a catalog. Read only: a
    /// cache made around another program's database left directories and a
    /// 1 MiB reserve in its folder before the catalog was refused.
    public static func notACatalogToMakeACacheAround(at path: String) -> String? {
        do {
            let queue = try DatabaseQueue(path: path, configuration: readOnlyConfiguration)
            defer { try? queue.close() }
            return try queue.read { try schemaProblem($0) }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED {
            // (Not "held for over 60 s": nothing waited for it.)
            return "it cannot be read as a catalog (another program holds it locked), and no objects/ is beside it: "
                + "another program's database; give another cache directory"
        } catch {
            return "it cannot be read as a catalog (\(describe(error))), and no objects/ is beside it: "
                + "another program's file, or damaged; give another cache directory"
        }
    }

    /// Rolls back the journal SQLite leaves beside a catalog whose making was
    /// killed. A new catalog's one write outside WAL is its switch to WAL,
    /// made with a rollback journal (`catalog.sqlite-journal`); a process
    /// killed in it (kill -9, or a signal in its first milliseconds) left
    /// that journal, and every later opening was refused with "attempt to
    /// write a readonly database": SQLite rolls a journal back on the next
    /// read, but only through a connection that may write, and the first
    /// look at a catalog is read-only (`list` and `stats` roll it back too:
    /// a recovery any SQLite reader that may write makes).
    ///
    /// Only that journal: one that says the file was empty before it (its
    /// header's magic number, and 0 pages for the size the file had), beside
    /// a file of a page or two. A catalog restored beside a stale journal is
    /// not emptied by it, but refused as before. Done under the opening's
    /// lock, which whoever makes the catalog holds: such a journal found now
    /// is no other process's work in progress. The catalog is then as before
    /// the kill: empty, as one whose making was cut off is (see
    /// `MediaCache.emptiedCatalog`).
    private static func rollBackJournalLeftByAKill(_ path: String) throws {
        var main = stat(), journal = stat()
        guard lstat(path + "-journal", &journal) == 0, journal.st_mode & S_IFMT == S_IFREG, journal.st_size >= 28,
              lstat(path, &main) == 0, main.st_mode & S_IFMT == S_IFREG, main.st_size <= 2 * 65_536 else { return }
        let magic: [UInt8] = [0xD9, 0xD5, 0x05, 0xF9, 0x20, 0xA1, 0x63, 0xD7]
        guard let header = firstBytes(20, of: path + "-journal"), header.starts(with: magic),
              header[16..<20].allSatisfy({ $0 == 0 }) else { return }
        do {
            // A connection that may write, in SQLite's own journal mode: its first read plays the journal back.
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.read { db in _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") }
            try queue.close()
        } catch {
            throw CatalogRefusal("its making was cut off, and the journal SQLite left beside it (catalog.sqlite-journal) "
                + "cannot be rolled back (\(describe(error))); run mediafetch get as a user who can write the cache")
        }
    }

    /// Whether the file at `path` is an SQLite database in rollback-journal
    /// mode (byte 18 of its header is 1; a WAL database has 2).
    private static func isInRollbackJournalMode(_ path: String) -> Bool {
        guard let header = firstBytes(20, of: path, followingLinks: true) else { return false }
        return header.starts(with: Array("SQLite format 3".utf8)) && header[18] == 1
    }

    /// The first `count` bytes of the file at `path`; nil when it has fewer, or cannot be read.
    private static func firstBytes(_ count: Int, of path: String, followingLinks: Bool = false) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | (followingLinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        return pread(fd, &bytes, count, 0) == count ? bytes : nil
    }

    private static var readOnlyConfiguration: Configuration {
        var configuration = Configuration()
        configuration.readonly = true
        return configuration
    }

    /// A catalog on a filesystem mounted read-only (a cache copied to a card
    /// or a disc for offline use) whose write-ahead log was checkpointed away:
    /// SQLite cannot create the shared-memory file a WAL database needs, and
    /// could not open it. Nothing can change such a file, so it is opened as
    /// immutable, read-only. Nil when the medium is writable. A log with
    /// commits but no shared-memory file cannot be read there at all
    /// (immutable reading would leave the commits out): that throws, saying
    /// what to do where the cache was written.
    /// The same holds for another user's cache, whose directory this process
    /// cannot write: once another SQLite client closed the catalog and took
    /// its log and shared-memory file away, they cannot be made again here.
    private static func openOnReadOnlyMedium(_ path: String) throws -> DatabaseQueue? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        let readOnlyFilesystem = info.f_flag & UInt(ST_RDONLY) != 0
        let directory = (path as NSString).deletingLastPathComponent
        guard readOnlyFilesystem || access(directory.isEmpty ? "." : directory, W_OK) != 0 else { return nil }
        var log = stat()
        if stat(writeAheadLog(of: path), &log) == 0, log.st_size > 0 {
            guard access(path + "-shm", F_OK) != 0 else { return nil }
            guard readOnlyFilesystem else {
                throw StoreError("its directory cannot be written here (another user's cache) and its write-ahead log "
                    + "holds commits with no shared-memory file beside it, which SQLite cannot read so: a run of "
                    + "mediafetch by its owner, or sqlite3 catalog.sqlite 'PRAGMA wal_checkpoint(TRUNCATE)', merges the log")
            }
            throw StoreError("it is on a read-only filesystem with commits in its write-ahead log and no shared-memory "
                + "file beside it, which SQLite cannot read there: merge the log where the cache was written "
                + "(sqlite3 catalog.sqlite 'PRAGMA wal_checkpoint(TRUNCATE)') before copying it")
        }
        var configuration = Configuration()
        configuration.readonly = true
        // A URI filename: the system's SQLite takes them (SQLITE_USE_URI).
        var uri = URLComponents()
        uri.scheme = "file"
        uri.path = path
        uri.queryItems = [URLQueryItem(name: "immutable", value: "1")]
        guard let text = uri.string else { return nil }
        return try DatabaseQueue(path: text, configuration: configuration)
    }

    /// The write-ahead log, which holds every commit since the last checkpoint.
    public var writeAheadLogPath: String { Self.writeAheadLog(of: path) }

    /// The write-ahead log of the database at `databasePath`.
    public static func writeAheadLog(of databasePath: String) -> String { databasePath + "-wal" }

    /// What a catalog's write-ahead log holds, as its header and its frames'
    /// headers tell (no checksum is computed).
    public enum WriteAheadLogState: Equatable, Sendable {
        /// No log beside the catalog.
        case absent
        /// Empty, or a header and no frame: no commit to read.
        case empty
        /// Bytes that are no log SQLite can read every commit from: shorter
        /// than a log's header, another file's magic number, cut off (or gone
        /// to other bytes) before the end of its first commit, or ending
        /// inside a frame. SQLite passes over such a log, or its last part,
        /// as if it were not there.
        case damaged(bytes: Int64)
        /// A whole commit at least (or frames past what is looked at).
        case frames
    }

    /// The state of the write-ahead log of the catalog at `databasePath`.
    ///
    /// Reads the log's header and its frames' headers up to the first
    /// commit (a frame that gives the database's size), each of which must
    /// be whole and carry the header's salts. A log after a checkpoint
    /// restart that was cut off before its first new frame looks damaged
    /// too; its commits are all in the catalog's file, which then has its
    /// tables, so it is never refused for that.
    public static func writeAheadLogState(of databasePath: String) -> WriteAheadLogState {
        let path = writeAheadLog(of: databasePath)
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return .absent }
        let size = Int64(info.st_size)
        let headerSize = 32, frameHeaderSize = 24
        if size == 0 { return .empty }
        guard size >= headerSize else { return .damaged(bytes: size) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .frames }  // Unreadable here: SQLite says why when it opens it.
        defer { close(fd) }
        func read(_ count: Int, at offset: Int64) -> [UInt8]? {
            var bytes = [UInt8](repeating: 0, count: count)
            return pread(fd, &bytes, count, off_t(offset)) == count ? bytes : nil
        }
        func word(_ bytes: [UInt8], _ offset: Int) -> UInt32 { bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        guard let header = read(headerSize, at: 0) else { return .frames }
        // Big-endian fields: the magic number (its low bit says the checksums' byte order) and the page size.
        guard word(header, 0) & ~1 == 0x377F_0682 else { return .damaged(bytes: size) }
        let pageSize = Int64(word(header, 8) == 1 ? 65_536 : word(header, 8))
        if size == Int64(headerSize) { return .empty }
        let frameSize = Int64(frameHeaderSize) + pageSize
        // SQLite writes whole frames: a log that ends inside one was cut (a
        // copy cut short), or is being written this moment by another process
        // (whose catalog has its tables, so nothing is refused for it).
        guard (size - Int64(headerSize)) % frameSize == 0 else { return .damaged(bytes: size) }
        // A first commit of thousands of pages is not walked to its end: a log that long is taken as whole.
        for frame in 0..<Int64(4096) {
            let offset = Int64(headerSize) + frame * frameSize
            guard offset + frameSize <= size, let frameHeader = read(frameHeaderSize, at: offset),
                  frameHeader[8..<16].elementsEqual(header[16..<24]) else { return .damaged(bytes: size) }
            // The database's size in pages, given by the last frame of a commit only.
            if word(frameHeader, 4) != 0 { return .frames }
        }
        return .frames
    }

    /// SQLite's `data_version` on the connection that writes: a number that
    /// changes when another connection (another process) commits to the
    /// catalog, and not with this catalog's own commits. Compared with an
    /// earlier value, it tells whether another process recorded rows since.
    /// Waits for this catalog's own write in progress, if any.
    public func versionOthersChange() throws -> Int {
        try database.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA data_version") ?? 0 }
    }

    /// Copies the write-ahead log's commits into the catalog's file, so that
    /// the next commit writes the log from its start again instead of
    /// growing it: the log holds every version of the pages it was given (a
    /// page a row, for rows keyed by hashes), the file only the last, so on
    /// a disk that filled this makes room for the rows still to come (a run
    /// on a 2 MiB disk had a log of 958 KB for 217 rows, and 77 objects
    /// stored without one). Passive: it waits for no reader (another
    /// process's `list` keeps its part of the log, and the log its length).
    public func checkpointToFreeRoom() throws {
        try database.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)") }
    }

    /// Makes every committed row durable now. Rows are committed without an
    /// fsync each (WAL, synchronous=NORMAL) and closing does not checkpoint, so
    /// a job calls this once when it ends; it syncs the WAL file, which holds
    /// every commit since the last checkpoint (checkpoints sync themselves).
    public func makeDurable() throws {
        let fd = open(writeAheadLogPath, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return } // nothing committed since the last checkpoint
            throw StoreError.system("cannot open", writeAheadLogPath)
        }
        defer { close(fd) }
        if fsync(fd) != 0 { throw StoreError.system("cannot flush", writeAheadLogPath) }
        guard createsFiles else { return }
        let directory = (path as NSString).deletingLastPathComponent
        let directoryDescriptor = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryDescriptor >= 0 else { throw StoreError.system("cannot open", directory) }
        defer { close(directoryDescriptor) }
        if fsync(directoryDescriptor) != 0 { throw StoreError.system("cannot flush", directory) }
    }

    /// Schema changes, in order. A released migration is never edited: add a new one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: objects, sources, collections, items") { db in
            try db.create(table: "object") { table in
                table.primaryKey("hash", .text)
                table.column("size", .integer).notNull()
                table.column("mediaType", .text)
                table.column("storedAt", .double).notNull()
                table.column("lastAccessAt", .double).notNull()
            }
            try db.create(table: "source") { table in
                table.primaryKey("url", .text)
                table.column("hash", .text).references("object", column: "hash", onDelete: .setNull)
                table.column("etag", .text)
                table.column("lastModified", .text)
                table.column("contentType", .text)
                table.column("fetchedAt", .double)
                table.column("lastError", .text)
                table.column("lastErrorAt", .double)
            }
            try db.create(index: "source_on_hash", on: "source", columns: ["hash"])
            try db.create(table: "collection") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("name", .text).notNull().unique()
                table.column("createdAt", .double).notNull()
            }
            try db.create(table: "item") { table in
                table.column("collectionId", .integer).notNull()
                    .references("collection", column: "id", onDelete: .cascade)
                table.column("url", .text).notNull()
                table.column("kind", .text).notNull()
                table.column("title", .text)
                table.column("addedAt", .double).notNull()
                table.column("metadata", .text)
                table.primaryKey(["collectionId", "url"])
            }
            try db.create(index: "item_on_url", on: "item", columns: ["url"])
        }
        migrator.registerMigration(passwordsMigration) { db in
            try removePasswords(in: db)
        }
        migrator.registerMigration(itemsByURLMigration) { db in
            // An item's URL was kept three times: in its row, in the index of
            // its key and in the index by URL (a list of long signed URLs made
            // a catalog six times its size). Keyed by URL first, without a
            // rowid, the row is the key, and lookups by URL use it. The cost:
            // `list --collection` reads every item (about 0.1 s for 200,000),
            // as an index by collection would hold each URL again.
            // (See `compact` for the room the old table leaves.)
            try db.create(table: "itemByURL", options: .withoutRowID) { table in
                table.column("collectionId", .integer).notNull()
                    .references("collection", column: "id", onDelete: .cascade)
                table.column("url", .text).notNull()
                table.column("kind", .text).notNull()
                table.column("title", .text)
                table.column("addedAt", .double).notNull()
                table.column("metadata", .text)
                table.primaryKey(["url", "collectionId"])
            }
            try db.execute(sql: """
                INSERT INTO itemByURL (collectionId, url, kind, title, addedAt, metadata)
                SELECT collectionId, url, kind, title, addedAt, metadata FROM item
                """)
            try db.drop(table: "item")
            try db.rename(table: "itemByURL", to: "item")
        }
        migrator.registerMigration("v4: URLs in one spelling") { db in
            try respellURLs(in: db)
        }
        migrator.registerMigration(objectsByHashMigration) { db in
            // An object's hash was kept twice, in its row and in the index
            // of its key; without a rowid the row is the key. (Not the
            // sources: their index by hash would then hold each URL again.)
            try rebuildWithoutRowid("object", in: db)
        }
        migrator.registerMigration("v6: hosts in one spelling") { db in
            try respellURLs(in: db)
        }
        return migrator
    }

    /// Rebuilds `table` as a table without a rowid, with the columns,
    /// constraints, rows and indexes it has: its definition is read from the
    /// catalog, so the step restates none of it. Foreign keys are off during
    /// a migration, so dropping the old table touches no row that points at
    /// it, and the new one takes its name (and the references to it).
    static func rebuildWithoutRowid(_ table: String, in db: Database) throws {
        guard let definition = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                                                   arguments: [table]),
              let columns = definition.firstIndex(of: "(") else { return }
        let indexes = try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
                                              + "AND sql IS NOT NULL", arguments: [table])
        let rebuilt = table + "WithoutRowid"
        try db.execute(sql: "CREATE TABLE \(rebuilt.quotedDatabaseIdentifier) \(definition[columns...]) WITHOUT ROWID")
        try db.execute(sql: "INSERT INTO \(rebuilt.quotedDatabaseIdentifier) SELECT * FROM \(table.quotedDatabaseIdentifier)")
        try db.drop(table: table)
        try db.rename(table: rebuilt, to: table)
        for index in indexes { try db.execute(sql: index) }
    }

    /// Gives the URLs of a catalog written before the engine spelt every
    /// URL one way (`URLSpelling`) that spelling, so that such a URL given
    /// again is found, not fetched again and listed twice. Where a URL is
    /// known both ways, the source that has an object and was fetched last
    /// stays, and an item already there in the new spelling stays.
    /// Only the URLs to respell are held (few: most were spelt so already).
    static func respellURLs(in db: Database) throws {
        func respelt(_ sql: String) throws -> [Row] {
            var rows: [Row] = []
            let cursor = try Row.fetchCursor(db, sql: sql)
            while let row = try cursor.next() {
                let url: String = row["url"]
                if URLSpelling.normalized(url) != url { rows.append(row.copy()) }
            }
            return rows
        }
        for source in try respelt("SELECT url, hash, fetchedAt FROM source") {
            try renameSource(source, to: URLSpelling.normalized(source["url"]), in: db)
        }
        for item in try respelt("SELECT collectionId, url FROM item") {
            try renameItem(item, to: URLSpelling.normalized(item["url"]), in: db)
        }
    }

    /// Takes the passwords out of the URLs of a catalog written before
    /// `record` did (see `URLPassword`). Where a URL is known both with and
    /// without its password, the source that has an object and was fetched
    /// last stays; an item already there without the password stays. The
    /// password is also taken out of the last error quoting it, and deleted
    /// text is overwritten in the file (`secure_delete`), not left in free pages.
    static func removePasswords(in db: Database) throws {
        // Debian's SQLite has it on already; others may not. The connection
        // goes on writing after the migration, with the setting it had.
        let secureDelete = try Int.fetchOne(db, sql: "PRAGMA secure_delete") ?? 0
        try db.execute(sql: "PRAGMA secure_delete = ON")
        defer { try? db.execute(sql: "PRAGMA secure_delete = \(secureDelete)") }
        let sources = try Row.fetchAll(db, sql: "SELECT url, hash, fetchedAt, lastError FROM source WHERE url LIKE '%@%'")
        for source in sources {
            let url: String = source["url"]
            let bare = URLPassword.removed(from: url)
            guard bare != url, let password = URLPassword.range(in: url).map({ String(url[$0]) }) else { continue }
            // Only where it stands in a URL: a short password may be any word.
            if let lastError: String = source["lastError"], lastError.contains(":\(password)@") {
                try db.execute(sql: "UPDATE source SET lastError = ? WHERE url = ?",
                               arguments: [lastError.replacingOccurrences(of: ":\(password)@", with: ":***@"), url])
            }
            try renameSource(source, to: bare, in: db)
        }
        let items = try Row.fetchAll(db, sql: "SELECT collectionId, url FROM item WHERE url LIKE '%@%'")
        for item in items {
            let url: String = item["url"]
            let bare = URLPassword.removed(from: url)
            guard bare != url else { continue }
            try renameItem(item, to: bare, in: db)
        }
    }

    /// Gives `source` (a row with its `url`, `hash` and `fetchedAt`) the URL
    /// `renamed` (a migration's new spelling of it). Where `renamed` has a
    /// source already, the one that has an object and was fetched last stays.
    private static func renameSource(_ source: Row, to renamed: String, in db: Database) throws {
        let url: String = source["url"]
        if let other = try Row.fetchOne(db, sql: "SELECT hash, fetchedAt FROM source WHERE url = ?", arguments: [renamed]) {
            let otherHash: String? = other["hash"]
            let hash: String? = source["hash"]
            let fetchedAt: Double = source["fetchedAt"] ?? 0
            let otherFetchedAt: Double = other["fetchedAt"] ?? 0
            let keepThis = hash != nil && (otherHash == nil || fetchedAt > otherFetchedAt)
            try db.execute(sql: "DELETE FROM source WHERE url = ?", arguments: [keepThis ? renamed : url])
            guard keepThis else { return }
        }
        try db.execute(sql: "UPDATE source SET url = ? WHERE url = ?", arguments: [renamed, url])
    }

    /// Gives `item` (a row with its `collectionId` and `url`) the URL
    /// `renamed`; where its collection has an item of `renamed` already, that one stays.
    private static func renameItem(_ item: Row, to renamed: String, in db: Database) throws {
        let url: String = item["url"]
        let collectionID: Int64 = item["collectionId"]
        // OR IGNORE: the item of the new URL may be there already; this one then goes.
        try db.execute(sql: "UPDATE OR IGNORE item SET url = ? WHERE collectionId = ? AND url = ?",
                       arguments: [renamed, collectionID, url])
        try db.execute(sql: "DELETE FROM item WHERE collectionId = ? AND url = ?", arguments: [collectionID, url])
    }

    /// Records a group of finished items and failures in one transaction
    /// (group commit), with statements prepared once and reused. The objects
    /// must already be durable in the store. URLs are recorded without their
    /// passwords (`URLPassword`): the catalog file never holds one.
    /// `kept`: the rows are an earlier run's, recorded late (see
    /// `UnrecordedRows`), with `date` when they were fetched: a URL fetched
    /// since keeps its newer source row (checked in the same transaction, so
    /// a process recording it meanwhile wins too), and an item that is there
    /// keeps its kind, title and metadata (the late row only fills in what
    /// it lacks).
    /// `clearingFailuresOf`: URLs whose object a run found in place, so that
    /// their last failure (a fetch when the file was gone) is past: the URL
    /// was cached, and `list --failed` kept it for good.
    public func record(_ records: [IngestRecord], failures: [FailureRecord] = [], touching touched: [String] = [],
                       clearingFailuresOf cleared: [String] = [], at date: Date = Date(), kept: Bool = false) throws {
        guard !records.isEmpty || !failures.isEmpty || !touched.isEmpty || !cleared.isEmpty else { return }
        let now = date.timeIntervalSince1970
        try database.write { db in
            var collectionIDs: [String: Int64] = [:]
            // Looked up once a group, not once a row: the cache finds a
            // statement by hashing its whole text.
            let insertObject = try db.cachedStatement(sql: """
                INSERT INTO object (hash, size, mediaType, storedAt, lastAccessAt) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(hash) DO UPDATE SET lastAccessAt = max(lastAccessAt, excluded.lastAccessAt)
                """)
            let insertSource = try db.cachedStatement(sql: """
                INSERT INTO source (url, hash, etag, lastModified, contentType, fetchedAt, lastError, lastErrorAt)
                VALUES (?, ?, ?, ?, ?, ?, NULL, NULL)
                ON CONFLICT(url) DO UPDATE SET hash = excluded.hash, etag = excluded.etag,
                  lastModified = excluded.lastModified, contentType = excluded.contentType,
                  fetchedAt = excluded.fetchedAt, lastError = NULL, lastErrorAt = NULL
                WHERE NOT ? OR source.hash IS NULL OR source.fetchedAt IS NULL
                  OR source.fetchedAt <= excluded.fetchedAt
                """)
            // A late row (`kept`) only fills in what an item lacks: what is
            // there may have been recorded since, by this process or another.
            let insertItem = try db.cachedStatement(sql: """
                INSERT INTO item (collectionId, url, kind, title, addedAt, metadata) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT(collectionId, url) DO UPDATE SET
                  kind = CASE WHEN ? THEN item.kind ELSE excluded.kind END,
                  title = CASE WHEN ? THEN coalesce(item.title, excluded.title)
                          ELSE coalesce(excluded.title, item.title) END,
                  metadata = CASE WHEN ? THEN coalesce(item.metadata, excluded.metadata)
                             ELSE coalesce(excluded.metadata, item.metadata) END
                """)
            for record in records {
                let url = URLPassword.removed(from: record.url)
                // Recency never moves back (a late row's date is older than a use since).
                try insertObject.run(.text(record.sha256), .integer(record.size), .text(record.contentType), .real(now), .real(now))
                if record.fetched {
                    try insertSource.run(.text(url), .text(record.sha256), .text(record.etag), .text(record.lastModified),
                                         .text(record.contentType), .real(now), .flag(kept))
                }
                if let missing = record.replacesMissingObject, missing != record.sha256 {
                    // Fetched again with other bytes: the old object has no file, and now maybe no URL.
                    try Self.dropUnreferencedObject(missing, in: db)
                }
                let collectionID = try collectionIDs[record.collection] ?? Self.collectionID(named: record.collection, in: db, now: now)
                collectionIDs[record.collection] = collectionID
                try insertItem.run(.integer(collectionID), .text(url), .text(record.kind.rawValue), .text(record.title), .real(now),
                                   .text(record.metadata), .flag(kept), .flag(kept), .flag(kept))
            }
            for failure in failures {
                let url = URLPassword.removed(from: failure.url)
                // Not over a fetch recorded since the run found the URL not cached
                // (another process's): the failure stayed listed, and the URL, cached,
                // was never fetched again to clear it.
                try db.cachedStatement(sql: """
                    INSERT INTO source (url, lastError, lastErrorAt) VALUES (?, ?, ?)
                    ON CONFLICT(url) DO UPDATE SET lastError = excluded.lastError, lastErrorAt = excluded.lastErrorAt
                    WHERE ? IS NULL OR source.fetchedAt IS NULL OR source.fetchedAt < ?
                    """).execute(arguments: [url, failure.message, now, failure.since?.timeIntervalSince1970,
                                               failure.since?.timeIntervalSince1970])
                // A URL whose file was gone keeps its object when fetching it again
                // fails: its items stay listed, as missing, in their collections
                // (clearing it dropped them from `list` and `stats` for good).
            }
            try Self.touch(touched, at: now, in: db)
            let clear = try db.cachedStatement(sql: "UPDATE source SET lastError = NULL, lastErrorAt = NULL WHERE url = ? AND hash IS NOT NULL")
            for url in cleared { try clear.execute(arguments: [URLPassword.removed(from: url)]) }
        }
    }

    /// The URLs among `urls` that already resolve to an object, keyed by
    /// the URL as the catalog keeps it (without its password).
    public func cachedSources(for urls: [String]) throws -> [String: CachedSource] {
        var found: [String: CachedSource] = [:]
        try database.read { db in
            // A new cache has nothing to find: one cheap look spares binding every URL.
            guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM source WHERE hash IS NOT NULL)")) == true
            else { return }
            try Self.inChunks(of: urls) { chunk, marks in
                let rows = try Row.fetchAll(Self.statement(in: db, forChunkOf: chunk.count, sql: """
                    SELECT source.url, object.hash, object.size, source.lastError IS NOT NULL FROM source
                    JOIN object ON object.hash = source.hash WHERE source.url IN (\(marks))
                    """), arguments: StatementArguments(chunk))
                for row in rows {
                    let source = CachedSource(url: row[0], sha256: row[1], size: row[2], lastFetchFailed: row[3])
                    found[source.url] = source
                }
            }
        }
        return found
    }

    /// Those of `urls` that are items of `collection`, as the catalog keeps
    /// them (without passwords): a long list is checked a part at a time
    /// without loading the whole collection.
    public func itemURLs(inCollection collection: String, among urls: [String]) throws -> Set<String> {
        var found = Set<String>()
        try database.read { db in
            try Self.inChunks(of: urls) { chunk, marks in
                found.formUnion(try String.fetchAll(Self.statement(in: db, forChunkOf: chunk.count, sql: """
                    SELECT item.url FROM item JOIN collection ON collection.id = item.collectionId
                    WHERE collection.name = ? AND item.url IN (\(marks))
                    """), arguments: StatementArguments([collection] + chunk)))
            }
        }
        return found
    }

    /// What kind the items of `urls` were found to be, in any collection, with
    /// their metadata: for a URL already cached that goes into another
    /// collection as an item of unknown kind (`get`'s), so that a sound stays
    /// a sound with its facts there too. A sound's item is taken over a
    /// photo's; URLs whose items are all files are left out.
    public func knownKinds(of urls: [String]) throws -> [String: (kind: ItemKind, metadata: String?)] {
        var found: [String: (kind: ItemKind, metadata: String?)] = [:]
        try database.read { db in
            try Self.inChunks(of: urls) { chunk, marks in
                let rows = try Row.fetchCursor(db, sql: """
                    SELECT url, kind, metadata FROM item WHERE url IN (\(marks)) AND kind <> 'file'
                    """, arguments: StatementArguments(chunk))
                while let row = try rows.next() {
                    guard let kind = ItemKind(rawValue: row[1]) else { continue }
                    let url: String = row[0]
                    if found[url]?.kind != .sound { found[url] = (kind, row[2]) }
                }
            }
        }
        return found
    }

    /// The statement for a query of a chunk of `count` URLs: kept for one
    /// URL, the size a run asks about one item at a time while another
    /// process stores into the cache (parsed anew each time: three runs
    /// sharing 2,000 files took 6.0-6.9 s of CPU in all, against 4.2-4.9 s
    /// kept), made anew for longer chunks, whose texts vary with their lengths.
    private static func statement(in db: Database, forChunkOf count: Int, sql: String) throws -> Statement {
        count == 1 ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
    }

    /// `urls` without their passwords, 500 at a time (SQLite limits the
    /// parameters bound to one statement), each chunk with its `?, ?, …`.
    private static func inChunks(of urls: [String], _ body: ([String], String) throws -> Void) throws {
        for start in stride(from: 0, to: urls.count, by: 500) {
            let chunk = urls[start..<min(start + 500, urls.count)].map(URLPassword.removed(from:))
            try body(chunk, Array(repeating: "?", count: chunk.count).joined(separator: ","))
        }
    }

    /// How collections are ordered, by the column `name` that holds their
    /// names: ASCII letters without regard to case, capitals first between
    /// names that differ only so (SQLite's NOCASE folds ASCII alone).
    private static func collectionOrder(_ name: String) -> String { "\(name) COLLATE NOCASE, \(name)" }

    /// The names of all collections, sorted as `readEntries` sorts them.
    public func collectionNames() throws -> [String] {
        try database.read { db in try String.fetchAll(db, sql: "SELECT name FROM collection ORDER BY \(Self.collectionOrder("name"))") }
    }

    /// Notes that objects were used now (recency lives here, not in atime).
    /// Without `waitingForLock`, a lock another process holds makes it fail
    /// at once (SQLITE_BUSY) instead of waiting: recency is a hint for
    /// pruning, not worth a minute of anyone's time.
    public func touch(_ hashes: [String], at date: Date = Date(), waitingForLock: Bool = true) throws {
        guard !hashes.isEmpty else { return }
        try database.writeWithoutTransaction { db in
            let write = {
                try db.inTransaction(.immediate) {
                    try Self.touch(hashes, at: date.timeIntervalSince1970, in: db)
                    return .commit
                }
            }
            if waitingForLock { try write() } else { try LockWait.withoutWaiting(write) }
        }
    }

    private static func touch(_ hashes: [String], at time: Double, in db: Database) throws {
        guard !hashes.isEmpty else { return }
        let update = try db.cachedStatement(sql: "UPDATE object SET lastAccessAt = ? WHERE hash = ?")
        // Many URLs may share one object: each is touched once.
        for hash in Set(hashes) {
            try update.execute(arguments: [time, hash])
        }
    }

    /// Deletes the row of an object no URL points at any more.
    private static func dropUnreferencedObject(_ hash: String, in db: Database) throws {
        try db.execute(sql: "DELETE FROM object WHERE hash = ? AND NOT EXISTS (SELECT 1 FROM source WHERE hash = ?)",
                       arguments: [hash, hash])
    }

    /// Items that resolve to an object, filtered by collection and kind, oldest first.
    public func entries(collection: String? = nil, kind: ItemKind? = nil) throws -> [CatalogEntry] {
        var entries: [CatalogEntry] = []
        try readEntries(collection: collection, kind: kind) { forEach in
            try forEach { entries.append($0) }
        }
        return entries
    }

    /// The URLs whose last fetch failed, oldest failure first, read as
    /// `readEntries` reads entries (one snapshot, a row at a time, as often
    /// as `body` goes through them). A URL that failed the first time is
    /// no item of any collection: only a stored object makes one.
    /// `objectFiles`: where a failed URL's object is looked for, to say
    /// whether it is still cached (without it, an object is enough).
    public func readFailures(objectFiles: (any BlobStore)? = nil,
                             _ body: (_ forEach: (_ visit: (CatalogFailure) throws -> Void) throws -> Void) throws -> Void) throws {
        try database.read { db in
            try body { visit in
                let rows = try Row.fetchCursor(db, sql: """
                    SELECT source.url, source.lastError, source.lastErrorAt, object.hash, object.size FROM source
                    LEFT JOIN object ON object.hash = source.hash
                    WHERE source.lastError IS NOT NULL ORDER BY source.lastErrorAt, source.url
                    """)
                while let row = try rows.next() {
                    let hash: String? = row[3]
                    let cached = hash.map { objectFiles?.contains($0, size: row[4]) ?? true } ?? false
                    try visit(CatalogFailure(url: row[0], message: row[1], failedAt: Date(timeIntervalSince1970: row[2] ?? 0),
                                             isCached: cached))
                }
            }
        }
    }

    /// The entries `entries` gives, without holding them all: `body` gets a
    /// function that goes through them one at a time, each time it is
    /// called, all from the same snapshot of the catalog (one read
    /// transaction), so two passes see the same rows. `body` must not use
    /// this catalog itself. Sorted by collection, then URL: the same rows
    /// come in the same order whichever run recorded them first (by the
    /// time each was recorded, they came in the order downloads finished,
    /// and two caches of one list listed them in two orders).
    /// The transaction lasts as long as `body`: output
    /// written to a pipe nobody reads holds it open, and the write-ahead log
    /// cannot start over until it ends. An error partway ends the entries
    /// where they are.
    public func readEntries(collection: String? = nil, kind: ItemKind? = nil,
                            _ body: (_ forEach: (_ visit: (CatalogEntry) throws -> Void) throws -> Void) throws -> Void) throws {
        var conditions: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        if let collection {
            conditions.append("collection.name = ?")
            arguments.append(collection)
        }
        if let kind {
            conditions.append("item.kind = ?")
            arguments.append(kind.rawValue)
        }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let sql = """
            SELECT object.hash, object.size, item.url, item.kind, collection.name, item.title,
                   source.contentType, item.addedAt, item.metadata
            FROM item
            JOIN collection ON collection.id = item.collectionId
            JOIN source ON source.url = item.url
            JOIN object ON object.hash = source.hash
            \(filter)
            ORDER BY \(Self.collectionOrder("collection.name")), item.url
            """
        try database.read { db in
            try body { visit in
                let rows = try Row.fetchCursor(db, sql: sql, arguments: StatementArguments(arguments))
                while let row = try rows.next() {
                    try visit(CatalogEntry(
                        sha256: row[0], size: row[1], url: row[2], kind: ItemKind(rawValue: row[3]) ?? .file,
                        collection: row[4], title: row[5], contentType: row[6],
                        addedAt: Date(timeIntervalSince1970: row[7]), metadata: row[8]))
                }
            }
        }
    }

    /// Those of `hashes` that have an object row.
    public func recordedObjects(among hashes: [String]) throws -> Set<String> {
        var recorded: Set<String> = []
        try read(among: hashes, sql: { "SELECT hash FROM object WHERE hash IN (\($0))" }) { row in
            recorded.insert(row[0])
        }
        return recorded
    }

    /// How many items resolve to each of `hashes` (one with none is absent).
    public func itemCounts(of hashes: [String]) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        try read(among: hashes, sql: {
            "SELECT source.hash, count(*) FROM source JOIN item ON item.url = source.url WHERE source.hash IN (\($0)) GROUP BY source.hash"
        }) { row in
            counts[row[0]] = row[1]
        }
        return counts
    }

    /// Runs `sql` (given the placeholders for a piece of `hashes`) over
    /// `hashes` in pieces, in one read: SQLite takes a bounded number of arguments.
    private func read(among hashes: [String], sql: (String) -> String, _ visit: (Row) throws -> Void) throws {
        guard !hashes.isEmpty else { return }
        try database.read { db in
            for start in stride(from: 0, to: hashes.count, by: 500) {
                let piece = Array(hashes[start..<min(start + 500, hashes.count)])
                let marks = Array(repeating: "?", count: piece.count).joined(separator: ",")
                let rows = try Row.fetchCursor(db, sql: sql(marks), arguments: StatementArguments(piece))
                while let row = try rows.next() { try visit(row) }
            }
        }
    }

    /// Calls `visit` with the hash and size of every object, read as they
    /// come (a catalog of millions of objects is not held).
    public func forEachObject(_ visit: (_ sha256: String, _ size: Int64) throws -> Void) throws {
        try database.read { db in
            let rows = try Row.fetchCursor(db, sql: "SELECT hash, size FROM object")
            while let row = try rows.next() { try visit(row[0], row[1]) }
        }
    }

    /// Totals over the whole catalog.
    public func stats() throws -> CatalogStats {
        try database.read { db in
            let objects = try Row.fetchOne(db, sql: "SELECT count(*), coalesce(sum(size), 0) FROM object")
            // By kind, in one pass: the totals are their sums.
            let kinds = try Row.fetchAll(db, sql: """
                SELECT item.kind, count(*), coalesce(sum(object.size), 0) FROM item
                JOIN source ON source.url = item.url JOIN object ON object.hash = source.hash
                GROUP BY item.kind
                """)
            var itemsByKind: [ItemKind: Int] = [:]
            var items = 0
            var logicalBytes: Int64 = 0
            for row in kinds {
                let count: Int = row[1]
                items += count
                logicalBytes += row[2] as Int64
                if let kind = ItemKind(rawValue: row[0]) { itemsByKind[kind, default: 0] += count }
            }
            let collections = try Int.fetchOne(db, sql: "SELECT count(*) FROM collection") ?? 0
            let sources = try Row.fetchOne(db, sql: "SELECT count(*), count(lastError) FROM source")
            return CatalogStats(
                objects: objects?[0] ?? 0, bytes: objects?[1] ?? 0,
                items: items, logicalBytes: logicalBytes, itemsByKind: itemsByKind,
                collections: collections,
                sources: sources?[0] ?? 0, failedSources: sources?[1] ?? 0)
        }
    }

    private static func collectionID(named name: String, in db: Database, now: Double) throws -> Int64 {
        try db.cachedStatement(sql: "INSERT INTO collection (name, createdAt) VALUES (?, ?) ON CONFLICT(name) DO NOTHING")
            .execute(arguments: [name, now])
        guard let id = try Int64.fetchOne(db, sql: "SELECT id FROM collection WHERE name = ?", arguments: [name]) else {
            throw DatabaseError(message: "collection \(name) vanished")
        }
        return id
    }
}
