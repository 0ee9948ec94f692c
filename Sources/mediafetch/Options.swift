import ArgumentParser
import Foundation
import ContentStore
import MediaFetch
import Transfer

/// `--cache DIR`, on every command.
struct CacheOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Cache root (default: $MEDIAFETCH_CACHE, else ./Cache).", valueName: "dir"))
    var cache: String?

    func validate() throws {
        // An unset variable in `--cache "$DIR"`: not ./Cache by surprise.
        if let cache, cache.isEmpty { throw ValidationError("--cache must not be empty") }
        // Read as U+FFFD in place of the bad bytes, it would name another directory.
        if cache == nil, let variable = getenv("MEDIAFETCH_CACHE"),
           let shown = CommandLineLayout.textShowingInvalidUTF8(Terminal.bytes(of: variable)) {
            throw ValidationError("MEDIAFETCH_CACHE is not valid UTF-8: \(DisplayText.escapingControls(shown))")
        }
    }

    /// Opens the cache or exits with status 3 and a one-line reason. Commands
    /// that only read (`list`, `stats`) pass `mustExist`, so a mistyped path
    /// is an error rather than a new empty cache.
    func open(mustExist: Bool = false, progress: ProgressMode? = nil) throws -> MediaCache {
        let (cache, notWritable) = try openForDownloads(mustExist: mustExist, progress: progress)
        if let notWritable {
            Terminal.error(notWritable.message, progress: progress)
            throw Exit.cacheUnusable
        }
        return cache
    }

    /// `open`, for a downloading command, which can still succeed on a cache
    /// it cannot write when everything asked for is cached already: a cache
    /// it cannot write comes with why, for the command to say when it needs
    /// to write after all.
    func openForDownloads(mustExist: Bool = false, progress: ProgressMode?) throws -> (MediaCache, CacheError?) {
        // Absolute in what is said of it: "no cache at Cache" named no place.
        let root = MediaCache.absolutePath(MediaCache.resolveRoot(explicit: cache))
        var info = stat()
        if stat(root + "/catalog.sqlite", &info) != 0, errno != ENOENT, errno != ENOTDIR,
           mustExist || errno == EACCES || errno == EPERM {
            // A directory this user may not enter is not a missing cache (nor a tmp/ to create).
            Terminal.error("cannot read the cache at \(root): \(String(cString: strerror(errno)))", progress: progress)
            throw Exit.cacheUnusable
        }
        if !mustExist, stat(root, &info) == 0, info.st_mode & S_IFMT != S_IFDIR {
            // Said of the directory given, not as "cannot create …/tmp: Not a directory".
            Terminal.error("cannot use the cache at \(root): it is not a directory", progress: progress)
            throw Exit.cacheUnusable
        }
        // A catalog removed beside its log is damage to say, not a missing cache (the opening says it).
        if mustExist, !FileManager.default.fileExists(atPath: root + "/catalog.sqlite"),
           MediaCache.damageBeforeOpening(catalogPath: root + "/catalog.sqlite") == nil {
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory)
            // A file given for the directory is named as such, not as a missing cache.
            let why = exists && !isDirectory.boolValue ? ": it is not a directory"
                : MediaCache.danglingLink(root).map { ": \($0)" } ?? ""
            // A catalog removed from a cache that holds objects is a lost catalog, not a missing cache.
            Terminal.error(MediaCache.lostCatalog(root: root)
                ?? "no cache at \(root)\(why) (give --cache DIR or set MEDIAFETCH_CACHE)", progress: progress)
            throw Exit.cacheUnusable
        }
        // A run from another directory than usual made a new ./Cache without a word: said.
        let newDefault = !mustExist && MediaCache.namedRoot(explicit: cache) == nil
            && !FileManager.default.fileExists(atPath: root + "/catalog.sqlite")
        // As `list` says it: the rows of what was stored are gone (said once the cache has opened).
        let emptied = mustExist ? nil : MediaCache.emptiedCatalog(root: root)
        do {
            let cache = try MediaCache(root: root, readingOnly: mustExist) {
                // A silent minute would look like a hang: another program holds the catalog.
                Terminal.notice("waiting for another process that holds the catalog's lock (for up to "
                    + "\(Catalog.busySeconds) s)", progress: progress ?? .auto)
            }
            // A reading command needs the catalog at once: say so here if it cannot be opened.
            if mustExist { _ = try cache.catalog }
            if newDefault {
                Terminal.notice("a new cache at \(root) (give --cache DIR, or set MEDIAFETCH_CACHE, for another)",
                                progress: progress ?? .auto)
            }
            if let emptied { Terminal.notice(emptied, progress: progress ?? .auto) }
            // A downloading command writes: a cache it cannot write to is one line, not one per URL.
            if !mustExist {
                do throws(CacheError) {
                    try cache.checkWritable()
                } catch {
                    return (cache, error)
                }
            }
            return (cache, nil)
        } catch {
            Terminal.error(error.message, progress: progress)
            throw Exit.cacheUnusable
        }
    }
}

/// How progress is shown.
enum ProgressMode: String, ExpressibleByArgument, CaseIterable {
    case auto, bar, json, none

    /// Whether a status line is drawn on stderr (and must be cleared before other output).
    var showsStatusLine: Bool {
        self == .bar || (self == .auto && Terminal.showsStatusLine)
    }
}

/// Transfer options shared by every downloading command.
struct TransferOptions: ParsableArguments {
    // `.unconditional`: `--jobs -1` is a bad number, not a missing value.
    // (A transform leaves the default out of the help: it is written there.)
    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Concurrent transfers in total. (default: \(Self.defaultJobs))", valueName: "n"),
            transform: { try wholeNumber($0) })
    var jobs: Int = Self.defaultJobs

    @Option(name: .customLong("per-host"), parsing: .unconditional,
            help: ArgumentHelp("Concurrent transfers against one host. (default: \(Self.defaultPerHost))", valueName: "n"), transform: { try wholeNumber($0) })
    var perHost: Int = Self.defaultPerHost

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Retries after a failed attempt (connection errors, timeouts, stalls, 408, 429, 5xx). Unless it is 0, waits a server asks for (Retry-After, 10 min in all; then up to 10 min a retry) and failures to reach a host that is out (--host-patience) use none. (default: \(Self.defaultRetries))", valueName: "n"),
            transform: { try wholeNumber($0) })
    var retries: Int = Self.defaultRetries

    static let defaultJobs = 16, defaultPerHost = 8, defaultRetries = 4

    @Option(name: .customLong("host-patience"), parsing: .unconditional, help: ArgumentHelp(
        "Seconds a host may go unanswered before its URLs fail at once; meanwhile its URLs' failures to reach it use up no retry (a lone URL of a host that has not answered yet uses its retries). 0: no patience (every failure uses a retry, no host is given up). (default: \(Self.shown(Self.defaultHostPatience)))",
        valueName: "seconds"), transform: { try seconds($0) })
    var hostPatience: Double = Self.defaultHostPatience

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Seconds one attempt may take in total (default: no limit).", valueName: "seconds"),
            transform: { try seconds($0) })
    var timeout: Double?

    @Option(name: .customLong("connect-timeout"), parsing: .unconditional, help: ArgumentHelp("Seconds to establish a connection. (default: \(Self.shown(Self.defaultConnectTimeout)))", valueName: "seconds"),
            transform: { try seconds($0) })
    var connectTimeout: Double = Self.defaultConnectTimeout

    @Option(name: .customLong("stall-timeout"), parsing: .unconditional, help: ArgumentHelp("Seconds without data, under a byte a second, or without a complete response head (ten times as long while only 1xx answers come), before a transfer counts as stalled. (default: \(Self.shown(Self.defaultStallTimeout)))", valueName: "seconds"),
            transform: { try seconds($0) })
    var stallTimeout: Double = Self.defaultStallTimeout

    // Written into the help: a transform leaves them out of it.
    static let defaultHostPatience = 30.0, defaultConnectTimeout = 15.0, defaultStallTimeout = 30.0

    @Option(name: .customLong("max-filesize"), parsing: .unconditional, help: ArgumentHelp("Largest body accepted (as sent, and decoded), e.g. 200M.", valueName: "size"))
    var maxFileSize: String?

    @Option(name: .customLong("limit-rate"), parsing: .unconditional, help: ArgumentHelp("Per-transfer rate limit in bytes a second, e.g. 500K.", valueName: "rate"))
    var limitRate: String?

    @Option(name: .long, help: ArgumentHelp(
        "CA certificates (PEM) to trust instead of the system's, for a private CA (default: $CURL_CA_BUNDLE, else $SSL_CERT_FILE, as curl).",
        valueName: "file"))
    var cacert: String?

    /// `--cacert`, else the variables curl reads.
    var caCertificates: String? {
        cacert ?? caCertificatesVariable?.value
    }

    /// The variable curl reads that names the CA certificates, when it is set and `--cacert` is not.
    var caCertificatesVariable: (name: String, value: String)? {
        guard cacert == nil else { return nil }
        let environment = ProcessInfo.processInfo.environment
        for name in ["CURL_CA_BUNDLE", "SSL_CERT_FILE"] {
            if let value = environment[name], !value.isEmpty { return (name, value) }
        }
        return nil
    }

    /// What is wrong with `path` as a file of CA certificates, or nil.
    static func caCertificatesProblem(_ path: String) -> String? {
        var info = stat()
        if stat(path, &info) != 0 || access(path, R_OK) != 0 {
            return "cannot read \(path): \(String(cString: strerror(errno)))"
        }
        // libcurl reads it again for every new connection: a pipe (<(cat ca.pem)) would
        // serve the first and fail the rest, so only a regular file will do.
        let kind = info.st_mode & S_IFMT
        if kind != S_IFREG {
            return kind == S_IFDIR ? "\(path) is not a file of certificates (a directory?)"
                : "\(path) is not a regular file (it is read again for every connection)"
        }
        // An empty or garbled file failed every https URL on its own line.
        if !(FileManager.default.contents(atPath: path).map(CACertificates.holdsPEMCertificate) ?? false) {
            return "\(path) holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        }
        return nil
    }

    @Option(name: .long, help: "Progress display: auto (a status line on a terminal; elsewhere only failures and the summary), bar (the status line even off a terminal), json (lines on stderr), none (failures and notes only: no status line, no summary).")
    var progress: ProgressMode = .auto

    /// `text` without its sign, if it has one.
    static func unsigned(_ text: String) -> Substring {
        text.hasPrefix("-") || text.hasPrefix("+") ? text.dropFirst() : Substring(text)
    }

    /// A whole number as an option's value, or why it is none: the parser's
    /// own said only "is invalid", of `20000000000000000000` too.
    static func wholeNumber(_ text: String) throws -> Int {
        if let number = Int(text) { return number }
        let digits = Self.unsigned(text)
        if !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) {
            throw ValidationError("a number that large is not taken")
        }
        throw ValidationError("not a whole number")
    }

    /// What is wrong with `text` as the size (in `unit`s) option `name`
    /// takes, or nil. At least 1: a `--max-filesize` of 0 would fail every download.
    static func sizeProblem(_ text: String, name: String, unit: String, example: String) -> String? {
        let form = "a whole number of bytes, or one with K, M, G, T, P or E, as in \(example)"
        let atLeastOne = "\(name) must be at least 1 \(unit) (got \(text))"
        // A number with a minus (`-1.5`, `-2K`) is one too small, not one unreadable.
        if text.hasPrefix("-"), ByteSize.read(String(text.dropFirst())) != .failure(.notANumber) { return atLeastOne }
        switch ByteSize.read(text) {
        case .success(let bytes): return bytes > 0 ? nil : atLeastOne
        case .failure(.fraction): return "\(name): '\(text)' holds a fraction of a byte (\(form))"
        case .failure(.tooLarge): return "\(name): '\(text)' is too large (it must be below 8 EiB)"
        case .failure(.notANumber): return "\(name): '\(text)' is not \(form)"
        }
    }

    /// Seconds as an option's value: digits with a decimal point at most
    /// (and a sign, which the range checks then refuse). Swift's own reading
    /// also took `0x10` as 16 and `1e400` as infinity.
    static func seconds(_ text: String) throws -> Double {
        let digits = Self.unsigned(text)
        guard digits.contains(where: \.isNumber), digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let value = Double(text) else {
            throw ValidationError("not a number of seconds (as in 30 or 2.5)")
        }
        // Digits past 308 of them read as infinity.
        guard value.isFinite else { throw ValidationError("a number that large is not taken") }
        return value
    }

    /// A number of seconds as it was written, or near enough: `0`, not `0.0`.
    static func shown(_ seconds: Double) -> String {
        seconds == seconds.rounded() && abs(seconds) < 1e15 ? String(Int64(seconds)) : String(seconds)
    }

    mutating func validate() throws {
        guard jobs >= 1 else { throw ValidationError("--jobs must be at least 1 (got \(jobs))") }
        guard perHost >= 1 else { throw ValidationError("--per-host must be at least 1 (got \(perHost))") }
        guard retries >= 0 else { throw ValidationError("--retries must not be negative (got \(retries))") }
        guard hostPatience == 0 || (1...86_400.0).contains(hostPatience) else {
            throw ValidationError("--host-patience must be 0 (none) or from 1 to 86400 seconds (a day) (got \(Self.shown(hostPatience)))")
        }
        for (name, value) in [("--timeout", timeout), ("--connect-timeout", connectTimeout), ("--stall-timeout", stallTimeout)] {
            if let value, !(0.001...86_400.0 * 365).contains(value) {
                throw ValidationError("\(name) must be from 0.001 to 31536000 seconds (a year) (got \(Self.shown(value)))")
            }
        }
        if let maxFileSize, let problem = Self.sizeProblem(maxFileSize, name: "--max-filesize", unit: "byte", example: "200M or 1.5G") {
            throw ValidationError(problem)
        }
        if let limitRate, let problem = Self.sizeProblem(limitRate, name: "--limit-rate", unit: "byte a second", example: "500K") {
            throw ValidationError(problem)
        }
        // Said once here, not as a certificate error on every https URL. The
        // variables are checked only when the list holds an https URL (see
        // `FetchRunner`): a stale one must not stop a run of plain http URLs.
        if let cacert, let problem = Self.caCertificatesProblem(cacert) {
            throw ValidationError("--cacert: \(problem)")
        }
    }

    var configuration: TransferConfiguration {
        var configuration = TransferConfiguration()
        configuration.maxConcurrentTransfers = jobs
        configuration.maxTransfersPerHost = perHost
        configuration.retry.maxRetries = retries
        configuration.unreachableHostPatience = hostPatience > 0 ? hostPatience : nil
        configuration.attemptTimeout = timeout
        configuration.connectTimeout = connectTimeout
        configuration.stallTimeout = stallTimeout
        configuration.maxFileSize = maxFileSize.flatMap(ByteSize.parse)
        configuration.maxBytesPerSecond = limitRate.flatMap(ByteSize.parse)
        configuration.caCertificates = caCertificates
        return configuration
    }
}
