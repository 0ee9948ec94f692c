import ContentStore
import Foundation

/// Output formats of `list` and `stats`.
public enum OutputFormat: String, Sendable, CaseIterable {
    case table, json, csv
}

/// Renders catalog entries for `list`.
public struct EntryFormatter: Sendable {
    public let cache: MediaCache

    public init(cache: MediaCache) { self.cache = cache }

    /// The fields of one entry as `list --format json` prints them. Sound facts
    /// (`durationSeconds`, `sampleRate`, `channels`, `format`) come from the
    /// item's metadata when it has them.
    public func fields(of entry: CatalogEntry) -> [String: Any] {
        var fields: [String: Any] = [
            "hash": entry.sha256,
            "size": entry.size,
            "path": cache.path(for: entry.sha256) ?? "",
            "url": RedactedURL.of(entry.url),
            "kind": entry.kind.rawValue,
            "collection": entry.collection,
            "title": entry.title ?? NSNull(),
            "addedAt": ISO8601DateFormatter().string(from: entry.addedAt),
        ]
        if let contentType = entry.contentType { fields["contentType"] = contentType }
        if let metadata = entry.metadata, let data = metadata.data(using: .utf8),
           let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
            for (key, value) in object where fields[key] == nil { fields[key] = value }
        }
        return fields
    }

    public func render(_ entries: [CatalogEntry], as format: OutputFormat) throws -> String {
        switch format {
        case .json:
            let data = try JSONSerialization.data(withJSONObject: entries.map(fields(of:)),
                                                  options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            return String(decoding: data, as: UTF8.self) + "\n"
        case .csv:
            var lines = ["hash,size,kind,collection,title,url,path"]
            for entry in entries {
                let columns = [entry.sha256, String(entry.size), entry.kind.rawValue, entry.collection,
                               entry.title ?? "", RedactedURL.of(entry.url), cache.path(for: entry.sha256) ?? ""]
                lines.append(columns.map(Self.csvField).joined(separator: ","))
            }
            return lines.joined(separator: "\n") + "\n"
        case .table:
            let rows = entries.map { entry in
                [String(entry.sha256.prefix(12)), ByteSize.format(entry.size), entry.kind.rawValue,
                 entry.collection, entry.title ?? RedactedURL.of(entry.url)]
            }
            return TextTable.render(header: ["HASH", "SIZE", "KIND", "COLLECTION", "TITLE / URL"], rows: rows,
                                    rightAligned: [1])
        }
    }

    /// RFC 4180: quote a field holding a comma, quote or line break; double inner quotes.
    static func csvField(_ text: String) -> String {
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// Renders `stats`.
public enum StatsFormatter {
    public static func render(_ stats: CatalogStats, root: String, as format: OutputFormat) throws -> String {
        switch format {
        case .json, .csv:
            let fields: [String: Any] = [
                "cache": root,
                "objects": stats.objects, "bytes": stats.bytes,
                "items": stats.items, "logicalBytes": stats.logicalBytes,
                "collections": stats.collections,
                "sources": stats.sources, "failedSources": stats.failedSources,
                "bytesSavedByDeduplication": stats.bytesSavedByDeduplication,
            ]
            let data = try JSONSerialization.data(withJSONObject: fields, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            return String(decoding: data, as: UTF8.self) + "\n"
        case .table:
            let rows = [
                ["cache", root],
                ["objects", "\(stats.objects) (\(ByteSize.format(stats.bytes)))"],
                ["items", "\(stats.items) (\(ByteSize.format(stats.logicalBytes)))"],
                ["collections", "\(stats.collections)"],
                ["sources", "\(stats.sources) (\(stats.failedSources) failed last time)"],
                ["saved by de-duplication", ByteSize.format(stats.bytesSavedByDeduplication)],
            ]
            return TextTable.render(header: nil, rows: rows, rightAligned: [])
        }
    }
}

/// Plain aligned columns.
enum TextTable {
    static func render(header: [String]?, rows: [[String]], rightAligned: Set<Int>) -> String {
        let all = (header.map { [$0] } ?? []) + rows.map { $0.map(TerminalText.escapingControls) }
        guard let columns = all.first?.count else { return "" }
        var widths = Array(repeating: 0, count: columns)
        for row in all {
            for (index, cell) in row.enumerated() where index < columns {
                widths[index] = max(widths[index], TerminalText.displayWidth(cell))
            }
        }
        let lines = all.map { row in
            row.enumerated().map { index, cell in
                // Columns, not characters: a wide character (東京) takes two.
                let padding = String(repeating: " ", count: widths[index] - TerminalText.displayWidth(cell))
                if index == columns - 1 { return cell }
                return rightAligned.contains(index) ? padding + cell : cell + padding
            }.joined(separator: "  ")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Messages of `list`.
public enum ListMessages {
    /// The error for `list --collection NAME` when no collection has that
    /// name, with the names there are, so that a typo shows itself.
    public static func noCollection(named name: String, among names: [String]) -> String {
        let shown = 10
        var known = names.prefix(shown).map { "'\(TerminalText.escapingControls($0))'" }.joined(separator: ", ")
        if names.count > shown { known += " and \(names.count - shown) more" }
        return "no collection named '\(TerminalText.escapingControls(name))' (" + (names.isEmpty ? "the cache has none" : "the cache has \(known)") + ")"
    }
}

/// Collection names as people type them: "café" is one name whether its é
/// is one character or an e and an accent (macOS file names and some
/// keyboards give the second), though SQLite compares bytes.
public enum CollectionName {
    /// The name in Unicode's composed form (NFC), as it is stored.
    public static func normalized(_ name: String) -> String {
        name.precomposedStringWithCanonicalMapping
    }

    /// The stored name among `names` that `name` means: the same bytes, or
    /// else the same text in another Unicode form (a name stored before
    /// names were normalized). Nil when there is none.
    public static func find(_ name: String, among names: [String]) -> String? {
        names.first { $0.utf8.elementsEqual(name.utf8) } ?? names.first { $0 == name }
    }
}
