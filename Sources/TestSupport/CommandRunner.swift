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

    /// Runs `mediafetch` with `arguments` and waits for it.
    public static func run(_ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil) throws -> CommandResult {
        let process = Process()
        process.executableURL = mediafetch
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["MEDIAFETCH_CACHE"] = nil
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let input = Pipe()
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(stdin) }
        try input.fileHandleForWriting.close()
        // Read both pipes to the end before waiting, so a full pipe never blocks the child.
        let group = DispatchGroup()
        nonisolated(unsafe) var outData = Data()
        nonisolated(unsafe) var errData = Data()
        group.enter()
        DispatchQueue.global().async {
            outData = out.fileHandleForReading.readDataToEndOfFile()
            group.leave()
        }
        errData = err.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return CommandResult(status: process.terminationStatus,
                             stdout: String(decoding: outData, as: UTF8.self),
                             stderr: String(decoding: errData, as: UTF8.self))
    }
}
