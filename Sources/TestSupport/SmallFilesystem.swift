import Foundation

/// A tmpfs of a few megabytes mounted for one test: a disk that fills up for
/// real (ENOSPC from the kernel, not an injected error). Needs root and a
/// kernel that lets this process mount.
public enum SmallFilesystem {
    /// Whether a tmpfs can be mounted here (tried once, on a throwaway directory).
    public static let canMount: Bool = {
        guard getuid() == 0, let directory = try? TemporaryDirectory() else { return false }
        defer { directory.remove() }
        guard mountCommand(["-t", "tmpfs", "-o", "size=64k", "tmpfs", directory.path]) else { return false }
        return mountCommand([directory.path], program: "/bin/umount")
    }()

    /// Runs `body` with a tmpfs of `kilobytes` KiB mounted on a fresh
    /// directory named `name`; `remount` changes its options while mounted
    /// (`size=8192k`, `ro`). Unmounted afterwards.
    public static func with<T>(kilobytes: Int, name: String = "small",
                               _ body: (_ path: String, _ remount: (String) -> Bool) async throws -> T) async throws -> T {
        try await TemporaryDirectory.with { directory in
            let mountPoint = directory.appending(name)
            try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
            guard mountCommand(["-t", "tmpfs", "-o", "size=\(kilobytes)k", "tmpfs", mountPoint]) else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: mountPoint])
            }
            defer { _ = mountCommand([mountPoint], program: "/bin/umount") }
            return try await body(mountPoint) { options in
                mountCommand(["-o", "remount,\(options)", mountPoint])
            }
        }
    }

    /// Runs mount(8) (or `program`) with `arguments`; true when it succeeded.
    private static func mountCommand(_ arguments: [String], program: String = "/bin/mount") -> Bool {
        guard let process = try? SpawnedProcess([program] + arguments, environment: ProcessInfo.processInfo.environment) else {
            return false
        }
        return process.waitForExit() == 0
    }
}
