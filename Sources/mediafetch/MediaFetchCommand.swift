import ArgumentParser
import MediaFetch
import Transfer

@main
struct MediaFetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mediafetch",
        abstract: "Prefetch media for map pins into a content-addressed cache that works offline.",
        discussion: """
            The cache root is --cache DIR, else $MEDIAFETCH_CACHE, else ./Cache.

            Exit status:
              0    everything asked for is in the cache
              1    some items failed (one line each on stderr); the rest stay cached
              2    bad input: an unreadable or malformed input file, or a bad URL
              3    the cache cannot be opened or written
              64   command-line usage error (unknown flag, bad flag value)
              74   the output could not be written (e.g. a full disk behind > FILE)
              130  interrupted (Ctrl-C, SIGTERM or SIGHUP); what finished is stored,
                   partial downloads resume on the next run
            """,
        version: mediafetchVersion,
        subcommands: [Get.self, List.self, Stats.self])

    /// No command is a usage error (exit 64), not help and success: a script
    /// running `mediafetch $COMMAND` with the variable unset must not pass.
    func run() async throws {
        throw ValidationError("give a command: get, list or stats (mediafetch --help lists them)")
    }

    /// `mediafetch --cache DIR <command>` is accepted as well as `<command> --cache DIR`.
    static func main() async {
        // Read before anything changes them: which stop signals were ignored.
        StopSignals.exitEarly()
        TransferEngine.prepareProcess()
        let arguments = CommandLineLayout.placingGlobalOptions(Array(CommandLine.arguments.dropFirst()))
        if let option = CommandLineLayout.optionWithEmptyValue(in: arguments) {
            // Laid out as the parser's own errors, with the usage of the command it was given to.
            let command = configuration.subcommands.first { $0._commandName == arguments.first }
            let name = ["mediafetch", command?._commandName].compactMap { $0 }.joined(separator: " ")
            Terminal.writeErr("Error: \(option) needs a value (\(option)= gives none)\n"
                + "Usage: \(usageString(for: command ?? Self.self))\n"
                + "  See '\(name) --help' for more information.\n")
            Self.exit(withError: ExitCode.validationFailure)
        }
        await main(arguments)
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

