import Foundation

/// A JSON value as `list --format json` writes it. A number keeps the text
/// it was given in, so it is written back exactly (an id of 20 digits, a
/// fraction, an exponent), and `true` stays apart from `1`.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number as JSON text, e.g. `42`, `-0.5`, `1e-05`.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// An integer.
    public static func integer(_ value: Int64) -> JSONValue { .number(String(value)) }

    /// An integer.
    public static func integer(_ value: Int) -> JSONValue { .number(String(value)) }

    /// A fraction, in the shortest text that reads back as the same Double
    /// (`0.25`, `1e-05`); null when it is not finite, as JSON has no such number.
    public static func number(_ value: Double) -> JSONValue { value.isFinite ? .number("\(value)") : .null }

    /// The members of a JSON object text; nil when `text` is not one.
    public static func members(ofObject text: String) -> [String: JSONValue]? {
        var parser = JSONParser(Array(text.utf8))
        guard case .object(let members)? = parser.parseDocument() else { return nil }
        return members
    }
}

/// Reads JSON text (RFC 8259) into `JSONValue`s; nil for anything that is
/// not exactly one JSON value. Nesting stops at `maxDepth`, so a hostile
/// text cannot exhaust the stack.
struct JSONParser {
    static let maxDepth = 256
    private let bytes: [UInt8]
    private var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() -> JSONValue? {
        guard let value = parseValue(depth: 0) else { return nil }
        skipSpace()
        return position == bytes.count ? value : nil
    }

    private mutating func skipSpace() {
        while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
    }

    private mutating func take(_ literal: String) -> Bool {
        let expected = Array(literal.utf8)
        guard bytes.count - position >= expected.count, bytes[position..<position + expected.count].elementsEqual(expected) else {
            return false
        }
        position += expected.count
        return true
    }

    private mutating func parseValue(depth: Int) -> JSONValue? {
        skipSpace()
        guard position < bytes.count, depth < Self.maxDepth else { return nil }
        switch bytes[position] {
        case UInt8(ascii: "{"): return parseObject(depth: depth)
        case UInt8(ascii: "["): return parseArray(depth: depth)
        case UInt8(ascii: "\""): return parseString().map(JSONValue.string)
        case UInt8(ascii: "t"): return take("true") ? .bool(true) : nil
        case UInt8(ascii: "f"): return take("false") ? .bool(false) : nil
        case UInt8(ascii: "n"): return take("null") ? .null : nil
        default: return parseNumber().map(JSONValue.number)
        }
    }

    private mutating func parseObject(depth: Int) -> JSONValue? {
        position += 1
        var members: [String: JSONValue] = [:]
        skipSpace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            return .object(members)
        }
        while true {
            skipSpace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\""), let key = parseString() else { return nil }
            skipSpace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { return nil }
            position += 1
            guard let value = parseValue(depth: depth + 1) else { return nil }
            members[key] = value
            skipSpace()
            guard position < bytes.count else { return nil }
            defer { position += 1 }
            if bytes[position] == UInt8(ascii: "}") { return .object(members) }
            guard bytes[position] == UInt8(ascii: ",") else { return nil }
        }
    }

    private mutating func parseArray(depth: Int) -> JSONValue? {
        position += 1
        var elements: [JSONValue] = []
        skipSpace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
        }
        while true {
            guard let element = parseValue(depth: depth + 1) else { return nil }
            elements.append(element)
            skipSpace()
            guard position < bytes.count else { return nil }
            defer { position += 1 }
            if bytes[position] == UInt8(ascii: "]") { return .array(elements) }
            guard bytes[position] == UInt8(ascii: ",") else { return nil }
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, kept as text.
    private mutating func parseNumber() -> String? {
        let start = position
        func digits() -> Int {
            let first = position
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
            return position - first
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "-") { position += 1 }
        let integerStart = position
        let integerDigits = digits()
        guard integerDigits > 0, integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else { return nil }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard digits() > 0 else { return nil }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard digits() > 0 else { return nil }
        }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    /// A string literal at `position` (its opening quote), unescaped.
    private mutating func parseString() -> String? {
        position += 1
        var text: [UInt8] = []
        while position < bytes.count {
            let byte = bytes[position]
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(validating: text, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard position < bytes.count else { return nil }
                let escaped = bytes[position]
                position += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escaped)
                case UInt8(ascii: "b"): text.append(0x08)
                case UInt8(ascii: "f"): text.append(0x0C)
                case UInt8(ascii: "n"): text.append(0x0A)
                case UInt8(ascii: "r"): text.append(0x0D)
                case UInt8(ascii: "t"): text.append(0x09)
                case UInt8(ascii: "u"):
                    guard var code = parseHex4() else { return nil }
                    if (0xD800..<0xDC00).contains(code) {
                        // A high surrogate must be followed by its low half.
                        guard take("\\u"), let low = parseHex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { return nil }
                    text.append(contentsOf: scalar.utf8)
                default: return nil
                }
            case ..<0x20:
                return nil
            default:
                text.append(byte)
            }
        }
        return nil
    }

    private mutating func parseHex4() -> UInt32? {
        guard bytes.count - position >= 4 else { return nil }
        var value: UInt32 = 0
        for byte in bytes[position..<position + 4] {
            guard let digit = Character(Unicode.Scalar(byte)).hexDigitValue else { return nil }
            value = value << 4 | UInt32(digit)
        }
        position += 4
        return value
    }
}

/// Writes JSON laid out for people: two spaces an indent level, `"key" : value`,
/// keys sorted by Unicode code point (`Z` before `a`, `track10` before
/// `track2`), slashes and non-ASCII text left as they are. Written by hand
/// because `JSONSerialization` took over 100 µs an entry (locale-aware key
/// sorting and bridging every value), 13 s for a list of 100,000.
enum JSONText {
    /// `value` as text, its first line at the current position and the
    /// following ones indented by `level` levels.
    static func write(_ value: JSONValue, level: Int = 0, into text: inout String) {
        emit(value, level: level, into: &text)
    }

    /// `value` on one line, with no spaces: `{"a":1,"b":[true,null]}`.
    static func writeCompact(_ value: JSONValue, into text: inout String) {
        emit(value, level: nil, into: &text)
    }

    /// Both layouts: indented at `level`, or on one line when it is nil.
    private static func emit(_ value: JSONValue, level: Int?, into text: inout String) {
        let inner = level.map { $0 + 1 }
        switch value {
        case .null: text += "null"
        case .bool(let flag): text += flag ? "true" : "false"
        case .number(let number): text += number
        case .string(let string): writeString(string, into: &text)
        case .array(let elements):
            writeContainer("[", "]", elements, level: level, into: &text) { element, text in
                emit(element, level: inner, into: &text)
            }
        case .object(let members):
            writeContainer("{", "}", members.sorted { $0.key < $1.key }, level: level, into: &text) { member, text in
                writeString(member.key, into: &text)
                text += level == nil ? ":" : " : "
                emit(member.value, level: inner, into: &text)
            }
        }
    }

    /// `open`, the items separated by commas (each on a line of its own,
    /// indented, unless `level` is nil), `close`; an empty one is `[]` or `{}`.
    private static func writeContainer<Item>(_ open: String, _ close: String, _ items: [Item], level: Int?,
                                             into text: inout String, item: (Item, inout String) -> Void) {
        guard let level, !items.isEmpty else {
            text += open
            for (index, element) in items.enumerated() {
                if index > 0 { text += "," }
                item(element, &text)
            }
            text += close
            return
        }
        let indent = String(repeating: "  ", count: level + 1)
        text += open + "\n"
        for (index, element) in items.enumerated() {
            text += index > 0 ? ",\n" + indent : indent
            item(element, &text)
        }
        text += "\n" + String(repeating: "  ", count: level) + close
    }

    /// A string literal: quotes, backslashes and U+0000 to U+001F escaped,
    /// as JSON requires (DEL and other characters are written as they are).
    /// Works on UTF-8 bytes: every byte of a multi-byte character is 0x80 or
    /// above, so none of them is ever taken for one to escape.
    static func writeString(_ string: String, into text: inout String) {
        text += "\""
        guard string.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
            // The usual case: nothing to escape.
            text += string
            text += "\""
            return
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(string.utf8.count + 16)
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes += [UInt8(ascii: "\\"), byte]
            case UInt8(ascii: "\n"): bytes += Array("\\n".utf8)
            case UInt8(ascii: "\r"): bytes += Array("\\r".utf8)
            case UInt8(ascii: "\t"): bytes += Array("\\t".utf8)
            case 0x08: bytes += Array("\\b".utf8)
            case 0x0C: bytes += Array("\\f".utf8)
            case ..<0x20:
                let hex = String(byte, radix: 16)
                bytes += Array(("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).utf8)
            default: bytes.append(byte)
            }
        }
        text += String(decoding: bytes, as: UTF8.self)
        text += "\""
    }
}
