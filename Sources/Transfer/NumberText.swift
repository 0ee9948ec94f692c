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

    /// Seconds as given: "30 s" for whole ones, else one decimal ("0.3 s").
    public static func seconds(_ value: Double) -> String {
        let whole = value.rounded()
        return value == whole && whole.magnitude < 1e15 ? "\(Int64(whole)) s" : "\(oneDecimal(value)) s"
    }
}
