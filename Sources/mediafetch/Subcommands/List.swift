import ArgumentParser
import ContentStore
import MediaFetch

extension OutputFormat: ExpressibleByArgument {}
extension ItemKind: ExpressibleByArgument {}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List cached items (a URL in a collection).",
        discussion: "Sorted by collection (ASCII letters without regard to case), then URL; --failed by when each failed.")

    @OptionGroup var cacheOptions: CacheOptions

    @Option(name: .long, help: "Only this collection.")
    var collection: String?

    @Option(name: .long, help: "Only this kind: photo, sound or file (get tells them apart by what it stored).")
    var kind: ItemKind?

    @Option(name: .long, help: "table, json (one array) or csv.")
    var format: OutputFormat = .table

    @Flag(name: .long, help: "The URLs whose last fetch failed, with the reason and when (not items: only a stored object makes one).")
    var failed = false

    mutating func validate() throws {
        if failed, collection != nil || kind != nil {
            throw ValidationError("--failed lists URLs, which belong to no collection or kind: give it without --collection or --kind")
        }
    }

    func run() async throws {
        let cache = try cacheOptions.open(mustExist: true)
        do {
            // A table on a terminal fits its rows to it; a pipe or a file gets every cell whole.
            let columns = format == .table ? Terminal.stdoutColumns : nil
            // A table of no rows is its header alone: a note says why (CSV's header and JSON's [] say it themselves).
            var lines = 0
            let write = { (text: String) throws in
                // Only whether a row follows the header is asked: a long listing is not counted through.
                if lines < 2 { lines += text.utf8.count { $0 == UInt8(ascii: "\n") } }
                try Terminal.writeOut(text)
            }
            if failed {
                var shortened = 0
                try cache.readFailures { forEach in
                    shortened = try FailureFormatter.write(forEach, as: format, columns: columns, to: write)
                }
                if shortened > 0 { Terminal.notice(Self.cutNote, progress: .none) }
                if format == .table, lines <= 1 { Terminal.notice("no URL's last fetch failed", progress: .none) }
                return
            }
            var stored: String?
            if let collection {
                let names = try cache.catalog.collectionNames()
                // A mistyped name must not look like an empty collection.
                guard let name = CollectionName.find(collection, among: names) else {
                    Terminal.error(ListMessages.noCollection(named: collection, among: names))
                    throw Exit.badInput
                }
                stored = name
            }
            // Written as it is read: a long list is never held whole.
            var (missing, shortened) = (0, 0)
            try cache.catalog.readEntries(collection: stored, kind: kind) { forEach in
                (missing, shortened) = try EntryFormatter(cache: cache).write(forEach, as: format, columns: columns, to: write)
            }
            if shortened > 0 { Terminal.notice(Self.cutNote, progress: .none) }
            if format == .table, lines <= 1 {
                let kindText = kind.map { " of kind \($0.rawValue)" } ?? ""
                Terminal.notice("no items\(kindText)\(stored.map { " in collection \($0)" } ?? "") in the cache", progress: .none)
            }
            if missing > 0 {
                // Listed all the same: the catalog knows them, and a run of get fetches them again.
                Terminal.notice(missing == 1
                    ? "1 of the items listed has no file in the cache (removed, or cut short): get fetches it again"
                    : "\(missing) of the items listed have no file in the cache (removed, or cut short): get fetches them again",
                    progress: .none)
            }
        } catch let exit as ExitCode {
            throw exit
        } catch {
            Terminal.error(cache.catalogReadError(error).message)
            throw Exit.cacheUnusable
        }
    }

    /// The note for a table with cells cut to fit the terminal: with its
    /// "mediafetch: note: ", under 64 columns, the narrowest terminal a
    /// table is fitted to.
    private static let cutNote = "… marks cut text; a pipe or CSV has it whole"
}
