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
public struct HostNames: Sendable {
    /// What the resolver says of a name.
    public enum Verdict: Sendable, Equatable {
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
    public static let system = HostNames { name in
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

    private static func name(after prefix: String, in message: String) -> String? {
        guard message.hasPrefix(prefix) else { return nil }
        let name = message.utf8.dropFirst(prefix.utf8.count)
        guard !name.isEmpty, name.count <= 253, name.allSatisfy({ byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
                return true
            default:
                return false
            }
        }) else { return nil }
        return String(Substring(name))
    }

    /// Whether `name`, as libcurl's message gives it, is the host of
    /// `hostKey` (`RequestTarget.hostKey`, "host:port"). libcurl says
    /// "Could not resolve host" of a SOCKS proxy's name too: that is not
    /// the host's. (An internationalised host's key keeps its Unicode form,
    /// which libcurl's converted name is not: such a name is tried again.)
    static func isName(_ name: String, of hostKey: String) -> Bool {
        let lowered = name.lowercased()
        guard hostKey.hasPrefix(lowered + ":") else { return false }
        return hostKey.utf8.dropFirst(lowered.utf8.count + 1).allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }
}

/// The verdicts of `HostNames` for one engine: each name is looked up once
/// at a time however many of its transfers failed meanwhile, off the
/// caller's thread (a lookup may block for seconds). A verdict is kept for a while:
/// "unknown" for `unknownLifetime`, so that a host whose lookups fail for
/// want of a resolver is asked about once in that time, not once a failed
/// attempt; "does not exist" for `doesNotExistLifetime`, as a name may come
/// to exist (a VPN that comes up, a record that spreads).
final class NameVerdicts: Sendable {
    private let names: HostNames
    private let unknownLifetime: Duration
    private let doesNotExistLifetime: Duration
    private let longestWait: DispatchTimeInterval
    private let entries = Mutex<[String: Entry]>([:])
    private let nextWaiter = Atomic<UInt64>(0)
    /// Serial: a lookup blocks the thread it runs on, and 200 names whose
    /// lookups time out must not hold 200 of the threads Dispatch shares
    /// with the rest of the run. A name waiting behind a slow lookup gets
    /// its verdict late, and its URLs meanwhile go on as before (see `longestWait`).
    private let lookups = DispatchQueue(label: "mediafetch.names")

    private enum Entry {
        /// A lookup runs; these wait for it.
        case asking([UInt64: CheckedContinuation<HostNames.Verdict, Never>])
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
        let (seconds, attoseconds) = max(longestWait, .zero).components
        self.longestWait = .nanoseconds(Int(clamping: seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
    }

    /// What the resolver says of `name`: remembered, or looked up now. A
    /// cancelled caller is answered `.unknown` at once, and any caller after
    /// `longestWait`, rather than wait for a lookup that may take long.
    func verdict(for name: String) async -> HostNames.Verdict {
        let waiter = nextWaiter.add(1, ordering: .relaxed).newValue
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let (answer, startsLookup) = entries.withLock { entries -> (HostNames.Verdict?, Bool) in
                    // Checked under the lock `onCancel` takes: cancelled before, it found no waiter to answer.
                    if Task.isCancelled { return (.unknown, false) }
                    switch entries[name] {
                    case .known(let verdict, let at)? where .now - at < lifetime(of: verdict):
                        return (verdict, false)
                    case .asking(var waiters)?:
                        waiters[waiter] = continuation
                        entries[name] = .asking(waiters)
                        return (nil, false)
                    case .known?, nil:
                        entries[name] = .asking([waiter: continuation])
                        return (nil, true)
                    }
                }
                if let answer {
                    continuation.resume(returning: answer)
                    return
                }
                if startsLookup {
                    lookups.async { [names] in self.settle(name, names.lookUp(name)) }
                }
                DispatchQueue.global().asyncAfter(deadline: .now() + longestWait) { self.stopWaiting(waiter, for: name) }
            }
        } onCancel: {
            stopWaiting(waiter, for: name)
        }
    }

    private func lifetime(of verdict: HostNames.Verdict) -> Duration {
        verdict == .doesNotExist ? doesNotExistLifetime : unknownLifetime
    }

    /// Answers `waiter` `.unknown` if it still waits for the lookup of `name`.
    private func stopWaiting(_ waiter: UInt64, for name: String) {
        let continuation = entries.withLock { entries -> CheckedContinuation<HostNames.Verdict, Never>? in
            guard case .asking(var waiters)? = entries[name], let continuation = waiters.removeValue(forKey: waiter) else { return nil }
            entries[name] = .asking(waiters)
            return continuation
        }
        continuation?.resume(returning: .unknown)
    }

    /// Whether libcurl's `failureMessage` ("Could not resolve host: NAME")
    /// names a name found not to exist, and that name is the one of
    /// `hostKey` (see `HostNames.isName`). Never waits for a lookup.
    func knownNotToExist(failureMessage: String, hostKey: String) -> Bool {
        guard let name = HostNames.unresolvedName(in: failureMessage), HostNames.isName(name, of: hostKey) else { return false }
        return entries.withLock { entries in
            if case .known(.doesNotExist, let at)? = entries[name], .now - at < doesNotExistLifetime { return true }
            return false
        }
    }

    /// Callers waiting for the lookup of `name` (for tests).
    func waiters(for name: String) -> Int {
        entries.withLock { entries in
            if case .asking(let waiters)? = entries[name] { return waiters.count }
            return 0
        }
    }

    private func settle(_ name: String, _ verdict: HostNames.Verdict) {
        let waiters = entries.withLock { entries -> [CheckedContinuation<HostNames.Verdict, Never>] in
            defer { entries[name] = .known(verdict, at: .now) }
            guard case .asking(let waiters)? = entries[name] else { return [] }
            return Array(waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: verdict) }
    }
}
