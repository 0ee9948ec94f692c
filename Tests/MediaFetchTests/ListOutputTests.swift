@testable import ContentStore
import Foundation
import Testing
import TestSupport
@testable import MediaFetch
import Transfer

/// `list` writes its rows as it reads them; the text must be what rendering
/// the whole list at once gives.
@Suite struct ListOutputTests {
    private static func hash(_ digit: Character) -> String { String(repeating: digit, count: 64) }

    /// A cache whose catalog holds entries with wide characters, control
    /// characters, a password, nested metadata and missing fields.
    private func withListedCache(_ body: (MediaCache, [CatalogEntry]) throws -> Void) async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            try cache.catalog.record([
                IngestRecord(url: "http://h/a.jpg", collection: "alps", kind: .photo, title: "Matterhorn, north face",
                             sha256: Self.hash("a"), size: 123_456, contentType: "image/jpeg",
                             metadata: #"{"photoId":"42","tags":["ski","snow"],"geo":{"lat":45.97,"lon":7.65}}"#),
                IngestRecord(url: "http://ann:secret@h/b.wav", collection: "東京", kind: .sound, title: nil,
                             sha256: Self.hash("b"), size: 9, metadata: #"{"durationSeconds":1.5,"channels":2}"#),
                IngestRecord(url: "http://h/c", collection: "alps", kind: .file, title: "quote \" and\u{1B}[31m red",
                             sha256: Self.hash("c"), size: 5 << 30, metadata: #"{"kind":"not this","flag":true,"one":1}"#),
            ])
            let entries = try cache.catalog.entries()
            // Their files, of their sizes (5 GiB as a hole): an entry without one is listed as missing.
            for entry in entries { try Self.placeFile(of: entry, in: cache) }
            try body(cache, entries)
        }
    }

    private static func placeFile(of entry: CatalogEntry, in cache: MediaCache) throws {
        let path = try #require(cache.path(for: entry.sha256))
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        #expect(truncate(path, off_t(entry.size)) == 0)
    }

    /// What `format` writes, in pieces of `pieceSize`; the pieces are checked too.
    private func written(_ cache: MediaCache, _ format: OutputFormat, pieceSize: Int) throws -> String {
        var pieces: [String] = []
        try cache.catalog.readEntries { forEach in
            try EntryFormatter(cache: cache).write(forEach, as: format, pieceSize: pieceSize, to: { pieces.append($0) })
        }
        // Every piece but the last has filled up; none is empty.
        #expect(pieces.dropLast().allSatisfy { $0.utf8.count >= pieceSize })
        #expect(pieces.allSatisfy { !$0.isEmpty })
        return pieces.joined()
    }

    /// On a terminal, a table's title or URL loses its middle rather than
    /// wrap its row: the host and the file's name stay. Untouched where
    /// the row fits, and in every other format.
    @Test func aTableOnATerminalCutsTheMiddleOutOfLongURLs() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            let long = "http://photos.example.test/albums/2026/bratislava/old-town/night/IMG_0042.jpg"
            try cache.catalog.record([
                IngestRecord(url: long, collection: "bratislava", kind: .photo, title: nil, sha256: Self.hash("d"), size: 2_000),
                IngestRecord(url: "http://h/e.jpg", collection: "bratislava", kind: .photo, title: nil, sha256: Self.hash("e"), size: 9),
            ])
            for entry in try cache.catalog.entries() { try Self.placeFile(of: entry, in: cache) }
            func table(columns: Int?) throws -> (text: String, shortened: Int) {
                var text = ""
                var shortened = 0
                try cache.catalog.readEntries { forEach in
                    shortened = try EntryFormatter(cache: cache).write(forEach, as: .table, columns: columns, to: { text += $0 }).shortened
                }
                return (text, shortened)
            }

            let fitted = try table(columns: 80)
            let whole = try table(columns: nil)

            let rows = fitted.text.split(separator: "\n").map(String.init)
            #expect(rows.allSatisfy { DisplayText.displayWidth($0) <= 80 }, "\(fitted.text)")
            #expect(fitted.shortened == 1)
            let cut = try #require(rows.first { $0.contains("…") })
            #expect(cut.contains("http://photos.example") && cut.hasSuffix("/IMG_0042.jpg"), "\(cut)")
            #expect(rows.contains { $0.hasSuffix("http://h/e.jpg") })
            #expect(whole.text.contains(long) && whole.shortened == 0)
            // Too narrow to leave a URL 20 columns: whole, to wrap.
            #expect(try table(columns: 50).text == whole.text)
            // A long collection name gives way to the URL, down to its header's width: both cut.
            try cache.catalog.record([IngestRecord(url: long + "?v=2", collection: String(repeating: "long-name-", count: 6),
                                                   kind: .photo, title: nil, sha256: Self.hash("f"), size: 5)])
            for entry in try cache.catalog.entries() where entry.sha256 == Self.hash("f") { try Self.placeFile(of: entry, in: cache) }
            let narrow = try table(columns: 80)
            // (The query is what gives way first: its path keeps the file's name.)
            let named = try #require(narrow.text.split(separator: "\n").first { $0.hasSuffix("/IMG_0042.jpg?…") }.map(String.init))
            #expect(DisplayText.displayWidth(named) == 80 && named.contains("  photo  long-n…me-  http://photos.example"), "\(named)")
            // A name longer than 100 is whole where the terminal has room, in a column as wide (it was cut to 100).
            let longest = String(repeating: "very-long-name-", count: 8)
            try cache.catalog.record([IngestRecord(url: "http://h/g.jpg", collection: longest, kind: .photo, title: nil,
                                                   sha256: Self.hash("e"), size: 9)])
            let wide = try table(columns: 300)
            #expect(wide.shortened == 0 && wide.text.contains("  \(longest)  http://h/g.jpg\n"), "\(wide.text)")
            // The other rows in line with it.
            #expect(wide.text.contains("  " + "bratislava".padding(toLength: longest.count, withPad: " ", startingAt: 0) + "  http://h/e.jpg\n"),
                    "\(wide.text)")
            // Where it does not, it is cut to the column, as before.
            let cutRow = try #require(try table(columns: 130).text.split(separator: "\n").first { $0.hasSuffix("http://h/g.jpg") })
            #expect(cutRow.contains("  very-long-name-") && cutRow.contains("…") && DisplayText.displayWidth(String(cutRow)) <= 130,
                    "\(cutRow)")
        }
    }

    @Test func elidingTheMiddleKeepsBothEndsWithinTheWidth() {
        let url = "http://127.0.0.1:38497/photos/copy-of-000.jpg"
        #expect(DisplayText.elidingMiddle(url, toWidth: 80) == url)
        #expect(DisplayText.elidingMiddle(url, toWidth: 26) == "http://127.0.0.…of-000.jpg")
        // Where the file's name fits beside them, the scheme, host and port stay whole.
        #expect(DisplayText.elidingMiddle(url, toWidth: 40) == "http://127.0.0.1:38497/…/copy-of-000.jpg")
        // Wide characters take two columns: never past the width, even by one.
        let wide = DisplayText.elidingMiddle("http://h/東京/写真/夜の東京タワー.jpg", toWidth: 21)
        #expect(DisplayText.displayWidth(wide) <= 21 && wide.hasPrefix("http://h/") && wide.hasSuffix(".jpg"), "\(wide)")
        #expect(DisplayText.elidingMiddle(url, toWidth: 5) == "http…")
    }

    /// `http://127.0.0.1:4731…s/nonexist.jpg` and `http://127.0.0.1:473…námestie.jpg`
    /// read as other ports: a host's or port's number is whole or left out.
    @Test func aCutURLShowsNoNumberOfItsHostOrPortCutShort() {
        // The file's name whole beside the host and port, without the slash the host's ends in.
        #expect(DisplayText.elidingMiddle("http://127.0.0.1:47311/photos/nonexist.jpg", toWidth: 36)
                == "http://127.0.0.1:47311/…nonexist.jpg")
        // Narrower, the port gives way whole.
        #expect(DisplayText.elidingMiddle("http://127.0.0.1:47311/zvuky/Žilina-námestie.jpg", toWidth: 33)
                == "http://127.0.0.1…ina-námestie.jpg")
        #expect(DisplayText.elidingMiddle("http://192.168.1.105/photos/a-long-file-name.jpg", toWidth: 30)
                == "http://192.168.1.…ile-name.jpg")
        // A tail that would begin in the port: the path whole, and the head what is left.
        #expect(DisplayText.elidingMiddle("http://127.0.0.1:47311/abcdefghij.jpg", toWidth: 36)
                == "http://127.0.0.1…abcdefghij.jpg")
        // A long host and a short path: the tail is the path, not the end of the port (`…80/a.jpg`).
        #expect(DisplayText.elidingMiddle("http://10.200.30.4:8080/a.jpg", toWidth: 19) == "http://10.200…a.jpg")
        #expect(DisplayText.elidingMiddle("http://10.200.30.4:8080/a.jpg", toWidth: 27) == "http://10.200.30.4…a.jpg")
        #expect(DisplayText.elidingMiddle("http://[2001:db8::1]:8080/a.jpg", toWidth: 20) == "http://[2001…a.jpg")
        // A user name gives way first, whole: it read as the host.
        let withUser = "http://www.bank.example.com@127.0.0.1:34567/photos/090.jpg"
        #expect(DisplayText.elidingMiddle(withUser, toWidth: 40) == "http://…@127.0.0.1:34567/photos/090.jpg")
        #expect(DisplayText.elidingMiddle(withUser, toWidth: 90) == withUser)
        for width in 8..<DisplayText.displayWidth(withUser) {
            let cut = DisplayText.elidingMiddle(withUser, toWidth: width)
            #expect(DisplayText.displayWidth(cut) <= width && (!cut.contains("bank") || cut.contains("bank.example.com@127.0.0.1:34567/")),
                    "width \(width): \(cut)")
            // What follows "…@" is the host's start.
            if let range = cut.range(of: "…@") { #expect(cut[range.upperBound...].hasPrefix("1"), "width \(width): \(cut)") }
        }
        // Every width: the "…" never stands between two digits of the host or port
        // (nor two hex digits of an IPv6 literal), and the tail never begins before the path.
        let urls = ["http://127.0.0.1:47311/zvuky/Žilina-námestie.jpg", "http://10.200.30.4:8080/a/b/photo-123.jpg",
                    "https://live.staticflickr.com/65535/48788868917_474f051e76.jpg", "http://10.200.30.4:8080/a.jpg",
                    "http://media.example.org:47311/x.jpg", "http://[2001:db8::1]:8080/a.jpg", "http://127.0.0.1:47311",
                    "http://192.168.100.200:8443/photos/2026/IMG_1.jpg"]
        for url in urls {
            let characters = Array(url)
            let hostStart = url.hasPrefix("https") ? 8 : 7
            let pathStart = characters[hostStart...].firstIndex(of: "/") ?? characters.count
            let isNumeral = { (character: Character) in url.contains("[") ? character.isHexDigit : character.isNumber }
            for width in 8..<DisplayText.displayWidth(url) {
                let cut = Array(DisplayText.elidingMiddle(url, toWidth: width))
                #expect(DisplayText.displayWidth(String(cut)) <= width, "\(String(cut))")
                guard let ellipsis = cut.firstIndex(of: "…") else { Issue.record("no … in \(String(cut))"); continue }
                let headEnd = ellipsis, tailStart = characters.count - (cut.count - ellipsis - 1)
                #expect(Array(characters[..<headEnd]) == Array(cut[..<ellipsis]) && Array(characters[tailStart...]) == Array(cut[(ellipsis + 1)...]))
                #expect(tailStart >= pathStart, "width \(width): \(String(cut))")
                if headEnd > hostStart, headEnd < pathStart {
                    #expect(!(isNumeral(characters[headEnd - 1]) && isNumeral(characters[headEnd])) && characters[headEnd - 1] != ":",
                            "width \(width): \(String(cut))")
                }
            }
        }
    }

    /// A reason too long for its row is broken between words: no line is
    /// wider than asked, no word is split that fits a line, and the words
    /// come back as they were.
    @Test func aReasonIsWrappedInWholeWords() {
        let reason = "Failed to connect to 127.0.2.1 port 30713 after 0 ms: Couldn't connect to server"
        #expect(DisplayText.wrapped(reason, toWidth: 25)
                == ["Failed to connect to", "127.0.2.1 port 30713", "after 0 ms: Couldn't", "connect to server"])
        for width in 9...90 {
            let lines = DisplayText.wrapped(reason, toWidth: width)
            #expect(lines.allSatisfy { DisplayText.displayWidth($0) <= width && !$0.hasPrefix(" ") && !$0.hasSuffix(" ") })
            #expect(lines.joined(separator: " ") == reason, "width \(width): \(lines)")
        }
        #expect(DisplayText.wrapped(reason, toWidth: 200) == [reason])
        // A word longer than a line fills lines of its own; wide characters count two columns.
        #expect(DisplayText.wrapped("HTTP 500 Internal_Server_Error_from_upstream", toWidth: 20)
                == ["HTTP 500", "Internal_Server_Erro", "r_from_upstream"])
        #expect(DisplayText.wrapped("東京の写真 ok", toWidth: 5) == ["東京", "の写", "真 ok"])
        #expect(DisplayText.wrapped("東", toWidth: 1) == ["東"])
        #expect(DisplayText.wrapped("", toWidth: 10).isEmpty && DisplayText.wrapped("   ", toWidth: 10).isEmpty)
        // A word of no width (a joiner) is kept, not lost.
        #expect(DisplayText.wrapped("a \u{200D} b", toWidth: 10) == ["a \u{200D} b"])
        #expect(DisplayText.wrapped("\u{200D}", toWidth: 10) == ["\u{200D}"])
    }

    /// A URL with a query keeps its path, the file's name with it, before
    /// any of the query: signed links' queries end alike, and every row read
    /// `http://127.0.0.1:18081/photos/IMG_0…host&X-Amz-Expires=3600`.
    @Test func aURLsQueryGivesWayBeforeItsPath() {
        let signed = "http://127.0.0.1:18081/photos/IMG_0097.jpg?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=7f3a&X-Amz-Expires=3600"
        #expect(DisplayText.elidingMiddle(signed, toWidth: 60) == "http://127.0.0.1:18081/photos/IMG_0097.jpg?X-Amz-Algorithm=…")
        #expect(DisplayText.elidingMiddle(signed, toWidth: 45) == "http://127.0.0.1:18081/photos/IMG_0097.jpg?…")
        #expect(DisplayText.elidingMiddle(signed, toWidth: 40) == "http://127.0.0.1:18081/…s/IMG_0097.jpg?…")
        #expect(DisplayText.elidingMiddle(signed, toWidth: 500) == signed)
    }

    /// The same bytes in the same order: what JSONSerialization makes of it with sorted keys.
    private func canonical(_ object: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    @Test(arguments: [16, 1 << 16])
    func jsonIsOneArrayWithEveryFieldAndTheMetadata(pieceSize: Int) async throws {
        try await withListedCache { cache, entries in
            let dates = ISO8601DateFormatter()
            let byHash = Dictionary(uniqueKeysWithValues: entries.map { ($0.sha256, $0) })
            func common(_ digit: Character) throws -> [String: Any] {
                let entry = try #require(byHash[Self.hash(digit)])
                return ["hash": entry.sha256, "size": entry.size, "path": cache.path(for: entry.sha256) ?? "",
                        "collection": entry.collection, "addedAt": dates.string(from: entry.addedAt), "missing": false]
            }
            let expected: [String: [String: Any]] = [
                Self.hash("a"): try common("a").merging([
                    "url": "http://h/a.jpg", "kind": "photo", "title": "Matterhorn, north face",
                    "contentType": "image/jpeg", "photoId": "42", "tags": ["ski", "snow"],
                    "geo": ["lat": 45.97, "lon": 7.65],
                ]) { $1 },
                Self.hash("b"): try common("b").merging([
                    "url": "http://ann@h/b.wav", "kind": "sound", "title": NSNull(), "durationSeconds": 1.5, "channels": 2,
                ]) { $1 },
                Self.hash("c"): try common("c").merging([
                    "url": "http://h/c", "kind": "file", "title": "quote \" and\u{1B}[31m red", "flag": true, "one": 1,
                ]) { $1 },
            ]

            let text = try written(cache, .json, pieceSize: pieceSize)

            let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
            #expect(parsed.map { $0["hash"] as? String } == entries.map(\.sha256))
            for object in parsed {
                let hash = try #require(object["hash"] as? String)
                #expect(try canonical(object) == canonical(try #require(expected[hash])))
            }
            // Laid out for people, keys sorted, slashes left alone.
            #expect(text.hasPrefix("[\n  {\n    \"addedAt\" : \""))
            #expect(text.contains("\n  },\n  {\n"))
            #expect(text.contains("\"url\" : \"http://h/a.jpg\""))
            #expect(text.contains("\"geo\" : {\n      \"lat\" : 45.97,\n      \"lon\" : 7.65\n    },"))
            #expect(text.hasSuffix("\n  }\n]\n"))
        }
    }

    @Test func jsonStringsEscapeOnlyWhatTheyMust() throws {
        let original = "a\"b\\c/d\n\t\u{01}\u{7F}é東🇸🇰"
        var text = ""
        JSONText.writeString(original, into: &text)

        #expect(text == #""a\"b\\c/d\n\t\u0001"# + "\u{7F}é東🇸🇰\"")
        #expect(try JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed) as? String == original)
    }

    @Test func jsonValuesKeepTheirKindsAndNumbersTheirText() {
        let members = JSONValue.members(ofObject: #"""
            {"a":true,"b":1,"c":1.5,"d":null,"e":[1,"x",[]],"f":{},"g":-9007199254740993,
             "h":18446744073709551616,"i":9007199254740993.5,"j":1e400,"k":-0.0,"l":1E+20,"m":1.0,
             "n\"q":"\u00e9\/\ud83c\uddf8\ud83c\uddf0\n"}
            """#)

        #expect(members == [
            "a": .bool(true), "b": .integer(1), "c": .number("1.5"), "d": .null,
            "e": .array([.integer(1), .string("x"), .array([])]), "f": .object([:]),
            "g": .number("-9007199254740993"), "h": .number("18446744073709551616"),
            "i": .number("9007199254740993.5"), "j": .number("1e400"), "k": .number("-0.0"),
            "l": .number("1E+20"), "m": .number("1.0"), "n\"q": .string("é/🇸🇰\n"),
        ])
        var text = ""
        JSONText.write(.object(members ?? [:]), into: &text)
        #expect(text == #"""
            {
              "a" : true,
              "b" : 1,
              "c" : 1.5,
              "d" : null,
              "e" : [
                1,
                "x",
                []
              ],
              "f" : {},
              "g" : -9007199254740993,
              "h" : 18446744073709551616,
              "i" : 9007199254740993.5,
              "j" : 1e400,
              "k" : -0.0,
              "l" : 1E+20,
              "m" : 1.0,
              "n\"q" : "é/🇸🇰\n"
            }
            """#)
    }

    @Test(arguments: ["[1]", "not json", "", "{", "{}x", #"{"a":01}"#, #"{"a":1.}"#, #"{"a":.5}"#, #"{"a":+1}"#,
                      #"{"a":-}"#, #"{"a":1e}"#, #"{"a":[1,]}"#, #"{"a":1,}"#, #"{"a":"open}"#, "{\"a\":\"\u{01}\"}",
                      #"{"a":"\u12"}"#, #"{"a":"\ud800"}"#, #"{"a":"\udc00"}"#, #"{"a":"\x"}"#, #"{a:1}"#, #"{"a" 1}"#,
                      #"{"a":tru}"#, "{\"a\":" + String(repeating: "[", count: 300) + String(repeating: "]", count: 300) + "}"])
    func textThatIsNotOneJSONObjectHasNoMembers(_ text: String) {
        #expect(JSONValue.members(ofObject: text) == nil)
    }

    @Test(arguments: [16, 1 << 16])
    func aTableHasTheColumnsOfTheWholeList(pieceSize: Int) async throws {
        try await withListedCache { cache, entries in
            let rows = entries.map { entry in
                [String(entry.sha256.prefix(12)), ByteSize.format(entry.size), entry.kind.rawValue,
                 entry.collection, entry.title ?? RedactedURL.readable(entry.url)]
            }
            let whole = TextTable.render(header: EntryFormatter.tableHeader, rows: rows, rightAligned: [1])

            let text = try written(cache, .table, pieceSize: pieceSize)

            #expect(text == whole)
            // Sizes right-aligned, 東京 two columns a character, the escape shown rather than sent.
            #expect(text == #"""
                HASH               SIZE  KIND   COLLECTION  TITLE / URL
                aaaaaaaaaaaa  120.6 KiB  photo  alps        Matterhorn, north face
                cccccccccccc    5.0 GiB  file   alps        quote " and\u{1B}[31m red
                bbbbbbbbbbbb        9 B  sound  東京        http://ann@h/b.wav

                """#)
            // The escape sequence is shown, not sent to the terminal; 東京 takes four columns.
            #expect(!text.contains("\u{1B}"))
            let lastCells = ["TITLE / URL"] + rows.map { DisplayText.escapingControls($0[4]) }
            let starts = zip(text.split(separator: "\n"), lastCells).map { line, cell in
                line.range(of: cell, options: .backwards).map { DisplayText.displayWidth(String(line[..<$0.lowerBound])) }
            }
            #expect(starts.count == 4)
            #expect(Set(starts).count == 1)
        }
    }

    @Test func csvHasAHeaderAndALinePerEntry() async throws {
        try await withListedCache { cache, entries in
            let text = try written(cache, .csv, pieceSize: 16)

            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(lines.first == "hash,size,kind,collection,title,url,path,missing,contentType,addedAt,durationSeconds,sampleRate,channels,format")
            // The missing flag, the content type (empty when unknown), when the item was added, and a sound's facts.
            let ends = #/,false,[^,]*,\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ,[^,]*,[^,]*,[^,]*,[^,]*$/#
            #expect(lines.dropFirst().dropLast().allSatisfy { $0.contains(ends) }, "\(lines)")
            // The sound's facts that its metadata holds; none for the photo and the file.
            #expect(lines.filter { $0.contains("/b.wav,") }.allSatisfy { $0.hasSuffix("Z,1.5,,2,") }, "\(lines)")
            #expect(lines.filter { $0.contains("/a.jpg,") || $0.contains("http://h/c,") }.allSatisfy { $0.hasSuffix("Z,,,,") },
                    "\(lines)")
            #expect(lines.filter { $0.hasSuffix("Z,,,,") || $0.hasSuffix("Z,1.5,,2,") }.count == entries.count)
            #expect(lines.count == entries.count + 2)
            #expect(lines.last == "")
            #expect(text.contains(#","quote "" and"#))
            #expect(text.contains("http://ann@h/b.wav"))
            #expect(!text.contains("secret"))
        }
    }

    /// Output that cannot be written (a closed pipe, a full disk) stops the
    /// listing: its error comes out of the read, and nothing more is written.
    @Test(arguments: OutputFormat.allCases)
    func aFailingOutputStopsTheListing(format: OutputFormat) async throws {
        struct Refused: Error {}
        try await withListedCache { cache, _ in
            var calls = 0
            #expect(throws: Refused.self) {
                try cache.catalog.readEntries { forEach in
                    try EntryFormatter(cache: cache).write(forEach, as: format, pieceSize: 16, to: { _ in
                        calls += 1
                        if calls == 2 { throw Refused() }
                    })
                }
            }
            #expect(calls == 2)
        }
    }

    /// An entry whose file was removed, or cut short, is listed as missing
    /// in every format, and counted.
    @Test func anEntryWithoutItsFileIsListedAsMissing() async throws {
        try await withListedCache { cache, entries in
            let gone = try #require(entries.first { $0.sha256 == Self.hash("b") })
            let cut = try #require(entries.first { $0.sha256 == Self.hash("a") })
            try FileManager.default.removeItem(atPath: try #require(cache.path(for: gone.sha256)))
            #expect(truncate(try #require(cache.path(for: cut.sha256)), 1000) == 0)

            var counts: [Int] = []
            func written(_ format: OutputFormat) throws -> String {
                var text = ""
                try cache.catalog.readEntries { forEach in
                    counts.append(try EntryFormatter(cache: cache).write(forEach, as: format, to: { text += $0 }).missing)
                }
                return text
            }
            let json = try #require(try JSONSerialization.jsonObject(with: Data(try written(.json).utf8)) as? [[String: Any]])
            let csv = try written(.csv)
            let table = try written(.table)

            #expect(counts == [2, 2, 2])
            let missing = Dictionary(uniqueKeysWithValues: json.map { ($0["hash"] as? String ?? "", $0["missing"] as? Bool) })
            #expect(missing == [Self.hash("a"): true, Self.hash("b"): true, Self.hash("c"): false])
            #expect(csv.split(separator: "\n").filter { $0.contains(",true,") }.count == 2)
            #expect(table == #"""
                HASH             SIZE  KIND   COLLECTION  TITLE / URL
                aaaaaaaaaaaa  missing  photo  alps        Matterhorn, north face
                cccccccccccc  5.0 GiB  file   alps        quote " and\u{1B}[31m red
                bbbbbbbbbbbb  missing  sound  東京        http://ann@h/b.wav

                """#)
            let missingObjects = try cache.missingObjects()
            #expect(missingObjects.count == 2)
            let sizes = Dictionary(uniqueKeysWithValues: json.map { ($0["hash"] as? String ?? "", $0["size"] as? Int64 ?? -1) })
            #expect(missingObjects.bytes == (sizes[Self.hash("a")] ?? 0) + (sizes[Self.hash("b")] ?? 0))
            let stats = try StatsFormatter.render(try cache.catalog.stats(), missing: missingObjects, root: "/c", as: .table)
            #expect(stats.contains("objects                  3 (5.0 GiB); 2 of them (\(ByteSize.format(missingObjects.bytes))) with no file in the cache\n"))
            // How many items are of each kind.
            #expect(stats.contains("items                    3 (5.0 GiB): 1 photo, 1 sound, 1 file\n"), "\(stats)")
            let statsJSON = try StatsFormatter.render(try cache.catalog.stats(), missing: missingObjects, root: "/c", as: .json)
            let statsFields = try #require(try JSONSerialization.jsonObject(with: Data(statsJSON.utf8)) as? [String: Any])
            #expect(statsFields["missingBytes"] as? Int64 == missingObjects.bytes)
            #expect([statsFields["photoItems"], statsFields["soundItems"], statsFields["fileItems"]].map { $0 as? Int } == [1, 1, 1])
            #expect(!stats.contains("waiting to be recorded"))
            let waiting = try StatsFormatter.render(try cache.catalog.stats(), awaitingRecord: 4, root: "/c", as: .table)
            #expect(waiting.hasSuffix("waiting to be recorded   4 (stored; the next get records them)\n"))
        }
    }

    /// De-duplication saves nothing of an object without its file: `stats`
    /// counted its second and third items as bytes saved.
    @Test func bytesSavedByDeduplicationLeaveOutObjectsWithoutAFile() async throws {
        try await TemporaryDirectory.with { directory in
            // Given one object of 1,000 bytes behind three URLs, another of 300 behind two
            let cache = try MediaCache(root: directory.appending("cache"))
            try cache.catalog.record((0..<3).map {
                IngestRecord(url: "http://h/x\($0).jpg", collection: "alps", kind: .photo, title: nil,
                             sha256: Self.hash("e"), size: 1_000, contentType: "image/jpeg")
            } + (0..<2).map {
                IngestRecord(url: "http://h/y\($0).jpg", collection: "alps", kind: .photo, title: nil,
                             sha256: Self.hash("f"), size: 300, contentType: "image/jpeg")
            })
            for entry in try cache.catalog.entries() { try Self.placeFile(of: entry, in: cache) }
            func saved() throws -> (table: String, json: Int64?) {
                let stats = try cache.catalog.stats()
                let missing = try cache.missingObjects()
                let table = try StatsFormatter.render(stats, missing: missing, root: "/c", as: .table)
                let json = try StatsFormatter.render(stats, missing: missing, root: "/c", as: .json)
                let fields = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
                return (table, fields?["bytesSavedByDeduplication"] as? Int64)
            }
            #expect(try saved().json == 2_300)
            #expect(try saved().table.contains("saved by de-duplication  2.2 KiB\n"))

            // When the first object's file is removed
            try FileManager.default.removeItem(atPath: try #require(cache.path(for: Self.hash("e"))))

            // Then only the second's duplicate counts as saved
            #expect(try cache.missingObjects() == MissingObjects(count: 1, bytes: 1_000, itemBytes: 3_000))
            #expect(try saved().json == 300)
            #expect(try saved().table.contains("saved by de-duplication  300 B\n"))
        }
    }

    /// `stats` counts the partial downloads in `tmp/`: disk the store's
    /// figures leave out, and what the next run goes on from.
    @Test func statsCountsThePartialDownloads() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            let tmp = cache.store.temporaryDirectory
            #expect(cache.heldPartials() == HeldPartials())
            for shard in ["3", "a"] { try FileManager.default.createDirectory(atPath: "\(tmp)/\(shard)", withIntermediateDirectories: true) }
            let key = { (digit: Character) in String(repeating: digit, count: 40) }
            try Data(count: 100_000).write(to: URL(fileURLWithPath: "\(tmp)/3/\(key("3")).part"))
            try Data("http://h/1\n\"v\"\n\n\n".utf8).write(to: URL(fileURLWithPath: "\(tmp)/3/\(key("3")).part.validator"))
            try Data(count: 50).write(to: URL(fileURLWithPath: "\(tmp)/a/\(key("a")).part"))
            // Left at the top by an older version: a run still finds it.
            try Data(count: 1000).write(to: URL(fileURLWithPath: "\(tmp)/\(key("b")).part"))
            // A private download (its partial was another process's) and a finished
            // body not yet stored, that a killed run left: disk too, until the sweep.
            try Data(count: 70).write(to: URL(fileURLWithPath: "\(tmp)/a/\(key("a")).1-1.tmp"))
            try Data(count: 30).write(to: URL(fileURLWithPath: "\(tmp)/3/\(key("c")).part.1-2.done"))
            // Not named as mediafetch names one.
            try Data(count: 70).write(to: URL(fileURLWithPath: "\(tmp)/a/notes.part"))

            let partials = cache.heldPartials()
            #expect(partials.count == 5 && partials.resumable == 1 && partials.bytes == 101_150)
            let stats = try StatsFormatter.render(try cache.catalog.stats(), partials: partials, root: "/c", as: .table)
            #expect(stats.hasSuffix("partial downloads        5 (98.8 KiB in tmp/; 1 with the validator a resumed download needs)\n"), "\(stats)")
            let json = try StatsFormatter.render(try cache.catalog.stats(), partials: partials, root: "/c", as: .json)
            let fields = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            #expect(fields["partialDownloads"] as? Int == 5 && fields["partialBytes"] as? Int == 101_150 && fields["resumablePartials"] as? Int == 1)
            let none = try StatsFormatter.render(try cache.catalog.stats(), root: "/c", as: .table)
            #expect(!none.contains("partial"))
        }
    }

    /// A very long collection name runs into its title on its own row: the
    /// column is padded to 100 columns at most, and the other rows stay
    /// readable; a name within that is padded to, so a table written to a
    /// file lines up.
    @Test func aVeryLongCollectionNameDoesNotPushEveryTitleOffTheScreen() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            let long = String(repeating: "x", count: 5000)
            try cache.catalog.record([
                IngestRecord(url: "http://h/a.jpg", collection: "alps", kind: .photo, title: "Matterhorn",
                             sha256: Self.hash("a"), size: 1),
                IngestRecord(url: "http://h/b.jpg", collection: long, kind: .photo, title: "Eiger", sha256: Self.hash("b"), size: 1),
                IngestRecord(url: "http://h/c.jpg", collection: "Bratislava — staré mesto, čierne fotky a zvuky", kind: .photo,
                             title: "Dóm", sha256: Self.hash("c"), size: 1),
            ])
            for entry in try cache.catalog.entries() { try Self.placeFile(of: entry, in: cache) }

            let rows = try written(cache, .table, pieceSize: 1 << 16).split(separator: "\n").map(String.init)

            #expect(rows.count == 4)
            let alps = try #require(rows.first { $0.hasSuffix("Matterhorn") })
            #expect(alps == "aaaaaaaaaaaa   1 B  photo  " + "alps".padding(toLength: 100, withPad: " ", startingAt: 0) + "  Matterhorn")
            #expect(rows.contains { $0.hasSuffix(long + "  Eiger") })
            // The titles of the rows within the width start in one column.
            let dom = try #require(rows.first { $0.hasSuffix("Dóm") })
            #expect(dom.count - "Dóm".count == alps.count - "Matterhorn".count, "\(rows)")
        }
    }

    @Test func anEmptyListIsAnEmptyArrayOrJustAHeader() async throws {
        try await TemporaryDirectory.with { directory in
            let cache = try MediaCache(root: directory.appending("cache"))
            let json = try written(cache, .json, pieceSize: 1 << 16)
            #expect(json == "[]\n")
            #expect((try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [Any])?.isEmpty == true)
            #expect(try written(cache, .csv, pieceSize: 1 << 16) == EntryFormatter.csvHeader + "\n")
            #expect(try written(cache, .table, pieceSize: 1 << 16) == "HASH  SIZE  KIND  COLLECTION  TITLE / URL\n")
        }
    }
}

/// `list --failed` as a table.
@Suite struct FailureTableTests {
    /// A very long URL runs into its reason on its own row: the URL column is
    /// padded to 100 columns at most, and the other rows stay readable.
    @Test func aVeryLongURLDoesNotPushEveryReasonOffTheScreen() throws {
        let when = Date(timeIntervalSince1970: 1_795_000_000)
        let long = "http://h.test/" + String(repeating: "a", count: 300)
        let failures = [CatalogFailure(url: "http://h.test/a.jpg", message: "HTTP 404", failedAt: when, isCached: false),
                        CatalogFailure(url: long, message: "HTTP 410", failedAt: when, isCached: false)]
        var text = ""
        try FailureFormatter.write({ visit in try failures.forEach(visit) }, as: .table) { text += $0 }
        let rows = text.split(separator: "\n").map(String.init)
        #expect(rows.count == 3)
        // The short URL's reason starts at column 20 + 100 + 2 (two blanks between columns).
        let stamp = ISO8601DateFormatter().string(from: when)
        #expect(rows[1] == stamp + "  " + "http://h.test/a.jpg".padding(toLength: 100, withPad: " ", startingAt: 0) + "  HTTP 404")
        #expect(rows[2] == stamp + "  " + long + "  HTTP 410")
        #expect(rows[0].hasPrefix("FAILED AT") && rows[0].hasSuffix("REASON"))
    }

    /// On a terminal, the URL column narrows to leave the reasons room, a
    /// URL that would still wrap its row loses its middle, and a reason too
    /// long for its row goes on under itself in its column, in whole words:
    /// the demo's one failure took 83 columns, and wrapped at 80; cut at its
    /// end, a reason read "Failed to connect…" and said nothing of why.
    @Test func onATerminalAFailuresURLKeepsToItsRowAndItsReasonIsWhole() throws {
        let when = Date(timeIntervalSince1970: 1_795_000_000)
        let refused = "Failed to connect to 127.0.2.1 port 30713 after 0 ms: Couldn't connect to server (after 5 attempts)"
        let failures = [CatalogFailure(url: "http://127.0.0.1:38497/photos/missing.jpg", message: "HTTP 404 Not Found",
                                       failedAt: when, isCached: false),
                        CatalogFailure(url: "http://127.0.2.1:30713/albums/2026/night/IMG_0042.jpg", message: refused,
                                       failedAt: when, isCached: false)]
        func table(columns: Int?) throws -> (rows: [String], shortened: Int) {
            var text = ""
            let shortened = try FailureFormatter.write({ visit in try failures.forEach(visit) }, as: .table, columns: columns) { text += $0 }
            return (text.split(separator: "\n").map(String.init), shortened)
        }

        let fitted = try table(columns: 80)

        #expect(fitted.rows.allSatisfy { DisplayText.displayWidth($0) <= 80 }, "\(fitted.rows)")
        #expect(fitted.shortened == 2)
        // The URL column left the long reason a third of the row past the dates (20 columns):
        // the URLs keep their hosts and file names (at 40, the URLs had 20 and kept neither).
        #expect(fitted.rows[1].hasSuffix("  http://127.0.0.1:38497/…/missing.jpg  HTTP 404 Not Found"), "\(fitted.rows[1])")
        #expect(fitted.rows[2].contains("  http://127.0.2.1:") && fitted.rows[2].contains(":30713/…IMG_0042.jpg  Failed to connect to"),
                "\(fitted.rows[2])")
        // The rest of the reason is on the rows under it, in the reason's column, and none of it is lost.
        let reasonColumn = try #require(fitted.rows[1].range(of: "HTTP 404").map { fitted.rows[1].distance(from: fitted.rows[1].startIndex, to: $0.lowerBound) })
        let under = Array(fitted.rows.dropFirst(3))
        #expect(under.count >= 3 && under.allSatisfy { $0.prefix(reasonColumn).allSatisfy { $0 == " " } && $0.dropFirst(reasonColumn).first != " " },
                "\(fitted.rows)")
        #expect(([String(fitted.rows[2].dropFirst(reasonColumn))] + under.map { String($0.dropFirst(reasonColumn)) }).joined(separator: " ") == refused)
        #expect(!fitted.rows.joined().contains("…  ") && !fitted.rows.joined().hasSuffix("…"))
        // The demo's one failure: the URL keeps its host and file name.
        var demo = ""
        try FailureFormatter.write({ visit in try visit(failures[0]) }, as: .table, columns: 80) { demo += $0 }
        let row = try #require(demo.split(separator: "\n").last.map(String.init))
        #expect(DisplayText.displayWidth(row) <= 80 && row.contains("  http://127.0.0.1:38497/…") && row.contains("/missing.jpg  HTTP 404"),
                "\(row)")
        // Wide enough: as without a terminal, a row a failure.
        let whole = try table(columns: nil)
        #expect(whole.rows.count == 3)
        #expect(try table(columns: 400).rows == whole.rows && whole.shortened == 0)
        #expect(whole.rows[2].hasSuffix(refused))
        // Too narrow to leave a URL and a reason 20 columns each (64 in all): whole,
        // to wrap. Cut to 20, the URL lost its host, and its row wrapped all the same.
        #expect(try table(columns: 60) == whole)
        #expect(try table(columns: 64).shortened == 2)
    }

    /// On a terminal wide enough, the URL column is as wide as the longest
    /// URL, past 100, every row in line: a URL of 150 characters was cut to
    /// 100 on a terminal 250 wide (and shown whole, its reason pushed out of
    /// line with the others). Where it would not leave the reasons room, it
    /// is cut to the column.
    @Test func onAWideTerminalALongURLIsShownWhole() throws {
        let when = Date(timeIntervalSince1970: 1_795_000_000)
        let long = "http://h.test/albums/" + String(repeating: "b", count: 125) + ".jpg"
        let failures = [CatalogFailure(url: "http://h.test/a.jpg", message: "HTTP 404", failedAt: when, isCached: false),
                        CatalogFailure(url: long, message: "HTTP 410 Gone", failedAt: when, isCached: false)]
        func table(columns: Int) throws -> (rows: [String], shortened: Int) {
            var text = ""
            let shortened = try FailureFormatter.write({ visit in try failures.forEach(visit) }, as: .table, columns: columns) { text += $0 }
            return (text.split(separator: "\n").map(String.init), shortened)
        }
        let stamp = ISO8601DateFormatter().string(from: when)

        let wide = try table(columns: 250)
        #expect(wide.shortened == 0)
        #expect(wide.rows[1] == stamp + "  " + "http://h.test/a.jpg".padding(toLength: long.count, withPad: " ", startingAt: 0) + "  HTTP 404")
        #expect(wide.rows[2] == stamp + "  " + long + "  HTTP 410 Gone")

        // 150 columns leave the URL 128 past its reason: cut to the column, the reasons in line.
        let narrower = try table(columns: 150)
        #expect(narrower.shortened == 1)
        #expect(narrower.rows.allSatisfy { DisplayText.displayWidth($0) <= 150 }, "\(narrower.rows)")
        let reasonColumn = narrower.rows[1].range(of: "HTTP 404").map { narrower.rows[1].distance(from: narrower.rows[1].startIndex, to: $0.lowerBound) }
        let cutReasonColumn = narrower.rows[2].range(of: "HTTP 410").map { narrower.rows[2].distance(from: narrower.rows[2].startIndex, to: $0.lowerBound) }
        #expect(reasonColumn != nil && reasonColumn == cutReasonColumn, "\(narrower.rows)")
        #expect(narrower.rows[2].contains("…") && narrower.rows[2].hasSuffix(".jpg  HTTP 410 Gone"), "\(narrower.rows[2])")
    }

    /// A server's reason phrase may carry escape codes: CSV shows them as
    /// the table does, not as codes for the terminal it is read on; JSON
    /// keeps them, escaped its own way.
    @Test func aReasonsEscapeCodesAreShownInCSV() throws {
        let when = Date(timeIntervalSince1970: 1_795_000_000)
        let failures = [CatalogFailure(url: "http://h.test/esc", message: "HTTP 500 Bad \u{1B}[31mRED\u{1B}[0m\u{07} \"x\",y",
                                       failedAt: when, isCached: false)]
        var csv = ""
        try FailureFormatter.write({ visit in try failures.forEach(visit) }, as: .csv) { csv += $0 }
        #expect(!csv.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
        let stamp = ISO8601DateFormatter().string(from: when)
        #expect(csv == FailureFormatter.csvHeader + "\n"
                + "http://h.test/esc,\(stamp),\"HTTP 500 Bad \\u{1B}[31mRED\\u{1B}[0m\\u{7} \"\"x\"\",y\",false\n")
        var json = ""
        try FailureFormatter.write({ visit in try failures.forEach(visit) }, as: .json) { json += $0 }
        #expect(json.contains(#"\u001b[31mRED"#))
    }
}
