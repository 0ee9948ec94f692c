import ContentStore
import Foundation
import Synchronization
import Transfer

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A cache root: the object store and the catalog beside it.
///
///     <root>/objects/sha256/ab/<hash>   complete, read-only objects
///     <root>/tmp/                       bodies being written, partials to resume
///     <root>/unrecorded/                rows the catalog could not take, or a killed run held, for the next run
///     <root>/runs/                      a locked file for each get at work on the cache
///     <root>/catalog.sqlite             the SQLite catalog (WAL; .lock serializes opening)
///     <root>/catalog.reserve            room held back for the catalog on a disk that fills
///
/// `Cache/README.md` describes each of them.
public final class MediaCache: Sendable {
    public let root: String
    public let store: ObjectStore
    /// Rows the catalog could not take mid-run, or a killed run held, for a later run to record.
    public let unrecorded: UnrecordedRows
    /// The marks of the `get` runs at work on the cache (see `RunMarkers`).
    public let runs: RunMarkers
    /// Room held back on the disk for the catalog (see `CatalogReserve`).
    public let reserve: CatalogReserve
    private let opening: CatalogOpening
    /// Ends the catalog's waits for another process's lock early (see
    /// `stopWaitingForCatalogLocks` and `deinit`), those of its opening too.
    private let lockWaitStop = LockWaitStop()
    /// Whether the catalog did not exist yet when the cache was opened and
    /// no job has claimed that since (see `claimEmptyCatalog`).
    private let catalogKnownEmpty: Atomic<Bool>
    /// The partials' directories being made for a new cache, waited for by `deinit`.
    private let partialDirectoriesAhead: DispatchGroup?

    /// Opens (creating if needed) the cache at `root`. The store is ready on
    /// return; the catalog is opened on another thread (a new one creates its
    /// schema, several fsyncs), and `catalog` waits for it. `onCatalogLockWait`
    /// is called once if the catalog waits long for another process's lock;
    /// it waits `catalogLockWaitLimit` at most (see `Catalog.init`).
    /// `readingOnly` (`list`, `stats`): nothing is created, neither
    /// directories nor a catalog, and only a catalog that exists is opened.
    public init(root: String, readingOnly: Bool = false, catalogLockWaitLimit: Duration = .seconds(Catalog.busySeconds),
                onCatalogLockWait: (@Sendable () -> Void)? = nil) throws(CacheError) {
        let absolute = Self.absolutePath(root)
        self.root = absolute
        unrecorded = UnrecordedRows(root: absolute)
        runs = RunMarkers(root: absolute)
        reserve = CatalogReserve(root: absolute)
        let others = Self.filesOfOthers(in: absolute)
        guard others.isEmpty else {
            let shown = others.sorted().prefix(3).map { "'\($0)'" }.joined(separator: ", ") + (others.count > 3 ? ", …" : "")
            throw CacheError("\(absolute) is not a mediafetch cache (it has no catalog.sqlite) and holds other files "
                + "(\(shown)): give a new or empty directory for a cache")
        }
        let catalogPath = Self.catalogPath(root: absolute)
        // Before anything is made: a catalog that is a FIFO or a directory, or damaged, is said at once.
        if let problem = Self.damageBeforeOpening(catalogPath: catalogPath) {
            throw CacheError("cannot open the catalog at \(catalogPath): \(problem)")
        }
        // Another program's database where a new cache's catalog goes (no objects/ beside
        // it): refused before anything is made beside it. A regular file with something in
        // it only: a FIFO would block the opening, and the other kinds are said above.
        var info = stat()
        if access(ObjectStore.objectsDirectory(root: absolute), F_OK) != 0, stat(catalogPath, &info) == 0,
           info.st_mode & S_IFMT == S_IFREG, info.st_size > 0,
           let problem = Catalog.notACatalogToMakeACacheAround(at: catalogPath) {
            throw CacheError("cannot open the catalog at \(catalogPath): \(problem)")
        }
        if readingOnly {
            store = ObjectStore(readingAt: absolute)
        } else {
            if let problem = Self.danglingLink(absolute) {
                // (Made through, the link would hide the cache; an unmounted disk leaves links so.)
                throw CacheError("cannot open the cache at \(absolute): \(problem)")
            }
            do {
                store = try ObjectStore(root: absolute)
            } catch {
                throw CacheError("cannot open the cache at \(absolute): \(error)")
            }
        }
        if let problem = OutOfSpace.catalogOpeningProblem(directory: absolute) {
            throw CacheError(problem, outOfSpace: true)
        }
        let isNew = access(catalogPath, F_OK) != 0
        if readingOnly, isNew { throw CacheError("no catalog at \(catalogPath)") }
        catalogKnownEmpty = Atomic(isNew)
        // A new catalog is made while the downloads start (see `CatalogOpening`): its room is taken first.
        if isNew { reserve.hold() }
        // Usually a new cache: its partials' directories are made while the run sets up the rest.
        partialDirectoriesAhead = isNew && !readingOnly ? TransferEngine.makePartialDirectoriesAhead(in: store.temporaryDirectory) : nil
        let objectsDirectory = store.objectsDirectory
        opening = CatalogOpening(path: catalogPath, lockWaitLimit: catalogLockWaitLimit, onLockWait: onCatalogLockWait,
                                 stop: lockWaitStop, reserve: reserve, readingOnly: readingOnly) {
            // A catalog this process makes (a second try on a full disk, say) is never one that was lost.
            isNew ? nil : Self.newCatalogRefusal(readingOnly: readingOnly, catalogPath: catalogPath, objectsDirectory: objectsDirectory)
        }
    }

    /// The catalog may still be opening on its own thread: any wait there
    /// for another process's lock ends, and the opening is waited for, as
    /// are the partials' directories being made, so that nothing of this
    /// cache is written after its owner let it go (a test that removed the
    /// directory next found catalog files come back).
    deinit {
        lockWaitStop.stop(grace: .zero)
        partialDirectoriesAhead?.wait()
        _ = opening.wait()
    }

    private static func catalogPath(root: String) -> String { root + "/catalog.sqlite" }

    /// Damage seen before SQLite opens the catalog, which would otherwise
    /// make the best of it and lose what is left: a main file emptied
    /// (`: > catalog.sqlite`) or removed beside a log that holds commits.
    /// SQLite read the first as a new database and wrote a new log over the
    /// old one, and replays the log onto a new file for the second.
    public static func damageBeforeOpening(catalogPath: String) -> String? {
        var main = stat()
        var log = stat()
        // SQLite says only "disk I/O error" of a directory in the catalog's place.
        if stat(catalogPath, &main) == 0, main.st_mode & S_IFMT != S_IFREG {
            return main.st_mode & S_IFMT == S_IFDIR ? "it is a directory, not a file" : "it is not a regular file"
        }
        guard stat(Catalog.writeAheadLog(of: catalogPath), &log) == 0, log.st_mode & S_IFMT == S_IFREG, log.st_size > 0 else {
            return nil
        }
        let exists = stat(catalogPath, &main) == 0
        guard !exists || main.st_size == 0 else { return nil }
        return (exists ? "the file is empty" : "the file is missing")
            + ", but its write-ahead log (catalog.sqlite-wal) holds \(log.st_size) bytes: the "
            + "catalog was damaged (both files belong together); restore them from a copy"
    }

    /// Why a catalog file that holds no tables must not be given a new
    /// schema now, or nil: a reading command has nothing to read, and
    /// objects without a catalog mean it was lost (copied without its
    /// write-ahead log, which holds every commit since the last checkpoint):
    /// a new one would forget them all.
    static func newCatalogRefusal(readingOnly: Bool, catalogPath: String, objectsDirectory: String) -> String? {
        if holdsObjects(objectsDirectory) {
            // Empty without a log: as `get` finds it (see `emptiedCatalog`), not a copy without its log.
            if readingOnly, isEmptyWithoutALog(catalogPath) {
                return "it is empty, but objects/ holds files: its making was cut off, or it was emptied; restore it with "
                    + "its log (catalog.sqlite-wal) from a copy (or run get to start a new catalog: \(objectsFoundAgain))"
            }
            let newCatalog = "catalog.sqlite away to start a new catalog: \(objectsFoundAgain)"
            if case .damaged(let bytes) = Catalog.writeAheadLogState(of: catalogPath) {
                return "it holds no catalog, but objects/ holds files: its write-ahead log (catalog.sqlite-wal, "
                    + "\(bytes) bytes), which holds every commit since the last checkpoint, is damaged (cut short, "
                    + "or not a log); restore both files from a copy (or move the log and \(newCatalog))"
            }
            return "it holds no catalog, but objects/ holds files: its write-ahead log (catalog.sqlite-wal) was "
                + "not copied with it, or the file was replaced; copy the log back beside it (or move \(newCatalog))"
        }
        return readingOnly ? "it holds no catalog yet (nothing has been recorded in it)" : nil
    }

    /// Why the cache at `root`, which has no catalog file, is no new cache to
    /// a reading command: objects/ holds files, so its catalog was removed
    /// or moved. Nil when it holds none.
    public static func lostCatalog(root: String) -> String? {
        guard holdsObjects(ObjectStore.objectsDirectory(root: root)) else { return nil }
        return "no catalog at \(catalogPath(root: root)), but objects/ holds files: it was removed or moved; restore it "
            + "with its log (catalog.sqlite-wal) from a copy (or run get to start a new catalog: \(objectsFoundAgain))"
    }

    /// What `get` says as it starts a new catalog in the cache at `root`
    /// over a catalog file that is empty, without a log, where objects/
    /// holds files: its making was cut off (the downloads begin while it is
    /// made) or it was emptied, and the rows of what was stored before are
    /// gone. Nil otherwise. (An empty file beside a log that holds commits
    /// is refused: see `damageBeforeOpening`.)
    public static func emptiedCatalog(root: String) -> String? {
        let path = catalogPath(root: root)
        guard isEmptyWithoutALog(path), holdsObjects(ObjectStore.objectsDirectory(root: root)) else { return nil }
        return "\(path) is empty, but objects/ holds files (its making was cut off, or it was emptied): a new catalog "
            + "is started, and \(objectsFoundAgain)"
    }

    /// Whether the file at `catalogPath` is empty, with no log beside it or an empty one.
    private static func isEmptyWithoutALog(_ catalogPath: String) -> Bool {
        var main = stat()
        var log = stat()
        guard stat(catalogPath, &main) == 0, main.st_mode & S_IFMT == S_IFREG, main.st_size == 0 else { return false }
        return stat(Catalog.writeAheadLog(of: catalogPath), &log) != 0 || log.st_size == 0
    }

    /// What becomes of the objects of a lost catalog when a new one is started.
    private static let objectsFoundAgain = "the objects are found again as their URLs are fetched"

    /// Whether a fan-out directory of `objectsDirectory` holds anything.
    private static func holdsObjects(_ objectsDirectory: String) -> Bool {
        guard let fanOuts = try? FileManager.default.contentsOfDirectory(atPath: objectsDirectory) else { return false }
        return fanOuts.contains { name in
            name.utf8.count == 2 && !((try? FileManager.default.contentsOfDirectory(atPath: "\(objectsDirectory)/\(name)"))?.isEmpty ?? true)
        }
    }

    /// What a cache holds, or may (`Cache/README.md`), and what a directory
    /// of its own may hold besides (a disk of its own mounted there has a
    /// `lost+found`): anything else in a directory without a catalog
    /// belongs to someone else.
    private static let ownNames: Set<String> = [
        "objects", "tmp", "unrecorded", "runs", "catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm",
        "catalog.sqlite-journal", "catalog.sqlite.lock", "catalog.reserve", "README.md", "lost+found",
    ]

    /// The names in `root` that are not a cache's, when `root` has no catalog
    /// (a cache it is not yet, or no more): a mistyped `--cache ~/thesis`
    /// must not get a cache's files mixed into it. Empty when `root` is a
    /// cache, is empty, or does not exist (or cannot be read: opening says why).
    /// Hidden names, and what Windows puts at the top of a disk, do not
    /// count: a card or a USB disk formatted elsewhere has them, and so has a
    /// folder a desktop has shown (`.Trash-1000`, `.DS_Store`).
    static func filesOfOthers(in root: String) -> [String] {
        // (An empty catalog.sqlite is none: among another program's files it made the folder a cache.)
        var info = stat()
        guard stat(catalogPath(root: root), &info) != 0 || info.st_size == 0,
              let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        return names.filter { !ownNames.contains($0) && !$0.hasPrefix(".") && !diskNames.contains($0) }
    }

    /// What Windows keeps at the top of a disk it has used.
    private static let diskNames: Set<String> = ["System Volume Information", "$RECYCLE.BIN"]

    /// The catalog's file (known without opening the catalog).
    public var catalogPath: String { Self.catalogPath(root: root) }

    /// `error` from reading the catalog, as one line naming it.
    public func catalogReadError(_ error: any Error) -> CacheError {
        // Already one line naming the catalog (it could not be opened): not said twice.
        if let error = error as? CacheError { return error }
        return CacheError.catalog("read", at: catalogPath, error)
    }

    /// The catalog's write-ahead log (known without opening the catalog).
    public var catalogWriteAheadLog: String { Catalog.writeAheadLog(of: Self.catalogPath(root: root)) }

    /// True once, for the first caller, when the catalog did not exist when
    /// the cache was opened: nothing is cached yet, so a job need not look
    /// (and can start downloading while the catalog is created). Later
    /// callers may find what earlier jobs stored, and are told false.
    public func claimEmptyCatalog() -> Bool {
        catalogKnownEmpty.exchange(false, ordering: .relaxed)
    }

    /// The catalog, once open; waits (blocking the thread) while it is being
    /// opened. Throws when it cannot be opened.
    public var catalog: Catalog {
        get throws(CacheError) { try opening.wait().get() }
    }

    /// A run being interrupted: a write waiting for another process's lock
    /// on the catalog gives up within a second, and so does any later one,
    /// the catalog's opening included (see `LockWaitStop.stop`). For a
    /// process that is stopping: it is not undone.
    public func stopWaitingForCatalogLocks() {
        lockWaitStop.stop(grace: .seconds(1))
    }

    /// Whether the catalog is known not to open (without waiting for it).
    public var catalogFailed: Bool {
        if case .failure = opening.outcome { return true }
        return false
    }

    /// The catalog, once open, waiting without holding a thread.
    public func openedCatalog() async throws(CacheError) -> Catalog {
        try await opening.opened().get()
    }

    /// Throws, naming the first place and the system's reason, unless this
    /// process may write everything a download writes: partials in `tmp/`,
    /// objects, the catalog and the journal files SQLite makes beside it. A
    /// cache someone else owns is then one error, not one per URL (and no
    /// SQLite "readonly database" error at the first row).
    public func checkWritable() throws(CacheError) {
        let catalogPath = Self.catalogPath(root: root)
        do {
            try store.checkOneFilesystem(temporarySubdirectories: TransferEngine.partialShardNames)
        } catch {
            throw CacheError("cannot open the cache at \(root): \(error)")
        }
        var places = [store.temporaryDirectory, store.objectsDirectory, root]
        // The partials' shard directories, as made by whoever ran first (and its umask).
        places += TransferEngine.partialShardNames.map { "\(store.temporaryDirectory)/\($0)" }.filter { access($0, F_OK) == 0 }
        for existing in [catalogPath, catalogPath + "-wal", catalogPath + "-shm"] where access(existing, F_OK) == 0 {
            places.append(existing)
        }
        for place in places where access(place, W_OK) != 0 {
            throw CacheError("cannot write to the cache at \(root): \(place): \(String(cString: strerror(errno)))")
        }
    }

    /// `path` made absolute against the working directory, without its `.`
    /// components and repeated slashes, and `..` taken off lexically. Not
    /// Foundation's `standardizedFileURL`, which also expands a leading `~`
    /// as a shell would: `--cache '~/c'` (quoted, or from a unit file) went
    /// to the home directory, where `list` and `stats` did not look. A `~`
    /// left by the shell is a directory's name, as it is to curl and ls.
    public static func absolutePath(_ path: String) -> String {
        let joined = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var components: [Substring] = []
        for component in joined.split(separator: "/") {
            switch component {
            case ".": continue
            case "..": _ = components.popLast()
            default: components.append(component)
            }
        }
        return "/" + components.joined(separator: "/")
    }

    /// The cache root to use: `explicit` (`--cache`), else `MEDIAFETCH_CACHE`, else `./Cache`.
    public static func resolveRoot(explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        namedRoot(explicit: explicit, environment: environment) ?? "Cache"
    }

    /// The cache root `explicit` (`--cache`) or `$MEDIAFETCH_CACHE` names,
    /// in that order; nil when neither does and the default applies.
    public static func namedRoot(explicit: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let explicit, !explicit.isEmpty { return explicit }
        if let fromEnvironment = environment["MEDIAFETCH_CACHE"], !fromEnvironment.isEmpty { return fromEnvironment }
        return nil
    }

    /// The catalog's objects that have no file in the store, or one not of
    /// their size (removed or cut by hand): `get` fetches their URLs again.
    /// A look per object; `verify` reads the bytes too.
    public func missingObjects() throws -> MissingObjects {
        var missing = MissingObjects()
        var sizes: [String: Int64] = [:]
        try catalog.forEachObject { sha256, size in
            do throws(StoreError) {
                if try !store.lookUp(sha256, size: size) {
                    missing.count += 1
                    missing.bytes += size
                    sizes[sha256] = size
                }
            } catch {
                throw CacheError.unreadableObjects(error)
            }
        }
        for (sha256, items) in try catalog.itemCounts(of: Array(sizes.keys)) {
            missing.itemBytes += Int64(items) * (sizes[sha256] ?? 0)
        }
        return missing
    }

    /// "it is a symbolic link to 'TARGET', which does not exist" when `path`
    /// is a link to nothing (a disk not mounted); nil otherwise.
    public static func danglingLink(_ path: String) -> String? {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFLNK, stat(path, &info) != 0, errno == ENOENT else { return nil }
        let target = DisplayText.escapingControls((try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "?")
        return "it is a symbolic link to '\(target)', which does not exist"
    }

    /// The URLs whose last fetch failed (see `Catalog.readFailures`), each
    /// cached only where its object's file is there.
    public func readFailures(_ body: (_ forEach: (_ visit: (CatalogFailure) throws -> Void) throws -> Void) throws -> Void) throws {
        try catalog.readFailures(objectFiles: store, body)
    }

    /// How many rows in `unrecorded/` the next `get` would record, for
    /// `stats`: those whose object is in the store and whose URL does not
    /// point at it already. A run killed while it held a group's rows (see
    /// `UnrecordedRows.hold`) left rows of bodies it never moved, and rows
    /// it had recorded: counted, they made 435 "waiting" where 26 were.
    /// (A row in two files, kept and held by a run killed between the two, counts once.)
    public func rowsAwaitingRecord() throws -> Int {
        var seen = Set<String>()
        let stored = unrecorded.waitingRecords().filter {
            seen.insert($0.url + "\n" + $0.collection + "\n" + $0.sha256).inserted && store.contains($0.sha256, size: $0.size)
        }
        guard !stored.isEmpty else { return 0 }
        let recorded = try catalog.cachedSources(for: stored.map(\.url))
        return stored.filter { recorded[$0.url]?.sha256 != $0.sha256 }.count
    }

    /// The partial downloads in `tmp/`, for `stats`.
    public func heldPartials() -> HeldPartials {
        HeldPartials(in: store.temporaryDirectory)
    }

    /// Where an object lives on disk, for `list`.
    public func path(for sha256: String) -> String? { store.path(for: sha256) }
}

/// Objects the catalog records whose files are gone or cut (see `MediaCache.missingObjects`).
public struct MissingObjects: Sendable, Equatable {
    /// How many.
    public var count = 0
    /// Their sizes as recorded, added up: bytes the catalog counts that the disk does not hold.
    public var bytes: Int64 = 0
    /// The bytes the items that resolve to them stand for (an object's size
    /// once an item): de-duplication saves nothing of them.
    public var itemBytes: Int64 = 0

    public init(count: Int = 0, bytes: Int64 = 0, itemBytes: Int64 = 0) {
        self.count = count
        self.bytes = bytes
        self.itemBytes = itemBytes
    }

    /// What de-duplication saves of the objects in place: `stats`'s figure
    /// less what items of objects without a file would count.
    public func bytesSavedByDeduplication(_ stats: CatalogStats) -> Int64 {
        max(0, (stats.logicalBytes - itemBytes) - (stats.bytes - bytes))
    }
}

/// The cache cannot be opened or written.
public struct CacheError: Error, Sendable, CustomStringConvertible {
    public let message: String
    /// The disk holding the cache is full (see `OutOfSpace`).
    public let outOfSpace: Bool
    /// Why the catalog failed as a whole (`Catalog.failsEveryRow`: a lock
    /// another process held past the wait, a damaged file), in SQLite's
    /// words; nil when this error is one item's alone, or the disk is full.
    public let catalogFailure: String?
    /// The catalog failure is a wait for another process's lock that ended
    /// without it (which Ctrl-C also ends, on purpose).
    public let lockTimedOut: Bool
    /// The item's object is stored and its row kept for the next run (see
    /// `UnrecordedRows`): it was downloaded, only not recorded yet.
    public private(set) var rowsKept = false
    public init(_ message: String, outOfSpace: Bool = false, catalogFailure: String? = nil, lockTimedOut: Bool = false) {
        self.message = message
        self.outOfSpace = outOfSpace
        self.catalogFailure = catalogFailure
        self.lockTimedOut = lockTimedOut
    }

    /// The catalog at `path` cannot be opened, read or written (`action`), in
    /// SQLite's words; on a full disk, saying so and what to do: "SQLite
    /// error 13: database or disk is full" alone left it to the user to
    /// find that the disk was the cause, not the catalog (and "disk I/O
    /// error" or "unable to open database file" told them nothing of it).
    /// `then` is added to either (what became of the run).
    static func catalog(_ action: String, at path: String, _ error: any Error, then: String = "") -> CacheError {
        let said = Catalog.describe(error)
        switch OutOfSpace.shortage(causing: error, onDiskOf: (path as NSString).deletingLastPathComponent) {
        case nil:
            return CacheError("cannot \(action) the catalog at \(path): \(said)\(then)")
        case .inodes:
            return CacheError("cannot \(action) the catalog at \(path): the disk holding the cache has no free inode "
                              + "(\(said)): remove some files and run again\(then)", outOfSpace: true)
        case .space:
            return CacheError("cannot \(action) the catalog at \(path): the disk holding the cache is full (\(said)): "
                              + "free some space and run again\(then)", outOfSpace: true)
        }
    }

    /// The store's objects cannot be looked at (see `ObjectStore.lookUp`).
    static func unreadableObjects(_ error: StoreError) -> CacheError {
        CacheError("cannot read the cache's objects: \(error.message)")
    }

    /// The same error, for an item whose row was kept for the next run.
    var withRowsKept: CacheError {
        var error = self
        error.rowsKept = true
        return error
    }
    public var description: String { message }
}

/// A catalog being opened on a Dispatch thread, with a result that can be
/// waited for by blocking or by suspending.
private final class CatalogOpening: Sendable {
    typealias Outcome = Result<Catalog, CacheError>

    /// Set once, before `opening` is left.
    private let result = Mutex<Outcome?>(nil)
    /// Entered until the catalog is open (or has failed to open).
    private let opening = DispatchGroup()

    /// Opens the catalog at `path` on a thread of its own. A new catalog on a
    /// disk that filled meanwhile (the downloads start while it is made) gets
    /// the room `reserve` held back, and a second try.
    init(path: String, lockWaitLimit: Duration, onLockWait: (@Sendable () -> Void)?, stop: LockWaitStop,
         reserve: CatalogReserve, readingOnly: Bool, refusingNewSchema: @escaping @Sendable () -> String?) {
        opening.enter()
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            let outcome: Outcome
            do {
                outcome = .success(try reserve.retryingOnFullDisk {
                    try Catalog(path: path, lockWaitLimit: lockWaitLimit, onLockWait: onLockWait, stop: stop,
                                readingOnly: readingOnly, refusingNewSchema: refusingNewSchema)
                })
            } catch {
                outcome = .failure(CacheError.catalog("open", at: path, error))
            }
            result.withLock { $0 = outcome }
            opening.leave()
        }
    }

    /// The outcome, once there is one; never waits.
    var outcome: Outcome? { result.withLock { $0 } }

    func wait() -> Outcome {
        opening.wait()
        return settled
    }

    func opened() async -> Outcome {
        if let outcome { return outcome }
        return await withCheckedContinuation { continuation in
            opening.notify(queue: .global()) { [self] in continuation.resume(returning: settled) }
        }
    }

    /// The outcome once `opening` has been left (it is set before).
    private var settled: Outcome {
        outcome ?? .failure(CacheError("the catalog was not opened"))
    }
}
