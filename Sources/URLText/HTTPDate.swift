import Foundation

/// HTTP dates (RFC 9110 §5.6.7) in whole seconds since 1970, without DateFormatter:
/// the conversions are pure arithmetic, so they are locale-independent and thread-safe.
/// The engine reads them (Retry-After, Last-Modified, Date) and the test origin writes them.
public enum HTTPDate {
    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Whole seconds since 1970 (rounded down), the precision HTTP dates carry.
    public static func seconds(_ date: Date) -> Int {
        Int(date.timeIntervalSince1970.rounded(.down))
    }

    /// Formats as IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    public static func format(seconds: Int) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        let weekday = ((days % 7) + 7 + 4) % 7  // 1970-01-01 was a Thursday.
        return "\(weekdays[weekday]), \(pad(day)) \(months[month - 1]) \(year) "
            + "\(pad(secondOfDay / 3600)):\(pad(secondOfDay / 60 % 60)):\(pad(secondOfDay % 60)) GMT"
    }

    public static func format(_ date: Date) -> String {
        format(seconds: seconds(date))
    }

    /// Parses IMF-fixdate, the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`)
    /// and asctime (`Sun Nov  6 08:49:37 1994`), as recipients must. Nil if invalid.
    public static func parse(_ text: String) -> Int? {
        let tokens = text.split(whereSeparator: { " ,-:".contains($0) }).map(String.init)
        // Drop the weekday; it is redundant.
        guard tokens.count >= 7 else { return nil }
        let rest = Array(tokens.dropFirst())
        var day: Int?, month: Int?, year: Int?, hour: Int?, minute: Int?, second: Int?
        if let asctimeMonth = monthNumber(rest[0]) {
            // asctime: Nov 6 08 49 37 1994
            month = asctimeMonth
            day = Int(rest[1]); hour = Int(rest[2]); minute = Int(rest[3]); second = Int(rest[4]); year = Int(rest[5])
        } else {
            // IMF-fixdate / RFC 850: 06 Nov 1994 08 49 37 GMT
            guard rest.count >= 7, rest[6] == "GMT" else { return nil }
            day = Int(rest[0]); month = monthNumber(rest[1]); year = Int(rest[2])
            hour = Int(rest[3]); minute = Int(rest[4]); second = Int(rest[5])
            if let twoDigit = year, rest[2].count == 2 {
                // RFC 850 two-digit years; RFC 9110 says to pick the nearest past century.
                year = twoDigit + (twoDigit >= 70 ? 1900 : 2000)
            }
        }
        guard let day, let month, let year, let hour, let minute, let second,
              (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        return days(fromCivil: year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
    }

    /// `parse`, as a `Date`.
    public static func date(_ text: String) -> Date? {
        parse(text).map { Date(timeIntervalSince1970: TimeInterval($0)) }
    }

    private static func monthNumber(_ name: String) -> Int? {
        months.firstIndex { $0.caseInsensitiveCompare(name) == .orderedSame }.map { $0 + 1 }
    }

    private static func pad(_ value: Int) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }

    // Proleptic Gregorian calendar conversions (Howard Hinnant's days_from_civil and
    // civil_from_days), exact for every date we can meet.

    private static func days(fromCivil year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = (month + 9) % 12  // March = 0
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }
}
