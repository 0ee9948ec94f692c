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
