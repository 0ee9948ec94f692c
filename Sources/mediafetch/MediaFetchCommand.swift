import ArgumentParser
import CProcessStart
import MediaFetch
import Transfer

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@main
struct MediaFetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mediafetch",
        abstract: "Prefetch media for map pins into a content-addressed cache that works offline.",
        // The cache may be named before the command too (see CommandLineLayout).
        usage: "mediafetch [--cache <dir>] <subcommand> [<options>]",
        discussion: """
            The cache root is --cache DIR, else $MEDIAFETCH_CACHE, else ./Cache.

            Exit status:
              0    everything asked for is in the cache
              1    some items failed (one line each on stderr); the rest stay cached
              2    bad input: an unreadable or malformed input file, a bad URL,
                   or a collection the cache does not have (list)
              3    the cache cannot be opened or written (no cache there for list
                   or stats, another program's files or catalog, a full disk, or
                   a catalog locked by another process past 60 s, stops a run),
                   or the limit on open files (under 56 free for get, 16 for
                   the rest, beside the descriptors mediafetch is started
                   with) or on address space (ulimit -v) is too low
              64   command-line usage error (unknown flag, bad flag value,
                   a CA file from --cacert, $CURL_CA_BUNDLE or $SSL_CERT_FILE
                   with no certificate)
              74   the output could not be written (e.g. a full disk behind > FILE)
              130  interrupted (Ctrl-C, SIGTERM or SIGHUP, or get's stderr read
                   by nothing any more); what finished is stored, partial
                   downloads resume on the next run
            """,
        version: mediafetchVersion,
        subcommands: [Get.self, List.self, Stats.self])

    /// No command is a usage error (exit 64), not help and success: a script
    /// running `mediafetch $COMMAND` with the variable unset must not pass.
    func run() async throws {
        throw ValidationError("give a command: get, list or stats")
    }

    /// `mediafetch --cache DIR <command>` is accepted as well as `<command> --cache DIR`.
    static func main() async {
        // Read before anything changes them: which stop signals were ignored.
        StopSignals.exitEarly()
        TransferEngine.prepareProcess()
        _ = mf_set_default_thread_stack_size(AddressSpace.defaultThreadStack)
        // Under a handful of open files libdispatch aborts the process (SIGILL), and under too
        // low a `ulimit -v` a thread fails to start and the run hangs: one line instead.
        if let problem = DescriptorBudget.current(heldFinishedBodies: 0).problemForAnyCommand ?? AddressSpace.problem(jobs: nil)
            ?? ThreadLimit.problem(jobs: nil) {
            Terminal.writeErr("mediafetch: \(problem)\n")
            Self.exit(withError: Exit.cacheUnusable)
        }
        // Text that help and --version leave in stdout's buffer is written at exit, where a failure would go unnoticed.
        atexit(flushBufferedOutputAtExit)
        refuseTextThatIsNotUTF8()
        if let option = CommandLineLayout.leadingOptionWithoutValue(in: Array(CommandLine.arguments.dropFirst())) {
            writeUsageError("\(option) needs a value (mediafetch \(option) DIR <command>)", for: nil)
            Self.exit(withError: ExitCode.validationFailure)
        }
        let arguments = CommandLineLayout.placingGlobalOptions(Array(CommandLine.arguments.dropFirst()))
        let commands = configuration.subcommands
        func named(_ name: String?) -> (any ParsableCommand.Type)? { commands.first { $0._commandName == name } }
        let command = named(arguments.first)
        if let problem = CommandLineLayout.unknownCommand(in: arguments,
                                                            commands: commands.map { $0._commandName }) {
            writeUsageError(problem, for: nil)
            Self.exit(withError: ExitCode.validationFailure)
        }
        if let problem = CommandLineLayout.repeatedGlobalOption(in: arguments) {
            writeUsageError(problem, for: command)
            Self.exit(withError: ExitCode.validationFailure)
        }
        if let option = CommandLineLayout.optionWithEmptyValue(in: arguments),
           CommandLineLayout.globalOptions.contains(option)
            || CommandLineLayout.longOptionsTakingValues(inHelpDump: (command ?? Self.self)._dumpHelp()).contains(option) {
            writeUsageError("\(option) needs a value (\(option)= gives none)", for: command)
            Self.exit(withError: ExitCode.validationFailure)
        }
        if let (misplaced, problem) = CommandLineLayout.optionBeforeCommand(
            in: arguments, commands: commands.map { $0._commandName },
            optionsOf: { name in
                let help = named(name)?._dumpHelp() ?? ""
                return (CommandLineLayout.optionNames(inHelpDump: help), CommandLineLayout.optionNames(inHelpDump: help, kinds: ["option"]))
            }) {
            writeUsageError(problem, for: named(misplaced))
            Self.exit(withError: ExitCode.validationFailure)
        }
        await parseAndRun(arguments, command: command)
    }

    /// What ArgumentParser's own `main` does, but a usage error, the parser's
    /// or a command's `ValidationError`, is one line (`writeUsageError`) where
    /// the parser writes three or four (the error, the option's help, the
    /// usage, a pointer to `--help`). Help, `--version` and the commands' exit
    /// codes go through the parser as before.
    /// Every way out waits for the set-up a download began (see `TransferEngine.warmUp`).
    private static func parseAndRun(_ arguments: [String], command: (any ParsableCommand.Type)?) async {
        do {
            var parsed = try await asyncParseAsRoot(arguments)
            if var asyncCommand = parsed as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try parsed.run()
            }
        } catch {
            TransferEngine.waitForWarmUp()
            let problem = CommandLineLayout.withDashValueHint(CommandLineLayout.joiningParserLines(message(for: error)),
                                                              arguments: arguments)
            // An `ExitCode` thrown after its message was written has no text of its own.
            if exitCode(for: error) == .validationFailure, !problem.isEmpty {
                writeUsageError(problem, for: command)
                Self.exit(withError: ExitCode.validationFailure)
            }
            Self.exit(withError: error)
        }
        TransferEngine.waitForWarmUp()
    }

    /// Writes a usage error as one line, as every other error is: what is
    /// wrong, then where the usage is (`command`'s help; nil: mediafetch's own),
    /// in parentheses (a full stop after a path read as part of it).
    /// The parser's words begin in lower case, as mediafetch's own do ("unknown
    /// option", not "Unknown option"), a value of thousands of characters
    /// is not echoed whole, and passwords in URLs are hidden.
    static func writeUsageError(_ problem: String, for command: (any ParsableCommand.Type)?) {
        let name = ["mediafetch", command?._commandName].compactMap { $0 }.joined(separator: " ")
        // A URL given where a command or a value was (`mediafetch http://u:pw@h/a.jpg`, `--jobs u:pw@h`)
        // keeps its password hidden: a quoted value here is what was given, read as a URL if it can be one.
        // (Word by word too: a `'` in a value pairs the quotes after it wrongly.)
        let quotedAsURLs = RedactedURL.ofMistyped(problem.split(separator: "'", omittingEmptySubsequences: false).enumerated()
            .map { $0.offset % 2 == 1 ? RedactedURL.ofMistyped(String($0.element)) : String($0.element) }.joined(separator: "'"))
        var shown = DisplayText.elidingMiddle(DisplayText.escapingControls(RedactedURL.inText(quotedAsURLs)), toWidth: 400, asURL: false)
        if let first = shown.first, first.isUppercase, shown.dropFirst().first?.isLowercase == true {
            shown = first.lowercased() + shown.dropFirst()
        }
        Terminal.writeErr("mediafetch: \(shown) (see '\(name) --help')\n")
    }

    /// An argument that is not valid UTF-8 is a usage error naming it: Swift
    /// would read it with U+FFFD in place of the bad bytes, and a cache or
    /// input file by that name is another file. (`$MEDIAFETCH_CACHE` is
    /// checked where it is used: `CacheOptions`.)
    private static func refuseTextThatIsNotUTF8() {
        guard CommandLine.argc > 1 else { return }
        for index in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[index],
                  let shown = CommandLineLayout.textShowingInvalidUTF8(Terminal.bytes(of: argument)) else { continue }
            writeUsageError("argument \(index) is not valid UTF-8: \(DisplayText.escapingControls(shown)) "
                + "(mediafetch takes paths, URLs and names in UTF-8)", for: nil)
            Self.exit(withError: ExitCode.validationFailure)
        }
    }
}


/// Exit codes, as documented in `--help`.
enum Exit {
    static let itemsFailed = ExitCode(1)
    static let badInput = ExitCode(2)
    static let cacheUnusable = ExitCode(3)
    static let outputFailed = ExitCode(74)
    static let interrupted = ExitCode(130)
}
