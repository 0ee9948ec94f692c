import CFileSync
import Foundation

/// The files in `directory` (an engine's partial directory) and in its
/// subdirectories (partials sit in sixteen, named by a hex digit), as paths
/// relative to it, such as `a/<key>.part`; the subdirectories themselves are
/// not listed.
public func partialDirectoryFiles(_ directory: String) -> [String] {
    let fileManager = FileManager.default
    var files: [String] = []
    for name in (try? fileManager.contentsOfDirectory(atPath: directory)) ?? [] {
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: "\(directory)/\(name)", isDirectory: &isDirectory) else { continue }
        if isDirectory.boolValue {
            files += ((try? fileManager.contentsOfDirectory(atPath: "\(directory)/\(name)")) ?? []).map { "\(name)/\($0)" }
        } else {
            files.append(name)
        }
    }
    return files
}

/// Whether `directory` (an engine's partial directory) holds a partial with
/// bytes on disk and its validator: a download cancelled from then on keeps
/// its partial. Before that it may not: the validator is written with the
/// response headers, before any body byte, and an empty partial is dropped.
public func holdsResumablePartial(_ directory: String) -> Bool {
    let names = partialDirectoryFiles(directory)
    return names.contains { name in
        guard name.hasSuffix(".part"), names.contains(name + ".validator"),
              let size = try? FileManager.default.attributesOfItem(atPath: "\(directory)/\(name)")[.size] as? Int
        else { return false }
        return size > 0
    }
}

/// Where a download cut off after `bytes` resumes when its partial is in
/// `directory`: at the last 4 KiB boundary before it where the filesystem
/// takes direct I/O (the writer keeps whole blocks only, so that the rest
/// of the body goes on past the page cache), else right there.
public func resumeOffset(afterCutAt bytes: Int, in directory: String) -> Int {
    takesDirectIO(directory) ? bytes - bytes % 4096 : bytes
}

/// The `Range` a resume from `held` bytes asks: from 4 KiB before them
/// (`FileSink.resumeOverlap`, 8 KiB held at least), which must come again as held.
public func resumeRange(from held: Int) -> String {
    "bytes=\(held >= 8192 ? held - 4096 : held)-"
}

/// Whether files in `directory` can be written with `O_DIRECT`.
public func takesDirectIO(_ directory: String) -> Bool {
    let path = "\(directory)/direct-io-probe-\(UUID().uuidString)"
    let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return false }
    defer {
        _ = close(fd)
        _ = unlink(path)
    }
    return mf_set_direct_io(fd, 1) == 0
}
