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
        guard !leading.isEmpty else { return arguments }
        // No command after the cache: without it, the parser says what is missing
        // ("give a command", or the help asked for) instead of "unknown option --cache".
        guard index < arguments.count, !arguments[index].hasPrefix("-") else { return Array(arguments[index...]) }
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
            // Only an '=' with nothing after it: `--collection=aGk=` has a value.
            if argument.count > 3, argument.hasPrefix("--"), let equals = argument.firstIndex(of: "="),
               argument.index(after: equals) == argument.endIndex {
                return String(argument[..<equals])
            }
        }
        return nil
    }
}
