import Foundation
import Testing
import Transfer
import URLText
import TestSupport
@testable import MediaFetch

@Suite struct URLListTests {
    /// Lists joined with `cat` keep a byte-order mark wherever a Windows
    /// file began: it is no part of the line, a comment's or a URL's.
    @Test func aByteOrderMarkOpeningAnyLineIsSkipped() throws {
        let text = "http://a/1.jpg\n\u{FEFF}# from Notepad\n\u{FEFF}http://b/2.jpg\n"
        #expect(try URLList.parse(text, source: "all.txt") == ["http://a/1.jpg", "http://b/2.jpg"])
    }

    /// A URL given as an argument is trimmed as a list's line is, and one
    /// with a space in it says so.
    @Test func argumentsAreTrimmedAsListLinesAndASpaceIsNamed() throws {
        let pasted = "http://a/z.jpg\u{200B}"
        #expect(try URLList.validate([pasted]) == ["http://a/z.jpg"])
        #expect(try URLList.parse(pasted + "\n", source: "list") == ["http://a/z.jpg"])
        #expect(try URLList.validate(["\u{A0}http://a/z.jpg "]) == ["http://a/z.jpg"])
        #expect(throws: InputError("not a URL, it holds a space (write it as %20): http://a/my photo.jpg")) {
            try URLList.validate(["http://a/my photo.jpg"])
        }
        #expect(throws: InputError("list:1: not a URL, it holds a control character: http://a/x\u{7F}.jpg")) {
            try URLList.parse("http://a/x\u{7F}.jpg\n", source: "list")
        }
        // %20 mends a path, not a host name.
        #expect(throws: InputError("not a URL, its host name holds a space: http://exa mple.com/a.jpg")) {
            try URLList.validate(["http://exa mple.com/a.jpg"])
        }
        #expect(throws: InputError("not a URL, it holds a space (write it as %20): http://a/b?q=my photo")) {
            try URLList.validate(["http://a/b?q=my photo"])
        }
        #expect(throws: InputError("not a URL, it holds a space (write it as %20): http://ann:***@a/b")) {
            try URLList.validate(["http://ann:my pass@a/b"])
        }
        // Two URLs on a line, and a URL in quotes, are named as such (they
        // were told to write a space as %20, and that they had no scheme).
        #expect(throws: InputError("list:1: not a URL, it holds two (one URL a line, or an argument each): http://a/1.jpg HTTPS://a/2.jpg")) {
            try URLList.parse("http://a/1.jpg HTTPS://a/2.jpg\n", source: "list")
        }
        #expect(throws: InputError("not a URL, it holds two (one URL a line, or an argument each): http://a/1.jpg\thttp://a/2.jpg")) {
            try URLList.validate(["http://a/1.jpg\thttp://a/2.jpg"])
        }
        // Joined by what a URL may hold, the second URL's password was fetched, stored and shown as a path.
        for between in [",", "|", ";", "\u{A0}", "\u{2028}", "\u{3000}"] {
            let joined = "http://a/1.jpg\(between)http://u:pw@h/2.jpg"
            // (Quoted without the password, found as a lenient reading finds it.)
            #expect(throws: InputError("not a URL, it holds a second one, with a password (one URL a line, or an argument each; "
                                       + "an @ in a URL is written %40): http://a/1.jpg\(between)http://u:***@h/2.jpg")) {
                try URLList.validate([joined])
            }
        }
        // A URL in a path, or a query, without a password is a URL's own (the Wayback Machine's).
        #expect(try URLList.validate(["http://web.archive.org/web/2020/http://example.com/a.jpg"]).count == 1)
        #expect(try URLList.validate(["http://a/r?to=https://u@h/x:y"]).count == 1)
        // Nor are a port and a query's next parameters, an empty password, or a fragment.
        for url in ["http://a/r?redirect_uri=http://localhost:3000&login_hint=alice@contoso.com",
                    "http://a/r?url=https://e.com&ts=2024-01-01T10:00:00Z&by=me@x.org",
                    "http://a/r?next=http://localhost:3000;hint=a@b.org", "http://a/r;s=http://h2:80,t=a@b",
                    "http://a/r?t=ftp://anon:@host/", "http://a/1.jpg#http://u:p@h"] {
            #expect(try URLList.validate([url]).count == 1, "\(url)")
        }
        // A second URL's password with a '/', '?' or '&' in it is one all the same.
        for joined in ["http://a/1.jpg,http://u:S3/KR1T@h/2.jpg", "http://a/1.jpg,http://u:S3?KR1T@h/2.jpg",
                       "http://a/r?next=http://u:S3KR1T&x@h/", "http://a/r?cb=http://me:pass@h2/"] {
            #expect(throws: InputError.self) { try URLList.validate([joined]) }
        }
        // C1 controls are control characters, as ASCII's are (NEL was taken into the path).
        #expect(throws: InputError("not a URL, it holds a control character: http://a/1.jpg\u{85}http://a/2.jpg")) {
            try URLList.validate(["http://a/1.jpg\u{85}http://a/2.jpg"])
        }
        for quoted in ["\"http://a/1.jpg\"", "'http://a/1.jpg'", "\"http://a/1.jpg"] {
            #expect(throws: InputError("not a URL, it is in quotes (write it without them): \(quoted)")) {
                try URLList.validate([quoted])
            }
        }
        #expect(throws: InputError("not a URL, it is in angle brackets (write it without them): <http://a/1.jpg>")) {
            try URLList.validate(["<http://a/1.jpg>"])
        }
        // A mark that only ends a URL may be its own (libcurl takes it).
        #expect(try URLList.validate(["http://a/x?a=b>", "http://a/x?q=\"hi\""]).count == 2)
        // Typographic quotes.
        for quoted in ["\u{201C}http://a/1.jpg\u{201D}", "\u{2018}http://a/1.jpg\u{2019}", "\u{AB}http://a/1.jpg\u{BB}"] {
            #expect(throws: InputError("not a URL, it is in quotes (write it without them): \(quoted)")) {
                try URLList.validate([quoted])
            }
        }
        // "-" is how -i reads standard input, not a URL.
        #expect(throws: InputError("not a URL: - (to read the URLs from standard input: -i -)")) {
            try URLList.validate(["-"])
        }
        // `mediafetch get help`: where the help is.
        #expect(throws: InputError("not a URL: help (for help: mediafetch get --help)")) {
            try URLList.validate(["help"])
        }
    }

    /// `xargs` over a CRLF list leaves each URL's CR on the argument: it is
    /// trimmed as a list's line break is (it was refused as a control
    /// character the message could not show).
    @Test func aLineBreakAroundAnArgumentIsTrimmed() throws {
        #expect(try URLList.validate(["http://a/1.jpg\r", "\nhttp://a/2.jpg\r\n"]) == ["http://a/1.jpg", "http://a/2.jpg"])
        #expect(throws: InputError("not a URL, it holds a control character: http://a/1\r.jpg")) {
            try URLList.validate(["http://a/1\r.jpg"])
        }
    }

    /// Every bad argument is named (up to ten), as a list's bad lines are:
    /// only the first was.
    @Test func everyBadArgumentIsNamedUpToTen() {
        let error = #expect(throws: InputError.self) { try URLList.validate(["ftp://a/", "http://ok/1.jpg", "ftp://b/", "bad3"]) }
        #expect(error?.problems == ["unsupported scheme 'ftp' (only http and https): ftp://a/",
                                    "unsupported scheme 'ftp' (only http and https): ftp://b/",
                                    "not a URL: bad3"])
        // A host with no scheme is said to be one (curl would take it as http).
        let hosts = #expect(throws: InputError.self) {
            try URLList.validate(["example.com/a.jpg", "127.0.0.1:8080/x.jpg", "localhost:8080/a", "LOCALHOST", "tel:5551234"])
        }
        #expect(hosts?.problems == ["example.com/a.jpg", "127.0.0.1:8080/x.jpg", "localhost:8080/a", "LOCALHOST"].map {
            "not a URL, it has no scheme (write http:// or https:// before it): \($0)"
        } + ["unsupported scheme 'tel' (only http and https): tel:5551234"])
        let many = #expect(throws: InputError.self) { try URLList.validate((1...30).map { "bad\($0)" }) }
        #expect(many?.problems.count == 11)
        #expect(many?.problems.last == "stopped at the 10th bad URL of the command line")
    }

    /// A comment may follow a URL after a space or a tab (the list was
    /// refused, with advice to write the space as %20); a `#` with no blank
    /// before it is the URL's fragment, and a space left in the URL still says so.
    @Test func aCommentAfterAURLIsSkipped() throws {
        let text = "http://a/1.jpg # the church\nhttp://a/2.jpg\t#\thall\nhttp://a/3.jpg#top\n"
        #expect(try URLList.parse(text, source: "pins.txt") == ["http://a/1.jpg", "http://a/2.jpg", "http://a/3.jpg"])
        #expect(throws: InputError("pins.txt:1: not a URL, it holds a space (write it as %20): http://a/my photo.jpg")) {
            try URLList.parse("http://a/my photo.jpg # note\n", source: "pins.txt")
        }
    }

    @Test func commentsAndBlankLinesAreSkipped() throws {
        let text = "# photos\nhttp://a/1.jpg\n\n   \n  https://b/2.jpg  \r\n# end\n"
        #expect(try URLList.parse(text, source: "urls.txt") == ["http://a/1.jpg", "https://b/2.jpg"])
    }

    @Test func aBadLineIsNamedByFileAndLine() {
        let text = "http://a/1.jpg\n# fine\nftp://a/2.jpg\n"
        #expect(throws: InputError("urls.txt:3: unsupported scheme 'ftp' (only http and https): ftp://a/2.jpg")) {
            try URLList.parse(text, source: "urls.txt")
        }
        #expect(throws: InputError.self) { try URLList.parse("not a url at all\n", source: "f") }
    }

    @Test func aCRLFLineWithNonASCIITextCountsOnce() {
        // The Character path split "café\r" into two lines: the bad URL was called line 4.
        let text = "# café list\r\nhttp://a/1.jpg\r\nftp://bad/x\r\n"
        #expect(throws: InputError("u.txt:3: unsupported scheme 'ftp' (only http and https): ftp://bad/x")) {
            try URLList.parse(text, source: "u.txt")
        }
    }

    @Test func lineNumbersCountEveryKindOfLineBreak() throws {
        // CRLF, a bare CR inside a line, Unicode separators and non-breaking spaces.
        let text = "http://a/1\r\n\u{2028}# note\u{2029}\u{00A0}https://b/2\u{00A0}\n\nftp://c/3\n"
        #expect(throws: InputError("u.txt:6: unsupported scheme 'ftp' (only http and https): ftp://c/3")) {
            try URLList.parse(text, source: "u.txt")
        }
        #expect(try URLList.parse("http://a/1\r\n\u{2028}# note\u{2029}\u{00A0}https://b/2\u{00A0}\n", source: "u")
                == ["http://a/1", "https://b/2"])
    }

    /// An unset variable in `-i "$LIST"` or `get "$URL"`: the error says what was empty.
    @Test func anEmptyFileNameOrURLIsNamedAsEmpty() {
        #expect(throws: InputError("--input-file: an empty file name (an unset variable?)")) { try URLList.read(path: "") }
        #expect(throws: InputError("an empty argument is not a URL (an unset variable?)")) {
            try URLList.validate(["http://a/1", ""])
        }
    }

    @Test func oldMacLineEndingsStillSplitLines() throws {
        #expect(try URLList.parse("http://a/1\rhttp://a/2\r# c\rhttps://b/3\r", source: "u")
                == ["http://a/1", "http://a/2", "https://b/3"])
    }

    @Test func aListWithoutATrailingNewlineKeepsItsLastURL() throws {
        #expect(try URLList.parse("http://a/1\nhttp://a/2", source: "u") == ["http://a/1", "http://a/2"])
        #expect(try URLList.parse("", source: "u").isEmpty)
        #expect(try URLList.parse("\n\n", source: "u").isEmpty)
    }

    @Test func aUTF16ListIsNamedAsSuch() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("notepad.txt")
            var bytes: [UInt8] = [0xFF, 0xFE]
            for unit in "http://a/1\r\nhttp://a/2\r\n".utf16 { bytes += [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path): UTF-16 text, not UTF-8 (iconv -f UTF-16 -t UTF-8 converts it)")) {
                try URLList.read(path: path)
            }
        }
    }

    @Test func aCommentInAnotherEncodingIsSkipped() throws {
        // "# café photos" in Latin-1: a comment is not read, so its encoding does not matter.
        try TemporaryDirectory.using { directory in
            let path = directory.appending("latin1.txt")
            let bytes: [UInt8] = Array("# caf".utf8) + [0xE9] + Array(" photos\nhttp://a/1.jpg\n".utf8)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            #expect(try URLList.read(path: path) == ["http://a/1.jpg"])
            let bad: [UInt8] = Array("http://a/1.jpg\n\n".utf8) + [0xFF] + Array("\n".utf8)
            try Data(bad).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path):3: not UTF-8 text")) { try URLList.read(path: path) }
        }
    }

    /// A photo given as the list said "not UTF-8 text" for ten of its
    /// lines, then that it stopped: one line says what the file is.
    @Test func aBinaryFileIsSaidToBeOneInOneLine() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("000.jpg")
            // A JPEG's opening (a NUL in its first line), and a PNG's (the NUL on its third).
            let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0x00, 0x01, 0x0A, 0xC3, 0x28, 0x0A]
            try Data(jpeg + Array(repeating: 0xAB, count: 500)).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path): binary data, not a list of URLs (line 1 holds a NUL byte)")) {
                try URLList.read(path: path)
            }
            let png: [UInt8] = [0x89] + Array("PNG\r\n".utf8) + [0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D] + Array("IHDR".utf8)
            try Data(png).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path): binary data, not a list of URLs (line 3 holds a NUL byte)")) {
                try URLList.read(path: path)
            }
            // Junk with a NUL before any URL: binary.
            try Data(Array("ab".utf8) + [0x00] + Array("cd\nhttp://a/1.jpg\n".utf8)).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path): binary data, not a list of URLs (line 1 holds a NUL byte)")) {
                try URLList.read(path: path)
            }
        }
    }

    /// A NUL byte is not always a binary file: UTF-16 without its byte
    /// order mark, URLs separated by NULs, and a list whose end a crash
    /// filled with NULs each say what they are.
    @Test func aListWithNULBytesSaysWhatItIs() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("urls.txt")
            let utf16: [UInt8] = Array("http://a/1.jpg\nhttp://a/2.jpg\n".utf8).flatMap { [$0, UInt8(0)] }
            try Data(utf16).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path): UTF-16 text without a byte order mark, not UTF-8 (iconv -f UTF-16LE -t UTF-8 converts it)")) {
                try URLList.read(path: path)
            }
            // An empty first line leaves no line to tell the byte order by (big-endian,
            // line 1 was one NUL, and called binary data): the file's opening tells it.
            for (order, crlf) in [("BE", false), ("LE", false), ("BE", true), ("LE", true)] {
                let text = crlf ? "\r\nhttp://a/1.jpg\r\n" : "\nhttp://a/1.jpg\n"
                let units: [UInt8] = Array(text.utf8).flatMap { order == "BE" ? [UInt8(0), $0] : [$0, UInt8(0)] }
                try Data(units).write(to: URL(fileURLWithPath: path))
                #expect(throws: InputError("\(path): UTF-16 text without a byte order mark, not UTF-8 (iconv -f UTF-16\(order) -t UTF-8 converts it)")) {
                    try URLList.read(path: path)
                }
            }
            try Data(Array("\n\nhttp://a/1.jpg\n".utf8).flatMap { [0, 0, 0, $0] }).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path): UTF-32 text without a byte order mark, not UTF-8 (iconv -f UTF-32BE -t UTF-8 converts it)")) {
                try URLList.read(path: path)
            }
            // A line break then NULs (a list a crash cut off), or small numbers, have no letters: binary.
            let cutOff: [UInt8] = [0x0A] + [UInt8](repeating: 0, count: 64)
            let numbers: [UInt8] = (1...16).flatMap { [UInt8($0), 0, 0, 0] }
            for bytes in [cutOff, numbers] {
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                #expect(throws: InputError("\(path): binary data, not a list of URLs (line \(bytes[0] == 0x0A ? 2 : 1) holds a NUL byte)")) {
                    try URLList.read(path: path)
                }
            }
            // UTF-32 is not called UTF-16: its iconv would leave NULs in.
            let utf32: [UInt8] = Array("http://a/1.jpg\n".utf8).flatMap { [0, 0, 0, $0] }
            try Data(utf32).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path): UTF-32 text without a byte order mark, not UTF-8 (iconv -f UTF-32BE -t UTF-8 converts it)")) {
                try URLList.read(path: path)
            }
            try Data([0xFF, 0xFE, 0, 0] + Array("h".utf8) + [0, 0, 0]).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path): UTF-32 text, not UTF-8 (iconv -f UTF-32 -t UTF-8 converts it)")) {
                try URLList.read(path: path)
            }
            // NULs before a URL are a file's junk, not print0's separators.
            try Data([0, 0] + Array("http://a/1.jpg\n".utf8)).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path): binary data, not a list of URLs (line 1 holds a NUL byte)")) {
                try URLList.read(path: path)
            }
            // A find -print0 list of any length (no line break in it at all).
            let printed = (0..<2000).map { "http://a/\($0).jpg\0" }.joined()
            try Data(printed.utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError(#"\#(path): URLs separated by NUL bytes (find -print0), not one a line (tr '\0' '\n' converts it)"#)) {
                try URLList.read(path: path)
            }
            try Data(Array("http://a/1.jpg\0https://a/2.jpg\0".utf8)).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError(#"\#(path): URLs separated by NUL bytes (find -print0), not one a line (tr '\0' '\n' converts it)"#)) {
                try URLList.read(path: path)
            }
            // Cut off by a crash: the URLs before are kept in the count, the NULs are a bad line among the others.
            try Data(Array("http://a/1.jpg\nnot a url\n".utf8) + [UInt8](repeating: 0, count: 4096)).write(to: URL(fileURLWithPath: path))
            let cut = #expect(throws: InputError.self) { try URLList.read(path: path) }
            #expect(cut?.problems == ["\(path):2: not a URL: not a url", "\(path):3: holds a NUL byte"])
        }
    }

    @Test func loneCRLinesAreCheckedOneByOne() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("mac.txt")
            // 1,000 lines of 44 bytes: 44 KB with no LF, more than one line may hold.
            let urls = (1...1000).map { String(format: "http://example.test/photos/%09d.jpg", $0) }
            try Data(urls.joined(separator: "\r").utf8).write(to: URL(fileURLWithPath: path))
            #expect(Array(try URLList.read(path: path)) == urls)
            // A Latin-1 comment, then a bad byte on line 3.
            let bytes: [UInt8] = Array("# caf".utf8) + [0xE9] + Array("\rhttp://a/1.jpg\rhttp://a/".utf8) + [0xFF] + [0x0D]
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path):3: not UTF-8 text")) { try URLList.read(path: path) }
        }
    }

    @Test func aCRLFSplitAcrossBlocksIsOneLineBreak() throws {
        var reader = URLList.LineReader(source: "u")
        try reader.feed(Array("http://a/1\r".utf8)[...])
        try reader.feed(Array("\nhttps://a/2\r".utf8)[...])
        try reader.feed(Array("\n\nftp://a/3\r\n".utf8)[...].prefix(1))
        try reader.feed(Array("\n\nftp://a/3\r\n".utf8)[...].dropFirst())
        #expect(throws: InputError("u:4: unsupported scheme 'ftp' (only http and https): ftp://a/3")) {
            try reader.finish()
        }
    }

    /// Every bad line of a list is named (up to ten), so it is not fixed one
    /// rerun a line; nothing of it is fetched.
    @Test func everyBadLineIsNamedUpToTen() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("pins.txt")
            try "http://a/1.jpg\nnot a url\nftp://a/2\nhttp://a/3.jpg\n".write(toFile: path, atomically: true, encoding: .utf8)
            let error = #expect(throws: InputError.self) { try URLList.read(path: path) }
            #expect(error?.problems == ["\(path):2: not a URL: not a url",
                                        "\(path):3: unsupported scheme 'ftp' (only http and https): ftp://a/2"])

            // Bytes that are not UTF-8, and a line too long, are bad lines among the others.
            let mixed = Array("ftp://x/y\nhttp://ex".utf8) + [0xE9] + Array(".com/a\n".utf8)
                + Array(String(repeating: "a", count: URLList.maxLineBytes + 1).utf8) + Array("\nnot a url\n".utf8)
            try Data(mixed).write(to: URL(fileURLWithPath: path))
            let several = #expect(throws: InputError.self) { try URLList.read(path: path) }
            #expect(several?.problems.map { $0.split(separator: ":").dropFirst().first.map(String.init) ?? "" } == ["1", "2", "3", "4"])
            #expect(several?.problems[1] == "\(path):2: not UTF-8 text")

            try (1...30).map { "bad \($0)" }.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
            let many = #expect(throws: InputError.self) { try URLList.read(path: path) }
            #expect(many?.problems.count == 11)
            #expect(many?.problems.first == "\(path):1: not a URL: bad 1")
            #expect(many?.problems.last == "\(path): stopped at its 10th bad line")
        }
    }

    /// A line too long to be a URL, longer than a read's block, is named and
    /// passed over: the bad lines after it are named too (they were not, and
    /// the file was fixed one rerun a line).
    @Test func theLinesAfterALineTooLongAreCheckedToo() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("long.txt")
            for length in [70_000, 200_000] {
                let text = "bad0\nhttp://h/" + String(repeating: "a", count: length) + "\nbad3\r\nhttp://h/4.jpg\nbad5"
                try Data(text.utf8).write(to: URL(fileURLWithPath: path))
                let error = #expect(throws: InputError.self) { try URLList.read(path: path) }
                #expect(error?.problems == ["\(path):1: not a URL: bad0",
                                            "\(path):2: line longer than \(URLList.maxLineBytes) bytes",
                                            "\(path):3: not a URL: bad3",
                                            "\(path):5: not a URL: bad5"])
            }
            // The last line, too long, without a line break after it.
            try Data(("http://h/1.jpg\n" + String(repeating: "a", count: 100_000)).utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path):2: line longer than \(URLList.maxLineBytes) bytes")) {
                try URLList.read(path: path)
            }
        }
    }

    @Test func aCommentEndsOnlyAtALineBreakOfTheFile() throws {
        // Long or short, a comment with U+2028 in it is one line and hides nothing after it on that line.
        for length in [10, 40_000] {
            let comment = "#" + String(repeating: "x", count: length) + "\u{2028}http://a/1"
            #expect(throws: InputError("u:2: unsupported scheme 'ftp' (only http and https): ftp://b")) {
                try URLList.parse(comment + "\nftp://b\n", source: "u")
            }
        }
    }

    @Test func aLongCommentIsPassedOver() throws {
        let comment = "# " + String(repeating: "notes ", count: 10_000)
        #expect(try URLList.parse(comment + "\nhttp://a/1.jpg\n" + comment, source: "u") == ["http://a/1.jpg"])
        try TemporaryDirectory.using { directory in
            let path = directory.appending("notes.txt")
            try Data((comment + "\r\nhttp://a/1.jpg\r\n" + comment + "\r\nftp://b\r\n").utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: InputError("\(path):4: unsupported scheme 'ftp' (only http and https): ftp://b")) {
                try URLList.read(path: path)
            }
        }
    }

    @Test func aByteOrderMarkIsNotPartOfTheFirstURL() throws {
        try TemporaryDirectory.using { directory in
            let path = directory.appending("bom.txt")
            try Data([0xEF, 0xBB, 0xBF] + Array("http://a/1.jpg\r\nhttp://a/2.jpg\r\n".utf8)).write(to: URL(fileURLWithPath: path))
            #expect(try URLList.read(path: path) == ["http://a/1.jpg", "http://a/2.jpg"])
            // A mark before a comment, long or in Latin-1.
            let comment: [UInt8] = Array("# caf".utf8) + [0xE9] + Array(String(repeating: " notes", count: 10_000).utf8)
            try Data([0xEF, 0xBB, 0xBF] + comment + Array("\nhttp://a/3.jpg\n".utf8)).write(to: URL(fileURLWithPath: path))
            #expect(try URLList.read(path: path) == ["http://a/3.jpg"])
        }
    }

    @Test func aURLLongerThanAnyServerTakesIsRefusedWithoutQuotingItWhole() {
        let long = "http://a/" + String(repeating: "x", count: 33_000)
        do {
            _ = try URLList.parse("http://a/1.jpg\n" + long + "\n", source: "u.txt")
            Issue.record("a 33 kB URL was accepted")
        } catch {
            #expect(error.message == "u.txt:2: URL of 33009 bytes is longer than the 32768 accepted: http://a…")
        }
        // Only the scheme and the host: never a password, even one with a slash in it.
        let secret = "S3cr3t/" + String(repeating: "S3cr3t", count: 10)
        for url in ["https://backup:\(secret)@photos.example/" + String(repeating: "x", count: 33_000),
                    "https://backup:\(secret)@photos.example?" + String(repeating: "x", count: 33_000)] {
            do {
                _ = try URLList.validate([url])
                Issue.record("a 33 kB URL was accepted")
            } catch {
                #expect(error.message == "URL of \(url.utf8.count) bytes is longer than the 32768 accepted: https://photos.example…")
            }
        }
    }

    @Test func aFileWithoutLineBreaksIsRefusedAtItsFirstLongLine() {
        // /dev/zero never ends: it must stop after a bounded read, not fill the memory or spin
        // (its NULs name it binary data once a line's worth is held).
        #expect(throws: InputError("/dev/zero: binary data, not a list of URLs (line 1 holds a NUL byte)")) {
            try URLList.read(path: "/dev/zero")
        }
        // A line of text that does not end stops the reading past 1 MiB.
        var reader = URLList.LineReader(source: "u")
        let block = Array(repeating: UInt8(ascii: "a"), count: 64 << 10)[...]
        #expect(throws: InputError("u:1: line longer than \(URLList.maxLineBytes) bytes, with no end in its "
                                   + "first 1.0 MiB: stopped reading the file there")) {
            for _ in 0..<20 { try reader.feed(block) }
        }
        let endless = String(repeating: "a", count: URLList.maxLineBytes + 10)
        #expect(throws: InputError("u:1: line longer than \(URLList.maxLineBytes) bytes")) {
            try URLList.parse(endless, source: "u")
        }
    }

    @Test func aFileThatCannotBeReadIsNamedWithTheReason() throws {
        #expect(throws: InputError("/nonexistent/urls.txt: cannot read the file: No such file or directory")) {
            try URLList.read(path: "/nonexistent/urls.txt")
        }
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        #expect(throws: InputError("\(directory.path): cannot read the file: Is a directory")) {
            try URLList.read(path: directory.path)
        }
    }

    /// `--input-file <(grep … list)` hands over a pipe: it has no size to ask
    /// for, and is read to its end all the same.
    @Test func aListIsReadFromAPipe() async throws {
        try await TemporaryDirectory.with { directory in
            let fifo = directory.appending("urls.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            // Larger than a pipe's buffer, so the writer blocks until the reader drains it.
            let lines = (1...3000).map { "http://example.test/photos/\($0).jpg" }
            let writer = Thread {
                if let handle = FileHandle(forWritingAtPath: fifo) {
                    handle.write(Data(("# from a pipe\n" + lines.joined(separator: "\n") + "\n").utf8))
                    try? handle.close()
                }
            }
            writer.start()
            let read = try URLList.read(path: fifo)
            #expect(Array(read) == lines)
        }
    }
}

@Suite struct ByteSizeTests {
    @Test func sizesAsPeopleWriteThem() {
        #expect(ByteSize.parse("512") == 512)
        // The largest size, exactly: through a Double it rounded up past it, and was refused.
        #expect(ByteSize.parse("9223372036854775807") == Int64.max)
        #expect(ByteSize.parse("9223372036854775808") == nil)
        #expect(ByteSize.parse("64K") == 65536)
        #expect(ByteSize.parse("64k") == 65536)
        #expect(ByteSize.parse("1.5M") == 1_572_864)
        #expect(ByteSize.parse("2G") == 2_147_483_648)
        #expect(ByteSize.parse("10MiB") == 10_485_760)
        #expect(ByteSize.parse("10MB") == 10_485_760)
        #expect(ByteSize.parse("abc") == nil)
        #expect(ByteSize.parse("-5K") == nil)
        #expect(ByteSize.parse("") == nil)
        // What Double would take but nobody means by a size.
        for text in ["0x10", "1e3", "inf", "nan", ".", "1.2.3", "K", "+5", "5i", "5ib"] { #expect(ByteSize.parse(text) == nil, "\(text)") }
        #expect(ByteSize.parse(".5K") == 512)
        // Every unit below 8 EiB; a count of bytes is whole, and one word.
        #expect(ByteSize.parse("1P") == 1 << 50)
        #expect(ByteSize.parse("1E") == 1 << 60)
        #expect(ByteSize.parse("7EiB") == 7 << 60)
        #expect(ByteSize.parse("8E") == nil)
        for text in ["1.5", "0.5", " 5", "5 ", "5 K"] { #expect(ByteSize.parse(text) == nil, "\(text)") }
    }

    @Test func formatting() {
        #expect(ByteSize.format(812) == "812 B")
        #expect(ByteSize.format(65536) == "64.0 KiB")
        #expect(ByteSize.format(1_572_864) == "1.5 MiB")
        // What would round to 1024.0 of a unit is 1.0 of the next.
        #expect(ByteSize.format(1024 * 1024 - 1) == "1.0 MiB")
        #expect(ByteSize.format(1_048_514) == "1023.9 KiB")
        #expect(ByteSize.format(1_073_741_823) == "1.0 GiB")
        #expect(ByteSize.format(5 * 1_073_741_824 + 107_374_183) == "5.1 GiB")
    }

    @Test func secondsAreShownWithOneDecimal() {
        #expect(NumberText.wait(90) == "90 s")
        #expect(NumberText.wait(3600) == "60 min")
        #expect(NumberText.wait(36 * 3600) == "36 h")
        #expect(NumberText.wait(2_300_771_135.8) == "26629 days")
        #expect(ByteSize.oneDecimal(0) == "0.0")
        #expect(ByteSize.oneDecimal(0.04) == "0.0")
        #expect(ByteSize.oneDecimal(0.06) == "0.1")
        #expect(ByteSize.oneDecimal(12.34) == "12.3")
        #expect(ByteSize.oneDecimal(9.96) == "10.0")
        #expect(ByteSize.oneDecimal(-2.5) == "-2.5")
    }

    @Test func csvFieldsAreQuotedWhenNeeded() {
        #expect(EntryFormatter.csvField("plain") == "plain")
        #expect(EntryFormatter.csvField("a,b") == "\"a,b\"")
        #expect(EntryFormatter.csvField("say \"hi\"") == "\"say \"\"hi\"\"\"")
        // CRLF is one Character, and so is a comma or quote with a combining mark after it.
        #expect(EntryFormatter.csvField("Trip\r\nDay 1") == "\"Trip\r\nDay 1\"")
        #expect(EntryFormatter.csvField("http://h/a,\u{301}b") == "\"http://h/a,\u{301}b\"")
        #expect(EntryFormatter.csvField("\"\u{301}") == "\"\"\"\u{301}\"")
    }
}

@Suite struct CacheRootTests {
    @Test func flagThenEnvironmentThenDefault() {
        #expect(MediaCache.resolveRoot(explicit: "/x", environment: ["MEDIAFETCH_CACHE": "/y"]) == "/x")
        #expect(MediaCache.resolveRoot(explicit: nil, environment: ["MEDIAFETCH_CACHE": "/y"]) == "/y")
        #expect(MediaCache.resolveRoot(explicit: nil, environment: [:]) == "Cache")
    }
}

@Suite struct DisplayTextTests {
    @Test func controlCharactersAreShownAsEscapes() {
        #expect(DisplayText.escapingControls("bratislava") == "bratislava")
        #expect(DisplayText.escapingControls("a\u{1B}[2Jb") == "a\\u{1B}[2Jb")
        #expect(DisplayText.escapingControls("two\nlines\ttab") == "two\\u{A}lines\\u{9}tab")
        #expect(DisplayText.escapingControls("del\u{7F} c1\u{9B}") == "del\\u{7F} c1\\u{9B}")
        #expect(DisplayText.escapingControls("Žilina — ok") == "Žilina — ok")
        // A right-to-left override would turn the rest of a row around; separators break lines.
        #expect(DisplayText.escapingControls("ab\u{202E}cd\u{2066}\u{200F}\u{2028}") == "ab\\u{202E}cd\\u{2066}\\u{200F}\\u{2028}")
        // Joiners stay (emoji sequences need them); invisible spaces and a
        // byte-order mark are shown, or a URL or name looks like another.
        #expect(DisplayText.escapingControls("👨\u{200D}👩 ok") == "👨\u{200D}👩 ok")
        #expect(DisplayText.escapingControls("\u{FEFF}http://h/a b\u{200B}c\u{2060}") == "\\u{FEFF}http://h/a b\\u{200B}c\\u{2060}")
        #expect(CollectionName.problem("\u{200B}") == "must not hold control or invisible characters (got '\\u{200B}')")
        // White space around a name: a second collection that looks like the first.
        #expect(CollectionName.problem("downloads ") == "must not begin or end with white space (got 'downloads ')")
        #expect(CollectionName.problem("downloads\u{A0}") == "must not begin or end with white space (got 'downloads\\u{A0}')")
        #expect(CollectionName.problem("\u{3000}tatry") == "must not begin or end with white space (got '\\u{3000}tatry')")
        #expect(CollectionName.problem("vysoké tatry") == nil)
    }

    /// What draws nothing makes a second collection that looks like the
    /// first: a soft hyphen, a joiner or a variation selector after a
    /// letter, a Hangul filler, a Braille blank, an accent with nothing to sit on.
    @Test func collectionNamesThatDrawNothingOrLookLikeAnotherAreRefused() {
        for (name, shown) in [("downloads\u{AD}", "downloads\\u{AD}"), ("downloads\u{200D}", "downloads\\u{200D}"),
                              ("\u{200C}downloads", "\\u{200C}downloads"), ("downloads\u{FE0F}", "downloads\\u{FE0F}"),
                              ("down\u{34F}loads", "down\\u{34F}loads"), ("downloads\u{180E}", "downloads\\u{180E}"),
                              ("\u{3164}", "\\u{3164}"), ("downloads\u{E0041}", "downloads\\u{E0041}")] {
            #expect(CollectionName.problem(name) == "must not hold control or invisible characters (got '\(shown)')", "\(shown)")
        }
        #expect(CollectionName.problem("\u{2800}") == "must not be empty")
        #expect(CollectionName.problem("downloads\u{2800}") == "must not begin or end with white space (got 'downloads\\u{2800}')")
        #expect(CollectionName.problem("\u{301}") == "must not begin with a combining mark (got '\u{301}')")
        // A URL given as the name: its password would be kept and listed.
        #expect(CollectionName.problem("http://u:S3KR1T@h/a.jpg") == "must not hold a URL's password (got 'http://u:***@h/a.jpg')")
        for name in ["trips@2024: tatry", "me:home@work/2024", "work:me@acme.com/reports"] {
            #expect(CollectionName.problem(name) == nil, "\(name)")
        }
        // Emoji sequences, an ideograph's variant, Mongolian's variants and a flag's tags are names.
        for name in ["❤\u{FE0F} trips", "👨\u{200D}👩\u{200D}👧", "葛\u{E0100}", "ᠠ\u{180B}ᠡ", "🏴\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}",
                     "e\u{301}te", "1\u{FE0F}\u{20E3}"] {
            #expect(CollectionName.problem(name) == nil, "\(name)")
        }
        // A variation selector widens an emoji, not a letter.
        #expect(DisplayText.displayWidth("s\u{FE0F}") == 1)
        #expect(DisplayText.displayWidth("❤\u{FE0F}") == 2)
    }

    @Test func wideCharactersTakeTwoColumns() {
        #expect(DisplayText.displayWidth("tatry") == 5)
        #expect(DisplayText.displayWidth("東京") == 4)
        #expect(DisplayText.displayWidth("서울") == 4)
        #expect(DisplayText.displayWidth("e\u{301}te\u{301}") == 3)
        #expect(DisplayText.displayWidth("a\u{200B}b\u{FEFF}") == 2)
        // A terminal counts by the scalar: spacing vowel signs, halfwidth voicing marks and a
        // conjunct's letters take a column each (rows with them wrapped); an emoji sequence's
        // later parts and Hangul's medial and final jamo do not.
        #expect(DisplayText.displayWidth("दुनिया") == 5)
        #expect(DisplayText.displayWidth("नमस्ते") == 4)
        #expect(DisplayText.displayWidth("ﾊﾟﾝﾀﾞ") == 5)
        #expect(DisplayText.displayWidth("น้ำ") == 2)
        #expect(DisplayText.displayWidth("\u{1112}\u{1161}\u{11AB}") == 2)
        for emoji in ["👍🏽", "👨\u{200D}👩\u{200D}👧", "🇸🇰", "1\u{FE0F}\u{20E3}"] {
            #expect(DisplayText.displayWidth(emoji) == 2, "\(emoji)")
        }
        let table = TextTable.render(header: ["COLLECTION", "URL"], rows: [["写真写真", "http://a/1"], ["abcdefgh", "http://a/2"]],
                                     rightAligned: [])
        let lines = table.split(separator: "\n").map(String.init)
        // The URL column starts in the same terminal column on every row.
        let starts = lines.map { line in
            DisplayText.displayWidth(String(line[..<((line.range(of: "URL") ?? line.range(of: "http://"))?.lowerBound ?? line.endIndex)]))
        }
        #expect(Set(starts).count == 1, "\(lines)")
    }

    @Test func theStatusLineSaysWhenTheNextRetryComes() {
        var progress = RunProgress()
        (progress.total, progress.done, progress.waitingToRetry, progress.nextRetryInSeconds) = (3, 1, 2, 95)
        #expect(ProgressText.status(progress) == "1/3 items, 0 B at 0 B/s, 2 waiting to retry (next in 95 s)")
        progress.nextRetryInSeconds = 600
        #expect(ProgressText.status(progress) == "1/3 items, 0 B at 0 B/s, 2 waiting to retry (next in 10 min)")
        progress.waitingToRetry = 0
        #expect(ProgressText.status(progress) == "1/3 items, 0 B at 0 B/s")
    }

    /// A wait for another process at the end of the list says so: it showed
    /// nothing running and nothing waiting.
    @Test func theStatusLineSaysWhatAnotherProcessIsFetching() {
        var progress = RunProgress()
        (progress.total, progress.done, progress.waitingForOtherProcess) = (3, 2, 1)
        #expect(ProgressText.status(progress) == "2/3 items, 0 B at 0 B/s, 1 being fetched by another process")
    }

    @Test func aCollectionNameIsTheSameInEitherUnicodeForm() {
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        #expect(Array(CollectionName.normalized(decomposed).utf8) == Array(composed.utf8))
        #expect(CollectionName.find(decomposed, among: ["alps", composed]).map { Array($0.utf8) } == Array(composed.utf8))
        #expect(CollectionName.find(composed, among: [decomposed]).map { Array($0.utf8) } == Array(decomposed.utf8))
        #expect(CollectionName.find("cafe", among: [composed]) == nil)
    }

    @Test func anUnknownCollectionIsNamedWithTheOnesThereAre() {
        #expect(ListMessages.noCollection(named: "tatri", among: ["alps", "tatry"])
                == "no collection named 'tatri' (the cache has 'alps', 'tatry')")
        #expect(ListMessages.noCollection(named: "x", among: []) == "no collection named 'x' (the cache has none)")
        let many = (1...12).map { "c\($0)" }
        #expect(ListMessages.noCollection(named: "x", among: many).hasSuffix("'c10' and 2 more)"))
        // A very long name is cut: one of 5,000 characters made a 10 KB line.
        let long = String(repeating: "a", count: 5_000)
        #expect(ListMessages.noCollection(named: long, among: [long])
                == "no collection named '\(String(repeating: "a", count: 59))…' (the cache has '\(String(repeating: "a", count: 59))…')")
    }

    @Test func aTableRowCannotBeBrokenOrClearTheScreen() {
        let table = TextTable.render(header: ["NAME", "SIZE"], rows: [["a\nb\u{1B}[2J", "1"]], rightAligned: [1])
        #expect(table.split(separator: "\n").count == 2)
        #expect(!table.contains("\u{1B}"))
        #expect(table.contains("a\\u{A}b\\u{1B}[2J"))
    }
}

@Suite struct RedactedURLTests {
    @Test func aPasswordInAURLIsNeverShown() {
        #expect(RedactedURL.of("http://user:secret@host:8080/a.jpg") == "http://user:***@host:8080/a.jpg")
        #expect(RedactedURL.of("https://user:p%40ss@example.com/x?y=1") == "https://user:***@example.com/x?y=1")
        // An '@' later in the URL is not userinfo.
        #expect(RedactedURL.of("http://host/a@b.jpg") == "http://host/a@b.jpg")
        #expect(RedactedURL.of("http://host/x?mail=a:b@c") == "http://host/x?mail=a:b@c")
        // A user without a password has nothing to hide.
        #expect(RedactedURL.of("http://user@host/a") == "http://user@host/a")
        #expect(RedactedURL.of("not a url") == "not a url")
        #expect(RedactedURL.inText("failed http://u:pw@h/a.jpg: HTTP 401 Unauthorized")
                == "failed http://u:***@h/a.jpg: HTTP 401 Unauthorized")
        // A password the parser refused for its unencoded '/', '?' or '#' is hidden all the same.
        for secret in ["pa/ss", "pa?ss", "pa#ss"] {
            #expect(RedactedURL.inText("bad port in URL: http://bob:\(secret)@127.0.0.1:8080/a.bin")
                    == "bad port in URL: http://bob:***@127.0.0.1:8080/a.bin")
        }
        // An IPv6 literal's port and an '@' in the path are not a password either.
        #expect(RedactedURL.inText("bad port in URL: http://[::1]:99999/a@b.jpg") == "bad port in URL: http://[::1]:99999/a@b.jpg")
        // A port and an '@' in the path are not a password.
        #expect(RedactedURL.inText("failed http://host:8080/a@b.jpg: HTTP 404") == "failed http://host:8080/a@b.jpg: HTTP 404")
        // Every user:password@ in a word, a mistyped URL's too, is hidden: an error quotes what was given.
        #expect(RedactedURL.inText("not a URL, it holds a second one: http://a/1.jpg,http://u:pw@h/2.jpg")
                == "not a URL, it holds a second one: http://a/1.jpg,http://u:***@h/2.jpg")
        // A URL refused as given is quoted with its password hidden, mistyped ones too (there, where it is a URL).
        for (typed, shown) in [("u:pw@h/b.jpg", "u:***@h/b.jpg"), ("//u:pw@h/b", "//u:***@h/b"), ("http:/u:pw@h/b", "http:***@h/b"),
                               ("http:u:pw@h/b", "http:***@h/b"), (#"http:\u:pw@h/b"#, "http:***@h/b"),
                               ("'http://u:pw@h/a.jpg'", "'http://u:***@h/a.jpg'"),
                               // A raw '@' or '/' in the password: hidden to the last '@' before the path.
                               ("u:p@ss@h/a.jpg", "u:***@h/a.jpg"), ("u:pa/ss@h/a.jpg", "u:***@h/a.jpg"), ("u:1234@h/a.jpg", "u:***@h/a.jpg"),
                               ("http://a/1.jpg,http://u:p@ss@h/2.jpg", "http://a/1.jpg,http://u:***@h/2.jpg"),
                               ("http:/u:pw@h/a.jpg?next=https://x.org/", "http:***@h/a.jpg?next=https://x.org/"),
                               // No path, or a scheme without its ':' or with another mark.
                               ("u:pw@h", "u:***@h"), ("u:pw@h?x=1", "u:***@h?x=1"), ("http//u:pw@h/", "http//u:***@h/"),
                               ("http;//u:pw@h/", "http;//u:***@h/"), ("http.//u:pw@h/", "http.//u:***@h/"),
                               // Each of two joined by a line break or a space.
                               ("http://a/1.jpg\nu:pw@h/2.jpg", "http://a/1.jpg\nu:***@h/2.jpg"),
                               ("http://u:pw@h/a.jpg u:pw2@h/b.jpg", "http://u:***@h/a.jpg u:***@h/b.jpg")] {
            do {
                _ = try URLList.validate([typed])
                Issue.record("\(typed) was taken")
            } catch {
                #expect(error.message.hasSuffix(": \(shown)"), "\(error.message)")
            }
        }
        #expect(RedactedURL.inText("failed http://u:pw@h/photo@2x.jpg: HTTP 404") == "failed http://u:***@h/photo@2x.jpg: HTTP 404")
        #expect(RedactedURL.inText("not a URL: http://a/1.jpg,http://u:p@ss@h/2.jpg") == "not a URL: http://a/1.jpg,http://u:***@h/2.jpg")
        // A proxy's URL quoted whole by curl, its password with a space in it (digits first too).
        #expect(RedactedURL.inText("Unsupported proxy syntax in 'http://pu:S3KR1T x/y@127.0.0.1:1'")
                == "Unsupported proxy syntax in 'http://pu:***@127.0.0.1:1'")
        #expect(RedactedURL.inText("Unsupported proxy syntax in 'http://pu:12 34@127.0.0.1:1'")
                == "Unsupported proxy syntax in 'http://pu:***@127.0.0.1:1'")
        // Both URLs' passwords, in the message of the one refused for holding the other.
        #expect(throws: InputError("not a URL, it holds a second one, with a password (one URL a line, or an argument each; "
                                   + "an @ in a URL is written %40): http://u:***@a/1.jpg,http://u2:***@h/2.jpg")) {
            try URLList.validate(["http://u:pw@a/1.jpg,http://u2:pw2@h/2.jpg"])
        }
        // Three slashes, or a space in the password (a URL refused for it is quoted whole).
        #expect(RedactedURL.inText("no host in URL: http:///u:pw@h/a.jpg") == "no host in URL: http:///u:***@h/a.jpg")
        // A name with ':' and '@' in other text is no URL (the list of collections quotes them), and a
        // password is not read across quotes into another name.
        #expect(RedactedURL.inText("no collection named 'x' (the cache has 'me:home@work/2024', 'trips')")
                == "no collection named 'x' (the cache has 'me:home@work/2024', 'trips')")
        #expect(RedactedURL.inText("no collection named 'https://u:pw@h' (the cache has 'me:home@work/2024')")
                == "no collection named 'https://u:***@h' (the cache has 'me:home@work/2024')")
        #expect(throws: InputError("not a URL, its host name holds a space: http://u:***@h/a.jpg")) {
            try URLList.validate(["http://u:S3KR1T x/y@h/a.jpg"])
        }
        // What is no password stays: a query's times, ports and addresses, a mail address, an '@' in a path, files' names.
        for kept in ["failed https://h/x?time=10:00&email=a@b.com: HTTP 404 Not Found", "unsupported scheme 'mailto': mailto:a@b.com",
                     "failed http://h/photo@2x.jpg: HTTP 404", "failed http://h/@user/a.jpg: HTTP 404",
                     "failed http://h/a?to=http://localhost:3000&hint=a@b.org: HTTP 404",
                     "lists/v1:final@2024.txt: cannot read the file", "me:list@x.txt:1: not a URL", "no cache at /tmp/nope:x@y",
                     "not a URL: view-source:https://cdn.x.com/img@2x/a.png", "not a URL: localhost:3000&hint=a@b.org/x",
                     "http://example.com: HTTP 403 (contact admin@example.com)"] {
            #expect(RedactedURL.inText(kept) == kept)
        }
        // Two URLs with a line break, a tab or another control between them are two words.
        for between in ["\n", "\r\n", "\t", "\u{1B}", "\u{2028}"] {
            #expect(RedactedURL.inText("not a URL: http://a/1.jpg\(between)http://ann:secret@h/2.jpg")
                    == "not a URL: http://a/1.jpg\(between)http://ann:***@h/2.jpg")
        }
    }

    @Test func aURLReadsAsABrowserShowsIt() {
        // UTF-8 escapes in the path read as their characters; the password is hidden as ever
        #expect(RedactedURL.readable("http://h/%C5%A0trbsk%C3%A9-pleso-%C5%BDilina.jpg") == "http://h/Štrbské-pleso-Žilina.jpg")
        #expect(RedactedURL.readable("http://u:pw@h:8080/zvuky/%C4%8Fal%C5%A1%C3%AD.wav") == "http://u:***@h:8080/zvuky/ďalší.wav")
        // Escapes of ASCII change what the URL says: they stay
        #expect(RedactedURL.readable("http://h/a%20b%2Fc%3F.jpg") == "http://h/a%20b%2Fc%3F.jpg")
        // The query and the fragment are kept as written
        #expect(RedactedURL.readable("http://h/%C3%A9?q=%C3%A9#%C3%A9") == "http://h/é?q=%C3%A9#%C3%A9")
        #expect(RedactedURL.readable("http://h?q=%C3%A9") == "http://h?q=%C3%A9")
        // Bytes that are not UTF-8 (Latin-1), and a sequence cut short, stay escaped
        #expect(RedactedURL.readable("http://h/%E9t%E9.jpg") == "http://h/%E9t%E9.jpg")
        #expect(RedactedURL.readable("http://h/%C5") == "http://h/%C5")
        // Characters that hide or disguise text stay escaped, with the rest of their run: controls,
        // format characters and spaces; default-ignorable letters and marks (a Hangul filler, a
        // variation selector, the grapheme joiner) and the blank Braille pattern; a run opening with
        // a mark; a decomposed é; right-to-left letters; look-alikes of /, ?, #, % and the tables' …
        let hidden = ["%E2%80%AE", "%C2%A0", "%E2%80%8B", "%C2%85", "%E3%80%80", "%C3%A9%E2%80%AE",
                      "%E3%85%A4", "%EF%BE%A0", "%EF%B8%8F", "%CD%8F", "%E2%A0%80", "%CC%B8", "e%CC%81",
                      "%D7%90%D7%91", "%D8%B3", "%E2%88%95", "%E2%81%84", "%EF%BC%8F", "%EF%BC%9F", "%EF%BC%83",
                      "%D9%AA", "%EF%B9%AA", "%E2%80%A4", "%EA%9E%89", "%E2%80%A6"]
        for escaped in hidden {
            #expect(RedactedURL.readable("http://h/a\(escaped)b.jpg") == "http://h/a\(escaped)b.jpg", "\(escaped)")
        }
        // A composed letter with its mark, CJK and emoji read as written
        #expect(RedactedURL.readable("http://h/%E1%BB%87%E5%9C%B0%F0%9F%8E%B5.ogg") == "http://h/ệ地🎵.ogg")
        // Given back to `get`, it names the same resource
        for url in ["http://h/%C5%A0trbsk%C3%A9.jpg", "http://h/%c3%a9/x%C3%A9y.mp3", "http://h/%F0%9F%8E%B5.ogg"] {
            #expect(URLSpelling.normalized(RedactedURL.readable(url)) == URLSpelling.normalized(url))
        }
        // Nothing to read differently: the same text
        #expect(RedactedURL.readable("not a url %C3%A9") == "not a url %C3%A9")
        #expect(RedactedURL.readable("http://h/plain.jpg") == "http://h/plain.jpg")
    }

    /// Whatever the URL, what a person reads is spelt as the URL is: `get`
    /// given it fetches the same item.
    @Test func aReadableURLIsSpeltAsItsURL() {
        var generator = SeededGenerator(seed: 48)
        let pieces = ["%C3%A9", "%c3%a9", "%C5", "%A0", "%E2%80%AE", "%CC%81", "e", "%F0%9F%8E%B5", "%E9", "%", "%4", "%41",
                      "%2F", "%2e", ".", "..", "/", "a", "é", "?", "#", "%25", "\"", "%EF%BC%8F", "%D7%90", "~", "%7E"]
        let prefixes = ["http://h", "HTTP://H:80", "https://u:p@h:0443", "http://[::1]:08080", "http://h%C3%A9"]
        for _ in 0..<20_000 {
            let rest = (0..<Int.random(in: 0...8, using: &generator)).map { _ in pieces.randomElement(using: &generator) ?? "" }.joined()
            let url = (prefixes.randomElement(using: &generator) ?? "http://h") + (Bool.random(using: &generator) ? "/" : "") + rest
            let redacted = RedactedURL.of(url)
            #expect(URLSpelling.normalized(RedactedURL.readable(url)) == URLSpelling.normalized(redacted), "\(url)")
        }
    }

    @Test func theCatalogKeepsAURLWithoutItsPasswordButWithItsUser() {
        #expect(URLPassword.removed(from: "http://user:secret@host:8080/a.jpg") == "http://user@host:8080/a.jpg")
        #expect(URLPassword.removed(from: "https://u:p%40ss@example.com/x?y=1#f") == "https://u@example.com/x?y=1#f")
        #expect(URLPassword.removed(from: "http://user@host/a") == "http://user@host/a")
        // An empty password is no password: the same item as none.
        #expect(URLPassword.removed(from: "http://user:@host/a") == "http://user@host/a")
        #expect(RedactedURL.of("http://user:@host/a") == "http://user:@host/a")
        #expect(URLPassword.removed(from: "http://host:8080/a@b.jpg") == "http://host:8080/a@b.jpg")
        #expect(URLPassword.removed(from: "http://host/x?mail=a:b@c") == "http://host/x?mail=a:b@c")
        #expect(URLPassword.removed(from: "no scheme:pw@host") == "no scheme:pw@host")
        let item = FetchItem(url: "http://a:b@h/1", collection: "c")
        #expect([item, FetchItem(url: "http://a:z@h/1", collection: "c"), FetchItem(url: "http://h/1", collection: "c")].withoutRepeats().items
                == [item, FetchItem(url: "http://h/1", collection: "c")])
        // The first that gives a password stands for repeats without one, in the first's place
        // (as `list` shows it, `a@h`, and then as the user has it); the collision path too.
        let shown = FetchItem(url: "http://a@h/1", collection: "c"), other = FetchItem(url: "http://h/2", collection: "c")
        let emptyPassword = FetchItem(url: "http://a:@h/1", collection: "c")
        let list = [shown, other, emptyPassword, item, FetchItem(url: "http://a:z@h/1", collection: "c")]
        #expect(list.withoutRepeats().items == [item, other])
        #expect(list.withoutRepeats(hash: { _, _ in 7 }).items == [item, other])
        #expect([shown, emptyPassword].withoutRepeats().items == [shown])
        #expect(URLPassword.isGiven(in: "http://a:b@h/1") && !URLPassword.isGiven(in: "http://a:@h/1") && !URLPassword.isGiven(in: "http://a@h/1"))
    }
}

@Suite struct URLBlockTests {
    @Test func aBlockGivesBackItsURLsInOrder() {
        var block: URLBlock = ["http://a/1", "https://b/é?x=1"]
        block += ["http://c/3", ""]
        block.append("http://d/4")
        #expect(Array(block) == ["http://a/1", "https://b/é?x=1", "http://c/3", "", "http://d/4"])
        #expect(block.count == 5)
        #expect(block[1] == "https://b/é?x=1")
        #expect(URLBlock() == [])
        #expect(block != ["http://a/1"])
    }

    /// Kept in segments (one array copied whole as it grew failed a long
    /// list under `ulimit -v`): URLs on both sides of a segment's end, and
    /// one longer than a segment, read back as they were given.
    @Test func urlsAcrossSegmentsReadBackWhole() {
        let urls = (0..<3_000).map { "http://a/\($0)?" + String(repeating: "p", count: 900 + $0 % 7) }
            + ["http://b/" + String(repeating: "q", count: 3 << 20), "http://c/after"]
        var block = URLBlock()
        for url in urls { block.append(url) }
        #expect(Array(block) == urls)
        #expect(block.byteCount == urls.reduce(0) { $0 + $1.utf8.count })
        var joined: URLBlock = ["http://first/"]
        joined += block
        #expect(Array(joined) == ["http://first/"] + urls)
        #expect(joined != block)
    }

    @Test func urlItemsAreItemsOfOneCollectionAndKind() {
        let items = URLItems(urls: ["http://a/1", "http://a/2", "http://a/1"], collection: "trip", kind: .photo)
        #expect(items.count == 3)
        #expect(items[1] == FetchItem(url: "http://a/2", collection: "trip", kind: .photo))
        #expect(items.withoutRepeats().items == [FetchItem(url: "http://a/1", collection: "trip", kind: .photo),
                                                 FetchItem(url: "http://a/2", collection: "trip", kind: .photo)])
    }
}
