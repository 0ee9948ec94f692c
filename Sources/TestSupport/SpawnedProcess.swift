import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with posix_spawn(3), its standard input from
/// /dev/null and its output into the descriptors given, every other
/// descriptor closed in the child.
///
/// Not Foundation's `Process`: on Linux its `run()` copies each
/// `/proc/self/fd` entry's name as a 256-byte field, reading past glibc's
/// buffer when a short entry ends it, and now and then crashes the test
/// process (swift-corelibs-foundation pull request 5472; seen here in a
/// full test run about once in ten, in `Process.run`'s memcpy).
public final class SpawnedProcess: Sendable {
    public let pid: pid_t
    /// The exit status once the child has ended: its exit code, or the
    /// number of the signal that ended it (as `Process.terminationStatus`).
    private let status = Mutex<Int32?>(nil)
    private let ended = DispatchGroup()

    /// Starts `command` (its first element an absolute path, or a name
    /// looked for in `PATH` with `searchingPath`) with `environment` as its
    /// whole environment, in a process group of its own (as `Process`
    /// does), writing to `standardOutput` and `standardError` (nil: to
    /// /dev/null). With
    /// `signalsReset`, no signal is blocked or ignored in the child (a
    /// daemon such as tmux's server kept the test process's mask, and
    /// outlived `kill-server`); else it inherits them, as a shell's child
    /// does, but for SIGPIPE, which the test process ignores and the child
    /// gets at its default.
    public init(_ command: [String], environment: [String: String], standardOutput: Int32? = nil, standardError: Int32? = nil,
                searchingPath: Bool = false, signalsReset: Bool = false) throws {
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attributes)
        defer {
            posix_spawn_file_actions_destroy(&actions)
            posix_spawnattr_destroy(&attributes)
        }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        for (target, source) in [(STDOUT_FILENO, standardOutput), (STDERR_FILENO, standardError)] {
            if let source {
                posix_spawn_file_actions_adddup2(&actions, source, target)
            } else {
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", O_WRONLY, 0)
            }
        }
        Self.closeTheRest(&actions, keeping: Set([standardOutput, standardError].compactMap { $0 }))
        // SIGPIPE at its default whatever: the test process ignores it (`CTestProcess`), a shell's child does not.
        var flags = POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        if signalsReset {
            var noSignals = sigset_t()
            sigemptyset(&noSignals)
            sigfillset(&defaults)
            posix_spawnattr_setsigmask(&attributes, &noSignals)
            flags |= POSIX_SPAWN_SETSIGMASK
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let arguments = command.map { strdup($0) } + [nil]
        let variables = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            arguments.forEach { free($0) }
            variables.forEach { free($0) }
        }
        var child = pid_t()
        let code = searchingPath
            ? posix_spawnp(&child, command[0], &actions, &attributes, arguments, variables)
            : posix_spawn(&child, command[0], &actions, &attributes, arguments, variables)
        guard code == 0 else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey:
                "cannot start \(command[0]): \(String(cString: strerror(code)))"])
        }
        pid = child
        ended.enter()
        Thread.detachNewThread { [self] in
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) == -1, errno == EINTR {}
            // WIFSIGNALED / WTERMSIG / WEXITSTATUS, which Swift does not import (macros).
            let signal = raw & 0x7F
            status.withLock { $0 = signal != 0 && signal != 0x7F ? signal : (raw >> 8) & 0xFF }
            ended.leave()
        }
    }

    /// Whether the child has not ended yet.
    public var isRunning: Bool { status.withLock { $0 == nil } }

    /// Waits (blocking the thread) for the child to end; its status.
    public func waitForExit() -> Int32 {
        ended.wait()
        return status.withLock { $0 ?? -1 }
    }

    /// Closes every descriptor but the standard ones in the child: with
    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 on; not in
    /// Swift's Glibc module), else one by one as listed in /proc/self/fd.
    private static func closeTheRest(_ actions: inout posix_spawn_file_actions_t, keeping kept: Set<Int32>) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            // The dup2 actions run first: the kept descriptors are copied before they are closed.
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
            return
        }
        guard let directory = opendir("/proc/self/fd") else { return }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            // The name read in place, to its end: never the whole 256-byte field.
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 1) { String(cString: $0) }
            }
            if let fd = Int32(name), fd > 2, !kept.contains(fd) { posix_spawn_file_actions_addclose(&actions, fd) }
        }
    }
}

extension SpawnedProcess {
    /// Another program holding the write lock of the SQLite database at
    /// `path` (`BEGIN IMMEDIATE`), as another process writing its rows
    /// does, for `seconds`; returns once it holds it. Kill it (SIGKILL) to
    /// let go sooner.
    public static func holdingWriteLock(ofDatabase path: String, seconds: Int) throws -> SpawnedProcess {
        // A pipe of its own, not Foundation's `Pipe`: dropped when this returned,
        // that broke the caller's run (a test waiting for the note of a lock wait
        // never saw it; a descriptor closed twice is the likely cause).
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw POSIXError(.EMFILE) }
        defer { close(ends[0]) }
        let holder: SpawnedProcess
        do {
            holder = try SpawnedProcess(["/usr/bin/env", "python3", "-c", """
                import sqlite3, sys, time
                db = sqlite3.connect(sys.argv[1], isolation_level=None)
                db.execute("BEGIN IMMEDIATE")
                print("held", flush=True)
                time.sleep(int(sys.argv[2]))
                db.execute("COMMIT")
                """, path, String(seconds)], environment: ProcessInfo.processInfo.environment, standardOutput: ends[1])
        } catch {
            close(ends[1])
            throw error
        }
        close(ends[1])
        // Its line, or the end of its output if it failed.
        var byte: UInt8 = 0
        while read(ends[0], &byte, 1) == 1, byte != UInt8(ascii: "\n") {}
        return holder
    }
}
