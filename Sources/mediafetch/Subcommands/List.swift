import ArgumentParser
import ContentStore
import MediaFetch

extension OutputFormat: ExpressibleByArgument {}
extension ItemKind: ExpressibleByArgument {}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List cached items (a URL in a collection).")

    @OptionGroup var cacheOptions: CacheOptions

    @Option(name: .long, help: "Only this collection.")
    var collection: String?

    @Option(name: .long, help: "Only this kind: photo, sound or file.")
    var kind: ItemKind?

    @Option(name: .long, help: "table, json (one array) or csv.")
    var format: OutputFormat = .table

    func run() async throws {
        let cache = try cacheOptions.open(mustExist: true)
        let text: String
        do {
            let entries = try cache.catalog.entries(collection: collection, kind: kind)
            text = try EntryFormatter(cache: cache).render(entries, as: format)
        } catch {
            Terminal.error("cannot read the catalog: \(error)")
            throw Exit.cacheUnusable
        }
        try Terminal.writeOut(text)
    }
}
