import MediaFetch

/// Where options that belong to every command may be written.
///
/// The command line is `mediafetch [--cache DIR] <command> ...`: the cache
/// root may come before the command name. The parser knows `--cache` as an
/// option of each command, so options written before the command are moved
/// to just after it.
enum CommandLineLayout {
    /// Options of every command that may precede the command name, each taking one value.
    static let globalOptions: Set<String> = ["--cache"]

    /// `arguments` (without the program name) with any leading global options
    /// (`--cache DIR` or `--cache=DIR`) moved after the command name. Anything
    /// else is left as it is, for the parser to judge.
    static func placingGlobalOptions(_ arguments: [String]) -> [String] {
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

    /// A global option given twice with different values (`mediafetch
    /// --cache A get --cache B`), said with both: the parser took the last
    /// and dropped the other without a word, and a run went to a cache the
    /// user may not have meant. Nil when each is given once, or alike.
    static func repeatedGlobalOption(in arguments: [String]) -> String? {
        for option in globalOptions.sorted() {
            var values: [String] = []
            var index = 0
            while index < arguments.count, arguments[index] != "--" {
                let argument = arguments[index]
                if argument.hasPrefix(option + "=") {
                    values.append(String(argument.dropFirst(option.count + 1)))
                } else if argument == option, index + 1 < arguments.count {
                    values.append(arguments[index + 1])
                    index += 1
                }
                index += 1
            }
            let distinct = values.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            if distinct.count > 1 {
                return "\(option) is given \(values.count) times, as \(distinct.map { "'\($0)'" }.joined(separator: " and ")): give one"
            }
        }
        return nil
    }

    /// A global option written before the command with nothing after it
    /// (`mediafetch --cache`), if any: the parser, which knows it only after
    /// a command, called it an unknown option.
    static func leadingOptionWithoutValue(in arguments: [String]) -> String? {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if let equals = argument.firstIndex(of: "="), globalOptions.contains(String(argument[..<equals])) {
                index += 1
            } else if globalOptions.contains(argument) {
                if index + 1 == arguments.count { return argument }
                index += 2
            } else {
                return nil
            }
        }
        return nil
    }

    /// The first `--name=` with nothing after the `=`, if any (before a `--`
    /// that ends the options). The parser would take the next argument as
    /// the value: `--collection="$NAME"` with `NAME` unset named a
    /// collection after the first URL, and `--cache="$DIR"` made a cache
    /// in a directory named after it.
    static func optionWithEmptyValue(in arguments: [String]) -> String? {
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

    /// "did you mean get? " when `word` is a slip of one of `commands` (two
    /// letters changed, added or left out at most, as the parser suggests
    /// for a flag); nothing otherwise.
    static func meant(_ word: String, among commands: [String]) -> String {
        let typed = Array(word.lowercased())
        let close = commands.map { ($0, editDistance(typed, Array($0))) }.filter { $0.1 <= 2 && $0.1 < typed.count }
        guard let best = close.min(by: { $0.1 < $1.1 }) else { return "" }
        return "did you mean \(best.0)? "
    }

    /// Levenshtein distance: the fewest letters changed, added or removed to turn `a` into `b`.
    private static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// What is wrong with the command asked for, or with `help <topic>`
    /// (`arguments` as laid out by `placingGlobalOptions`), or nil when it
    /// names one of `commands` or nothing. ArgumentParser shows the
    /// top-level help, with exit 0, for `help frob`: a script that asked
    /// about a misspelt command was told nothing went wrong; and it said
    /// "2 unexpected arguments: 'fetch', 'x'" of `fetch x`.
    static func unknownCommand(in arguments: [String], commands: [String]) -> String? {
        let listed = commands.count > 1
            ? commands.dropLast().joined(separator: ", ") + " and " + (commands.last ?? "")
            : commands.joined()
        if let first = arguments.first, !first.hasPrefix("-"), first != "help", !commands.contains(first) {
            // A URL given without its command.
            // A URL mistyped without its `://` (`mediafetch u:pw@h/a.jpg`): its password stays hidden.
            let first = RedactedURL.ofMistyped(first)
            if first.contains("://") { return "unknown command '\(first)' (to download it: mediafetch get URL)" }
            return "unknown command '\(first)' (\(meant(first, among: commands))the commands are \(listed))"
        }
        guard arguments.first == "help" else { return nil }
        let words = arguments.dropFirst()
        // Another option (`help --cache X get`) is the parser's to name: its
        // value is not a topic.
        guard words.allSatisfy({ !$0.hasPrefix("-") || ["-h", "--help", "-help"].contains($0) }) else { return nil }
        let topics = words.filter { !$0.hasPrefix("-") }
        guard let topic = topics.first, topic != "help" else { return nil }
        guard commands.contains(topic) else {
            return "unknown command '\(topic)' (\(meant(topic, among: commands))the commands are \(listed))"
        }
        if let extra = topics.dropFirst().first { return "Unexpected argument '\(extra)'" }
        return nil
    }

    /// The long options that take a value (`--collection`, not `--help`),
    /// read from the JSON that describes a command's arguments (ArgumentParser's
    /// `_dumpHelp()`, printed by `--experimental-dump-help`). Empty when the
    /// text is not such a description. Lets `--bogus=` stay an unknown option
    /// rather than one that "needs a value".
    static func longOptionsTakingValues(inHelpDump text: String) -> Set<String> {
        optionNames(inHelpDump: text, kinds: ["option"], longOnly: true)
    }

    /// The options and flags of a command, long (`--collection`) and short
    /// (`-i`), read from its `_dumpHelp()` as `longOptionsTakingValues` reads them.
    static func optionNames(inHelpDump text: String, kinds: Set<String> = ["option", "flag"], longOnly: Bool = false) -> Set<String> {
        guard case .object(let command)? = JSONValue.members(ofObject: text)?["command"],
              case .array(let arguments)? = command["arguments"] else { return [] }
        var options: Set<String> = []
        for case .object(let argument) in arguments {
            guard case .string(let kind)? = argument["kind"], kinds.contains(kind),
                  case .array(let names)? = argument["names"] else { continue }
            for case .object(let name) in names {
                guard case .string(let spelling)? = name["name"] else { continue }
                if name["kind"] == .string("long") {
                    options.insert("--" + spelling)
                } else if !longOnly, name["kind"] == .string("short") {
                    options.insert("-" + spelling)
                }
            }
        }
        return options
    }

    /// A command's option written before the command's name (`mediafetch
    /// --collection tatry get URL`), said as such: the parser called it an
    /// unknown option, though `get` knows it. (`--cache`, which may come
    /// first, is placed by `placingGlobalOptions` before this is asked.) Nil
    /// when the first argument is no option, or no option of the command
    /// named after it (the parser's to say). `optionsOf` gives a command's
    /// options, and those of them that take a value (`optionNames`): the
    /// value of `--collection list get` is not the command.
    static func optionBeforeCommand(in arguments: [String], commands: [String],
                                    optionsOf: (String) -> (all: Set<String>, takingValues: Set<String>))
        -> (command: String, problem: String)? {
        guard let first = arguments.first, first.hasPrefix("-"), first != "--" else { return nil }
        let option = first.firstIndex(of: "=").map { String(first[..<$0]) } ?? first
        guard !["-h", "--help", "--version"].contains(option) else { return nil }
        for (position, command) in arguments.enumerated().prefix(while: { $0.element != "--" }) where commands.contains(command) {
            let options = optionsOf(command)
            // Right after the option, a command's name may be its value (`-i list get`).
            if position == 1, option == first, !options.all.contains(option) || options.takingValues.contains(option) { continue }
            guard options.all.contains(option) else { return nil }
            return (command, "\(option) is an option of \(command): write it after '\(command)'")
        }
        return nil
    }

    /// The parser's "missing value for '--collection <collection>'" with how
    /// to give a value that begins with a dash, where one followed the
    /// option in `arguments` (`--collection -x`: the parser reads `-x` as an
    /// option, and `--collection=-x` is the way); else `problem` as it is.
    static func withDashValueHint(_ problem: String, arguments: [String]) -> String {
        // (The parser's words begin in upper case; `writeUsageError` lowers them.)
        let prefix = "missing value for '"
        guard problem.lowercased().hasPrefix(prefix) else { return problem }
        let option = problem.dropFirst(prefix.count).prefix { $0 != " " && $0 != "'" }
        // The option's last use among the options (before any `--`), which the parser read last.
        let options = arguments.prefix { $0 != "--" }
        guard option.hasPrefix("--"), let at = options.lastIndex(of: String(option)), at + 1 < arguments.count,
              let value = arguments[at + 1].first, value == "-", arguments[at + 1] != "--" else { return problem }
        return problem + "; a value that begins with a dash is given as \(option)=\(arguments[at + 1])"
    }

    /// The parser's own few messages of several lines read as one
    /// ("Unknown option '-ifoo'\n   or: Missing value…", "…'foo'.\nPlease use…"):
    /// a line break after `.` or `:`, or before an indented line, is a space.
    /// Any other is a value's (`--cacert $'a\nb'`), kept to be shown as `\u{A}`
    /// (a value's after `.` or `:` reads as a space: `x.\ny` as `x. y`).
    static func joiningParserLines(_ message: String) -> String {
        var joined = ""
        var rest = Substring(message)
        while let lineBreak = rest.firstIndex(of: "\n") {
            let before = rest[..<lineBreak], after = rest[rest.index(after: lineBreak)...]
            let indented = after.first == " " || after.first == "\t"
            joined += before
            if indented || before.last == "." || before.last == ":" {
                joined += " "
                rest = after.drop { $0 == " " || $0 == "\t" }
            } else {
                joined += "\n"
                rest = after
            }
        }
        return joined + rest
    }

    /// `bytes` as text with each byte that is not part of valid UTF-8 shown
    /// as `\xHH`, or nil when all of it is valid. Swift reads arguments and
    /// the environment with such bytes replaced by U+FFFD: a `--cache` of
    /// `caf\xE9` would silently become another directory, so such text is refused and shown.
    static func textShowingInvalidUTF8(_ bytes: some Collection<UInt8>) -> String? {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        var shown = ""
        var offset = bytes.startIndex
        var foundInvalid = false
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                shown.unicodeScalars.append(Unicode.UTF8.decode(encoded))
                offset = bytes.index(offset, offsetBy: encoded.count)
            case .error(let length):
                foundInvalid = true
                let end = bytes.index(offset, offsetBy: length)
                for byte in bytes[offset..<end] { shown += "\\x" + String(byte, radix: 16, uppercase: true) }
                offset = end
            case .emptyInput:
                return foundInvalid ? shown : nil
            }
        }
    }
}
