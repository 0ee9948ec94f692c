import Foundation
import Transfer

/// A line of input that is not an http or https URL.
public struct InputError: Error, Sendable, CustomStringConvertible, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Reads URL lists: one URL a line, blank lines and `#` comments allowed.
public enum URLList {
    /// Parses `text`; `source` names the file in errors (`FILE:LINE: ...`).
    /// Every URL must be http or https: one bad line rejects the whole list,
    /// so nothing is fetched from a half-understood file.
    ///
    /// Works on bytes (a list of thousands of URLs is read in a millisecond);
    /// a line with any non-ASCII byte or another kind of line break goes through `Character`-level
    /// splitting and trimming instead, so Unicode line separators and
    /// whitespace are honoured as well.
    public static func parse(_ text: String, source: String) throws(InputError) -> [String] {
        var urls: [String] = []
        var lineNumber = 0
        var text = text
        let lines: [(slice: Range<Int>, ascii: Bool)] = text.withUTF8 { bytes in
            var lines: [(Range<Int>, Bool)] = []
            var start = 0
            var ascii = true
            for index in 0...bytes.count {
                if index == bytes.count || bytes[index] == 0x0A {
                    if index > start || index < bytes.count { lines.append((start..<index, ascii)) }
                    start = index + 1
                    ascii = true
                } else if bytes[index] >= 0x80 || bytes[index] == 0x0B || bytes[index] == 0x0C
                            || (bytes[index] == 0x0D && index + 1 < bytes.count && bytes[index + 1] != 0x0A) {
                    // Other line breaks (a lone CR, VT, FF, Unicode separators) and
                    // Unicode blanks: the Character-level path handles those.
                    ascii = false
                }
            }
            return lines
        }
        let utf8 = Array(text.utf8)
        for (range, ascii) in lines {
            var pieces: [Substring]
            if ascii {
                var lower = range.lowerBound
                var upper = range.upperBound
                while lower < upper, isBlank(utf8[lower]) { lower += 1 }
                while upper > lower, isBlank(utf8[upper - 1]) { upper -= 1 }
                pieces = [Substring(String(decoding: utf8[lower..<upper], as: UTF8.self))]
            } else {
                // isNewline also splits CRLF, which Swift holds as one Character.
                pieces = String(decoding: utf8[range], as: UTF8.self)
                    .split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
                    .map { Substring($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            }
            for line in pieces {
                lineNumber += 1
                if line.isEmpty || line.hasPrefix("#") { continue }
                do {
                    urls.append(try RequestTarget(String(line)).url)
                } catch {
                    throw InputError("\(source):\(lineNumber): \(error.message)")
                }
            }
        }
        return urls
    }

    /// Space, tab and carriage return (the end of a CRLF line).
    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D
    }

    /// Reads and parses the file at `path` (`-` reads standard input).
    public static func read(path: String) throws(InputError) -> [String] {
        let data: Data
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: path) else {
                throw InputError("\(path): cannot read the file")
            }
            data = contents
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw InputError("\(path): not UTF-8 text")
        }
        return try parse(text, source: path)
    }

    /// Checks URLs given on the command line.
    public static func validate(_ arguments: [String]) throws(InputError) -> [String] {
        var urls: [String] = []
        for argument in arguments {
            do {
                urls.append(try RequestTarget(argument).url)
            } catch {
                throw InputError(error.message)
            }
        }
        return urls
    }
}
