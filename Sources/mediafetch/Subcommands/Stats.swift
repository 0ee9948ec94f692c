import ArgumentParser
import MediaFetch

struct Stats: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Objects, bytes, items, collections, and bytes saved by de-duplication.")

    @OptionGroup var cacheOptions: CacheOptions

    @Option(name: .long, help: "table or json.")
    var format: OutputFormat = .table

    mutating func validate() throws {
        if format == .csv { throw ValidationError("--format for stats is table or json") }
    }

    func run() async throws {
        let cache = try cacheOptions.open(mustExist: true)
        do {
            Terminal.writeOut(try StatsFormatter.render(cache.catalog.stats(), root: cache.root, as: format))
        } catch {
            Terminal.error("cannot read the catalog: \(error)")
            throw Exit.cacheUnusable
        }
    }
}
