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
    public static func parse(_ text: String, source: String) throws(InputError) -> [String] {
        var urls: [String] = []
        var lineNumber = 0
        // isNewline also splits CRLF, which Swift holds as one Character.
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            lineNumber += 1
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            do {
                urls.append(try RequestTarget(trimmed).url)
            } catch {
                throw InputError("\(source):\(lineNumber): \(error.message)")
            }
        }
        return urls
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
