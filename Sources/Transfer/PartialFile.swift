import CFileSync
import Crypto
import Foundation
import Synchronization
import URLText

#if canImport(Glibc)
import Glibc
let systemWrite = Glibc.write
let systemClose = Glibc.close
#elseif canImport(Darwin)
import Darwin
let systemWrite = Darwin.write
let systemClose = Darwin.close
#endif

/// The file a body is written into before it is complete.
///
/// A URL's partial has a stable name (`<k>/<key>.part`, where the key is 40
/// hex digits of the URL's SHA-256 and `<k>` its first digit: see
/// `shardDirectory`), so a later run finds it and resumes. The URL is taken without its password (see
/// `URLPassword`), here and in the validator file: nothing on disk gives it
/// away. Its validator (ETag or Last-Modified) sits beside it in
/// `<name>.validator`, written when the response starts; without a validator
/// the bytes cannot be trusted to belong to the current file and are dropped.
/// An exclusive `flock` on the partial keeps two processes from writing the
/// same one; the loser writes to a private temporary file instead.
///
/// A new partial is created read-only (mode 0444; its descriptor still
/// writes), as objects must be: the store then has no mode to change when
/// it moves the finished body into place. Whether the mode is 0444 is read
/// from the descriptor when the body is complete (a umask such as 077, or a
/// default ACL, may have made it something else; a partial resumed by an
/// ordinary user was made writable again), and only a file's lock holder
/// changes its mode, so the answer holds until the file is moved.
final class PartialFile {
    let path: String
    let descriptor: Int32
    private let directory: String
    private let validatorPath: String?
    private var isOpen = true

    /// What an earlier run left that can be resumed: the bytes held, the
    /// validator they came with, the body's whole length as that response
    /// gave it (nil when it did not, or an older version wrote the file), the
    /// redirects it came through and what it said of the body (`BodyLabels`:
    /// none when it said nothing, or an older version wrote the file).
    let resumable: (size: Int64, validator: String, total: Int64?, route: String, labels: BodyLabels)?
    /// How the file was opened, when it was created empty just now (the
    /// common case): spares the writer a look at the descriptor.
    let opened: HashingWriter.OpenedFile

    /// Opens (or creates) the partial for `url` in `directory`, locked. A new
    /// partial is opened for direct I/O when `direct` asks for it and the
    /// filesystem allows it. When another process holds it, a private
    /// temporary is opened instead, unless `privateIfHeld` is false: then
    /// this throws `heldElsewhere`.
    init(directory: String, url: String, direct: Bool = false, privateIfHeld: Bool = true) throws(TransferError) {
        self.directory = directory
        let url = URLPassword.removed(from: url)
        let key = Self.key(for: url)
        let shard = Self.shardDirectory(directory, key: key)
        let sharedPath = "\(shard)/\(key).part"
        var opened = HashingWriter.OpenedFile.unknown
        // A partial found and gone before it was locked (another process moved its
        // finished body into the store) is made afresh: it is not one this process held.
        var found = Self.LockedPartial.gone
        var created: (Int32, Bool)?
        for _ in 0..<8 {
            created = try Self.createLocked(sharedPath, direct: direct)
            if created != nil { break }
            found = Self.openLocked(sharedPath)
            guard case .gone = found else { break }
        }
        if let (fd, isDirect) = created {
            // The common case: no partial yet, so nothing to check or resume.
            Self.heldHere(sharedPath)
            opened = .fresh(direct: isDirect)
            path = sharedPath
            descriptor = fd
            validatorPath = sharedPath + ".validator"
            resumable = nil
        } else if case .locked(let fd) = found {
            Self.heldHere(sharedPath)
            path = sharedPath
            descriptor = fd
            validatorPath = sharedPath + ".validator"
            var info = stat()
            let size = fstat(fd, &info) == 0 ? Int64(info.st_size) : 0
            let saved = Self.readValidator(sharedPath + ".validator", url: url)
            if size > 0, let saved {
                resumable = (size, saved.validator, saved.total, saved.route, saved.labels)
            } else {
                resumable = nil
                _ = ftruncate(fd, 0)
            }
        } else if !privateIfHeld, !Self.lockedHere.withLock({ $0.contains(sharedPath) }) {
            throw Self.heldElsewhere
        } else {
            // Another process holds this URL's partial (or it vanished at every look): download privately, without resume.
            (path, descriptor) = try Self.createPrivateTemporary(in: shard, key: key)
            validatorPath = nil
            resumable = nil
        }
        self.url = url
        self.opened = opened
        // Only a partial that was there before may have a validator beside it.
        hasValidator = opened == .unknown
    }

    /// What is seen of the shared partial for `url` in `directory`, if there
    /// is one: its size, and when it was last written or marked alive (see
    /// `markAlive(in:except:)`), in nanoseconds.
    static func sharedProgress(directory: String, url: String) -> SharedProgress? {
        let key = key(for: URLPassword.removed(from: url))
        var info = stat()
        guard stat("\(shardDirectory(directory, key: key))/\(key).part", &info) == 0 else { return nil }
        return SharedProgress(size: Int64(info.st_size),
                              modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
    }

    /// See `sharedProgress(directory:url:)`.
    struct SharedProgress: Equatable {
        let size: Int64
        let modified: Int64
    }

    /// Sets the modification time of the shared partials this process holds
    /// to now, but those in `quiet` (of transfers silent since the last time,
    /// as their stall clocks count silence). Another process waiting for one
    /// of them (see `DownloadBatch`) takes a partial that neither grows nor
    /// is marked for a stall timeout for one whose holder is stopped or
    /// stuck, and fetches the URL itself. Growth alone said too little: bodies reach the file
    /// 256 KiB at a time, and the partials of items waiting for a slot do not
    /// grow at all, so a second process fetched again URLs the first was
    /// downloading at 30 KB/s, or had not started yet.
    /// Only those in `directory`, an engine's: another engine of the
    /// process (the tests run many at once) has quiet transfers of its own.
    static func markAlive(in directory: String, except quiet: Set<String>) {
        let held = lockedHere.withLock { $0 }
        let prefix = directory.hasSuffix("/") ? directory : directory + "/"
        // By name: the descriptor may be closed meanwhile, and its number taken by
        // another file. A link put at the name (see `createLocked`) is not followed.
        for path in held where path.hasPrefix(prefix) && !quiet.contains(path) {
            _ = utimensat(AT_FDCWD, path, nil, AT_SYMLINK_NOFOLLOW)
        }
    }

    /// How often the engine's loop calls `markAliveInBackground(in:except:)`.
    static let aliveInterval = Duration.seconds(1)

    /// `markAlive(in:except:)` on a utility thread, unless the last one has not
    /// ended (a filesystem that hangs): passes would pile up, and a late one
    /// would mark partials found quiet meanwhile.
    static func markAliveInBackground(in directory: String, except quiet: Set<String>) {
        guard !marking.exchange(true, ordering: .acquiring) else { return }
        DispatchQueue.global(qos: .utility).async {
            markAlive(in: directory, except: quiet)
            marking.store(false, ordering: .releasing)
        }
    }
    private static let marking = Atomic(false)

    /// The shared partials this process holds locked: a lock on one of them
    /// is this process's own (the same URL twice in a list, with two
    /// passwords), not another process's. Each leaves when its lock does.
    /// A sleeping lock: every writer thread takes it for each body it opens,
    /// and spinning on it (a `Mutex`) was 2% of the CPU of 2000 small files.
    static let lockedHere = SleepingLock<Set<String>>([])

    /// `path` is locked by this process (see `lockedHere`).
    static func heldHere(_ path: String) {
        lockedHere.withLock { _ = $0.insert(path) }
    }

    /// `path`'s lock, held by this process, is gone.
    static func unlockedHere(_ path: String) {
        lockedHere.withLock { _ = $0.remove(path) }
    }

    /// What `init` throws when another process holds the partial and no
    /// private temporary is wanted.
    static let heldElsewhere = TransferError(.fileSystem(errno: EWOULDBLOCK), "another process is downloading it")

    /// The URL without its password: the validator file's first line.
    private let url: String
    /// Whether a validator file beside the partial may be this partial's own:
    /// one recorded for its bytes, or there when an earlier run's partial was
    /// opened. Only then does it need removing, or make the partial resumable.
    private var hasValidator = true

    deinit {
        guard isOpen else { return }
        _ = mf_close_unlocking(descriptor)
        leaveLockedHere()
    }

    /// A shared partial's lock is gone (see `lockedHere`); a private file was never listed.
    private func leaveLockedHere() {
        if validatorPath != nil { Self.unlockedHere(path) }
    }

    /// Remembers the validator of the body being written, for a later resume.
    ///
    /// Runs on the transfer loop's thread, so it must not wait for the disk:
    /// the file is written without an fsync (Foundation's `createFile` syncs).
    /// A validator is only a hint: one lost or cut short by a crash is
    /// refused by `readValidator` (it must end with a newline), and the
    /// partial then starts over.
    /// `total` is the body's length as the response gave it: a later range
    /// answer for another length is another version of the file, whatever
    /// its validator says.
    /// `route` names the redirects the response came through (`ResponseHead.route`);
    /// `labels` are the response's, so that a body a later run proves whole
    /// (a 416 for its length) is stored with them.
    func recordValidator(_ validator: String, total: Int64?, route: String, labels: BodyLabels) {
        guard let validatorPath else { return }
        hasValidator = true
        let type = labels.contentType.flatMap(Self.recordableLabel) ?? ""
        let coding = labels.contentEncoding.flatMap(Self.recordableLabel) ?? ""
        Self.writeValidatorFile("\(url)\n\(validator)\n\(total.map(String.init) ?? "")\n\(route)\n\(type)\n\(coding)\n",
                                to: validatorPath)
    }

    /// A header value as a validator file keeps it: one line of at most 255
    /// bytes without control characters; nil for any other.
    private static func recordableLabel(_ text: String) -> String? {
        text.utf8.count <= 255 && !holdsControlCharacter(text.utf8) ? text : nil
    }

    /// Whether `bytes` hold a control character (a line break, say), which
    /// no line of a validator file, nor a header value made from one, may.
    private static func holdsControlCharacter(_ bytes: some Sequence<UInt8>) -> Bool {
        bytes.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// Writes a validator file whole or not at all (a temporary file renamed
    /// into place), without an fsync. Returns whether it is there.
    @discardableResult
    static func writeValidatorFile(_ text: String, to path: String) -> Bool {
        var text = text
        let temporary = path + ".\(getpid())"
        // The umask decides who may read it (a group sharing a cache, under 002).
        // A new file, never one found at the name: a link put there by
        // another user of the cache would have this process write through it.
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
        var fd = open(temporary, flags, 0o666)
        if fd < 0, errno == EEXIST, unlink(temporary) == 0 { fd = open(temporary, flags, 0o666) }
        guard fd >= 0 else { return false }
        let written = text.withUTF8 { systemWrite(fd, $0.baseAddress, $0.count) }
        _ = systemClose(fd)
        guard written == text.utf8.count, rename(temporary, path) == 0 else {
            _ = unlink(temporary)
            return false
        }
        return true
    }

    /// The text of a validator file (a few hundred bytes at most); nil when unreadable.
    static func readValidatorFile(_ path: String) -> String? {
        // Not blocking, and a file only: a FIFO at the name held the run for ever.
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { _ = systemClose(fd) }
        var info = stat()
        // Our own, as the partial must be (see `openLocked`): another user's
        // file in a shared cache vouches for nothing of ours.
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else { return nil }
        var buffer = [UInt8](repeating: 0, count: 8192)
        let count = buffer.withUnsafeMutableBytes { bytes -> Int in
            guard let base = bytes.baseAddress else { return -1 }
            return read(fd, base, bytes.count)
        }
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }

    /// Forgets the validator: the bytes on disk no longer belong to it.
    func forgetValidator() {
        guard hasValidator, let validatorPath else { return }
        hasValidator = false
        _ = unlink(validatorPath)
    }

    /// Hands the finished body over as a `FinishedFile`. Usually the file keeps
    /// its name and its lock, so no other process opens it until the caller has
    /// moved it away and released it: no rename and no new name per body. When
    /// too many finished files are held at once (descriptors are finite), it is
    /// renamed to a private name instead and closed.
    func complete(budget: FinishedFile.Budget) throws(TransferError) -> FinishedFile {
        let isReadOnly = Self.hasReadOnlyMode(descriptor)
        isOpen = false
        // A private temporary (no validator path) is opened by nobody else: nothing to hold.
        if validatorPath != nil, budget.reserve() {
            // The validator stays until the body is stored: should the process
            // die first, the next run finds a partial it can prove complete
            // (a 416 for exactly its length) instead of fetching it again.
            return FinishedFile(path: path, descriptor: descriptor, isReadOnly: isReadOnly, budget: budget,
                                validatorPath: hasValidator ? validatorPath : nil, lockedHere: true)
        }
        if hasValidator, let validatorPath { _ = unlink(validatorPath) }
        defer {
            _ = mf_close_unlocking(descriptor)
            leaveLockedHere()
        }
        // Unlocked from here on, under a name a sweep leaves a day (a private
        // temporary's, left as it was, went after ten minutes: a body waiting
        // for a slow store was removed), dated now, or another process's sweep
        // would take a body resumed from an old partial (a 416 proved it
        // complete, so no byte was written) for one left by a crash, and remove
        // it before it is stored. Best effort: the file is ours to date.
        let finished = "\(path).\(Self.privateName()).done"
        _ = futimens(descriptor, nil)
        guard mf_renameat_noreplace(AT_FDCWD, path, AT_FDCWD, finished) == 0 else { throw Self.error("cannot rename", path) }
        return FinishedFile(path: finished, descriptor: nil, isReadOnly: isReadOnly, budget: budget)
    }

    /// Creates a private temporary beside `path` (a finished body's file),
    /// named after `url` as a private partial is (`<key>.<pid>-<n>.tmp`),
    /// read-only and locked, so a sweep leaves it while this process holds
    /// it: the file a decoded copy of that body is written into (see
    /// `ContentDecoding`).
    static func createPrivateTemporary(besides path: String, url: String) throws(TransferError) -> (path: String, descriptor: Int32) {
        let directory = path.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(path[..<$0]) } ?? "."
        return try createPrivateTemporary(in: directory, key: key(for: URLPassword.removed(from: url)))
    }

    /// Creates `<key>.<pid>-<n>.tmp` in `directory`, read-only, and locks it
    /// as a shared partial is locked: a sweep then tells one in use from one
    /// a killed run left (see `abandonedAfter`).
    private static func createPrivateTemporary(in directory: String, key: Substring) throws(TransferError) -> (path: String, descriptor: Int32) {
        let temporary = "\(directory)/\(key).\(privateName()).tmp"
        let fd = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, readOnlyMode)
        guard fd >= 0 else { throw error("cannot create", temporary) }
        _ = flock(fd, LOCK_EX | LOCK_NB)
        return (temporary, fd)
    }

    /// `<pid>-<n>` for a private file's name: the process, and a random
    /// number, not a sequence (processes of one pid in two containers on one
    /// cache) nor Foundation's UUID (it came out all zeros, the same for every
    /// file, when descriptors ran short; this one takes none).
    static func privateName() -> String {
        "\(getpid())-\(UInt64.random(in: 1...UInt64.max))"
    }

    /// Closes the file. A private file, an empty one, or one asked to be
    /// discarded is removed; a resumable partial stays for the next run.
    func close(discard: Bool) {
        guard isOpen else { return }
        var info = stat()
        let empty = fstat(descriptor, &info) == 0 && info.st_size == 0
        // Bytes without a validator can never be resumed: drop them. Only a
        // validator this partial recorded (or had when it was opened) counts:
        // one a crash left beside a name that is now a new partial says
        // nothing about the new bytes.
        let resumable = hasValidator && (validatorPath.map { access($0, F_OK) == 0 } ?? false)
        if discard || !resumable || empty {
            // The validator first: a kill between the two leaves bytes that are
            // dropped, not a validator a new partial at the name would take for its own.
            if let validatorPath { _ = unlink(validatorPath) }
            _ = unlink(path)
        }
        isOpen = false
        _ = mf_close_unlocking(descriptor)
        leaveLockedHere()
    }

    /// The directory of the partials whose key is `key`: one of sixteen,
    /// named by the key's first hex digit. Creating a file and renaming one
    /// away both take the lock of the directory that holds the name; with a
    /// single directory, the thread that creates new partials and the one
    /// that moves finished bodies into the store spun on each other's lock
    /// (a tenth of the CPU of a run of 2000 small files). Made together when
    /// an engine starts (`makeShardDirectories`), and again by the first
    /// partial that finds its own gone (see `createLocked`).
    static func shardDirectory(_ directory: String, key: Substring) -> String {
        "\(directory)/\(key.prefix(1))"
    }

    /// The names of the shard directories: the hex digits.
    static let shardNames = "0123456789abcdef".map(String.init)

    /// Makes the shard directories under `directory` that are not there, all
    /// at once, so that they have the modes of one process's umask and a
    /// cache that cannot be written is found up front (see
    /// `MediaCache.checkWritable`), not item by item. Best effort: a shard
    /// missing later is made by the first partial that needs it.
    /// A link at a shard's name (the directory is writable by everyone
    /// sharing the cache) is removed, not followed: partials were written
    /// through it into another directory. (`removingLinks` false: left for
    /// the engine's own call, see `TransferEngine.makePartialDirectoriesAhead`.)
    static func makeShardDirectories(in directory: String, removingLinks: Bool = true) {
        for name in shardNames {
            let shard = "\(directory)/\(name)"
            var info = stat()
            if removingLinks, lstat(shard, &info) == 0, info.st_mode & S_IFMT == S_IFLNK { _ = unlink(shard) }
            _ = makeDirectory(shard)
        }
    }

    /// Whether `name` is one this program gives files in the partial
    /// directory, in this version or an earlier one: a URL's 40-hex-digit
    /// key with `.part`, `.part.validator` (and its temporary,
    /// `.part.validator.<pid>`), `.<pid>-<n>.tmp`, or either of those first
    /// two with `.<pid>-<n>.done`; or, in early versions, a UUID with `.tmp`
    /// or `.done`. The sweep removes nothing else: a directory given as a
    /// cache by mistake, or a `tmp/` linked elsewhere, keeps its own files.
    static func isOwnName(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard let first = parts.first else { return false }
        let rest = Array(parts.dropFirst())
        let isHex: (UInt8) -> Bool = { (48...57).contains($0) || (97...102).contains($0) }
        if first.utf8.count == 40, first.utf8.allSatisfy(isHex) {
            return isPartialSuffix(rest) || isPartialSuffix(Array(rest.dropLast(2))) && isDoneSuffix(Array(rest.suffix(2)))
                || rest.count == 3 && rest[0] == "part" && rest[1] == "validator" && isNumber(rest[2])
                || rest == ["part", "validator"]
        }
        return first.utf8.count == 36 && UUID(uuidString: first) != nil && (rest == ["tmp"] || rest == ["done"])
    }

    /// Whether `name` is a private temporary's: `<key>.<pid>-<n>.tmp`.
    private static func isPrivateTemporary(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        return parts.first?.utf8.count == 40 && isPrivateSuffix(Array(parts.dropFirst()))
    }

    /// `part`, or a private temporary's ending: a partial's name after its key.
    private static func isPartialSuffix(_ parts: [String]) -> Bool {
        parts == ["part"] || isPrivateSuffix(parts)
    }

    /// `<pid>-<n>` `tmp`: a private temporary's name after its key.
    private static func isPrivateSuffix(_ parts: [String]) -> Bool {
        parts.count == 2 && isSequence(parts[0]) && parts[1] == "tmp"
    }

    /// `<pid>-<n>` `done`: a finished body's name after its partial's.
    private static func isDoneSuffix(_ parts: [String]) -> Bool {
        parts.count == 2 && isSequence(parts[0]) && parts[1] == "done"
    }

    /// `<pid>-<n>`.
    private static func isSequence(_ text: String) -> Bool {
        let halves = text.split(separator: "-", omittingEmptySubsequences: false)
        return halves.count == 2 && halves.allSatisfy { isNumber(String($0)) }
    }

    private static func isNumber(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { (48...57).contains($0) }
    }

    /// Whether `name`, in the partial directory, is one of its shard directories.
    private static func isShardName(_ name: String) -> Bool {
        shardNames.contains(name)
    }

    /// Removes what crashed or killed runs left in `directory` and its shard
    /// directories: finished bodies that never reached the store (`.done`),
    /// private temporaries (`.tmp`), half-written validators, and partials
    /// nobody resumed. Files in use (locked, or touched within `staleAfter`
    /// seconds) are left alone; resumable partials are kept for
    /// `resumableFor` seconds. A resumable partial not at its URL's name (left
    /// at the top by a version without shard directories, or named after a
    /// password) is moved there. Returns how many files were removed.
    @discardableResult
    static func sweep(directory: String, staleAfter: Double = 86_400, resumableFor: Double = 7 * 86_400,
                      abandonedAfter: Double = 600, now: Date = Date()) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return 0 }
        var removed = 0
        for name in names where isShardName(name) {
            let shard = "\(directory)/\(name)"
            guard isDirectoryItself(shard), let inShard = try? FileManager.default.contentsOfDirectory(atPath: shard) else { continue }
            removed += sweep(names: inShard, in: shard, root: directory, staleAfter: staleAfter,
                             resumableFor: resumableFor, abandonedAfter: abandonedAfter, now: now)
        }
        return removed + sweep(names: names, in: directory, root: directory, staleAfter: staleAfter,
                               resumableFor: resumableFor, abandonedAfter: abandonedAfter, now: now)
    }

    /// `sweep` for the files `names` of one directory (directories among them
    /// are passed over, and so are files not named as this program names them).
    /// `abandonedAfter`: how long an empty partial without a validator, or
    /// a private temporary, is left alone when no process holds it. Neither
    /// is ever resumed: no process holds one but while it writes it (and a
    /// version that did not lock private files wrote them within a stall
    /// timeout). Killed runs on a shared cache left a thousand of them in a
    /// review, which waited a day.
    private static func sweep(names: [String], in directory: String, root: String, staleAfter: Double,
                              resumableFor: Double, abandonedAfter: Double, now: Date) -> Int {
        var removed = 0
        for name in names where isOwnName(name) {
            let path = "\(directory)/\(name)"
            var info = stat()
            guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { continue }
            let age = now.timeIntervalSince1970 - Double(info.st_mtim.tv_sec)
            let isPart = name.hasSuffix(".part")
            let isValidator = name.hasSuffix(".validator")
            // (An empty partial resumes nothing, validator or not: a run killed before its first bytes left it.)
            let resumable = isPart && info.st_size > 0 && access(path + ".validator", F_OK) == 0
            if isValidator {
                let partial = String(path.dropLast(".validator".count))
                // A validator outlives its partial only by accident.
                if access(partial, F_OK) != 0 {
                    if age > staleAfter { removed += unlink(path) == 0 ? 1 : 0 }
                } else {
                    removed += moveToItsName(partial: partial, root: root)
                }
                continue
            }
            let abandoned = isPart && !resumable && info.st_size == 0 || isPrivateTemporary(name)
            guard age > (resumable ? resumableFor : abandoned ? abandonedAfter : staleAfter) else { continue }
            removed += removeUnlessHeld(path, judged: info, withValidator: isPart)
        }
        return removed
    }

    /// Removes the file at `path` (and its validator, `withValidator`) when no
    /// process holds it and it is still the file judged by `info`: a new
    /// partial made at that name meanwhile is left alone. Returns how many
    /// files were removed.
    private static func removeUnlessHeld(_ path: String, judged info: stat, withValidator: Bool) -> Int {
        // A partial may be read-only; a read-only descriptor can lock it
        // (except on NFS, where flock needs one that writes: tried first).
        var fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0, errno == EACCES { fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { return 0 }
        defer { _ = mf_close_unlocking(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return 0 }
        var locked = stat()
        guard fstat(fd, &locked) == 0, locked.st_ino == info.st_ino, locked.st_dev == info.st_dev,
              isFile(fd, at: path) else { return 0 }
        // The validator first (see `close(discard:)`).
        var removed = withValidator && unlink(path + ".validator") == 0 ? 1 : 0
        if unlink(path) == 0 { removed += 1 }
        return removed
    }

    /// Removes the resumable partials (and their validators) in `directory`
    /// whose URLs `stored` says are cached now, unless a process holds them:
    /// a run killed while another process cached the same URLs left them to
    /// wait out the sweep's week (two of 512 KiB each in a black-box review),
    /// though no run would resume them. `stored` gets the partials' URLs (as
    /// their validators name them, without passwords) and returns those
    /// cached. Returns how many files were removed.
    static func removeStored(directory: String, stored: ([String]) -> Set<String>) -> Int {
        var found: [(url: String, path: String, info: stat)] = []
        let shards = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter(isShardName)
        for shard in shards.map({ "\(directory)/\($0)" }) where isDirectoryItself(shard) {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: shard)) ?? [] where name.hasSuffix(".part") {
                let path = "\(shard)/\(name)"
                var info = stat()
                guard isOwnName(name), stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
                      let text = readValidatorFile(path + ".validator"),
                      let firstLine = text.split(separator: "\n", omittingEmptySubsequences: false).first else { continue }
                found.append((URLPassword.removed(from: String(firstLine)), path, info))
            }
        }
        guard !found.isEmpty else { return 0 }
        let cached = stored(found.map(\.url))
        return found.filter { cached.contains($0.url) }
            .reduce(0) { $0 + removeUnlessHeld($1.path, judged: $1.info, withValidator: true) }
    }

    /// A partial whose name is not the one its validator's URL gives it
    /// (under `root`, the partial directory) is moved there, so the download
    /// can still resume. Three kinds of older versions left such partials: at
    /// the top of the partial directory, before the shard directories;
    /// named after the URL with its password, which the validator quoted
    /// (the new validator does not hold it, so the password leaves the
    /// disk); and named after the URL as it was written, before URLs were
    /// spelt one way (`URLSpelling`; the new validator holds the new
    /// spelling). Where the name is taken, or the move fails, the old partial
    /// goes. Skipped while another process holds the partial. Returns how
    /// many files were removed.
    private static func moveToItsName(partial: String, root: String) -> Int {
        let validatorPath = partial + ".validator"
        guard let text = readValidatorFile(validatorPath),
              let firstLine = text.split(separator: "\n", omittingEmptySubsequences: false).first else { return 0 }
        let written = URLPassword.removed(from: String(firstLine))
        let url = URLSpelling.normalized(written)
        let key = key(for: url)
        let shard = shardDirectory(root, key: key)
        let newPartial = "\(shard)/\(key).part"
        guard newPartial != partial,
              URLPassword.range(in: String(firstLine)) != nil || url != written || partial.hasSuffix("/\(key).part")
        else { return 0 }
        var fd = open(partial, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0, errno == EACCES { fd = open(partial, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { return 0 }
        defer { _ = mf_close_unlocking(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, isFile(fd, at: partial) else { return 0 }
        let rest = text.dropFirst(firstLine.count)
        // Never over another partial. The lock goes with the file, so no one
        // opens it at its new name before its validator is there; a crash in
        // between leaves a partial without one, which starts over.
        var moved = mf_renameat_noreplace(AT_FDCWD, partial, AT_FDCWD, newPartial) == 0
        if !moved, errno == ENOENT, makeDirectory(shard) {
            moved = mf_renameat_noreplace(AT_FDCWD, partial, AT_FDCWD, newPartial) == 0
        }
        guard moved else {
            let removed = unlink(validatorPath) == 0 ? 1 : 0
            return removed + (unlink(partial) == 0 ? 1 : 0)
        }
        writeValidatorFile(url + rest, to: newPartial + ".validator")
        return unlink(validatorPath) == 0 ? 1 : 0
    }

    /// Creates `path`, which must not exist yet, and locks it; with O_DIRECT
    /// when `direct` asks for it and the filesystem takes it. A process that
    /// opened the new file in between and locked it first makes this fail.
    /// Returns the descriptor and whether it is open for direct I/O.
    /// Throws when the file cannot be made for a reason other than being
    /// there already (no space, no permission): that is the error to report,
    /// not a failure to make a private file after it.
    private static func createLocked(_ path: String, direct: Bool) throws(TransferError) -> (Int32, Bool)? {
        let flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
        let directFlag = direct ? mf_direct_open_flag() : 0
        var fd = open(path, flags | directFlag, readOnlyMode)
        if fd < 0, errno == ENOENT, let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")),
           makeDirectory(String(path[..<slash])) {
            // The first partial of its shard directory (see `shardDirectory`).
            fd = open(path, flags | directFlag, readOnlyMode)
        }
        var isDirect = directFlag != 0
        if fd < 0, directFlag != 0, errno == EINVAL {
            // A filesystem without direct I/O refuses the flag, not the file,
            // and only once the file is made: open what was just created
            // (writable again, or only root could open it for writing; no
            // body has been written to it, so its mode is ours to change).
            // (Through a descriptor: by name, a link put there meanwhile was followed.)
            let made = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            if made >= 0 {
                _ = fchmod(made, writableMode)
                _ = systemClose(made)
            }
            fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
            isDirect = false
        }
        guard fd >= 0 else {
            if errno == EEXIST { return nil }
            throw error("cannot create", path)
        }
        // Locked first by another process, or removed before we locked it (a
        // sweep that took it for stale): not ours to write. The caller then
        // opens whatever is at the name now, under its lock.
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, isFile(fd, at: path) else {
            _ = mf_close_unlocking(fd)
            return nil
        }
        return (fd, isDirect)
    }

    /// What `openLocked` found at a partial's name.
    private enum LockedPartial {
        /// The partial, locked by this process.
        case locked(Int32)
        /// Nothing at the name, or not the file that was locked any more
        /// (renamed away between `open` and `flock`: a finished body moved
        /// into the store): to be made afresh.
        case gone
        /// Held by another process, or no file of this user's to write.
        case notOurs
    }

    /// Opens `path` and takes an exclusive lock without waiting; `.gone` when
    /// there is nothing at the name or the file was renamed away between
    /// `open` and `flock` (a finished body). A read-only partial (see the
    /// type's comment) is made writable first, under its lock. A link at the
    /// name is removed, never followed: the directory is writable by everyone
    /// sharing the cache, and a link to another of this user's files had the
    /// download written over it. Anything else that is not a file is left
    /// alone (the download goes to a private file).
    private static func openLocked(_ path: String) -> LockedPartial {
        for _ in 0..<8 {
            // Not created here: a name found empty is made by `createLocked`, as a fresh partial.
            let fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
            if fd < 0, errno == ENOENT { return .gone }
            if fd < 0, errno == EACCES {
                if makeWritable(path) { continue }
                return .notOurs
            }
            if fd < 0, errno == ELOOP {
                if unlink(path) == 0 || errno == ENOENT { return .gone }
                return .notOurs
            }
            guard fd >= 0 else { return .notOurs }
            // A file of this user's, by one name: a hard link put there to another of
            // its files (where the system allows one) would be truncated and written over.
            var info = stat()
            guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_nlink == 1, info.st_uid == geteuid() else {
                _ = systemClose(fd)
                return .notOurs
            }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                _ = systemClose(fd)
                return .notOurs
            }
            if isFile(fd, at: path) { return .locked(fd) }
            _ = mf_close_unlocking(fd)
            return .gone
        }
        return .notOurs
    }

    /// The stable part of a URL's partial name: 40 hex digits of the SHA-256
    /// of the URL without its password.
    /// Hashed from the string's own bytes (going through `Data` cost a
    /// dynamic cast per file).
    static func key(for url: String) -> Substring {
        var hasher = SHA256()
        var text = URLPassword.removed(from: url)
        text.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        return hasher.finalize().hexString.prefix(40)
    }

    /// Gives a read-only partial left by an earlier run (only root may open
    /// it for writing as it is) its owner's write bit back, holding its lock
    /// meanwhile: a partial another process is writing is never touched, so
    /// the mode that process reads when its body is complete stays true.
    /// Returns whether opening it again is worth a try.
    private static func makeWritable(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return errno == ENOENT }
        defer { _ = mf_close_unlocking(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return false }
        // Renamed away (a finished body) since the open: look again.
        guard isFile(fd, at: path) else { return true }
        return fchmod(fd, writableMode) == 0
    }

    /// Whether `path` is a directory, not a link to one: files of mediafetch's
    /// names found through a link elsewhere are not its to remove.
    private static func isDirectoryItself(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// Makes the directory `path` (not its parents); whether it is there now.
    /// Its mode is the umask's to decide, so a group's shared cache (umask
    /// 002) stays writable by the group.
    private static func makeDirectory(_ path: String) -> Bool {
        mkdir(path, 0o777) == 0 || errno == EEXIST
    }

    /// Whether `fd` is the file now at `path` (itself: a link to it is not).
    private static func isFile(_ fd: Int32, at path: String) -> Bool {
        var opened = stat()
        var named = stat()
        return fstat(fd, &opened) == 0 && lstat(path, &named) == 0
            && opened.st_ino == named.st_ino && opened.st_dev == named.st_dev
    }

    /// Whether the open file's permission bits are exactly `readOnlyMode`.
    private static func hasReadOnlyMode(_ fd: Int32) -> Bool {
        var info = stat()
        return fstat(fd, &info) == 0 && info.st_mode & 0o7777 == readOnlyMode
    }

    /// The mode of a new partial.
    private static let readOnlyMode: mode_t = 0o444

    /// The mode of a partial made writable again.
    private static let writableMode: mode_t = 0o644

    private static func readValidator(_ path: String, url: String)
        -> (validator: String, total: Int64?, route: String, labels: BodyLabels)? {
        // Most partials are new: a cheap existence check before the read.
        guard access(path, F_OK) == 0, let text = readValidatorFile(path) else { return nil }
        // "<url>\n<validator>\n<total>\n<route>\n<content type>\n<content coding>\n" (the
        // total empty when unknown, the route when no redirect led to the file, a label
        // when the response gave none): without the final newline the write was cut
        // short. A file of an older version has no coding line, or no type line either,
        // or no route line either (taken as no redirect: bytes that came through one
        // start over), or no total line either, and is then trusted with an ETag only:
        // its date may not be one this version would send (see `FileSink.strongLastModified`).
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        // (The validator goes into a request's header: no control character.)
        guard (4...7).contains(lines.count) || (lines.count == 3 && lines[1].hasPrefix("\"")), lines[0] == url,
              !lines[1].isEmpty, !holdsControlCharacter(lines[1].utf8),
              lines.last?.isEmpty == true else { return nil }
        let route = lines.count >= 5 ? String(lines[3]) : ""
        func label(_ index: Int) -> String? {
            index < lines.count - 1 && !lines[index].isEmpty ? recordableLabel(String(lines[index])) : nil
        }
        let labels = BodyLabels(contentType: label(4), contentEncoding: label(5))
        guard lines.count >= 4, !lines[2].isEmpty else { return (String(lines[1]), nil, route, labels) }
        guard let total = Int64(lines[2]), total > 0 else { return nil }
        return (String(lines[1]), total, route, labels)
    }

    private static func error(_ what: String, _ path: String) -> TransferError {
        let code = errno
        return TransferError(.fileSystem(errno: code), "\(what) \(path): \(String(cString: strerror(code)))")
    }
}

/// A finished body's file, owned by the caller: move it (into a store) or
/// remove it, then `release()` it.
///
/// While held it usually keeps the lock it was written under, so no other
/// process opens it by its shared partial name in the meantime.
///
/// A decoded copy of a body (see `ContentDecoding`) holds the body as sent
/// as its `source` until it is itself stored or given up: kept to resume, it
/// keeps that body (with its validator) and removes itself, since it is
/// made again from it; stored or discarded, it takes that body with it.
public final class FinishedFile: Sendable {
    /// Where the body is now.
    public let path: String
    /// Whether the file's mode is read-only already, as a stored object's
    /// must be (read from the descriptor when the body was complete), so a
    /// store need not change it.
    public let isReadOnly: Bool
    /// The open, locked descriptor; nil once released (or if there was none).
    private let descriptor: Mutex<Int32?>

    private let budget: Budget

    /// Where the body's validator is recorded, if it has one.
    private let validatorPath: String?
    /// Whether the validator file is still there (until `forgetValidator()`),
    /// and its text once removed, should the body have to stay after all.
    private let validator = Mutex((present: false, removedText: String?.none))
    /// Left in place to be resumed (see `keepForResume`): `release` keeps the validator.
    private let kept = Atomic(false)
    /// Whether the lock is on a shared partial's name (see `PartialFile.lockedHere`).
    private let lockedHere: Bool
    /// Whether the name is in `PartialFile.lockedHere` still: it leaves when the
    /// body is about to leave the name (see `forgetValidator`), or at `release`.
    private let listed: Atomic<Bool>
    /// The body as sent, for a decoded copy (see the type's comment).
    private let source: FinishedFile?
    /// Whether `source` has been let go (kept, or removed), once.
    private let sourceLetGo = Atomic(false)

    init(path: String, descriptor: Int32?, isReadOnly: Bool, budget: Budget, validatorPath: String? = nil,
         lockedHere: Bool = false, source: FinishedFile? = nil) {
        self.path = path
        self.source = source
        self.descriptor = Mutex(descriptor)
        self.isReadOnly = isReadOnly
        self.budget = budget
        self.validatorPath = validatorPath
        self.lockedHere = lockedHere
        listed = Atomic(lockedHere)
        validator.withLock { $0.present = validatorPath != nil }
    }

    /// Takes the name out of `PartialFile.lockedHere`, once.
    private func unlist() {
        if listed.exchange(false, ordering: .acquiringAndReleasing) { PartialFile.unlockedHere(path) }
    }

    /// Removes the body's validator: call it just before the body leaves its
    /// name (moved into a store). Until then a process that dies leaves a
    /// partial the next run can prove complete; after, the name may belong
    /// to another download's partial and validator. Idempotent; `release()`
    /// does it too, for a body given up.
    public func forgetValidator() {
        // A decoded copy leaves for the store: the body it came from is not to be resumed. Its name
        // stays this process's until it is removed (another process waiting for it must not take it
        // for stalled meanwhile).
        source?.forgetValidator(leavingName: false)
        forgetValidator(leavingName: true)
    }

    /// `forgetValidator`; `leavingName`: the body leaves its name now.
    private func forgetValidator(leavingName: Bool) {
        // The name is left now: not marked alive any more (its body would be
        // the store's, its name another download's), nor taken for this process's.
        if leavingName { unlist() }
        guard let path = validatorPath, validator.withLock({ state in
            defer { state.present = false }
            return state.present
        }) else { return }
        // Kept in memory: should the move fail, `keepForResume` writes it back.
        let text = PartialFile.readValidatorFile(path)
        validator.withLock { $0.removedText = text }
        _ = unlink(path)
    }

    /// Leaves the whole body where it is, with its validator, when it cannot
    /// be stored (a full disk, a store directory that cannot be made): the
    /// next run finds a partial it can prove complete (a 416 for exactly its
    /// length) instead of fetching it all again. Returns false when there is
    /// nothing to prove it with (no validator, or a private name), and the
    /// caller removes the body.
    public func keepForResume() -> Bool {
        if let source {
            // The body as sent stays to be resumed; this copy is made again from it.
            guard source.keepForResume() else { return false }
            _ = unlink(path)
            kept.store(true, ordering: .relaxed)
            return true
        }
        guard let path = validatorPath else { return false }
        let (present, removedText) = validator.withLock { ($0.present, $0.removedText) }
        if !present {
            // Removed just before a move that then failed: the body is still at
            // its name, under our lock, so its validator can go back beside it.
            guard let removedText, PartialFile.writeValidatorFile(removedText, to: path) else { return false }
            validator.withLock { $0.present = true }
            if lockedHere, !listed.exchange(true, ordering: .acquiringAndReleasing) { PartialFile.heldHere(self.path) }
        }
        kept.store(true, ordering: .relaxed)
        return true
    }

    /// Removes the body, for a caller that will not store it: its validator
    /// first, while the body still holds the name (the lock is on the file:
    /// once the name is free, another download may take it and write a
    /// validator of its own there), then the file, then the lock.
    public func discard() {
        forgetValidator()
        _ = unlink(path)
        release()
    }

    deinit { release() }

    /// How many finished files of one engine may hold a descriptor at once.
    final class Budget: Sendable {
        let limit: Int
        private let held = Atomic<Int>(0)

        init(limit: Int) { self.limit = limit }

        /// Takes a place; false when all are taken.
        func reserve() -> Bool {
            if held.add(1, ordering: .relaxed).newValue <= limit { return true }
            held.subtract(1, ordering: .relaxed)
            return false
        }

        func giveBack() { held.subtract(1, ordering: .relaxed) }
    }

    /// Closes the descriptor and with it the lock. Idempotent; also done when
    /// the last reference goes away.
    public func release() {
        if let source, !sourceLetGo.exchange(true, ordering: .acquiringAndReleasing) {
            if kept.load(ordering: .relaxed) { source.release() } else { source.discard() }
        }
        guard let fd = descriptor.withLock({ value -> Int32? in
            defer { value = nil }
            return value
        }) else { return }
        // Given up without a move and not kept: the validator goes with the body.
        if !kept.load(ordering: .relaxed) { forgetValidator() }
        _ = mf_close_unlocking(fd)
        unlist()
        budget.giveBack()
    }
}

/// The partial downloads a cache holds, for `stats`: its disk use beyond the
/// store, and what the next run goes on from.
public struct HeldPartials: Sendable, Equatable {
    /// Partials with bytes and a validator beside them, which a resumed download needs.
    public var resumable = 0
    /// Every partial: those of running downloads (this or another
    /// process's) and those no run can resume too, and the private files
    /// of downloads whose partial another process held, and of finished
    /// bodies not yet stored (a killed run leaves them until the sweep takes
    /// them a day later: 122 of them, 19 MB, after three runs killed at once).
    public var count = 0
    /// Their bytes.
    public var bytes: Int64 = 0

    public init() {}

    /// The partials in `directory` (a cache's `tmp/`) and its shard
    /// directories (an older version left them at the top, where a run
    /// still finds them), named as this program names them.
    public init(in directory: String) {
        for path in [directory] + PartialFile.shardNames.map({ "\(directory)/\($0)" }) {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { continue }
            for name in names where !name.contains(".validator") && PartialFile.isOwnName(name) {
                var info = stat()
                guard lstat("\(path)/\(name)", &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
                count += 1
                bytes += Int64(info.st_size)
                if name.hasSuffix(".part"), info.st_size > 0, access("\(path)/\(name).validator", F_OK) == 0 { resumable += 1 }
            }
        }
    }
}

/// What a response said of its body that is kept beside the body's
/// validator: a body a later run proves whole (a 416 for its length, which
/// describes no body) is stored, and judged, as that response labelled it.
struct BodyLabels: Sendable, Equatable {
    var contentType: String?
    var contentEncoding: String?

    init(contentType: String? = nil, contentEncoding: String? = nil) {
        self.contentType = contentType
        self.contentEncoding = contentEncoding
    }

    /// The labels `head` gives its body.
    init(of head: ResponseHead) {
        self.init(contentType: head.contentType, contentEncoding: head.contentEncoding)
    }
}
