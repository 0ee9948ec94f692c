/// Images and sounds whose files open with text, read from a body's opening
/// for the page check (`PageInsteadOfMedia`): Netpbm (PBM, PGM, PPM and
/// PAM), XPM, XBM and AMR. Such a file is no page whatever its label says,
/// and a PPM at a `.jpg` URL is a photo still; but an error page may begin
/// with the same letters (`P5 500 Internal Server Error`), so each header is
/// read as its format writes it, field by field.
///
/// An opening may be cut anywhere (512 bytes of a body, or 32 of an answer
/// to a resume): a header well formed up to a cut counts, but only where
/// the body goes on past the opening (`whole` false). A whole body that
/// ends inside its header is no such file.
enum TextFormatMedia {
    /// Whether `bytes`, the first bytes of a body, open as one of these
    /// formats; `whole`: they are the whole body.
    static func opens(_ bytes: [UInt8], whole: Bool) -> Bool {
        var reader = HeaderReader(bytes)
        let verdict: Verdict
        if bytes.count >= 2, bytes[0] == UInt8(ascii: "P"), (0x31...0x37).contains(bytes[1]) {
            _ = reader.advance(by: 2)
            verdict = bytes[1] == UInt8(ascii: "7") ? pam(&reader) : netpbm(&reader, kind: bytes[1] - 0x30)
        } else {
            verdict = magic(&reader) ?? xbm(&reader)
        }
        switch verdict {
        case .yes: return true
        case .no: return false
        case .cut: return !whole
        }
    }

    /// What a header read so far says: it is one, it is not, or it was well
    /// formed up to the end of the opening.
    enum Verdict {
        case yes, no, cut
    }

    /// XPM's and AMR's openings, by their magic and what follows it; nil
    /// when `reader`'s bytes open with none of them.
    private static func magic(_ reader: inout HeaderReader) -> Verdict? {
        // (Most bodies are a JPEG's or an MP3's: no magic here begins with their first byte.)
        guard let first = reader.current, first == UInt8(ascii: "/") || first == UInt8(ascii: "!") || first == UInt8(ascii: "#") else {
            return nil
        }
        switch reader.take(oneOf: magics) {
        case .literal(let index): return rests[index](&reader)
        // (An opening shorter than the magic: a body of a few bytes.)
        case .cut: return .cut
        case .none: return nil
        }
    }

    /// The magics, and the readers of what follows each.
    private static let magics = ["/* XPM */", "! XPM2", "#!AMR-WB\n", "#!AMR\n", "#!AMR_MC1.0\n", "#!AMR-WB_MC1.0\n"]
    private static let rests: [@Sendable (inout HeaderReader) -> Verdict] = [xpm, xpm2, amrWideband, amr, { _ in .yes }, { _ in .yes }]

    /// P1–P6 after their two letters: a blank or comment before each of
    /// width, height and (but for the bitmaps, P1 and P4) the largest value;
    /// then the raster: any bytes after one blank for the binary formats,
    /// numbers, blanks and comments for the plain ones.
    private static func netpbm(_ reader: inout HeaderReader, kind: UInt8) -> Verdict {
        let fields = kind == 1 || kind == 4 ? 2 : 3
        for _ in 0..<fields {
            let separated = reader.skipBlanksAndComments()
            guard !reader.atEnd else { return .cut }
            guard separated, reader.skip(while: isDigit) > 0 else { return .no }
            guard !reader.atEnd else { return .cut }
        }
        guard let next = reader.current, isBlank(next) || next == UInt8(ascii: "#") else { return .no }
        guard kind <= 3 else { return .yes }
        while let byte = reader.current {
            if isDigit(byte) || isBlank(byte) {
                reader.advance()
            } else if byte == UInt8(ascii: "#") {
                reader.skipToLineEnd()
            } else {
                return .no
            }
        }
        return .yes
    }

    /// PAM after `P7`: a line break, then lines of a keyword and its value
    /// (`WIDTH 2`, `TUPLTYPE RGB`) or comments, up to `ENDHDR`.
    private static func pam(_ reader: inout HeaderReader) -> Verdict {
        guard reader.take(where: isLineBreak) != nil else { return reader.atEnd ? .cut : .no }
        let keywords = ["WIDTH", "HEIGHT", "DEPTH", "MAXVAL", "TUPLTYPE", "ENDHDR"]
        while true {
            _ = reader.skipBlanksAndComments()
            guard !reader.atEnd else { return .cut }
            let word = reader.word { (0x41...0x5A).contains($0) }
            if reader.atEnd { return keywords.contains { $0.utf8.starts(with: word) } ? .cut : .no }
            guard let keyword = keywords.first(where: { $0.utf8.elementsEqual(word) }) else { return .no }
            if keyword == "ENDHDR" { return .yes }
            guard reader.skip(while: isSpaceOrTab) > 0 else { return reader.atEnd ? .cut : .no }
            guard !reader.atEnd else { return .cut }
            if keyword == "TUPLTYPE" {
                reader.skipToLineEnd()
            } else {
                guard reader.skip(while: isDigit) > 0 else { return .no }
                reader.skip(while: isSpaceOrTab)
            }
            guard let byte = reader.current else { return .cut }
            guard isLineBreak(byte) else { return .no }
        }
    }

    /// XPM (version 3) after `/* XPM */`: blanks, then its C array (`static char *name[] = {`).
    private static func xpm(_ reader: inout HeaderReader) -> Verdict {
        reader.skip(while: isBlank)
        guard !reader.atEnd else { return .cut }
        switch reader.take(oneOf: ["static", "char"]) {
        case .literal: return .yes
        case .cut: return .cut
        case .none: return .no
        }
    }

    /// XPM2 after `! XPM2`: a line break, then its values (width, height, colours, characters a pixel).
    private static func xpm2(_ reader: inout HeaderReader) -> Verdict {
        guard reader.take(where: isLineBreak) != nil else { return reader.atEnd ? .cut : .no }
        reader.skip(while: isBlank)
        guard let byte = reader.current else { return .cut }
        return isDigit(byte) ? .yes : .no
    }

    /// XBM: C comments and blanks (GIMP wrote one first), then `#define`,
    /// a name that ends in `_width` (ImageMagick keeps the file's, `-` and
    /// all), and a number.
    private static func xbm(_ reader: inout HeaderReader) -> Verdict {
        reader.skip(while: isBlank)
        while true {
            let comment = reader.take("/*")
            if comment == .cut { return .cut }
            guard comment == .matched else { break }
            guard reader.skip(past: Array("*/".utf8)) else { return .cut }
            reader.skip(while: isBlank)
        }
        switch reader.take("#define") {
        case .matched: break
        case .cut: return .cut
        case .mismatched: return .no
        }
        guard reader.skip(while: isSpaceOrTab) > 0 else { return reader.atEnd ? .cut : .no }
        let name = reader.word { $0 > 0x20 && $0 != 0x7F }
        guard !reader.atEnd else { return .cut }
        guard name.count > 6, name.suffix(6).elementsEqual("_width".utf8) else { return .no }
        guard reader.skip(while: isSpaceOrTab) > 0 else { return .no }
        guard let byte = reader.current else { return .cut }
        return isDigit(byte) ? .yes : .no
    }

    /// AMR (narrowband) frames after the magic, each by its header: a
    /// frame type with padding bits clear, and the length that type has.
    private static func amr(_ reader: inout HeaderReader) -> Verdict {
        amrFrames(&reader, lengths: [0: 13, 1: 14, 2: 16, 3: 18, 4: 20, 5: 21, 6: 27, 7: 32, 8: 6, 15: 1])
    }

    /// AMR-WB frames after the magic, as `amr` reads them.
    private static func amrWideband(_ reader: inout HeaderReader) -> Verdict {
        amrFrames(&reader, lengths: [0: 18, 1: 24, 2: 33, 3: 37, 4: 41, 5: 47, 6: 51, 7: 59, 8: 61, 9: 6, 14: 1, 15: 1])
    }

    /// `lengths`: each frame type's frame, its header byte included. A file
    /// of no frame, or of whole frames, is one, and so is one cut short
    /// after a whole frame (an opening, or a file cut off); a first frame
    /// cut by the end is one only where the opening was cut (`404 Not Found`
    /// after the magic opens a frame of 27 bytes).
    private static func amrFrames(_ reader: inout HeaderReader, lengths: [UInt8: Int]) -> Verdict {
        var frames = 0
        while let header = reader.current {
            guard header & 0x83 == 0, let length = lengths[header >> 3 & 0x0F] else { return .no }
            guard reader.advance(by: length) else { return frames > 0 ? .yes : .cut }
            frames += 1
        }
        return .yes
    }

    private static let isDigit = HeaderReader.isDigit
    private static let isBlank = HeaderReader.isBlank
    private static let isSpaceOrTab = HeaderReader.isSpaceOrTab
    private static let isLineBreak = HeaderReader.isLineBreak
}

/// A cursor over a header's bytes.
struct HeaderReader {
    let bytes: [UInt8]
    private(set) var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index >= bytes.count }
    var current: UInt8? { atEnd ? nil : bytes[index] }

    mutating func advance() { index += 1 }

    /// Moves on `count` bytes; false (at the end) when fewer are left.
    mutating func advance(by count: Int) -> Bool {
        index += count
        guard index <= bytes.count else {
            index = bytes.count
            return false
        }
        return true
    }

    /// How `take` found a literal: all of it, a different byte, or the end first.
    enum Match {
        case matched, mismatched, cut
    }

    /// Takes `literal` if the bytes go on with it; moves on only when they do.
    mutating func take(_ literal: String) -> Match {
        var at = index
        for byte in literal.utf8 {
            guard at < bytes.count else { return .cut }
            guard bytes[at] == byte else { return .mismatched }
            at += 1
        }
        index = at
        return .matched
    }

    /// Which of several literals `take(oneOf:)` found: the first the bytes
    /// go on with, none, or the end of the bytes inside one first.
    enum Choice {
        case literal(Int), none, cut
    }

    /// Takes the first of `literals` the bytes go on with (moving on only then).
    mutating func take(oneOf literals: [String]) -> Choice {
        for (index, literal) in literals.enumerated() {
            switch take(literal) {
            case .matched: return .literal(index)
            case .cut: return .cut
            case .mismatched: continue
            }
        }
        return .none
    }

    /// Takes one byte that `predicate` accepts; nil (not moving) otherwise.
    mutating func take(where predicate: (UInt8) -> Bool) -> UInt8? {
        guard let byte = current, predicate(byte) else { return nil }
        index += 1
        return byte
    }

    /// Skips the bytes `predicate` accepts; how many it skipped.
    @discardableResult
    mutating func skip(while predicate: (UInt8) -> Bool) -> Int {
        let start = index
        while let byte = current, predicate(byte) { index += 1 }
        return index - start
    }

    /// The bytes `predicate` accepts, taken.
    mutating func word(_ predicate: (UInt8) -> Bool) -> ArraySlice<UInt8> {
        let start = index
        skip(while: predicate)
        return bytes[start..<index]
    }

    /// Skips up to and past `end`; false (at the end) when it does not come.
    mutating func skip(past end: [UInt8]) -> Bool {
        while !atEnd {
            if bytes[index...].starts(with: end) {
                index += end.count
                return true
            }
            index += 1
        }
        return false
    }

    /// Skips blanks and `#` comments (to their line's end); whether it skipped any.
    mutating func skipBlanksAndComments() -> Bool {
        let start = index
        while let byte = current {
            if Self.isBlank(byte) {
                index += 1
            } else if byte == UInt8(ascii: "#") {
                skipToLineEnd()
            } else {
                break
            }
        }
        return index > start
    }

    /// Skips what is left of the line (a comment), up to its line break.
    mutating func skipToLineEnd() {
        skip { !Self.isLineBreak($0) }
    }

    static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
    /// Space, tab, line breaks, vertical tab, form feed (C's `isspace`).
    static func isBlank(_ byte: UInt8) -> Bool { [0x20, 0x09, 0x0A, 0x0D, 0x0B, 0x0C].contains(byte) }
    static func isSpaceOrTab(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
    static func isLineBreak(_ byte: UInt8) -> Bool { byte == 0x0A || byte == 0x0D }
}
