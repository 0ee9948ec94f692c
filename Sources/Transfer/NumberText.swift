/// Numbers written for people, shared by the engine's messages and the
/// command's output.
public enum NumberText {
    /// `value` rounded to one decimal: `1.5`, `64.0`. Not `String(format:)`,
    /// whose boxed arguments cost about half a millisecond on first use in a
    /// binary this large (protocol conformance lookups), at the end of every run.
    public static func oneDecimal(_ value: Double) -> String {
        let tenths = (value.magnitude * 10).rounded()
        guard tenths < 1e15 else { return "\(value)" }
        let whole = Int64(tenths)
        return "\(value < 0 && whole > 0 ? "-" : "")\(whole / 10).\(whole % 10)"
    }

    /// A wait in the largest unit that keeps it readable: "90 s", "60 min",
    /// "36 h", "26629 days" (a Retry-After date decades away was "2300771135.8 s").
    public static func wait(_ seconds: Double) -> String {
        switch seconds {
        case ..<120: return Self.seconds(seconds)
        case ..<7200: return "\(Int64((seconds / 60).rounded())) min"
        case ..<172_800: return "\(Int64((seconds / 3600).rounded())) h"
        case ..<1e15: return "\(Int64((seconds / 86_400).rounded())) days"
        default: return "a very long time"
        }
    }

    /// Two waits as `wait` words them, or both in whole seconds (the first
    /// rounded up) where those texts would read the same: "asked to wait 10
    /// min; mediafetch waits 10 min at most" says nothing, "601 s; 600 s" does.
    public static func distinctWaits(_ first: Double, _ second: Double) -> (String, String) {
        let texts = (wait(first), wait(second))
        guard texts.0 == texts.1, first != second else { return texts }
        return (seconds(first.rounded(.up)), seconds(second))
    }

    /// Seconds as given: "30 s" for whole ones, else one decimal ("0.3 s").
    public static func seconds(_ value: Double) -> String {
        let whole = value.rounded()
        return value == whole && whole.magnitude < 1e15 ? "\(Int64(whole)) s" : "\(oneDecimal(value)) s"
    }
}
