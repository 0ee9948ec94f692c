import CFileSync
import Foundation
import Synchronization
import URLText

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Rows the catalog could not take, kept in files beside it so that a later
/// run records them instead of downloading their objects again.
///
/// When the catalog fails as a whole mid-run (another process held its lock
/// past the wait, the disk filled), the objects of the group being recorded
/// are durable in the store already; without their rows nothing points at
/// them, and the next run would fetch every one of those URLs again (seen:
/// 137.7 MiB fetched twice after a lock held for 75 s). Each file here holds
/// one such group: a first line with when it was fetched, then one JSON
/// object a record. URLs are kept without their passwords, as the catalog
/// keeps them. A file is written whole (a temporary name, `fsync`, rename),
/// and removed once its rows are in the catalog.
public struct UnrecordedRows: Sendable {
    /// `<cache root>/unrecorded`.
    public let directory: String
    /// The cache root, which holds the directory's name.
    private let root: String

    public init(root: String) {
        self.root = root
        directory = root + "/unrecorded"
    }

    /// The rows waiting to be recorded (by the next run that writes the
    /// catalog): the records of the files waiting, read without changing
    /// anything. Files set aside as `.bad` do not count, nor files a live
    /// process holds (see `hold`). A file is only looked at under a lock,
    /// and read after: held while it was read, it made a replay starting
    /// meanwhile pass the file by, and fetch its URLs again.
    public func waitingRecords() -> [IngestRecord] {
        var records: [IngestRecord] = []
        forEachFile(held: false) { _, fd in
            if let data = try? FileHandle(fileDescriptor: fd, closeOnDealloc: false).readToEnd() { records += Self.parse(data).0 }
            return true
        }
        return records
    }

    /// The URLs of the rows other live processes hold (`hold`): bodies they
    /// have moved into the store, whose rows come with their next flush.
    /// Files no process holds are waiting records, not these; this
    /// process's own are passed over (their URLs are done here already).
    /// `known`: the URLs of the held files read before, by name, kept by the
    /// caller between calls: a held file does not change once it has its
    /// name, so only new ones are read (the directory is listed, and each
    /// file's lock looked at, every time).
    public func urlsHeldByOtherProcesses(known: inout [String: Set<String>]) -> Set<String> {
        var held: [String: Set<String>] = [:]
        forEachFile(held: true) { name, fd in
            if let urls = known[name] {
                held[name] = urls
            } else if let data = try? FileHandle(fileDescriptor: fd, closeOnDealloc: false).readToEnd() {
                // Whole once it has its name (written under the lock, then renamed): read while held.
                held[name] = Set(Self.parse(data).0.map(\.url))
            }
            return true
        }
        known = held
        return held.values.reduce(into: Set<String>()) { $0.formUnion($1) }
    }

    /// Whether another live process holds rows here now (see `urlsHeldByOtherProcesses`), without reading them.
    public func anyHeldByOtherProcesses() -> Bool {
        var any = false
        forEachFile(held: true) { _, _ in
            any = true
            return false
        }
        return any
    }

    /// Calls `body` with the name and an open descriptor of each file of
    /// rows, until it returns false: with `held`, those another live process
    /// holds (locked, and not named with this process's pid); without, those
    /// no process holds (looked at under a lock, let go before `body`).
    private func forEachFile(held: Bool, _ body: (String, Int32) -> Bool) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        let ownMark = "-\(getpid())-"
        for name in names where name.hasSuffix(".jsonl") && !(held && Self.isNamed(name, withMark: ownMark)) {
            guard let fd = Self.openRegularFile("\(directory)/\(name)") else { continue }
            defer { close(fd) }
            let free = flock(fd, LOCK_SH | LOCK_NB) == 0
            if free { flock(fd, LOCK_UN) }
            guard free ? !held : held && errno == EWOULDBLOCK else { continue }
            if !body(name, fd) { return }
        }
    }

    /// Whether `name` (`<ms>-<pid>-<n>-<random>.jsonl`, see `writeFile`) has `mark` (`-<pid>-`) after its first field.
    private static func isNamed(_ name: String, withMark mark: String) -> Bool {
        guard let dash = name.firstIndex(of: "-") else { return false }
        return name[dash...].hasPrefix(mark)
    }

    /// A descriptor of the regular file at `path`, not waiting on a FIFO
    /// someone put here (it hung the run), nor following a link; nil otherwise.
    static func openRegularFile(_ path: String) -> Int32? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            return nil
        }
        return fd
    }

    /// Keeps `records`, fetched at `date`, in a new file. Best effort: a
    /// failure (the disk that filled the catalog) leaves the objects to be
    /// fetched again, as before.
    public func keep(_ records: [IngestRecord], fetchedAt date: Date) throws(StoreError) {
        guard !records.isEmpty else { return }
        let (fd, _) = try writeFile(records, fetchedAt: date, durably: true)
        close(fd)
    }

    /// Rows a process holds in a file of its own while it moves their
    /// objects into the store and records them (see `hold`).
    /// Dropped without `release()`, the file is closed and left to replay.
    public final class HeldRows: Sendable {
        private let descriptor: Int32
        private let path: String
        private let isOpen = Atomic(true)

        fileprivate init(descriptor: Int32, path: String) {
            self.descriptor = descriptor
            self.path = path
        }

        /// The rows are recorded, kept otherwise, or not to be recorded: the file goes.
        public func release() {
            guard isOpen.exchange(false, ordering: .relaxed) else { return }
            // Removed while still locked: a replay that takes the lock next finds the name gone.
            unlink(path)
            close(descriptor)
        }

        /// The rows are to wait for a later run after all (the catalog
        /// failed): the file stays, synced as `keep` writes its files, and
        /// is let go. False when it could not be synced, or was let go before.
        public func keepDurably() -> Bool {
            guard isOpen.load(ordering: .relaxed), fsync(descriptor) == 0 else { return false }
            let directory = (path as NSString).deletingLastPathComponent
            // Its directory's name too: `hold` made the directory without syncing the cache root.
            UnrecordedRows.syncDirectory(directory)
            UnrecordedRows.syncDirectory((directory as NSString).deletingLastPathComponent)
            guard isOpen.exchange(false, ordering: .relaxed) else { return false }
            close(descriptor)
            return true
        }

        deinit {
            if isOpen.load(ordering: .relaxed) { close(descriptor) }
        }
    }

    /// Writes `records` to a new file that this process holds locked until
    /// `release()`, so that other processes' replays pass it by: written
    /// before a group's objects are moved into the store, and released once
    /// their rows are recorded. A process killed between the two (kill -9,
    /// a crash) leaves the file unlocked, and the next run records the rows
    /// whose objects are in the store: up to two groups of URLs (1,024) were
    /// fetched again. Not synced (a process that dies leaves the page cache
    /// behind; a power cut fetches again, as before), so this costs a small
    /// file a group; nil when it cannot be written (the rows are then only
    /// as safe as before).
    public func hold(_ records: [IngestRecord], fetchedAt date: Date) -> HeldRows? {
        guard !records.isEmpty, let (fd, path) = try? writeFile(records, fetchedAt: date, durably: false) else { return nil }
        return HeldRows(descriptor: fd, path: path)
    }

    /// Writes a new file of `records` (a temporary name, then its own),
    /// locked; returns its descriptor and path. `durably`: its bytes and its
    /// name are synced, and those of the directory when it is new.
    private func writeFile(_ records: [IngestRecord], fetchedAt date: Date, durably: Bool) throws(StoreError) -> (Int32, String) {
        if mkdir(directory, 0o777) == 0 {
            // A new directory's name is in the cache root: durable too, or a
            // power cut could take the kept file with it.
            if durably { Self.syncDirectory(root) }
        } else if errno != EEXIST {
            throw StoreError.system("cannot create", directory)
        }
        var text = "{\"fetchedAt\":\(date.timeIntervalSince1970)}\n"
        for record in records {
            var kept = record
            kept.url = URLPassword.removed(from: kept.url)
            text += kept.jsonLine + "\n"
        }
        let sequence = Self.sequence.add(1, ordering: .relaxed).newValue
        // Random bits too: two containers sharing a cache may each run mediafetch as pid 1.
        let name = "\(Int64(date.timeIntervalSince1970 * 1000))-\(getpid())-\(sequence)-\(String(UInt32.random(in: .min ... .max), radix: 16))"
        let temporary = "\(directory)/.\(name).tmp"
        let path = "\(directory)/\(name).jsonl"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
        guard fd >= 0 else { throw StoreError.system("cannot create", temporary) }
        // Locked before it has its name: no replay can take it half written.
        let written = flock(fd, LOCK_EX) == 0 && text.withUTF8 { bytes in Self.writeAll(fd, bytes) } && (!durably || fsync(fd) == 0)
        let code = errno
        // Never over another file of the name: its process would remove this one as its own.
        guard written, mf_renameat_noreplace(AT_FDCWD, temporary, AT_FDCWD, path) == 0 else {
            let failure = StoreError.system("cannot write", temporary, errno: written ? errno : code)
            unlink(temporary)
            close(fd)
            throw failure
        }
        if durably {
            // Whole already: a replay need not wait out the sync (a file passed by is fetched again).
            flock(fd, LOCK_UN)
            Self.syncDirectory(directory)
        }
        return (fd, path)
    }

    /// `fsync` of a directory, so the names in it are durable. Best effort, as `keep` is.
    private static func syncDirectory(_ path: String) {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }

    /// Hands each kept group to `record` (its records and when they were
    /// fetched), one file at a time, each under an exclusive lock so that
    /// two processes do not record it twice; a file whose group was recorded
    /// (`record` returned) is removed. Lines that cannot be read are passed
    /// over. An error for which `stops` is true (the catalog failing as a
    /// whole) ends the replay, the file kept, and is returned; any other
    /// (a row the catalog refuses) has each row of the group tried on its
    /// own, so that one bad row does not cost the rest, and then sets the
    /// file aside as `.bad` (for a look by hand; it is not replayed), so that
    /// it does not hold up the files after it run after run. Recording a
    /// row twice is harmless: the rows are upserts. Temporary files a process
    /// killed while writing left are removed (see `removeIfLeft`).
    /// `lockWait`: how long files held by others are tried, all together (see `lock(_:before:)`).
    public func replay(_ record: ([IngestRecord], Date) throws -> Void,
                       stops: (any Error) -> Bool = { _ in true }, lockWait: Duration = .milliseconds(50)) -> (any Error)? {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return nil }
        for name in names where name.hasPrefix(".") && name.hasSuffix(".tmp") {
            removeIfLeft("\(directory)/\(name)")
        }
        // One wait for all files: a live process's held file is tried until then, not 50 ms a file.
        let lockDeadline = ContinuousClock.now + lockWait
        for name in names.sorted() where name.hasSuffix(".jsonl") {
            let path = "\(directory)/\(name)"
            guard let fd = Self.openRegularFile(path) else { continue }
            defer { _ = mf_close_unlocking(fd) }
            // Held by another process recording it now, or gone since the listing.
            guard Self.lock(fd, before: lockDeadline), access(path, F_OK) == 0,
                  let data = FileManager.default.contents(atPath: path) else { continue }
            let (records, date) = Self.parse(data)
            if records.isEmpty, !data.isEmpty {
                // Not one readable row: not ours to delete unseen.
                rename(path, path + ".bad")
                continue
            }
            if !records.isEmpty {
                do {
                    try record(records, date)
                } catch {
                    if stops(error) { return error }
                    if let stop = Self.recordEach(records, date, record, stops: stops) { return stop }
                    rename(path, path + ".bad")
                    continue
                }
            }
            unlink(path)
        }
        return nil
    }

    /// Takes the exclusive lock of `fd`, trying until `deadline`: a count
    /// (`waitingRecords`) or another replay's look holds a file for an
    /// instant, and a file passed by is fetched again. A process that
    /// holds its rows (`hold`) keeps the lock for as long as they take.
    private static func lock(_ fd: Int32, before deadline: ContinuousClock.Instant) -> Bool {
        while true {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
            guard errno == EWOULDBLOCK || errno == EINTR, ContinuousClock.now < deadline else { return false }
            usleep(5_000)
        }
    }

    /// Removes a temporary file that no process is writing: locked by
    /// none, and a minute old (a process killed while it wrote left it;
    /// one being made is locked at once).
    private func removeIfLeft(_ path: String) {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
              Date().timeIntervalSince1970 - Double(info.st_mtim.tv_sec) > 60,
              let fd = Self.openRegularFile(path) else { return }
        defer { _ = mf_close_unlocking(fd) }
        if flock(fd, LOCK_EX | LOCK_NB) == 0 { unlink(path) }
    }

    /// Records each row on its own; returns an error that `stops` the replay.
    /// A row refused for itself stays in the file set aside.
    private static func recordEach(_ records: [IngestRecord], _ date: Date, _ record: ([IngestRecord], Date) throws -> Void,
                                   stops: (any Error) -> Bool) -> (any Error)? {
        for row in records {
            do {
                try record([row], date)
            } catch where stops(error) {
                return error
            } catch {}
        }
        return nil
    }

    /// The records of a kept file and when they were fetched (now, if its
    /// first line is unreadable). Their URLs are respelt (`URLSpelling`): a
    /// file an older version kept holds them as they were given, and the
    /// catalog it is replayed into spells them one way (its migration v4).
    static func parse(_ data: Data) -> ([IngestRecord], Date) {
        let decoder = JSONDecoder()
        var date = Date()
        var records: [IngestRecord] = []
        for (index, line) in data.split(separator: UInt8(ascii: "\n")).enumerated() {
            if index == 0 {
                if let header = try? decoder.decode(Header.self, from: line) {
                    date = Date(timeIntervalSince1970: header.fetchedAt)
                }
                continue
            }
            if var record = try? decoder.decode(IngestRecord.self, from: line) {
                record.url = URLSpelling.normalized(record.url)
                records.append(record)
            }
        }
        return (records, date)
    }

    private static func writeAll(_ fd: Int32, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = write(fd, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }

    private static let sequence = Atomic<UInt64>(0)

    private struct Header: Codable {
        var fetchedAt: Double
    }
}
