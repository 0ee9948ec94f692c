import Foundation
import TestOrigin

/// A fresh directory under the system's temporary directory, removed by `remove()`.
/// Each test makes its own, so tests never share a cache.
public struct TemporaryDirectory: Sendable {
    public let url: URL
    public var path: String { url.path }

    public init(_ label: String = "mediafetch-test") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path inside the directory.
    public func appending(_ name: String) -> String { url.appendingPathComponent(name).path }

    /// Writes `lines` (URLs, one a line) to the file `name` inside the directory; returns its path.
    public func writingList(_ lines: [String], named name: String = "urls.txt") throws -> String {
        let path = appending(name)
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Removes the directory; read-only objects inside are made writable first.
    public func remove() {
        if let enumerator = FileManager.default.enumerator(atPath: path) {
            for case let relative as String in enumerator {
                _ = chmod(url.appendingPathComponent(relative).path, 0o755)
            }
        }
        try? FileManager.default.removeItem(at: url)
    }

    /// Runs `body` with a fresh directory and removes it afterwards (for tests that do not await).
    public static func using<T>(_ body: (TemporaryDirectory) throws -> T) throws -> T {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        return try body(directory)
    }

    /// Runs `body` with a fresh directory and removes it afterwards.
    public static func with<T>(_ label: String = "mediafetch-test", _ body: (TemporaryDirectory) async throws -> T) async throws -> T {
        let directory = try TemporaryDirectory(label)
        defer { directory.remove() }
        return try await body(directory)
    }
}

/// Deterministic pseudo-random bytes (SplitMix64), so fixtures differ from
/// one another but are the same on every run.
public func fixtureBytes(count: Int, seed: UInt64) -> Data {
    var state = seed &+ 0x9E37_79B9_7F4A_7C15
    var data = Data(capacity: count)
    while data.count < count {
        state = state &+ 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        withUnsafeBytes(of: z.littleEndian) { data.append(contentsOf: $0.prefix(count - data.count)) }
    }
    return data
}

/// `count` bytes (44 at least) that make a WAV file, 16-bit stereo PCM at
/// 44.1 kHz, whose samples are `fixtureBytes`' noise: a body that libsndfile
/// decodes where a sound is asked for, of the size a test needs, each seed
/// other bytes.
public func soundFixtureBytes(count: Int, seed: UInt64) -> Data {
    let samples = max(0, count - 44)
    func le32(_ value: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian, Array.init) }
    var header = Array("RIFF".utf8) + le32(samples + 36) + Array("WAVEfmt ".utf8)
    header += le32(16) + [1, 0, 2, 0] + le32(44_100) + le32(44_100 * 4) + [4, 0, 16, 0]
    header += Array("data".utf8) + le32(samples)
    return Data(header) + fixtureBytes(count: samples, seed: seed)
}

extension TestOrigin {
    /// Adds `count` photos of `size` bytes at `/photo0.jpg`, `/photo1.jpg`…,
    /// each sent over about `seconds` after its head (a paced body: the
    /// connection stays busy meanwhile), and returns their URLs.
    public func addSlowPhotos(_ count: Int, size: Int = 8_000, seconds: Double = 0.05) -> [String] {
        // Paced bodies go in chunks of a twentieth of a second's bytes, the first at once.
        let bytesPerSecond = max(1, Int(Double(size) / (seconds + 0.05)))
        return (0..<count).map { index in
            let path = "/photo\(index).jpg"
            addResource(path, data: fixtureBytes(count: size, seed: UInt64(9_000 + index)))
            setFault(path, .slow(bytesPerSecond: bytesPerSecond))
            return url(path)
        }
    }
}

/// Runs `body` with a loopback origin and a fresh directory; both are
/// shut down and removed afterwards.
public func withOrigin<T>(_ body: (TestOrigin, TemporaryDirectory) async throws -> T) async throws -> T {
    try await TemporaryDirectory.with { directory in
        let origin = try TestOrigin()
        defer { origin.shutdown() }
        return try await body(origin, directory)
    }
}

extension TestOrigin {
    /// Adds `count` resources, `<prefix>0.jpg`, `<prefix>1.jpg` and so on, of
    /// `size` bytes, each with bytes of its own (seeds from `firstSeed` up);
    /// returns their URLs in order.
    public func addFixtures(count: Int, size: Int, firstSeed: UInt64, prefix: String = "/p") -> [String] {
        (0..<count).map { index in
            let path = "\(prefix)\(index).jpg"
            addResource(path, data: fixtureBytes(count: size, seed: firstSeed + UInt64(index)))
            return url(path)
        }
    }
}

extension TemporaryDirectory {
    /// Makes a `cache` directory in here owned by `user`, and lets others
    /// through this directory: a cache the built binary can use when run as
    /// `user` (see `BuiltProducts.run(_:as:)`). Returns its path.
    public func cache(ownedBy user: BuiltProducts.User) throws -> String {
        let cache = appending("cache")
        try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        guard chmod(path, 0o755) == 0, chown(cache, user.uid, user.gid) == 0 else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: cache])
        }
        return cache
    }
}

/// A file's permission bits.
public func permissions(of path: String) throws -> Int? {
    try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
}

/// The path of every object file in the cache at `cache` (none when it has no store yet).
public func objectPaths(inCache cache: String) throws -> [String] {
    let objects = cache + "/objects/sha256"
    guard FileManager.default.fileExists(atPath: objects) else { return [] }
    var paths: [String] = []
    for fanOut in try FileManager.default.contentsOfDirectory(atPath: objects) {
        for name in try FileManager.default.contentsOfDirectory(atPath: "\(objects)/\(fanOut)") {
            paths.append("\(objects)/\(fanOut)/\(name)")
        }
    }
    return paths
}

/// The permission bits of every object file in the cache at `cache`.
public func objectModes(inCache cache: String) throws -> Set<Int> {
    Set(try objectPaths(inCache: cache).compactMap { try permissions(of: $0) })
}
