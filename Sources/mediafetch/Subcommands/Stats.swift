import ArgumentParser
import MediaFetch

struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Objects, bytes, items, collections, and bytes saved by de-duplication.")

    @OptionGroup var cacheOptions: CacheOptions

    @Option(name: .long, help: "table or json.")
    var format: Format = .table

    /// The formats stats has (a table of one row makes no CSV worth having).
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case table, json

        var output: OutputFormat { self == .json ? .json : .table }
    }

    func run() async throws {
        let cache = try cacheOptions.open(mustExist: true)
        let text: String
        do {
            text = try StatsFormatter.render(cache.catalog.stats(), missing: cache.missingObjects(),
                                             awaitingRecord: cache.unrecorded.waitingCount(), partials: cache.heldPartials(),
                                             root: cache.root,
                                             as: format.output)
        } catch {
            Terminal.error(cache.catalogReadError(error).message)
            throw Exit.cacheUnusable
        }
        try Terminal.writeOut(text)
    }
}
