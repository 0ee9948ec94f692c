import Foundation

/// Whether `directory` (an engine's partial directory) holds a partial with
/// bytes on disk and its validator: a download cancelled from then on keeps
/// its partial. Before that it may not: the validator is written with the
/// response headers, before any body byte, and an empty partial is dropped.
public func holdsResumablePartial(_ directory: String) -> Bool {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    return names.contains { name in
        guard name.hasSuffix(".part"), names.contains(name + ".validator"),
              let size = try? FileManager.default.attributesOfItem(atPath: "\(directory)/\(name)")[.size] as? Int
        else { return false }
        return size > 0
    }
}
