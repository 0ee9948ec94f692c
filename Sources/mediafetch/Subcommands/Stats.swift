import ArgumentParser
import MediaFetch

struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Objects, bytes, items, collections, and bytes saved by de-duplication.")

    @OptionGroup var cacheOptions: CacheOptions

    @Option(name: .long, help: "table, json or csv (a header and one row).")
    var format: OutputFormat = .table

    func run() async throws {
        let cache = try cacheOptions.open(mustExist: true)
        let text: String
        do {
            text = try StatsFormatter.render(cache.catalog.stats(), missing: cache.missingObjects(),
                                             awaitingRecord: cache.rowsAwaitingRecord(), partials: cache.heldPartials(),
                                             root: cache.root,
                                             as: format)
        } catch {
            Terminal.error(cache.catalogReadError(error).message)
            throw Exit.cacheUnusable
        }
        try Terminal.writeOut(text)
    }
}
