import ContentStore
import Foundation
import Transfer
import URLText

/// Output formats of `list` and `stats`.
public enum OutputFormat: String, Sendable, CaseIterable {
    case table, json, csv
}

/// Renders catalog entries for `list`, a row at a time.
public struct EntryFormatter: Sendable {
    public let cache: MediaCache

    public init(cache: MediaCache) { self.cache = cache }

    /// The fields of one entry as `list --format json` prints them. Sound facts
    /// (`durationSeconds`, `sampleRate`, `channels`, `format`) and other
    /// facts come from the item's metadata, where they do not clash with
    /// these. `dates` formats `addedAt` (making a formatter is dear: a long
    /// list shares one). `missing`: the entry's file is not in the cache (or
    /// not its size): `path` names where it would be.
    public func fields(of entry: CatalogEntry, missing: Bool = false,
                       dates: ISO8601DateFormatter = ISO8601DateFormatter()) -> [String: JSONValue] {
        var fields: [String: JSONValue] = [
            "hash": .string(entry.sha256),
            "size": .integer(entry.size),
            "path": .string(cache.path(for: entry.sha256) ?? ""),
            "url": .string(RedactedURL.of(entry.url)),
            "kind": .string(entry.kind.rawValue),
            "collection": .string(entry.collection),
            "title": entry.title.map(JSONValue.string) ?? .null,
            "addedAt": .string(dates.string(from: entry.addedAt)),
            "missing": .bool(missing),
        ]
        if let contentType = entry.contentType { fields["contentType"] = .string(contentType) }
        if let metadata = entry.metadata, let members = JSONValue.members(ofObject: metadata) {
            fields.merge(members) { ours, _ in ours }
        }
        return fields
    }

    static let tableHeader = ["HASH", "SIZE", "KIND", "COLLECTION", "TITLE / URL"]
    /// The columns of `--format csv`: the table's, then what JSON adds
    /// (`contentType`, empty when unknown, `addedAt`, and a sound's facts,
    /// empty for other items), at the end so that scripts reading the first
    /// ones read them as before.
    static let csvHeader = "hash,size,kind,collection,title,url,path,missing,contentType,addedAt,"
        + soundFactColumns.joined(separator: ",")
    /// A sound's facts, as its metadata holds them (see `MediaKinds`).
    static let soundFactColumns = ["durationSeconds", "sampleRate", "channels", "format"]

    /// The CSV cells of a sound's facts: empty for an item that is no sound,
    /// or a fact its metadata lacks.
    static func soundFactCells(of entry: CatalogEntry) -> [String] {
        guard entry.kind == .sound, let metadata = entry.metadata, let facts = JSONValue.members(ofObject: metadata) else {
            return soundFactColumns.map { _ in "" }
        }
        return soundFactColumns.map { column in
            switch facts[column] {
            case .number(let number)?: number
            case .string(let text)?: text
            default: ""
            }
        }
    }

    /// Whether the entry's file is gone from the store, or is not its size
    /// (`get` fetches such an item again; `verify` looks at the bytes too).
    /// Throws when the store cannot be looked in (see `ObjectStore.lookUp`).
    func isMissing(_ entry: CatalogEntry) throws(CacheError) -> Bool {
        do {
            return try !cache.store.lookUp(entry.sha256, size: entry.size)
        } catch {
            throw CacheError.unreadableObjects(error)
        }
    }

    /// Writes the entries that `forEach` goes through, in `format`, handing
    /// `output` a piece of about `pieceSize` bytes whenever one fills: the
    /// whole listing is never held. JSON is one array of objects (see
    /// `JSONText` for the layout). A table goes through the
    /// entries twice, first for the column widths, so `forEach` must give
    /// the same entries each time (`Catalog.readEntries` does). `output` is
    /// only called during this call; it is `@escaping` because the entries'
    /// closures, passed to `forEach`, call it. `columns`, for a table on a
    /// terminal that wide, cuts the middle out of each title or URL that
    /// would make its row wrap (see `fittedLast`). Returns how many entries
    /// have no file in the cache (the listing shows them as missing), and
    /// how many titles or URLs were cut.
    @discardableResult
    public func write(_ forEach: (_ visit: (CatalogEntry) throws -> Void) throws -> Void,
                      as format: OutputFormat, columns: Int? = nil, pieceSize: Int = 64 << 10,
                      to output: @escaping (String) throws -> Void) throws -> (missing: Int, shortened: Int) {
        var missing = 0
        var shortened = 0
        /// Whether the entry's file is missing, counted.
        func lookedFor(_ entry: CatalogEntry) throws -> Bool {
            let isMissing = try isMissing(entry)
            if isMissing { missing += 1 }
            return isMissing
        }
        var pieces = OutputPieces(size: pieceSize, output: output)
        func emit(_ text: String) throws { try pieces.emit(text) }
        switch format {
        case .json:
            let dates = ISO8601DateFormatter()
            try pieces.emitJSONArray(forEach) { .object(fields(of: $0, missing: try lookedFor($0), dates: dates)) }
        case .csv:
            let dates = ISO8601DateFormatter()
            try emit(Self.csvHeader + "\n")
            try forEach { entry in
                let columns = [entry.sha256, String(entry.size), entry.kind.rawValue, entry.collection,
                               entry.title ?? "", RedactedURL.of(entry.url), cache.path(for: entry.sha256) ?? "",
                               String(try lookedFor(entry)), entry.contentType ?? "", dates.string(from: entry.addedAt)]
                    + Self.soundFactCells(of: entry)
                try emit(columns.map(Self.csvField).joined(separator: ",") + "\n")
            }
        case .table:
            var widths = Self.tableHeader.map(DisplayText.displayWidth)
            // The last column is not padded: its cells are left out of the first pass.
            // A size and "missing" differ in width: the files are looked for in the first pass,
            // and those missing remembered (few, unless the store is gone) for the second.
            var missingHashes: Set<String> = []
            var widestLast = 0
            try forEach { entry in
                let isMissing = try isMissing(entry)
                if isMissing { missingHashes.insert(entry.sha256) }
                var row = Self.tableRow(entry, missing: isMissing)
                widestLast = max(widestLast, row.popLast().map(DisplayText.displayWidth) ?? 0)
                TextTable.widen(&widths, toFit: row)
            }
            // On a terminal, long collection names give way to the titles, down to the header's width.
            let fitting = Self.fitting(&widths, narrowing: 3, downTo: Self.tableHeader[3].count, widestLast: widestLast,
                                       columns: columns, paddedAtMost: Self.widestPaddedCollection)
            try emit(TextTable.line(Self.tableHeader, widths: widths, rightAligned: [1]) + "\n")
            try forEach { entry in
                let isMissing = missingHashes.contains(entry.sha256)
                if isMissing { missing += 1 }
                var row = Self.tableRow(entry, missing: isMissing)
                if let fitting, Self.fitted(&row, cutting: 3, widths: widths, columns: fitting) { shortened += 1 }
                try emit(TextTable.line(row, widths: widths, rightAligned: [1]) + "\n")
            }
        }
        try pieces.finish()
        return (missing, shortened)
    }

    /// Cuts `row`'s cell `column` to `widths[column]`, then its last cell as
    /// `fittedLast` does; returns whether either was cut.
    static func fitted(_ row: inout [String], cutting column: Int, widths: [Int], columns: Int) -> Bool {
        let cell = DisplayText.elidingMiddle(row[column], toWidth: widths[column])
        let cut = cell != row[column]
        row[column] = cell
        return fittedLast(of: &row, widths: widths, columns: columns) || cut
    }

    /// Cuts the middle out of `row`'s last cell (a title or URL) so that the
    /// row fits a terminal `columns` wide (a row as wide as the terminal does
    /// not wrap); returns whether it did. Not where that leaves it under
    /// `leastFittedWidth` (a narrow terminal): it wraps whole.
    static func fittedLast(of row: inout [String], widths: [Int], columns: Int) -> Bool {
        guard let last = row.last else { return false }
        let room = columns - lastCellStart(of: row, widths: widths)
        guard room >= leastFittedWidth, DisplayText.displayWidth(last) > room else { return false }
        row[row.count - 1] = DisplayText.elidingMiddle(last, toWidth: room)
        return true
    }

    /// The column `row`'s last cell starts at: the padded cells before it (a
    /// long collection name runs past its width) and the two spaces after each.
    static func lastCellStart(of row: [String], widths: [Int]) -> Int {
        zip(row.dropLast(), widths).reduce(0) { $0 + max($1.1, DisplayText.displayWidth($1.0)) + 2 }
    }

    /// On a terminal `columns` wide, narrows padded column `column` (not
    /// under `least`) to leave the last cells (`widestLast` at most) the
    /// room `lastRoom` gives of the columns left for the two
    /// (`lastColumnRoom` unless said); returns the width rows are then fitted
    /// to, or nil where they cannot fit even so: they are left whole, as on a
    /// pipe (cut, a collection or URL only made what wrapped harder to read).
    /// Off a terminal (nil `columns`), or on one too narrow, the column is
    /// padded to `paddedAtMost` at most: one very long value does not push
    /// every row's last cell off the screen.
    static func fitting(_ widths: inout [Int], narrowing column: Int, downTo least: Int, widestLast: Int,
                        lastRoom: (_ left: Int) -> Int = { _ in lastColumnRoom }, columns: Int?, paddedAtMost: Int) -> Int? {
        let before = widths.prefix(column).reduce(0) { $0 + $1 + 2 }
        let left = (columns ?? 0) - before - 2
        let narrowed = min(widths[column], max(least, left - min(widestLast, lastRoom(left))))
        guard let columns, before + narrowed + 2 + min(widestLast, leastFittedWidth) <= columns else {
            widths[column] = min(widths[column], paddedAtMost)
            return nil
        }
        widths[column] = narrowed
        return columns
    }

    /// The narrowest a last cell (a title, URL or reason) is cut to (see `fittedLast`).
    static let leastFittedWidth = 20

    /// The columns a table on a terminal leaves its last cells (titles)
    /// before the padded column before them gives way (a failure's reasons:
    /// see `FailureFormatter.reasonRoom`).
    static let lastColumnRoom = 40

    /// The widest the collection column is padded to: a longer name runs into
    /// its title on its own row, rather than pushing every row's title off
    /// the screen (a 5,000-character name made every row 5,070 columns wide).
    /// 100, as `list --failed`'s URLs: at 40, a name such as "Bratislava —
    /// staré mesto, čierne fotky a zvuky" left a table written to a file
    /// ragged. On a terminal the column is as wide as the longest name where
    /// it leaves the titles their room, and gives way to them where it does
    /// not (see `fitting`): every row in line, and a name of 144 characters
    /// whole at 250 columns (it was cut to 100). CSV and JSON hold it whole.
    static let widestPaddedCollection = 100

    /// What a table shows for the size of an entry whose file is missing.
    static let missingCell = "missing"

    /// One entry's cells in a table, control characters shown as escapes;
    /// `paddedOnly` leaves out the last one.
    static func tableRow(_ entry: CatalogEntry, missing: Bool, paddedOnly: Bool = false) -> [String] {
        var cells = [String(entry.sha256.prefix(12)), missing ? missingCell : ByteSize.format(entry.size),
                     entry.kind.rawValue, entry.collection]
        if !paddedOnly { cells.append(entry.title ?? RedactedURL.readable(entry.url)) }
        return cells.map(DisplayText.escapingControls)
    }

    /// RFC 4180: quote a field holding a comma, quote or line break; double inner quotes.
    /// Looked for byte by byte (and quotes doubled scalar by scalar): as
    /// `Character`s, CRLF is one that is neither CR nor LF, and a comma or
    /// quote with a combining mark after it is neither.
    static func csvField(_ text: String) -> String {
        guard text.utf8.contains(where: isCSVSpecial) else { return text }
        var quoted = String.UnicodeScalarView()
        quoted.append("\"")
        for scalar in text.unicodeScalars {
            quoted.append(scalar)
            if scalar == "\"" { quoted.append("\"") }
        }
        quoted.append("\"")
        return String(quoted)
    }

    /// What makes a CSV field need quotes: each is ASCII, so a field's UTF-8
    /// bytes are compared (a set of scalars hashed every one: a fifth of
    /// `list --format csv`'s time).
    private static func isCSVSpecial(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ",") || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
    }
}

/// Output handed on in pieces of about `size` bytes as it is made: a long
/// listing is never held whole.
struct OutputPieces {
    let size: Int
    let output: (String) throws -> Void
    private var piece = ""

    init(size: Int, output: @escaping (String) throws -> Void) {
        self.size = size
        self.output = output
    }

    mutating func emit(_ text: String) throws {
        piece += text
        if piece.utf8.count >= size {
            try output(piece)
            piece = ""
        }
    }

    /// One JSON array of what `forEach` goes through, an object a row (see
    /// `JSONText` for the layout).
    mutating func emitJSONArray<Row>(_ forEach: (_ visit: (Row) throws -> Void) throws -> Void,
                                     _ value: (Row) throws -> JSONValue) throws {
        var first = true
        try withoutActuallyEscaping(value) { value in
            try forEach { row in
                var object = first ? "[\n  " : ",\n  "
                JSONText.write(try value(row), level: 1, into: &object)
                try emit(object)
                first = false
            }
        }
        try emit(first ? "[]\n" : "\n]\n")
    }

    /// Hands on what is left.
    mutating func finish() throws {
        if !piece.isEmpty { try output(piece) }
        piece = ""
    }
}

/// Renders `stats`.
public enum StatsFormatter {
    /// `missing`: the catalog's objects that have no file in the cache (or
    /// not one of their size; see `MediaCache.missingObjects`): their bytes
    /// are counted in `bytes`, as recorded, and said apart so the figure is
    /// not read as what the disk holds, and the bytes saved by
    /// de-duplication leave them out (nothing of them is held, once or more);
    /// `awaitingRecord`: rows of stored objects waiting in `unrecorded/`
    /// for the next run to record (see `UnrecordedRows`);
    /// `partials`: the partial downloads in `tmp/`, bytes the store's
    /// figures leave out.
    public static func render(_ stats: CatalogStats, missing: MissingObjects = MissingObjects(), awaitingRecord: Int = 0,
                              partials: HeldPartials = HeldPartials(), root: String, as format: OutputFormat) throws -> String {
        switch format {
        case .json, .csv:
            let fields: KeyValuePairs<String, JSONValue> = [
                "cache": .string(root),
                "objects": .integer(Int64(stats.objects)), "bytes": .integer(stats.bytes),
                "items": .integer(Int64(stats.items)), "logicalBytes": .integer(stats.logicalBytes),
                "collections": .integer(Int64(stats.collections)),
                "sources": .integer(Int64(stats.sources)), "failedSources": .integer(Int64(stats.failedSources)),
                "bytesSavedByDeduplication": .integer(missing.bytesSavedByDeduplication(stats)),
                "missingObjects": .integer(Int64(missing.count)), "missingBytes": .integer(missing.bytes),
                "awaitingRecord": .integer(Int64(awaitingRecord)),
                "partialDownloads": .integer(Int64(partials.count)), "partialBytes": .integer(partials.bytes),
                "resumablePartials": .integer(Int64(partials.resumable)),
                "photoItems": .integer(Int64(stats.itemsByKind[.photo] ?? 0)),
                "soundItems": .integer(Int64(stats.itemsByKind[.sound] ?? 0)),
                "fileItems": .integer(Int64(stats.itemsByKind[.file] ?? 0)),
            ]
            if format == .csv {
                // A header and one row, in the order above.
                let values = fields.map { field -> String in
                    switch field.value {
                    case .string(let text): return EntryFormatter.csvField(text)
                    case .number(let number): return number
                    default: return ""
                    }
                }
                return fields.map(\.key).joined(separator: ",") + "\n" + values.joined(separator: ",") + "\n"
            }
            var text = ""
            JSONText.write(.object(Dictionary(uniqueKeysWithValues: fields.map { ($0.key, $0.value) })), into: &text)
            return text + "\n"
        case .table:
            var rows = [
                ["cache", root],
                ["objects", "\(stats.objects) (\(ByteSize.format(stats.bytes)))"
                    + (missing.count > 0 ? "; \(missing.count) of them (\(ByteSize.format(missing.bytes))) with no file in the cache" : "")],
                ["items", "\(stats.items) (\(ByteSize.format(stats.logicalBytes)))" + kindsOfItems(stats)],
                ["collections", "\(stats.collections)"],
                ["sources", "\(stats.sources) (\(stats.failedSources) failed last time)"],
                ["saved by de-duplication", ByteSize.format(missing.bytesSavedByDeduplication(stats))],
            ]
            if awaitingRecord > 0 {
                rows.append(["waiting to be recorded", "\(awaitingRecord) (stored; the next get records them)"])
            }
            if partials.count > 0 {
                let resumed = partials.resumable == partials.count ? "each with the validator a resumed download needs"
                    : "\(partials.resumable) with the validator a resumed download needs"
                rows.append(["partial downloads", "\(partials.count) (\(ByteSize.format(partials.bytes)) in tmp/; \(resumed))"])
            }
            return TextTable.render(header: nil, rows: rows, rightAligned: [])
        }
    }

    /// How many items are of each kind, as the table's items row ends:
    /// `: 200 photos, 5 sounds, 1 file`; nothing when there are none.
    static func kindsOfItems(_ stats: CatalogStats) -> String {
        let counts = [(ItemKind.photo, "photo"), (.sound, "sound"), (.file, "file")].compactMap { kind, name -> String? in
            guard let count = stats.itemsByKind[kind], count > 0 else { return nil }
            return "\(count) \(name)\(count == 1 ? "" : "s")"
        }
        return counts.isEmpty ? "" : ": " + counts.joined(separator: ", ")
    }
}

/// Plain aligned columns.
enum TextTable {
    static func render(header: [String]?, rows: [[String]], rightAligned: Set<Int>) -> String {
        let all = (header.map { [$0] } ?? []) + rows.map { $0.map(DisplayText.escapingControls) }
        guard let columns = all.first?.count else { return "" }
        var widths = Array(repeating: 0, count: columns)
        for row in all { widen(&widths, toFit: row) }
        return all.map { line($0, widths: widths, rightAligned: rightAligned) }.joined(separator: "\n") + "\n"
    }

    /// Widens `widths` to fit `row`'s cells, in columns on the screen.
    static func widen(_ widths: inout [Int], toFit row: [String]) {
        for (index, cell) in row.enumerated() where index < widths.count {
            widths[index] = max(widths[index], DisplayText.displayWidth(cell))
        }
    }

    /// One row padded to `widths` (the last cell is not padded).
    static func line(_ row: [String], widths: [Int], rightAligned: Set<Int>) -> String {
        row.enumerated().map { index, cell in
            // Columns, not characters: a wide character (東京) takes two.
            let padding = String(repeating: " ", count: max(0, widths[index] - DisplayText.displayWidth(cell)))
            if index == row.count - 1 { return cell }
            return rightAligned.contains(index) ? padding + cell : cell + padding
        }.joined(separator: "  ")
    }
}

/// Messages of `list`.
public enum ListMessages {
    /// The error for `list --collection NAME` when no collection has that
    /// name, with the names there are, so that a typo shows itself.
    public static func noCollection(named name: String, among names: [String]) -> String {
        let shown = 10
        var known = names.prefix(shown).map { "'\(quoted($0))'" }.joined(separator: ", ")
        if names.count > shown { known += " and \(names.count - shown) more" }
        return "no collection named '\(quoted(name))' (" + (names.isEmpty ? "the cache has none" : "the cache has \(known)") + ")"
    }

    /// A name as the message shows it: escaped, and cut at 60 characters
    /// (one of 5,000 made the line 10 KB).
    private static func quoted(_ name: String) -> String {
        let escaped = DisplayText.escapingControls(name)
        return escaped.count > 60 ? escaped.prefix(59) + "…" : escaped
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

    /// Why `name` cannot name a new collection, or nil. It must hold more
    /// than white space, no control character (nor a line separator or
    /// bidirectional control), and no white space around it: a name read
    /// from a CRLF file ended in CR, and one with a space or a no-break space
    /// after it (`--collection "downloads "`), made a second collection
    /// that looked like the first.
    ///
    /// Nor may it hold what draws nothing (a soft hyphen, a Hangul filler,
    /// U+034F; joiners and variation selectors only inside, after what they
    /// join or vary), nor begin with a combining mark or end in a blank:
    /// `downloads` with a soft hyphen or a ZWJ after it was a second
    /// `downloads` in the table.
    public static func problem(_ name: String) -> String? {
        let scalars = Array(name.unicodeScalars)
        if scalars.allSatisfy(isBlank) { return "must not be empty" }
        let shown = DisplayText.escaping(name) { DisplayText.isControl($0) || drawsNothing($0) || isBlank($0) && $0 != " " }
        var previous: Unicode.Scalar?
        for (offset, scalar) in scalars.enumerated() {
            defer { previous = scalar }
            let atAnEnd = offset == 0 || offset == scalars.count - 1
            let fits = isJoiner(scalar) ? !atAnEnd : modifierFits(scalar, after: previous)
            if DisplayText.isControl(scalar) || drawsNothing(scalar) && fits != true {
                return "must not hold control or invisible characters (got '\(shown)')"
            }
        }
        if let first = scalars.first, let last = scalars.last, isBlank(first) || isCombiningMark(first) || isBlank(last) {
            // A no-break or an ideographic space, shown as what it is.
            return isCombiningMark(first) ? "must not begin with a combining mark (got '\(shown)')"
                : "must not begin or end with white space (got '\(shown)')"
        }
        // A URL given as the name (`--collection "$URL"`): its password would be kept and listed as the name's.
        if URLPassword.isGiven(in: name) || !URLPassword.lenientRanges(in: name).isEmpty {
            return "must not hold a URL's password (got '\(RedactedURL.inText(shown))')"
        }
        return nil
    }

    /// White space, and the Braille blank, which draws as one.
    private static func isBlank(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isWhitespace || scalar.value == 0x2800
    }

    /// The zero-width joiner and non-joiner, which emoji sequences and some scripts need inside a name.
    private static func isJoiner(_ scalar: Unicode.Scalar) -> Bool { scalar.value == 0x200C || scalar.value == 0x200D }

    /// Whether `scalar`, a variation selector or an emoji tag, varies what
    /// comes before it (an emoji or an ideograph; a Mongolian letter for
    /// Mongolian's); nil when it is none of those. After a letter it draws
    /// nothing, and names nothing.
    private static func modifierFits(_ scalar: Unicode.Scalar, after previous: Unicode.Scalar?) -> Bool? {
        guard let previous else { return false }
        switch scalar.value {
        case 0xFE00...0xFE0F, 0xE0100...0xE01EF:
            return previous.properties.isEmoji || previous.properties.isIdeographic
        case 0x180B...0x180D, 0x180F:
            return (0x1820...0x18AF).contains(previous.value)
        case 0xE0020...0xE007F:
            return previous.properties.isEmoji || (0xE0020...0xE007F).contains(previous.value)
        default:
            return nil
        }
    }

    private static func drawsNothing(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isDefaultIgnorableCodePoint
    }

    private static func isCombiningMark(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: true
        default: false
        }
    }

    /// The stored name among `names` that `name` means: the same bytes, or
    /// else the same text in another Unicode form (a name stored before
    /// names were normalized). Nil when there is none.
    public static func find(_ name: String, among names: [String]) -> String? {
        names.first { $0.utf8.elementsEqual(name.utf8) } ?? names.first { $0 == name }
    }
}
