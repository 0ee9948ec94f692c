import CCurl
import CFileSync
import Foundation
import Synchronization

/// Asks the system's resolver about a name libcurl could not resolve:
/// whether the name does not exist at all (a typo in a host), or the lookup
/// failed for some other reason (the machine is offline, the resolver is
/// down). libcurl says "Could not resolve host" for both.
///
/// A failed lookup was retried like a refused connection, and its host given
/// up after `--host-patience`: a misspelt host took 6 s to fail one URL and
/// 30 s to fail 50, where curl and wget say so at once. A name the resolver
/// says does not exist (`EAI_NONAME`) now fails its URLs at once; anything
/// else (`EAI_AGAIN` when offline, or a name that resolves by now) is tried
/// again as before.
struct HostNames: Sendable {
    /// What the resolver says of a name.
    enum Verdict: Sendable, Equatable {
        /// The resolver answers that no such name exists.
        case doesNotExist
        /// The name resolves now, or the resolver could not say.
        case unknown
    }

    /// Looks `name` up; may block for as long as the resolver takes.
    let lookUp: @Sendable (String) -> Verdict

    /// A resolver of names given by `lookUp` (tests give their own).
    init(lookUp: @escaping @Sendable (String) -> Verdict) {
        self.lookUp = lookUp
    }

    /// The system's resolver, through `getaddrinfo` for stream sockets of
    /// any address family (libcurl asks for IPv4 alone where IPv6 does not
    /// work: a name with only an IPv6 address is found here, and then tried
    /// again, the safe side).
    static let system = HostNames { name in
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(name, nil, &hints, &found)
        if let found { freeaddrinfo(found) }
        return verdict(lookupStatus: status)
    }

    /// The verdict a `getaddrinfo` status gives: only "no such name" says
    /// the name does not exist. `EAI_NODATA` (the name exists, with no
    /// address) is left to the retries: glibc gives it to a name that has
    /// only mail records, which an address may be added to.
    static func verdict(lookupStatus status: Int32) -> Verdict {
        status == EAI_NONAME ? .doesNotExist : .unknown
    }

    /// The host name in libcurl's "Could not resolve host: NAME" (the name
    /// it gave the resolver: an internationalised one already converted),
    /// when it is a plain ASCII name; nil for another message.
    static func unresolvedName(in message: String) -> String? {
        name(after: "Could not resolve host: ", in: message)
    }

    /// The proxy's name in libcurl's "Could not resolve proxy: NAME" (an
    /// HTTP proxy's), as `unresolvedName(in:)` reads the host's.
    static func unresolvedProxyName(in message: String) -> String? {
        name(after: "Could not resolve proxy: ", in: message)
    }

    /// What follows `prefix` in `message`, when it is a host name of ASCII
    /// letters, digits, `-`, `_`, `%` and dots (a name libcurl gave the
    /// resolver; `%` where its URL's escape was not one, `a%zz`, or was `%25`).
    private static func name(after prefix: String, in message: String) -> String? {
        guard message.hasPrefix(prefix) else { return nil }
        let name = message.utf8.dropFirst(prefix.utf8.count)
        guard !name.isEmpty, name.count <= 253, name.allSatisfy({ byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "%"):
                return true
            default:
                return false
            }
        }) else { return nil }
        return String(Substring(name))
    }

    /// Whether `name`, as libcurl's message gives it, is the host of
    /// `hostKey` (`RequestTarget.hostKey`, "host:port"), spelt the same (an
    /// internationalised host's key keeps its Unicode form, which libcurl's
    /// converted name is not).
    static func isName(_ name: String, of hostKey: String) -> Bool {
        let lowered = name.lowercased()
        guard hostKey.hasPrefix(lowered + ":") else { return false }
        return hostKey.utf8.dropFirst(lowered.utf8.count + 1).allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }
}

/// A name libcurl could not resolve, and whose it is.
struct UnresolvedName: Sendable, Equatable {
    /// The name as libcurl gave it to the resolver.
    let name: String
    /// Whose name it is: the host asked for (or redirected to), or the
    /// environment's proxy, with the variable that names it when known.
    let owner: Owner

    enum Owner: Sendable, Equatable {
        case host
        case proxy(variable: String?)
    }
}

extension UnresolvedName {

    /// The name in libcurl's failure (`code`, `message`) of an attempt at
    /// `hostKey` (the host asked for, or redirected to; nil when not known)
    /// with `scheme`, and whose it is; nil when it is not such a failure, or
    /// whose name it is cannot be told. libcurl says "Could not resolve
    /// proxy" of an HTTP proxy's name, and "Could not resolve host" of the
    /// host's and of a SOCKS proxy's; with no proxy for the scheme, the name
    /// is the host's however libcurl spelt it (an internationalised one
    /// converted, a percent-encoded one decoded).
    init?(code: CURLcode, message: String, hostKey: String?, scheme: String, proxies: ProxyEnvironment) {
        switch code {
        case CURLE_COULDNT_RESOLVE_PROXY:
            guard let proxy = HostNames.unresolvedProxyName(in: message) else { return nil }
            self.init(name: proxy, owner: .proxy(variable: proxies.variable(ofProxyNamed: proxy, scheme: scheme)))
        case CURLE_COULDNT_RESOLVE_HOST:
            guard let host = HostNames.unresolvedName(in: message) else { return nil }
            if let variable = proxies.variable(ofProxyNamed: host, scheme: scheme) {
                self.init(name: host, owner: .proxy(variable: variable))
            } else if proxies.proxy(forScheme: scheme) == nil || hostKey.map({ HostNames.isName(host, of: $0) }) == true {
                self.init(name: host, owner: .host)
            } else {
                // A SOCKS proxy whose name is spelt otherwise in the environment, or the host's: not known which.
                return nil
            }
        default:
            return nil
        }
    }
}

/// The verdicts of `HostNames` for one engine: one lookup a name however
/// many of its transfers failed meanwhile, at most `lookupsAtOnce` at once,
/// off the caller's thread (a lookup may block for seconds). A verdict is kept for a while:
/// "unknown" for `unknownLifetime`, so that a host whose lookups fail for
/// want of a resolver is asked about once in that time, not once a failed
/// attempt; "does not exist" for `doesNotExistLifetime`, as a name may come
/// to exist (a VPN that comes up, a record that spreads).
final class NameVerdicts: Sendable {
    private let names: HostNames
    private let unknownLifetime: Duration
    private let doesNotExistLifetime: Duration
    private let longestWait: DispatchTimeInterval
    private let state = Mutex(State())
    private let nextWaiter = Atomic<UInt64>(0)
    /// Lookups at once, at most: each blocks a thread of its own, and 200
    /// names whose lookups time out must not make 200 threads; one at a time, 100 misspelt
    /// names behind a resolver that drops queries past a burst (glibc asks
    /// again 5 s later) took a minute to be told apart. The rest wait their
    /// turn, their URLs going on as before meanwhile (see `longestWait`).
    static let lookupsAtOnce = 8

    private struct State {
        var entries: [String: Entry] = [:]
        /// Names waiting for a lookup to be free, in turn.
        var queued: [String] = []
        var running = 0
    }

    private enum Entry {
        /// A lookup runs or waits its turn; these wait for it. `gaveUpWaiting`:
        /// when a caller last stopped waiting for it (`longestWait`).
        case asking([UInt64: CheckedContinuation<HostNames.Verdict, Never>], gaveUpWaiting: ContinuousClock.Instant?)
        case known(HostNames.Verdict, at: ContinuousClock.Instant)
    }

    /// `longestWait`: how long a caller waits for a lookup before it is
    /// answered `.unknown` (the lookup goes on, and its verdict counts for
    /// the next failure): a resolver that hangs (a stuck name service
    /// module) must not hold a URL past the time libcurl gave its own lookup.
    init(_ names: HostNames, longestWait: Duration = .seconds(2),
         unknownLifetime: Duration = .seconds(5), doesNotExistLifetime: Duration = .seconds(60)) {
        self.names = names
        self.unknownLifetime = unknownLifetime
        self.doesNotExistLifetime = doesNotExistLifetime
        let milliseconds = max(longestWait, .zero) / .milliseconds(1)
        self.longestWait = milliseconds < Double(Int32.max) ? .milliseconds(Int(milliseconds)) : .never
    }

    /// What the resolver says of `name`: remembered, or looked up now. A
    /// cancelled caller is answered `.unknown` at once, and any caller after
    /// `longestWait`, rather than wait for a lookup that may take long; for
    /// `unknownLifetime` after that, later callers are answered `.unknown` at
    /// once (a hung lookup costs each failure of its name no wait).
    func verdict(for name: String) async -> HostNames.Verdict {
        let waiter = nextWaiter.add(1, ordering: .relaxed).newValue
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let (answer, startsLookup) = state.withLock { state -> (HostNames.Verdict?, Bool) in
                    // Checked under the lock `onCancel` takes: cancelled before, it found no waiter to answer.
                    if Task.isCancelled { return (.unknown, false) }
                    switch state.entries[name] {
                    case .known(let verdict, let at)? where .now - at < lifetime(of: verdict):
                        return (verdict, false)
                    case .asking(_, let gaveUpWaiting?)? where .now - gaveUpWaiting < unknownLifetime:
                        return (.unknown, false)
                    case .asking(var waiters, let gaveUpWaiting)?:
                        waiters[waiter] = continuation
                        state.entries[name] = .asking(waiters, gaveUpWaiting: gaveUpWaiting)
                        return (nil, false)
                    case .known?, nil:
                        state.entries[name] = .asking([waiter: continuation], gaveUpWaiting: nil)
                        guard state.running < Self.lookupsAtOnce else {
                            state.queued.append(name)
                            return (nil, false)
                        }
                        state.running += 1
                        return (nil, true)
                    }
                }
                if let answer {
                    continuation.resume(returning: answer)
                    return
                }
                if startsLookup { lookUp(name) }
                DispatchQueue.global().asyncAfter(deadline: .now() + longestWait) {
                    self.stopWaiting(waiter, for: name, gaveUp: true)
                }
            }
        } onCancel: {
            stopWaiting(waiter, for: name, gaveUp: false)
        }
    }

    /// Whether `name` was found not to exist. Never waits for a lookup.
    func knownNotToExist(_ name: String) -> Bool {
        state.withLock { state in
            if case .known(.doesNotExist, let at)? = state.entries[name], .now - at < doesNotExistLifetime { return true }
            return false
        }
    }

    /// Callers waiting for the lookup of `name` (for tests).
    func waiters(for name: String) -> Int {
        state.withLock { state in
            if case .asking(let waiters, _)? = state.entries[name] { return waiters.count }
            return 0
        }
    }

    private func lifetime(of verdict: HostNames.Verdict) -> Duration {
        verdict == .doesNotExist ? doesNotExistLifetime : unknownLifetime
    }

    /// Looks `name` up, then each name queued meanwhile, on a thread of its
    /// own: a lookup blocks its thread for as long as the resolver takes,
    /// which is not to be one of the threads Dispatch shares with the run's
    /// tasks (eight of them, held by a resolver that hangs).
    private func lookUp(_ first: String) {
        let thread = Thread { [self] in
            mf_name_this_thread("mf-names")
            _ = mf_lower_thread_priority(0) // at the process's level at least (see the helper)
            var name = first
            while true {
                let verdict = names.lookUp(name)
                let (waiters, next) = state.withLock { state -> ([CheckedContinuation<HostNames.Verdict, Never>], String?) in
                    var waiters: [CheckedContinuation<HostNames.Verdict, Never>] = []
                    if case .asking(let waiting, _)? = state.entries[name] { waiters = Array(waiting.values) }
                    state.entries[name] = .known(verdict, at: .now)
                    guard !state.queued.isEmpty else {
                        state.running -= 1
                        return (waiters, nil)
                    }
                    return (waiters, state.queued.removeFirst())
                }
                for waiter in waiters { waiter.resume(returning: verdict) }
                guard let next else { return }
                name = next
            }
        }
        // Room for the resolver (its buffers are on the stack), short of the 8 MiB default a `ulimit -v` counts.
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Answers `waiter` `.unknown` if it still waits for the lookup of `name`;
    /// `gaveUp`: for want of time (not cancelled), which the next callers are spared.
    private func stopWaiting(_ waiter: UInt64, for name: String, gaveUp: Bool) {
        let continuation = state.withLock { state -> CheckedContinuation<HostNames.Verdict, Never>? in
            guard case .asking(var waiters, let gaveUpWaiting)? = state.entries[name],
                  let continuation = waiters.removeValue(forKey: waiter) else { return nil }
            state.entries[name] = .asking(waiters, gaveUpWaiting: gaveUp ? .now : gaveUpWaiting)
            return continuation
        }
        continuation?.resume(returning: .unknown)
    }
}
