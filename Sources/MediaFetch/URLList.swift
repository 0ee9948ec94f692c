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
    /// a line with any non-ASCII byte or another kind of line break goes
    /// through `Character`-level splitting and trimming instead, so Unicode
    /// line separators and whitespace are honoured as well.
    public static func parse(_ text: String, source: String) throws(InputError) -> [String] {
        var urls: [String] = []
        var lineNumber = 0
        func take(_ line: String) throws(InputError) {
            lineNumber += 1
            if line.isEmpty || line.hasPrefix("#") { return }
            do {
                urls.append(try RequestTarget(line).url)
            } catch {
                throw InputError("\(source):\(lineNumber): \(error.message)")
            }
        }
        for line in Array(text.utf8).split(separator: 0x0A, omittingEmptySubsequences: false) {
            // A CR other than the last byte (CRLF) is a line break of its own.
            if line.allSatisfy(isPlain), !line.dropLast().contains(0x0D) {
                var trimmed = line
                while let first = trimmed.first, isBlank(first) { trimmed.removeFirst() }
                while let last = trimmed.last, isBlank(last) { trimmed.removeLast() }
                try take(String(decoding: trimmed, as: UTF8.self))
            } else {
                // The CR of this line's CRLF ends the line, not another one.
                let line = line.last == 0x0D ? line.dropLast() : line
                // isNewline also splits CRLF, which Swift holds as one Character.
                for piece in String(decoding: line, as: UTF8.self)
                    .split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
                    try take(piece.trimmingCharacters(in: .whitespacesAndNewlines))
                }
            }
        }
        return urls
    }

    /// ASCII other than the line breaks VT and FF: the byte-level path handles it.
    private static func isPlain(_ byte: UInt8) -> Bool {
        byte < 0x80 && byte != 0x0B && byte != 0x0C
    }

    /// Space, tab and carriage return (the end of a CRLF line).
    private static func isBlank(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D
    }

    /// Reads and parses the file at `path` (`-` reads standard input). A
    /// pipe or a process substitution (`--input-file <(grep … list)`) is read
    /// like a regular file: to its end, without asking for its size first.
    public static func read(path: String) throws(InputError) -> [String] {
        let data = try path == "-" ? readToEnd(STDIN_FILENO, name: "standard input") : readFile(path)
        guard let text = String(data: data, encoding: .utf8) else {
            throw InputError("\(path): not UTF-8 text")
        }
        return try parse(text, source: path)
    }

    private static func readFile(_ path: String) throws(InputError) -> Data {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw unreadable(path) }
        defer { close(fd) }
        return try readToEnd(fd, name: path)
    }

    /// Reads `fd` until end of file; `name` is what errors call it.
    private static func readToEnd(_ fd: Int32, name: String) throws(InputError) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                data.append(contentsOf: buffer[..<count])
            } else if count == 0 {
                return data
            } else if errno != EINTR {
                throw unreadable(name)
            }
        }
    }

    /// "PATH: cannot read the file: <the system's reason>", from `errno`.
    private static func unreadable(_ name: String) -> InputError {
        InputError("\(name): cannot read the file: \(String(cString: strerror(errno)))")
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
