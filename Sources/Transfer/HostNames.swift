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

    /// The system's resolver, through `getaddrinfo` as libcurl uses it
    /// (any address family, stream sockets).
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

    /// The host name in libcurl's "Could not resolve host: NAME", when it is
    /// a plain ASCII name; nil for another message, or a name the system's
    /// resolver may read otherwise than libcurl did (an internationalised
    /// one, which libcurl converts first).
    static func unresolvedName(in message: String) -> String? {
        let prefix = "Could not resolve host: "
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
}

/// The verdicts of `HostNames` for one engine: each name is looked up once
/// at a time however many of its transfers failed meanwhile, on a thread of
/// its own (a lookup may block for seconds); "does not exist" is kept for
/// the engine's life, "unknown" for `unknownLifetime`, so that a host whose
/// lookups fail for want of a resolver is asked about once in that time,
/// not once a failed attempt.
final class NameVerdicts: Sendable {
    private let names: HostNames
    private let unknownLifetime: Duration
    private let entries = Mutex<[String: Entry]>([:])
    private let nextWaiter = Atomic<UInt64>(0)
    private static let lookups = DispatchQueue(label: "mediafetch.names", attributes: .concurrent)

    private enum Entry {
        /// A lookup runs; these wait for it.
        case asking([UInt64: CheckedContinuation<HostNames.Verdict, Never>])
        case known(HostNames.Verdict, at: ContinuousClock.Instant)
    }

    init(_ names: HostNames, unknownLifetime: Duration = .seconds(5)) {
        self.names = names
        self.unknownLifetime = unknownLifetime
    }

    /// What the resolver says of `name`: remembered, or looked up now. A
    /// cancelled caller is answered `.unknown` at once, without waiting for
    /// a lookup that may take seconds.
    func verdict(for name: String) async -> HostNames.Verdict {
        let waiter = nextWaiter.add(1, ordering: .relaxed).newValue
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let (answer, startsLookup) = entries.withLock { entries -> (HostNames.Verdict?, Bool) in
                    // Checked under the lock `onCancel` takes: cancelled before, it found no waiter to answer.
                    if Task.isCancelled { return (.unknown, false) }
                    switch entries[name] {
                    case .known(let verdict, let at)? where verdict == .doesNotExist || .now - at < unknownLifetime:
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
                if let answer { continuation.resume(returning: answer) }
                if startsLookup {
                    Self.lookups.async { [names] in self.settle(name, names.lookUp(name)) }
                }
            }
        } onCancel: {
            let continuation = entries.withLock { entries -> CheckedContinuation<HostNames.Verdict, Never>? in
                guard case .asking(var waiters)? = entries[name], let continuation = waiters.removeValue(forKey: waiter) else { return nil }
                entries[name] = .asking(waiters)
                return continuation
            }
            continuation?.resume(returning: .unknown)
        }
    }

    /// Whether libcurl's failure `message` names a name already found not to
    /// exist (see `HostNames.unresolvedName`). Never waits for a lookup.
    func knownNotToExist(named message: String) -> Bool {
        guard let name = HostNames.unresolvedName(in: message) else { return false }
        return entries.withLock { entries in
            if case .known(.doesNotExist, _)? = entries[name] { return true }
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
