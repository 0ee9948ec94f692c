import CFileSync
import Foundation

/// The result of running the built `mediafetch`.
public struct CommandResult: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
    /// Non-empty stderr lines.
    public var stderrLines: [String] { stderr.split(separator: "\n").map(String.init) }
}

/// Runs the built executables of this package.
public enum BuiltProducts {
    /// The directory holding the built products: where the test bundle was
    /// built, or `MEDIAFETCH_PRODUCTS` when set.
    public static var directory: URL {
        if let explicit = ProcessInfo.processInfo.environment["MEDIAFETCH_PRODUCTS"] {
            return URL(fileURLWithPath: explicit)
        }
        var url = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath()
        // Walk up out of `<name>.xctest` (a bundle directory on some platforms).
        while url.pathComponents.count > 1 {
            url = url.deletingLastPathComponent()
            if FileManager.default.isExecutableFile(atPath: url.appendingPathComponent("mediafetch").path) { return url }
        }
        return URL(fileURLWithPath: ".build/debug")
    }

    public static var mediafetch: URL { directory.appendingPathComponent("mediafetch") }

    /// An account to run `mediafetch` as instead of the caller's (which must be root).
    public struct User: Sendable {
        public let uid: UInt32
        public let gid: UInt32
        public init(uid: UInt32, gid: UInt32) {
            self.uid = uid
            self.gid = gid
        }

        /// The unprivileged `nobody` account.
        public static let nobody = User(uid: 65534, gid: 65534)
    }

    /// `setpriv(1)`, which runs a command as another user; tests that need it
    /// run only as root where it is installed.
    public static let setpriv = "/usr/bin/setpriv"

    /// `prlimit(1)`, which runs a command under other resource limits (util-linux, as `setpriv`).
    public static let prlimit = "/usr/bin/prlimit"

    /// Whether `run(_:as:)` can switch users here: as root, with setpriv, and
    /// with the built products and the temporary directory reachable by others.
    public static var canRunAsAnotherUser: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: setpriv)
            && othersCanReach(directory.path) && othersCanReach(FileManager.default.temporaryDirectory.path)
    }

    /// Whether every directory from the root down to `path` lets others through.
    private static func othersCanReach(_ path: String) -> Bool {
        var current = URL(fileURLWithPath: path).standardizedFileURL
        while true {
            var info = stat()
            guard stat(current.path, &info) == 0, info.st_mode & S_IXOTH != 0 else { return false }
            if current.path == "/" { return true }
            current.deleteLastPathComponent()
        }
    }

    /// Runs `mediafetch` with `arguments` and waits for it; as `user`, with
    /// `umask`, with `openFileLimit` and with `processLimit` (`ulimit -u`;
    /// soft and hard) when given; with its
    /// stdout or stderr sent to the file `stdoutTo` or `stderrTo` (such as
    /// `/dev/full`) instead of being collected.
    public static func run(_ arguments: [String], environment: [String: String] = [:],
                           as user: User? = nil, umask: mode_t? = nil, openFileLimit: Int? = nil, processLimit: Int? = nil,
                           stdoutTo: String? = nil, stderrTo: String? = nil) async throws -> CommandResult {
        try await start(arguments, environment: environment, as: user, umask: umask, openFileLimit: openFileLimit,
                        processLimit: processLimit, stdoutTo: stdoutTo, stderrTo: stderrTo).wait()
    }

    /// Starts `mediafetch` with `arguments`; `wait()` collects the result.
    /// `ignoring` names signals (`HUP`, `INT`) it starts with ignored, as
    /// under `nohup` or in a script's background job.
    public static func start(_ arguments: [String], environment: [String: String] = [:],
                             as user: User? = nil, umask: mode_t? = nil, openFileLimit: Int? = nil, processLimit: Int? = nil,
                             stdoutTo: String? = nil, stderrTo: String? = nil, ignoring: [String] = []) throws -> RunningCommand {
        var command = [mediafetch.path] + arguments
        // A shell sets these for the child alone: the test process's are every test's.
        var settings: [String] = []
        if !ignoring.isEmpty { settings.append("trap '' \(ignoring.joined(separator: " "))") }
        if let umask { settings.append("umask \(String(umask, radix: 8))") }
        if let openFileLimit { settings.append("ulimit -n \(openFileLimit)") }
        var redirections = ""
        if let stdoutTo { redirections += " >'\(stdoutTo)'" }
        if let stderrTo { redirections += " 2>'\(stderrTo)'" }
        if !settings.isEmpty || !redirections.isEmpty {
            command = ["/bin/sh", "-c", (settings + ["exec \"$0\" \"$@\"" + redirections]).joined(separator: " && ")] + command
        }
        // (Not the shell's `ulimit`: dash spells it -p, bash -u.)
        if let processLimit { command = [prlimit, "--nproc=\(processLimit)", "--"] + command }
        if let user {
            command = [setpriv, "--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups"] + command
        }
        return try launch(command, environment: environment)
    }

    /// Runs `script` with `/bin/sh -c`, `$MEDIAFETCH` naming the built
    /// `mediafetch`, and waits for it: for what `run` cannot pass, such as
    /// arguments that are not valid UTF-8 (made with `printf`).
    public static func runShell(_ script: String, environment: [String: String] = [:]) async throws -> CommandResult {
        var environment = environment
        environment["MEDIAFETCH"] = mediafetch.path
        return try await launch(["/bin/sh", "-c", script], environment: environment).wait()
    }

    /// Starts `command` with the test process's environment, less
    /// `MEDIAFETCH_CACHE`, the proxy variables (a CI image's proxy would
    /// take every loopback request elsewhere) and the CA variables (a stale
    /// one fails every https test with a usage error), plus `environment`;
    /// stdin is empty.
    private static func launch(_ command: [String], environment: [String: String]) throws -> RunningCommand {
        var env = ProcessInfo.processInfo.environment
        env["MEDIAFETCH_CACHE"] = nil
        for name in ["http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                     "CURL_CA_BUNDLE", "SSL_CERT_FILE"] { env[name] = nil }
        for (key, value) in environment { env[key] = value }
        return try RunningCommand(command, environment: env)
    }
}

/// A started `mediafetch`; its output is drained while it runs so a full pipe never blocks it.
public final class RunningCommand: @unchecked Sendable {
    // @unchecked: `output` and `errors` are written once by the reader threads
    // and read only after `group.wait()`, which orders the accesses.
    private let process: SpawnedProcess
    private let group = DispatchGroup()
    private var output = Data()
    private var errors = Data()

    init(_ command: [String], environment: [String: String]) throws {
        // Close-on-exec from the moment they exist (pipe2): a process another
        // test starts meanwhile (nginx, the TLS origin, which live for their
        // whole suite) must not inherit these, or reading them to the end
        // waits for that process too. Setting the flag after Pipe() left a
        // window, and a test then hung until its time limit. The child gets
        // its own copies as stdout and stderr (dup2 clears the flag there).
        let (outRead, outWrite) = try Self.closeOnExecPipe()
        let (errRead, errWrite) = try Self.closeOnExecPipe()
        defer {
            // The parent's write ends: the reads end when the child's copies close.
            try? outWrite.close()
            try? errWrite.close()
        }
        process = try SpawnedProcess(command, environment: environment, standardOutput: outWrite.fileDescriptor,
                                     standardError: errWrite.fileDescriptor)
        group.enter()
        group.enter()
        Thread.detachNewThread { [self] in
            output = outRead.readDataToEndOfFile()
            group.leave()
        }
        Thread.detachNewThread { [self] in
            errors = errRead.readDataToEndOfFile()
            group.leave()
        }
    }

    /// A pipe whose two ends are close-on-exec from the start: (read, write).
    private static func closeOnExecPipe() throws -> (FileHandle, FileHandle) {
        var ends: [Int32] = [-1, -1]
        guard mf_pipe_cloexec(&ends) == 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "pipe2: \(String(cString: strerror(errno)))"])
        }
        return (FileHandle(fileDescriptor: ends[0], closeOnDealloc: true), FileHandle(fileDescriptor: ends[1], closeOnDealloc: true))
    }

    /// Whether the process has not exited yet.
    public var isRunning: Bool { process.isRunning }

    /// Sends SIGINT, as Ctrl-C in a terminal would.
    public func interrupt() { send(SIGINT) }

    /// Sends `signal` (SIGTERM from `timeout` or a service manager, SIGHUP from a closed terminal).
    public func send(_ signal: Int32) { kill(process.pid, signal) }

    /// Waits for the process to exit and returns what it printed. The blocking
    /// wait happens on a Dispatch thread, never on the tasks' cooperative pool,
    /// so tests running in parallel keep their threads.
    public func wait() async -> CommandResult {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { [self] in
                group.wait()
                let status = process.waitForExit()
                continuation.resume(returning: CommandResult(
                    status: status,
                    stdout: String(decoding: output, as: UTF8.self),
                    stderr: String(decoding: errors, as: UTF8.self)))
            }
        }
    }
}
