import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one spelling of a host, as libcurl reads it: an
/// IPv4 address written as numbers in another form (`127.1`, `0x7f.0.0.1`,
/// `0177.0.0.1`, `2130706433`) is `127.0.0.1`, the address libcurl connects
/// to and names in `Host:`; an IPv6 literal is in RFC 5952's form, the
/// address libcurl connects to (`[0:0:0:0:0:0:0:1]` is `[::1]`,
/// `[::FFFF:7F00:1]` is `[::ffff:127.0.0.1]`, where libcurl would name it
/// as written).
/// A name beyond ASCII (an IDN) is in its ASCII form, each such label
/// mapped as IDNA maps it (small letters, NFC) and then Punycode
/// (`Bücher.example` is `xn--bcher-kva.example`), which is what libcurl
/// looks up and sends. (A label IDNA 2008 refuses for its context rules,
/// on joiners or right-to-left text, is looked up so too, and fails as a
/// name that does not resolve, where libcurl would refuse to convert it.)
/// A name with a label that holds anything but letters, marks and digits
/// after that mapping, or anything IDNA maps further (symbols, full-width
/// letters, ẞ), stays as written, for libcurl to convert. So do numbers
/// that are no address (`256.1.1.1`, five parts) and a literal with a zone
/// (`[fe80::1%25eth0]`).
public enum HostSpelling {
    /// `host` (its ASCII letters small) in its one spelling, or nil when it
    /// is spelt so already, or is left as written. Cheap for most hosts (every
    /// URL of a list is looked at): a name in ASCII, and an address in dotted
    /// decimal, are known as they are without being copied or parsed.
    static func spelled(_ host: some Collection<UInt8>) -> [UInt8]? {
        guard let first = host.first else { return nil }
        let spelled: [UInt8]?
        if first == UInt8(ascii: "[") {
            spelled = ipv6(Array(host))
        } else if host.contains(where: { $0 >= 0x80 }) {
            spelled = idn(Array(host))
        } else if (0x30...0x39).contains(first), !isDottedDecimal(host) {
            spelled = ipv4(Array(host))
        } else {
            spelled = nil
        }
        guard let spelled, !spelled.elementsEqual(host) else { return nil }
        return spelled
    }

    /// `host` (a URL's, without its port) in its one spelling: its ASCII
    /// letters small, and spelt as `spelled` spells it.
    public static func key(_ host: some Collection<UInt8>) -> [UInt8] {
        let small = host.map(URLSpelling.lowered)
        return HostSpelling.spelled(small) ?? small
    }

    /// Four numbers of 0 to 255 in decimal, without leading zeros, between dots.
    private static func isDottedDecimal(_ host: some Collection<UInt8>) -> Bool {
        var parts = 0, value = 0, digits = 0
        for byte in host {
            if byte == UInt8(ascii: ".") {
                guard digits > 0 else { return false }
                parts += 1
                value = 0
                digits = 0
            } else if (0x30...0x39).contains(byte) {
                // A leading zero is octal to libcurl.
                if digits == 1, value == 0 { return false }
                value = value * 10 + Int(byte - 0x30)
                digits += 1
                guard value <= 255 else { return false }
            } else {
                return false
            }
        }
        return parts == 3 && digits > 0
    }

    /// `host` with each label beyond ASCII in its ASCII form; nil when a
    /// label is not valid UTF-8 or holds what `asciiLabel` leaves to libcurl.
    static func idn(_ host: [UInt8]) -> [UInt8]? {
        var labels: [String] = []
        for label in host.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false) {
            guard label.contains(where: { $0 >= 0x80 }) else {
                labels.append(String(decoding: label, as: UTF8.self))
                continue
            }
            guard let text = String(validating: label, as: UTF8.self), let ascii = asciiLabel(text) else { return nil }
            labels.append(ascii)
        }
        return Array(labels.joined(separator: ".").utf8)
    }

    /// `label` (beyond ASCII) in small letters and NFC, as `xn--` and its
    /// Punycode (or as it is, if that mapping leaves it ASCII: the Kelvin
    /// sign is `k`); nil when, so mapped, it holds anything but letters,
    /// marks, digits and `-`, or anything IDNA would map further (a
    /// character case folding or NFKC changes, such as ẞ, which IDNA makes
    /// `ss`; one it drops, such as a variation selector: `ß` and `ς` are
    /// kept, as IDNA 2008 keeps them), begins or ends with `-`, or would be
    /// over 63 bytes (looked at before encoding, whose time grows with the
    /// square of the label's length).
    static func asciiLabel(_ label: String) -> String? {
        guard !label.unicodeScalars.contains("\u{1E9E}") else { return nil }
        let mapped = label.lowercased().precomposedStringWithCanonicalMapping
        guard mapped.unicodeScalars.count <= 63, mapped.precomposedStringWithCompatibilityMapping == mapped,
              !mapped.hasPrefix("-"), !mapped.hasSuffix("-"), mapped.unicodeScalars.allSatisfy(isLabelScalar) else { return nil }
        if mapped.unicodeScalars.allSatisfy(\.isASCII) { return mapped }
        // Each scalar beyond ASCII takes a digit at least, beside `xn--` and the ASCII ones.
        guard mapped.unicodeScalars.count <= 59, let encoded = Punycode.encoded(Array(mapped.unicodeScalars)) else { return nil }
        let ascii = "xn--" + encoded
        return ascii.utf8.count <= 63 ? ascii : nil
    }

    private static func isLabelScalar(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII {
            return (0x61...0x7A).contains(scalar.value) || (0x30...0x39).contains(scalar.value) || scalar == "-"
        }
        let properties = scalar.properties
        // What IDNA's mapping (NFKC with case folding, less the default-ignorable)
        // would change; NFKC is looked at on the whole label. IDNA 2008 keeps ß and ς.
        if properties.changesWhenCaseFolded || properties.isDefaultIgnorableCodePoint,
           scalar != "\u{DF}", scalar != "\u{3C2}" { return false }
        switch properties.generalCategory {
        case .lowercaseLetter, .otherLetter, .modifierLetter, .nonspacingMark, .spacingMark, .decimalNumber: return true
        default: return false
        }
    }

    /// `host` with each `xn--` label a person reads as its letters, where
    /// spelling those letters gives that label back (so what is shown is
    /// the same host); other labels as they are.
    public static func readable(_ host: Substring) -> String {
        guard host.contains("xn--") else { return String(host) }
        return host.split(separator: ".", omittingEmptySubsequences: false).map { label -> String in
            guard label.hasPrefix("xn--"), label.utf8.count <= 63, let scalars = Punycode.decoded(label.dropFirst(4)),
                  scalars.contains(where: { !$0.isASCII }) else { return String(label) }
            var text = ""
            text.unicodeScalars.append(contentsOf: scalars)
            return asciiLabel(text) == String(label) ? text : String(label)
        }.joined(separator: ".")
    }

    /// Dotted decimal for one to four parts, each decimal, octal after a
    /// leading `0`, or hexadecimal after `0x`; the last part fills the bytes
    /// the others leave (as `inet_aton` and libcurl read them). Nil when
    /// `host` is not such numbers.
    static func ipv4(_ host: [UInt8]) -> [UInt8]? {
        let parts = host.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return nil }
        var values: [UInt64] = []
        for part in parts {
            guard let value = number(part) else { return nil }
            values.append(value)
        }
        // Every part but the last is a byte; the last fills the rest.
        guard values.dropLast().allSatisfy({ $0 <= 255 }), let last = values.last,
              last < (UInt64(1) << (8 * UInt64(5 - values.count))) else { return nil }
        var address = last
        for (index, value) in values.dropLast().enumerated() {
            address |= value << (8 * UInt64(3 - index))
        }
        let text = (0..<4).map { String((address >> (8 * UInt64(3 - $0))) & 0xFF) }.joined(separator: ".")
        return Array(text.utf8)
    }

    /// A part's value: `0x` and hex digits, `0` and octal digits, or decimal
    /// digits; nil when it is none of them or past 2^32.
    private static func number(_ part: ArraySlice<UInt8>) -> UInt64? {
        var digits = part[...]
        var radix: UInt64 = 10
        if digits.count >= 2, digits.first == UInt8(ascii: "0"),
           digits.dropFirst().first == UInt8(ascii: "x") || digits.dropFirst().first == UInt8(ascii: "X") {
            radix = 16
            digits = digits.dropFirst(2)
        } else if digits.count >= 2, digits.first == UInt8(ascii: "0") {
            radix = 8
            digits = digits.dropFirst()
        }
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard let digit = URLSpelling.hexValue(byte).map(UInt64.init), digit < radix else { return nil }
            value = value * radix + digit
            guard value <= UInt64(UInt32.max) else { return nil }
        }
        return value
    }

    /// `[address]` in RFC 5952's form (the C library's `inet_ntop`), or nil
    /// when the brackets hold no IPv6 address, or a zone.
    static func ipv6(_ literal: [UInt8]) -> [UInt8]? {
        guard literal.count > 2, literal.last == UInt8(ascii: "]"), !literal.contains(UInt8(ascii: "%")) else { return nil }
        let inside = String(decoding: literal.dropFirst().dropLast(), as: UTF8.self)
        var address = in6_addr()
        guard inet_pton(AF_INET6, inside, &address) == 1 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { return nil }
        let spelled = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return [UInt8(ascii: "[")] + spelled + [UInt8(ascii: "]")]
    }
}

/// Punycode (RFC 3492): Unicode labels in the letters, digits and `-` that
/// host names may hold.
enum Punycode {
    private static let base: UInt32 = 36, tMin: UInt32 = 1, tMax: UInt32 = 26, skew: UInt32 = 38, damp: UInt32 = 700
    private static let initialBias: UInt32 = 72, initialN: UInt32 = 128

    private static func adapt(_ delta: UInt32, _ count: UInt32, first: Bool) -> UInt32 {
        var delta = first ? delta / damp : delta / 2
        delta += delta / count
        var k: UInt32 = 0
        while delta > ((base - tMin) * tMax) / 2 {
            delta /= base - tMin
            k += base
        }
        return k + (base - tMin + 1) * delta / (delta + skew)
    }

    private static func digit(_ value: UInt32) -> Character {
        Character(Unicode.Scalar(value < 26 ? value + 0x61 : value - 26 + 0x30) ?? "a")
    }

    private static func value(of character: Character) -> UInt32? {
        guard let ascii = character.asciiValue else { return nil }
        switch ascii {
        case 0x61...0x7A: return UInt32(ascii - 0x61)
        case 0x41...0x5A: return UInt32(ascii - 0x41)
        case 0x30...0x39: return UInt32(ascii - 0x30) + 26
        default: return nil
        }
    }

    /// The Punycode of `input` (without `xn--`); nil on overflow.
    static func encoded(_ input: [Unicode.Scalar]) -> String? {
        var output = String(String.UnicodeScalarView(input.filter(\.isASCII)))
        let basic = UInt32(output.unicodeScalars.count)
        var handled = basic
        if basic > 0 { output.append("-") }
        var n = initialN, delta: UInt32 = 0, bias = initialBias
        while handled < input.count {
            guard let next = input.map(\.value).filter({ $0 >= n }).min() else { return nil }
            let (product, overflow) = (next - n).multipliedReportingOverflow(by: handled + 1)
            guard !overflow, delta <= UInt32.max - product else { return nil }
            delta += product
            n = next
            for scalar in input {
                if scalar.value < n {
                    guard delta < UInt32.max else { return nil }
                    delta += 1
                }
                if scalar.value == n {
                    var q = delta
                    var k = base
                    while true {
                        let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                        if q < t { break }
                        output.append(digit(t + (q - t) % (base - t)))
                        q = (q - t) / (base - t)
                        k += base
                    }
                    output.append(digit(q))
                    bias = adapt(delta, handled + 1, first: handled == basic)
                    delta = 0
                    handled += 1
                }
            }
            delta += 1
            n += 1
        }
        return output
    }

    /// The scalars `input` (without `xn--`) encodes; nil when it is no Punycode.
    static func decoded(_ input: Substring) -> [Unicode.Scalar]? {
        var output: [Unicode.Scalar] = []
        var rest = input[...]
        if let dash = input.lastIndex(of: "-") {
            for character in input[..<dash] {
                guard let scalar = character.unicodeScalars.first, scalar.isASCII else { return nil }
                output.append(scalar)
            }
            rest = input[input.index(after: dash)...]
        }
        var n = initialN, i: UInt32 = 0, bias = initialBias
        var characters = rest.makeIterator()
        var pending = characters.next()
        while pending != nil {
            let oldI = i
            var w: UInt32 = 1
            var k = base
            while true {
                guard let character = pending, let digit = value(of: character) else { return nil }
                pending = characters.next()
                let (product, overflow) = digit.multipliedReportingOverflow(by: w)
                guard !overflow, i <= UInt32.max - product else { return nil }
                i += product
                let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                if digit < t { break }
                let (weight, wOverflow) = w.multipliedReportingOverflow(by: base - t)
                guard !wOverflow else { return nil }
                w = weight
                k += base
            }
            let count = UInt32(output.count + 1)
            bias = adapt(i - oldI, count, first: oldI == 0)
            guard i / count <= UInt32.max - n else { return nil }
            n += i / count
            i %= count
            guard let scalar = Unicode.Scalar(n) else { return nil }
            output.insert(scalar, at: Int(i))
            i += 1
        }
        return output
    }
}
