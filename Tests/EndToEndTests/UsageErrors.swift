/// The one line `mediafetch` writes for a usage error (exit 64): what is
/// wrong, then where the usage is (`command`'s help; nil: mediafetch's own).
func usageError(_ problem: String, command: String? = "get") -> [String] {
    let name = ["mediafetch", command].compactMap { $0 }.joined(separator: " ")
    return ["mediafetch: \(problem) (see '\(name) --help')"]
}
