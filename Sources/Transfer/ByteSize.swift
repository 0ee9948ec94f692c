import Foundation

/// Sizes as people write them: `512`, `64K`, `1.5M`, `2G` (powers of 1024, like curl).
public enum ByteSize {
    /// Parses a size; nil when the text is not one.
    public static func parse(_ text: String) -> Int64? {
        guard case .success(let bytes) = read(text) else { return nil }
        return bytes
    }

    /// Why a text is not a size.
    public enum Unreadable: Error, Equatable {
        /// Not a number, or with a unit not known.
        case notANumber
        /// A number of bytes with a fraction (`1.5`): a count of bytes is whole.
        case fraction
        /// 8 EiB or more.
        case tooLarge
    }

    /// Reads a size, or says why it is none.
    public static func read(_ text: String) -> Result<Int64, Unreadable> {
        // No blanks: `--jobs ' 5'` is refused too, and a size is one word.
        var number = Substring(text.lowercased())
        if number.hasSuffix("b") { number = number.dropLast() }
        let multipliers: [Character: Double] = ["k": 1024, "m": 1_048_576, "g": 1_073_741_824, "t": 1_099_511_627_776,
                                                "p": 1_125_899_906_842_624, "e": 1_152_921_504_606_846_976]
        // The i of KiB, MiB…, only after a unit letter: "5i" is not a size.
        if number.hasSuffix("i"), let unit = number.dropLast().last, multipliers[unit] != nil { number = number.dropLast() }
        var multiplier = 1.0
        if let unit = number.last, let found = multipliers[unit] {
            multiplier = found
            number = number.dropLast()
        }
        // Digits and a decimal point only: Double alone also takes 0x10, 1e3 and inf.
        guard number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) else { return .failure(.notANumber) }
        // A whole number of bytes is read exactly: through a Double, 2^63 - 1 rounded up past the largest size.
        if multiplier == 1, let whole = Int64(number) { return .success(whole) }
        guard let value = Double(number) else { return .failure(.notANumber) }
        let bytes = value * multiplier
        // (Digits past 308 of them read as infinity.)
        guard bytes < Double(Int64.max) else { return .failure(.tooLarge) }
        // A count of bytes is whole: "1.5" was taken as 2.
        guard multiplier > 1 || bytes == bytes.rounded() else { return .failure(.fraction) }
        return .success(Int64(bytes.rounded()))
    }

    /// A short human form: `812 B`, `64.0 KiB`, `1.5 MiB`.
    public static func format(_ bytes: Int64) -> String {
        if bytes < 1024 { return "\(bytes) B" }
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes) / 1024
        var unit = 0
        // 1023.95 KiB and up would show as "1024.0 KiB": the next unit's 1.0 reads better.
        while value >= 1023.95, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return "\(oneDecimal(value)) \(units[unit])"
    }

    /// `value` rounded to one decimal: `1.5`, `64.0` (see `NumberText`).
    public static func oneDecimal(_ value: Double) -> String { NumberText.oneDecimal(value) }
}
