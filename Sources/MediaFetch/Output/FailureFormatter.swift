import ContentStore
import Foundation

/// Renders `list --failed`: the URLs whose last fetch failed, a row at a
/// time (the same piecewise output as `EntryFormatter`).
public enum FailureFormatter {
    static let tableHeader = ["FAILED AT", "URL", "REASON"]
    /// The widest the URL column is padded to: a longer URL runs into its
    /// reason on its own row, rather than pushing every row's reason off the
    /// screen (a 32 KB URL padded them all to 32 KB). On a terminal the column
    /// is as wide as the longest URL where it leaves the reasons their room,
    /// and narrower where it does not: every row in line, and a URL of 192
    /// characters whole at 250 columns. CSV and JSON hold it whole.
    static let widestPaddedURL = 100
    static let csvHeader = "url,failedAt,reason,cached"

    /// The fields of one failure as `--format json` prints them.
    public static func fields(of failure: CatalogFailure, dates: ISO8601DateFormatter) -> [String: JSONValue] {
        [
            "url": .string(RedactedURL.of(failure.url)),
            "reason": .string(RedactedURL.inText(failure.message)),
            "failedAt": .string(dates.string(from: failure.failedAt)),
            "cached": .bool(failure.isCached),
        ]
    }

    /// Writes the failures `forEach` goes through in `format` (see
    /// `EntryFormatter.write`: a table goes through them twice). `columns`,
    /// for a table on a terminal that wide, narrows the URL column to leave
    /// the reasons room (`reasonRoom`, or the longest reason if shorter),
    /// cuts the middle out of the URLs that would still make a row wrap, and
    /// goes on with a reason too long for its row in lines of its own under
    /// it, in the reason's column. Returns how many URLs were cut.
    @discardableResult
    public static func write(_ forEach: (_ visit: (CatalogFailure) throws -> Void) throws -> Void,
                             as format: OutputFormat, columns: Int? = nil, pieceSize: Int = 64 << 10,
                             to output: @escaping (String) throws -> Void) throws -> Int {
        var shortened = 0
        var pieces = OutputPieces(size: pieceSize, output: output)
        func emit(_ text: String) throws { try pieces.emit(text) }
        let dates = ISO8601DateFormatter()
        switch format {
        case .json:
            try pieces.emitJSONArray(forEach) { .object(fields(of: $0, dates: dates)) }
        case .csv:
            try emit(csvHeader + "\n")
            try forEach { failure in
                // A server's words: its escape codes are shown, not sent to the terminal a
                // CSV is often read on (JSON escapes them its own way, and keeps them).
                let columns = [RedactedURL.of(failure.url), dates.string(from: failure.failedAt),
                               DisplayText.escapingControls(RedactedURL.inText(failure.message)), String(failure.isCached)]
                try emit(columns.map(EntryFormatter.csvField).joined(separator: ",") + "\n")
            }
        case .table:
            var widths = tableHeader.map(DisplayText.displayWidth)
            var widestReason = 0
            try forEach { failure in
                let row = tableRow(failure, dates: dates)
                TextTable.widen(&widths, toFit: Array(row.dropLast()))
                widestReason = max(widestReason, row.last.map(DisplayText.displayWidth) ?? 0)
            }
            let fitting = EntryFormatter.fitting(&widths, narrowing: 1, downTo: EntryFormatter.leastFittedWidth, widestLast: widestReason,
                                                 lastRoom: reasonRoom(left:), columns: columns, paddedAtMost: widestPaddedURL)
            try emit(TextTable.line(tableHeader, widths: widths, rightAligned: []) + "\n")
            try forEach { failure in
                var row = tableRow(failure, dates: dates)
                var under: [String] = []
                if let fitting {
                    let url = row[1]
                    row[1] = DisplayText.elidingMiddle(url, toWidth: widths[1])
                    if row[1] != url { shortened += 1 }
                    // A reason is what the list is read for: one too long for its row goes on
                    // under itself, in whole words (cut at 80 columns, "Failed to connect…" and
                    // "the server sent a…" said nothing of why).
                    let start = EntryFormatter.lastCellStart(of: row, widths: widths)
                    if fitting - start >= EntryFormatter.leastFittedWidth {
                        let lines = DisplayText.wrapped(row[2], toWidth: fitting - start)
                        row[2] = lines.first ?? ""
                        under = lines.dropFirst().map { String(repeating: " ", count: start) + $0 }
                    }
                }
                try emit(TextTable.line(row, widths: widths, rightAligned: []) + "\n")
                for line in under { try emit(line + "\n") }
            }
        }
        try pieces.finish()
        return shortened
    }

    /// The columns a table on a terminal leaves the reasons of the `left` that
    /// the dates leave the URLs and the reasons, before the URLs give way: a
    /// third, 20 at least. The URL says which item failed: at 80 columns, 40
    /// for the reasons left the URLs 20, `http://127.0.0.1:47001/…ad-135.jpg`.
    static func reasonRoom(left: Int) -> Int {
        max(EntryFormatter.leastFittedWidth, left / 3)
    }

    /// One failure's cells, control characters shown as escapes; `paddedOnly` leaves out the last.
    static func tableRow(_ failure: CatalogFailure, dates: ISO8601DateFormatter, paddedOnly: Bool = false) -> [String] {
        var cells = [dates.string(from: failure.failedAt), RedactedURL.readable(failure.url)]
        if !paddedOnly { cells.append(RedactedURL.inText(failure.message)) }
        return cells.map(DisplayText.escapingControls)
    }
}
