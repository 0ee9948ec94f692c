import Foundation
import Transfer

/// A line of input that is not an http or https URL.
public struct InputError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The first problem.
    public var message: String { problems[0] }
    /// Every problem found, a line each (several bad lines of a list).
    public let problems: [String]
    public init(_ message: String) { problems = [message] }
    init(problems: [String]) { self.problems = problems.isEmpty ? ["bad input"] : problems }
    public var description: String { message }
}

/// Reads URL lists: one URL a line, blank lines and `#` comments allowed.
public enum URLList {
    /// Parses `text`; `source` names the file in errors (`FILE:LINE: ...`).
    /// Every URL must be http or https: one bad line rejects the whole list,
    /// so nothing is fetched from a half-understood file.
    public static func parse(_ text: String, source: String) throws(InputError) -> [String] {
        var reader = LineReader(source: source)
        try reader.feed(Array(text.utf8)[...])
        return Array(try reader.finish())
    }

    /// The longest line a list may hold: a URL at its longest, and room for blanks around it.
    public static let maxLineBytes = RequestTarget.maxLength + 1024

    /// Turns bytes into URLs a line at a time, as they are read: a file that
    /// is not a list (a binary, `/dev/zero`) fails at its first bad line
    /// instead of being read whole first.
    ///
    /// Works on bytes (a list of thousands of URLs is read in a millisecond);
    /// a line with any non-ASCII byte or another kind of line break goes
    /// through `Character`-level splitting and trimming instead, so Unicode
    /// line separators and whitespace are honoured as well.
    struct LineReader {
        let source: String
        private(set) var urls = URLBlock()
        /// Lines that are not URLs, said together at the end (or once there
        /// are `maxProblems`), so a list is not fixed one rerun a line.
        private var problems: [String] = []
        static let maxProblems = 10
        private var lineNumber = 0
        /// The start of a line whose end has not been read yet.
        private var pending: [UInt8] = []
        /// The last block ended with a CR: an LF opening the next one is the rest of a CRLF.
        private var afterCarriageReturn = false
        /// A line too long to hold is being passed over up to its end.
        private var skipping: Skip?
        /// The file's first bytes (`openingBytes` at most), line breaks and
        /// all: UTF-16 whose first line is empty has no line long enough to
        /// tell its byte order by (big-endian, its line 1 was one NUL).
        private var opening: [UInt8] = []
        static let openingBytes = 64

        /// What kind of line `skipping` passes over.
        private enum Skip {
            /// A comment: read to its end whatever its length.
            case comment
            /// A line too long to be a URL, the `line`th: named as such at its
            /// end, so the lines after it are checked too. `bytes` passed over
            /// so far, bounded by `maxSkippedBytes`.
            case longLine(line: Int, bytes: Int)
        }

        /// How much of a line too long to be a URL is read for its end: a
        /// file with no line breaks at all (`/dev/zero`) is not read to its end.
        static let maxSkippedBytes = 1 << 20

        init(source: String) { self.source = source }

        /// Reads the next block: LF, CR and CRLF each end a line.
        mutating func feed(_ bytes: ArraySlice<UInt8>) throws(InputError) {
            if opening.count < Self.openingBytes { opening += bytes.prefix(Self.openingBytes - opening.count) }
            var start = bytes.startIndex
            if afterCarriageReturn, start < bytes.endIndex {
                if bytes[start] == 0x0A { start += 1 }
                afterCarriageReturn = false
            }
            while let end = bytes[start...].firstIndex(where: { $0 == 0x0A || $0 == 0x0D }) {
                try endLine(with: bytes[start..<end])
                start = end + 1
                if bytes[end] == 0x0D {
                    if start == bytes.endIndex {
                        afterCarriageReturn = true
                    } else if bytes[start] == 0x0A {
                        start += 1
                    }
                }
            }
            try hold(bytes[start...])
        }

        /// The URLs, once the last line (which may lack its line break) is read.
        mutating func finish() throws(InputError) -> URLBlock {
            if case .longLine(let line, _) = skipping {
                try note(tooLong(line: line))
            } else if !pending.isEmpty, skipping == nil {
                try line(pending[...])
            }
            skipping = nil
            pending = []
            if !problems.isEmpty { throw InputError(problems: problems) }
            return urls
        }

        private mutating func endLine(with tail: ArraySlice<UInt8>) throws(InputError) {
            if let skipped = skipping {
                skipping = nil
                if case .longLine(let line, _) = skipped { try note(tooLong(line: line)) }
            } else if pending.isEmpty {
                try line(tail)
            } else {
                pending.append(contentsOf: tail)
                try line(pending[...])
                pending.removeAll(keepingCapacity: true)
            }
        }

        /// Keeps the start of a line until its end comes; a line that grows
        /// past the limit is passed over up to its end instead (it is not
        /// held whole), and named as too long there, unless it is a comment.
        /// A line with no end in `maxSkippedBytes` stops the reading.
        private mutating func hold(_ tail: ArraySlice<UInt8>) throws(InputError) {
            switch skipping {
            case .comment:
                return
            case .longLine(let line, let bytes):
                let skipped = bytes + tail.count
                // A line that never ends (/dev/zero) must not be read to its end: it stops the reading.
                guard skipped <= Self.maxSkippedBytes else {
                    throw InputError(problems: problems + ["\(tooLong(line: line)), with no end in its first "
                        + "\(ByteSize.format(Int64(Self.maxSkippedBytes))): stopped reading the file there"])
                }
                skipping = .longLine(line: line, bytes: skipped)
                return
            case nil:
                break
            }
            pending.append(contentsOf: tail)
            guard pending.count > URLList.maxLineBytes else { return }
            lineNumber += 1
            // No line break in 33 KiB, and a NUL before any URL: what the file is is said at once
            // (`find -print0` writes no line break at all; /dev/zero is binary data).
            if urls.count == 0, pending.contains(0) { try noteNUL(in: pending[...], line: lineNumber) }
            skipping = isComment(pending[...]) ? .comment : .longLine(line: lineNumber, bytes: pending.count)
            pending.removeAll(keepingCapacity: true)
        }

        /// Whether the line's first byte other than spaces and tabs (and a byte-order mark) is `#`.
        private func isComment(_ line: ArraySlice<UInt8>) -> Bool {
            let line = line.starts(with: [0xEF, 0xBB, 0xBF]) ? line.dropFirst(3) : line
            return line.first(where: { !URLList.isBlank($0) }) == UInt8(ascii: "#")
        }

        /// A line that is not a URL and holds a NUL byte (`bytes`, the
        /// `number`th), noted as a bad line among the others when URLs came
        /// before it (a list cut off by a crash, its end NULs); else thrown
        /// at once, alone, naming what the file is: UTF-16 text without a
        /// byte order mark (every other byte NUL), URLs separated by NULs
        /// (`find -print0`), or binary data (a photo given as the list said
        /// "not UTF-8 text" for ten of its lines).
        private mutating func noteNUL(in bytes: ArraySlice<UInt8>, line number: Int) throws(InputError) {
            guard urls.count == 0 else {
                try note("\(source):\(number): holds a NUL byte")
                return
            }
            // UTF-32 (three NULs in four bytes) before UTF-16 (one in two): the one byte of text in
            // each unit. The file's opening first, then the line. Either from the file's start:
            // little-endian text, Windows', has it first.
            for (text, fromStart) in [(opening[...], true), (bytes, number == 1)] {
                for unit in [4, 2] where text.count >= 2 * unit {
                    let texts = (0..<unit).filter { offset in
                        stride(from: text.startIndex + offset, to: text.endIndex, by: unit).contains { text[$0] != 0 }
                    }
                    // Text has letters: a line break and NULs (a list a crash cut off), or small numbers, have none.
                    guard texts.count == 1, let offset = texts.first,
                          stride(from: text.startIndex + offset, to: text.endIndex, by: unit).count(where: { (0x21...0x7E).contains(text[$0]) }) >= 2
                    else { continue }
                    let order = fromStart && offset == unit - 1 ? "BE" : "LE"
                    throw InputError(problems: ["\(source): UTF-\(unit * 8) text without a byte order mark, not UTF-8 "
                        + "(iconv -f UTF-\(unit * 8)\(order) -t UTF-8 converts it)"])
                }
            }
            let pieces = bytes.split(separator: 0)
            // A NUL after each URL (not before the first: that is a file's junk).
            if bytes.first != 0, !pieces.isEmpty, pieces.allSatisfy({ RequestTarget.startsWithHTTPScheme($0) }) {
                throw InputError(problems: ["\(source): URLs separated by NUL bytes (find -print0), not one a line "
                    + "(tr '\\0' '\\n' converts it)"])
            }
            throw InputError(problems: ["\(source): binary data, not a list of URLs (line \(number) holds a NUL byte)"])
        }

        /// "FILE:LINE: line longer than … bytes" for the `line`th line.
        private func tooLong(line: Int) -> String {
            "\(source):\(line): line longer than \(URLList.maxLineBytes) bytes"
        }

        private mutating func take(_ whole: String) throws(InputError) {
            lineNumber += 1
            if whole.isEmpty || whole.hasPrefix("#") { return }
            // A comment may follow the URL after a space or a tab: no URL holds
            // either (it was refused, with advice to write the space as %20).
            var line = Substring(whole)
            // Most lines hold no `#` at all: looked for byte-wise first (this runs per URL).
            if whole.utf8.contains(UInt8(ascii: "#")), let comment = line.utf8.indices.first(where: { index in
                line.utf8[index] == UInt8(ascii: "#") && index > line.utf8.startIndex
                    && URLList.isBlank(line.utf8[line.utf8.index(before: index)])
            }) {
                line = line[..<comment]
                while let last = line.utf8.last, URLList.isBlank(last) { line = line.dropLast() }
            }
            // Not reached by any list a machine can hold, but positions are counted in 32 bits.
            guard urls.count < URLBlock.maxCount else {
                throw InputError(problems: problems + ["\(source):\(lineNumber): more than \(URLBlock.maxCount) URLs"])
            }
            do {
                urls.append(try RequestTarget(String(line)).url)
            } catch {
                if line.utf8.contains(0) {
                    try noteNUL(in: Array(line.utf8)[...], line: lineNumber)
                    return
                }
                try note("\(source):\(lineNumber): \(error.message)")
            }
        }

        /// Remembers a bad line; throws them all once there are `maxProblems`.
        private mutating func note(_ problem: String) throws(InputError) {
            if URLList.noteReachesCap(problem, in: &problems, stopped: "\(source): stopped at its \(Self.maxProblems)th bad line") {
                throw InputError(problems: problems)
            }
        }

        /// One line, without its line break.
        private mutating func line(_ raw: ArraySlice<UInt8>) throws(InputError) {
            // Notepad's "Unicode": every other byte a NUL, which gave two
            // baffling errors a URL until the cap, and never said why.
            if lineNumber == 0, raw.starts(with: [0xFF, 0xFE, 0, 0]) || raw.starts(with: [0, 0, 0xFE, 0xFF]) {
                throw InputError(problems: problems + ["\(source): UTF-32 text, not UTF-8 (iconv -f UTF-32 -t UTF-8 converts it)"])
            }
            if lineNumber == 0, raw.starts(with: [0xFF, 0xFE]) || raw.starts(with: [0xFE, 0xFF]) {
                throw InputError(problems: problems + ["\(source): UTF-16 text, not UTF-8 (iconv -f UTF-16 -t UTF-8 converts it)"])
            }
            // A comment is not read: neither its length, its encoding (café in
            // Latin-1) nor a Unicode line break in it matters; LF, CR or CRLF
            // ends it, whether it is held whole or passed over (`hold`).
            if isComment(raw) {
                lineNumber += 1
                return
            }
            guard raw.count <= URLList.maxLineBytes else {
                // Held whole, so its end is known: the lines after it are read too.
                lineNumber += 1
                try note(tooLong(line: lineNumber))
                return
            }
            var line = raw
            // A byte-order mark opens some files written on Windows, and lists
            // joined with `cat` have one wherever such a file began.
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { line = line.dropFirst(3) }
            if line.allSatisfy(URLList.isPlain) {
                var trimmed = line
                while let first = trimmed.first, URLList.isBlank(first) { trimmed.removeFirst() }
                while let last = trimmed.last, URLList.isBlank(last) { trimmed.removeLast() }
                try take(String(decoding: trimmed, as: UTF8.self))
                return
            }
            guard let text = String(validating: line, as: UTF8.self) else {
                if line.contains(0) {
                    try noteNUL(in: line, line: lineNumber + 1)
                } else {
                    try note("\(source):\(lineNumber + 1): not UTF-8 text")
                }
                lineNumber += 1
                return
            }
            // Unicode's own line breaks (U+2028, NEL, VT, FF) end lines too.
            for piece in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
                try take(piece.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
    }

    /// ASCII other than the line breaks VT and FF: the byte-level path handles it.
    fileprivate static func isPlain(_ byte: UInt8) -> Bool {
        byte < 0x80 && byte != 0x0B && byte != 0x0C
    }

    /// Space and tab (a CR never reaches a line: it ends one).
    fileprivate static func isBlank(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09
    }

    /// Reads and parses the file at `path` (`-` reads standard input), a
    /// block at a time. A pipe or a process substitution (`--input-file
    /// <(grep … list)`) is read like a regular file: to its end, without
    /// asking for its size first.
    public static func read(path: String) throws(InputError) -> URLBlock {
        // `-i "$LIST"` with the variable unset said ": cannot read the file".
        if path.isEmpty { throw InputError("--input-file: an empty file name (an unset variable?)") }
        if path == "-" { return try read(STDIN_FILENO, name: "standard input", source: "standard input") }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw unreadable(path) }
        defer { close(fd) }
        return try read(fd, name: path, source: path)
    }

    /// The bytes of the lists at `paths` that are regular files (a pipe's are not known before it is read).
    public static func fileBytes(_ paths: [String]) -> Int64 {
        paths.reduce(Int64(0)) { sum, path in
            var info = stat()
            return sum + (path != "-" && stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG ? Int64(info.st_size) : 0)
        }
    }

    /// Reads `fd` until end of file; `name` is what read errors call it, `source` what line errors do.
    private static func read(_ fd: Int32, name: String, source: String) throws(InputError) -> URLBlock {
        var reader = LineReader(source: source)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                try reader.feed(buffer[..<count])
            } else if count == 0 {
                return try reader.finish()
            } else if errno != EINTR {
                throw unreadable(name)
            }
        }
    }

    /// "PATH: cannot read the file: <the system's reason>", from `errno`.
    private static func unreadable(_ name: String) -> InputError {
        InputError("\(name): cannot read the file: \(String(cString: strerror(errno)))")
    }

    /// Checks URLs given on the command line. Every bad one is named (up to
    /// ten), as a list's bad lines are.
    public static func validate(_ arguments: [String]) throws(InputError) -> URLBlock {
        var urls = URLBlock()
        var problems: [String] = []
        for argument in arguments {
            do {
                urls.append(try url(fromArgument: argument))
            } catch {
                let stopped = "stopped at the \(LineReader.maxProblems)th bad URL of the command line"
                if noteReachesCap(error.message, in: &problems, stopped: stopped) { break }
            }
        }
        if !problems.isEmpty { throw InputError(problems: problems) }
        return urls
    }

    /// Adds `problem`; at the `maxProblems`th, adds `stopped` too and
    /// returns true: the rest is not looked at.
    fileprivate static func noteReachesCap(_ problem: String, in problems: inout [String], stopped: String) -> Bool {
        problems.append(problem)
        guard problems.count == LineReader.maxProblems else { return false }
        problems.append(stopped)
        return true
    }

    /// The URL an argument gives, trimmed as a list's lines are.
    private static func url(fromArgument argument: String) throws(InputError) -> String {
        // `get "$URL"` with the variable unset said "not a URL: " and nothing after it.
        if argument.isEmpty { throw InputError("an empty argument is not a URL (an unset variable?)") }
        if argument == "-" { throw InputError("not a URL: - (to read the URLs from standard input: -i -)") }
        if argument.lowercased() == "help" { throw InputError("not a URL: \(argument) (for help: mediafetch get --help)") }
        // Trimmed as a list's lines are: a blank pasted around a URL (a
        // no-break or zero-width space) made it another URL than in a file,
        // and the CR that `xargs` leaves of a CRLF list's line break was refused
        // as a control character nobody could see.
        let ends = [argument.utf8.first, argument.utf8.last]
        let trimmed = argument.utf8.allSatisfy({ $0 < 0x80 }) && !ends.contains(0x0D) && !ends.contains(0x0A) ? argument
            : argument.trimmingCharacters(in: .whitespacesAndNewlines)
        do {
            return try RequestTarget(trimmed).url
        } catch {
            throw InputError(error.message)
        }
    }
}
