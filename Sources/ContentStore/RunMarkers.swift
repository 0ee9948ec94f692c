import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The runs at work on a cache, each known by a file of its own in
/// `<cache root>/runs/`, which it holds locked for as long as it runs: so a
/// run can tell at once that another is at work beside it, before either
/// has stored or recorded anything. (Two runs of one list begun together on
/// a new cache each fetched it whole, one of them 300 URLs of 300, as
/// neither saw the other's rows before it was done.)
///
/// A file no process holds is a killed run's: it means nothing, and is
/// removed once a minute old (it was locked before it was named).
public struct RunMarkers: Sendable {
    /// `<cache root>/runs`.
    public let directory: String

    public init(root: String) {
        directory = root + "/runs"
    }

    /// This run's mark: a file named `<pid>-<random>`, locked until `remove()`.
    public final class Mark: Sendable {
        /// The file's name in `runs/`.
        public let name: String
        private let path: String
        private let descriptor: Int32
        private let removed = Atomic(false)

        fileprivate init(name: String, path: String, descriptor: Int32) {
            self.name = name
            self.path = path
            self.descriptor = descriptor
        }

        /// The run is over: the file goes, and its lock with it.
        public func remove() {
            guard !removed.exchange(true, ordering: .relaxed) else { return }
            _ = unlink(path)
            _ = close(descriptor)
        }

        deinit { remove() }
    }

    /// Marks this run as at work; nil when the mark cannot be made (a cache
    /// that cannot be written, where a run fetches nothing): best effort,
    /// as it only spares other runs' downloads.
    public func mark() -> Mark? {
        // The umask decides, as for the cache's other directories (a group may share a cache).
        _ = mkdir(directory, 0o777)
        let name = "\(getpid())-\(UInt64.random(in: 1...UInt64.max))"
        let path = "\(directory)/\(name)"
        // Locked under a hidden name, then named: another run's look never
        // finds it unlocked (its shared lock taken in between made this one's fail).
        let hidden = "\(directory)/.\(name)"
        // Writable: over NFS an exclusive flock is a POSIX lock, which needs a descriptor that may write.
        let fd = open(hidden, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return nil }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, rename(hidden, path) == 0 else {
            _ = unlink(hidden)
            _ = close(fd)
            return nil
        }
        return Mark(name: name, path: path, descriptor: fd)
    }

    /// Whether another run holds a mark here now (`own`: this run's, passed
    /// over). Removes the marks of killed runs a minute old, and hidden ones
    /// (a mark being made) no process holds, as old.
    public func othersAtWork(own: Mark?) -> Bool {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return false }
        var found = false
        for name in names where name != own?.name {
            let path = "\(directory)/\(name)"
            guard let fd = UnrecordedRows.openRegularFile(path) else { continue }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0 else { continue }
            if flock(fd, LOCK_SH | LOCK_NB) != 0 {
                if errno == EWOULDBLOCK { found = true }
                continue
            }
            if Date().timeIntervalSince1970 - Double(info.st_mtim.tv_sec) > Self.killedRunAge { _ = unlink(path) }
            flock(fd, LOCK_UN)
        }
        return found
    }

    /// How old an unlocked mark is before it is taken for a killed run's and removed, in seconds.
    static let killedRunAge: Double = 60

    /// When `runs/` last changed (a mark made or removed), to the
    /// filesystem's clock; nil when it cannot be read.
    public func lastChange() -> timespec? {
        var info = stat()
        guard stat(directory, &info) == 0 else { return nil }
        return info.st_mtim
    }
}
