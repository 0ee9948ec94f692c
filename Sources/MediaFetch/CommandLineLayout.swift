/// Where options that belong to every command may be written.
///
/// The command line is `mediafetch [--cache DIR] <command> ...`: the cache
/// root may come before the command name. The parser knows `--cache` as an
/// option of each command, so options written before the command are moved
/// to just after it.
public enum CommandLineLayout {
    /// Options of every command that may precede the command name, each taking one value.
    public static let globalOptions: Set<String> = ["--cache"]

    /// `arguments` (without the program name) with any leading global options
    /// (`--cache DIR` or `--cache=DIR`) moved after the command name. Anything
    /// else is left as it is, for the parser to judge.
    public static func placingGlobalOptions(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if let equals = argument.firstIndex(of: "="), globalOptions.contains(String(argument[..<equals])) {
                leading.append(argument)
                index += 1
            } else if globalOptions.contains(argument), index + 1 < arguments.count {
                leading.append(contentsOf: arguments[index...(index + 1)])
                index += 2
            } else {
                break
            }
        }
        // Nothing hoisted, or no command after the options (let the parser say so).
        guard !leading.isEmpty, index < arguments.count, !arguments[index].hasPrefix("-") else { return arguments }
        // `help` takes no cache: `mediafetch --cache DIR help get` is help on get.
        if arguments[index] == "help" { return Array(arguments[index...]) }
        return [arguments[index]] + leading + arguments[(index + 1)...]
    }

    /// The first `--name=` with nothing after the `=`, if any (before a `--`
    /// that ends the options). The parser would take the next argument as
    /// the value: `--collection="$NAME"` with `NAME` unset named a
    /// collection after the first URL, and `--cache="$DIR"` made a cache
    /// in a directory named after it.
    public static func optionWithEmptyValue(in arguments: [String]) -> String? {
        for argument in arguments {
            if argument == "--" { return nil }
            if argument.count > 3, argument.hasPrefix("--"), argument.hasSuffix("=") { return String(argument.dropLast()) }
        }
        return nil
    }
}
