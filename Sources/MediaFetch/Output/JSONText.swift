import Foundation

/// A JSON value as `list --format json` writes it. Item metadata is decoded
/// into it with `JSONDecoder`, which keeps `true` apart from `1`.
public enum JSONValue: Sendable, Equatable, Decodable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// The members of a JSON object text; nil when `text` is not one.
    public static func members(ofObject text: String) -> [String: JSONValue]? {
        guard case .object(let members)? = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else {
            return nil
        }
        return members
    }
}

/// Writes JSON laid out for people: two spaces an indent level, `"key" : value`,
/// keys sorted, slashes and non-ASCII text left as they are. Written by hand
/// because `JSONSerialization` took over 100 µs an entry (locale-aware key
/// sorting and bridging every value), 13 s for a list of 100,000.
enum JSONText {
    /// `value` as text, its first line at the current position and the
    /// following ones indented by `level` levels.
    static func write(_ value: JSONValue, level: Int = 0, into text: inout String) {
        switch value {
        case .null: text += "null"
        case .bool(let flag): text += flag ? "true" : "false"
        case .integer(let number): text += String(number)
        case .number(let number): text += number.isFinite ? "\(number)" : "null"
        case .string(let string): writeString(string, into: &text)
        case .array(let elements):
            guard !elements.isEmpty else {
                text += "[]"
                return
            }
            text += "[\n"
            for (index, element) in elements.enumerated() {
                if index > 0 { text += ",\n" }
                indent(level + 1, into: &text)
                write(element, level: level + 1, into: &text)
            }
            text += "\n"
            indent(level, into: &text)
            text += "]"
        case .object(let members):
            guard !members.isEmpty else {
                text += "{}"
                return
            }
            text += "{\n"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { text += ",\n" }
                indent(level + 1, into: &text)
                writeString(key, into: &text)
                text += " : "
                // The key was taken from `members`.
                write(members[key] ?? .null, level: level + 1, into: &text)
            }
            text += "\n"
            indent(level, into: &text)
            text += "}"
        }
    }

    private static func indent(_ level: Int, into text: inout String) {
        text += String(repeating: "  ", count: level)
    }

    /// A string literal: quotes, backslashes and control characters escaped.
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
