#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one spelling of a host that is an address, as libcurl reads it: an
/// IPv4 address written as numbers in another form (`127.1`, `0x7f.0.0.1`,
/// `0177.0.0.1`, `2130706433`) is `127.0.0.1`, the address libcurl connects
/// to and names in `Host:`; an IPv6 literal is in RFC 5952's form
/// (`[0:0:0:0:0:0:0:1]` is `[::1]`, `[::FFFF:7F00:1]` is `[::ffff:127.0.0.1]`).
/// A name, numbers that are no address (`256.1.1.1`, five parts), and a
/// literal with a zone (`[fe80::1%25eth0]`) stay as written.
enum HostSpelling {
    /// `host` (its ASCII letters small) in its one spelling, or nil when it
    /// is spelt so already or is not an address. Cheap for a name: only a
    /// host that begins with a digit or `[` is looked at further.
    static func spelled(_ host: [UInt8]) -> [UInt8]? {
        guard let first = host.first else { return nil }
        let spelled: [UInt8]?
        if first == UInt8(ascii: "[") {
            spelled = ipv6(host)
        } else if (0x30...0x39).contains(first) {
            spelled = ipv4(host)
        } else {
            spelled = nil
        }
        return spelled == host ? nil : spelled
    }

    /// Whether `host` might be spelt otherwise (a quick look, before the host is copied).
    static func mayNeedSpelling(first byte: UInt8?) -> Bool {
        guard let byte else { return false }
        return byte == UInt8(ascii: "[") || (0x30...0x39).contains(byte)
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
