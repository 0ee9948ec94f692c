import ArgumentParser
import CProcessStart
import Foundation
import Synchronization
import MediaFetch
import Transfer

#if canImport(Glibc)
import Glibc
#endif

struct Get: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        // Named, not derived from the type's name: that costs the parser a reflection at every start.
        commandName: "get",
        abstract: "Download URLs into the cache.",
        discussion: "URLs already cached are not downloaded again. Partial downloads resume. Each item is a photo, "
            + "a sound or a file by what it holds; a sound asked for (.mp3, .wav, .flac, .ogg…, or audio/*) is decoded "
            + "through libsndfile first, and one that proves damaged is not stored, nor is a photo cut short. A body "
            + "the server gzips or deflates unasked is stored decoded.")

    @OptionGroup var cacheOptions: CacheOptions
    @OptionGroup var transfer: TransferOptions

    @Argument(help: "http or https URLs.")
    var urls: [String] = []

    @Option(name: [.customLong("input-file"), .customShort("i")], help: ArgumentHelp("A file of URLs, one a line ('#' comments, after a URL too, and blank lines allowed; - for stdin, once). May be given more than once.", valueName: "file"))
    var inputFiles: [String] = []

    @Option(name: .long, help: "Collection the items go into.")
    var collection: String = "downloads"

    mutating func validate() throws {
        if let problem = CollectionName.problem(collection) { throw ValidationError("--collection \(problem)") }
        // An unset variable in `-i "$LIST"`: a usage error, as an empty --cache is.
        if inputFiles.contains("") { throw ValidationError("--input-file must not be empty") }
        // Standard input is read once: the second -i - read nothing, and said nothing.
        if inputFiles.filter({ $0 == "-" }).count > 1 {
            throw ValidationError("--input-file - (standard input) is given twice: it can be read once")
        }
    }

    func run() async throws {
        // Here, not in `validate`: ArgumentParser validates before it names an
        // unknown option, and `get --bogus` said "give URLs" instead.
        if urls.isEmpty, inputFiles.isEmpty {
            MediaFetchCommand.writeUsageError("give URLs or --input-file FILE", for: Get.self)
            throw ExitCode.validationFailure
        }
        if transfer.progress == .json { StopSignals.exitEarly(json: true) }
        // What a download needs and no option changes is set up meanwhile, on another core.
        TransferEngine.warmUp()
        let items = try requestedItems()
        // Lists of only comments and blank lines ask for nothing: said, and no cache is made for it.
        guard items.count > 0 else {
            let lists = inputFiles.map { $0 == "-" ? "standard input" : $0 }.joined(separator: ", ")
            Terminal.notice("nothing to fetch: no URL in \(lists)", progress: transfer.progress)
            // A reader of the events waits for the last one: a run of nothing has it too.
            if transfer.progress == .json { Terminal.writeErr(ProgressJSON.line(for: .finished(FetchReport())) + "\n") }
            return
        }
        try await FetchRunner(cacheOptions: cacheOptions, transfer: transfer).run(items, listBytes: Int64(items.urls.byteCount))
    }

    /// The URLs given and those in the input files, as items (kept as the
    /// URLs' bytes: a list of a million URLs is held for the whole run).
    private func requestedItems() throws -> URLItems {
        // Lists too long for the address-space limit are said to be before they are read.
        let listBytes = URLList.fileBytes(inputFiles)
        if listBytes > 0, let problem = AddressSpace.problem(jobs: AddressSpace.baseJobs, listBytes: listBytes) {
            Terminal.error(problem, progress: transfer.progress)
            throw Exit.cacheUnusable
        }
        var list = URLBlock()
        var problems: [String] = []
        // Every bad line of every list (up to ten a list), each on its own line.
        do { list = try URLList.validate(urls) } catch { problems += error.problems }
        for inputFile in inputFiles {
            if inputFile == "-", mf_standard_descriptor_was_closed(STDIN_FILENO) != 0 {
                // (Its number holds a placeholder that refuses reads: said by name, not as a bad descriptor.)
                problems.append("standard input: it is closed (give the list in a file, or pipe it in)")
                continue
            }
            do { list += try URLList.read(path: inputFile) } catch { problems += error.problems }
        }
        if list.count > URLBlock.maxCount { problems.append("more than \(URLBlock.maxCount) URLs in all") }
        guard problems.isEmpty else {
            for problem in problems { Terminal.error(problem, progress: transfer.progress) }
            throw Exit.badInput
        }
        let name = CollectionName.normalized(collection)
        return URLItems(urls: list, collection: name, kind: .file)
    }
}

/// When the first stop signal of a run came (see `StopSignals.quitsAtOnce`).
private final class FirstStop: Sendable {
    let instant = Mutex<ContinuousClock.Instant?>(nil)
    /// Whether a Ctrl-C too soon after it was answered with a note.
    let noted = Mutex(false)
}

/// Runs a fetch job with progress display, Ctrl-C handling and the exit status.
struct FetchRunner {
    let cacheOptions: CacheOptions
    let transfer: TransferOptions

    /// `listBytes`: the URLs' bytes, which the run holds (see `AddressSpace.needed`).
    func run(_ items: any FetchList, listBytes: Int64 = 0) async throws {
        // Killed by SIGPIPE when stderr's reader went, a run left finished
        // bodies unrecorded and no summary: the failed write stops it instead
        // (see `Terminal.whenStderrIsGone`, set once the run begins).
        signal(SIGPIPE, SIG_IGN)
        let configuration = transfer.configuration
        // Before the cache is opened: nothing is made that the run cannot go on with.
        let budget = DescriptorBudget.current(heldFinishedBodies: configuration.maxHeldFinishedBodies)
        if budget.isTooLow {
            Terminal.error(budget.tooLow(for: "a download", needing: budget.leastLimitNeeded), progress: transfer.progress)
            throw Exit.cacheUnusable
        }
        // The transfers that will run: --jobs, held to what the open files allow.
        let jobs = min(configuration.maxConcurrentTransfers, budget.maxJobs)
        if let problem = AddressSpace.problem(jobs: jobs, asked: configuration.maxConcurrentTransfers, listBytes: listBytes)
            ?? ThreadLimit.problem(jobs: jobs, besides: FetchJob.checkThreadsAtMost) {
            Terminal.error(problem, progress: transfer.progress)
            throw Exit.cacheUnusable
        }
        // A stale $CURL_CA_BUNDLE failed every https URL on its own line, not naming the variable.
        if let (name, path) = transfer.caCertificatesVariable,
           // The URLs' schemes are lower-cased already (`RequestTarget`).
           (0..<items.count).contains(where: { items[$0].url.hasPrefix("https:") }),
           let problem = TransferOptions.caCertificatesProblem(path) {
            Terminal.error("\(name): \(problem) (unset it, or give --cacert FILE)", progress: transfer.progress)
            throw ExitCode.validationFailure
        }
        let (cache, notWritable) = try cacheOptions.openForDownloads(progress: transfer.progress)
        if let notWritable {
            try await checkCached(items, in: cache, notWritable: notWritable)
            return
        }
        // The engine runs no more transfers than the open-file limit allows: said
        // when there are downloads to run (not when every URL is cached).
        var limitNote: (@Sendable (Int) -> Void)?
        if configuration.maxConcurrentTransfers > budget.maxJobs {
            let note = "--jobs \(configuration.maxConcurrentTransfers) needs more open files than the limit of "
                + "\(budget.limit) allows\(budget.inheritedShare(" (", ")")): running \(budget.maxJobs) at once; that is the hard limit "
                + "(ulimit -Hn), as the soft one was raised to it: raise it \(DescriptorBudget.whereToRaise)"
            let (maxJobs, progress) = (budget.maxJobs, transfer.progress)
            limitNote = { count in
                if count > maxJobs { Terminal.notice(note, progress: progress) }
            }
        }
        // Only the JSON lines show each stored item; the other modes show totals.
        let job = FetchJob(cache: cache, configuration: configuration,
                           reportsEachStoredItem: transfer.progress == .json)
        let printer = ProgressPrinter(mode: transfer.progress)
        let display = Task { await printer.consume(job.events) }
        let work = Task { try await job.run(items, whenDownloadsBegin: limitNote) }

        // Ctrl-C cancels the job: running transfers stop, what finished is
        // stored and recorded, partials stay for the next run. SIGTERM
        // (`timeout`, `systemctl stop`, `docker stop`) and SIGHUP (a closed
        // terminal) do the same: killed outright, a run lost the bodies it had
        // finished but not yet stored. A second Ctrl-C or SIGTERM, a second or
        // more later, quits at once (see `StopSignals.quitsAtOnce`; the cache
        // stays consistent: objects and rows are only ever added whole).
        // A queue of their own: a private serial queue gets a thread even when
        // every thread of the global queue is blocked (in a wait for another
        // process's catalog lock, say), which left Ctrl-C unheard until it ended.
        // No SIG_IGN first: a signal in between was discarded, and the run
        // went on to the end and exited 0 (seen 11 times in 300 signals sent
        // 28–40 ms after start). The early handler stays until Dispatch puts
        // its own in place, so a signal in that gap ends the process with 130.
        let signalQueue = DispatchQueue(label: "mediafetch.signals")
        let firstStop = FirstStop()
        let sources = StopSignals.handled.map { number -> any DispatchSourceSignal in
            let source = DispatchSource.makeSignalSource(signal: number, queue: signalQueue)
            source.setEventHandler {
                let now = ContinuousClock.now
                let first = firstStop.instant.withLock { first in
                    if first == nil { first = now }
                    return first ?? now
                }
                if work.isCancelled {
                    guard StopSignals.quitsAtOnce(number, sinceFirstStop: now - first) else {
                        // A Ctrl-C pressed twice on purpose, too soon: say how to quit at once (once).
                        if number == SIGINT, firstStop.noted.withLock({ noted in defer { noted = true }; return !noted }) {
                            Terminal.notice("stopping: what finished is being stored (Ctrl-C again, a second from now, "
                                + "quits at once)", progress: transfer.progress)
                        }
                        return
                    }
                    // A status line may be showing: end it, and say why there is no summary.
                    StatusLine.shared.clear()
                    Terminal.error("interrupted again: stopped at once (what was stored stays, partial downloads resume)",
                                   progress: transfer.progress)
                    // Not exit(): its handlers (OpenSSL's cleanup among them) would
                    // run while the transfer thread may be in a TLS call.
                    fflush(nil)
                    _exit(Exit.interrupted.rawValue)
                }
                work.cancel()
            }
            source.resume()
            return source
        }
        defer { for source in sources { source.cancel() } }
        // A reader of stderr that has gone (`2>&1 | head`, a pager quit) stops
        // the run as SIGHUP does (SIGPIPE is ignored before anything is written).
        Terminal.whenStderrIsGone.withLock { $0 = { work.cancel() } }

        let report: FetchReport
        do {
            report = try await work.value
        } catch {
            await display.value
            Terminal.error("\(error)", progress: transfer.progress)
            throw Exit.cacheUnusable
        }
        await display.value
        if let reason = report.outOfSpace {
            // One line whatever the progress mode: why the rest was not fetched, and what to do.
            Terminal.error("no room left for the cache (\(reason)): stopped with \(report.left) left to fetch; "
                + "free some space and run again (what finished is stored, partial downloads resume)",
                progress: transfer.progress)
            throw Exit.cacheUnusable
        }
        if let reason = report.catalogFailure {
            Terminal.error("cannot record downloads in the catalog at \(cache.catalogPath): \(reason); stopped with "
                + "\(report.left) left to fetch (\(report.awaitingRecord) stored, which the next run records without fetching "
                + "them again)",
                progress: transfer.progress)
            throw Exit.cacheUnusable
        }
        if report.interrupted { throw Exit.interrupted }
        if !report.succeeded { throw Exit.itemsFailed }
    }

    /// A cache this process cannot write (read-only media, another user's)
    /// serves a run that finds everything cached: it says so, as a run that
    /// downloaded nothing would. Anything to fetch or record fails the run
    /// with the reason the cache cannot be written (exit 3).
    private func checkCached(_ items: any FetchList, in cache: MediaCache, notWritable: CacheError) async throws {
        let job = FetchJob(cache: cache, reportsEachStoredItem: transfer.progress == .json)
        let display = Task { await ProgressPrinter(mode: transfer.progress).consume(job.events) }
        let report: FetchReport?
        do {
            report = try job.runWithoutWriting(items)
        } catch {
            await display.value
            Terminal.error("\(error)", progress: transfer.progress)
            throw Exit.cacheUnusable
        }
        await display.value
        guard report != nil else {
            Terminal.error(notWritable.message, progress: transfer.progress)
            throw Exit.cacheUnusable
        }
    }
}
