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
            // A mistyped name must not look like an empty collection.
            if let collection, case let names = try cache.catalog.collectionNames(), !names.contains(collection) {
                Terminal.error(ListMessages.noCollection(named: collection, among: names))
                throw Exit.badInput
            }
            let entries = try cache.catalog.entries(collection: collection, kind: kind)
            text = try EntryFormatter(cache: cache).render(entries, as: format)
        } catch let exit as ExitCode {
            throw exit
        } catch {
            Terminal.error("cannot read the catalog: \(error)")
            throw Exit.cacheUnusable
        }
        try Terminal.writeOut(text)
    }
}
