import CCurl
import Foundation
import Synchronization
import Testing
@testable import Transfer

/// What the resolver says of names libcurl could not resolve, and how often it is asked.
@Suite(.timeLimit(.minutes(1))) // a lookup waited for wrongly would hang here
struct HostNamesTests {
    @Test func theNameIsTakenFromLibcurlsMessageWhenItIsAPlainOne() {
        #expect(HostNames.unresolvedName(in: "Could not resolve host: photos.example.com") == "photos.example.com")
        #expect(HostNames.unresolvedName(in: "Could not resolve host: under_score-1.test") == "under_score-1.test")
        // Not the host's (a proxy's), none named, or one the system may read otherwise than libcurl did.
        #expect(HostNames.unresolvedName(in: "Could not resolve proxy: proxy.example") == nil)
        #expect(HostNames.unresolvedName(in: "Could not resolve host: ") == nil)
        #expect(HostNames.unresolvedName(in: "Could not resolve host: bücher.example") == nil)
        #expect(HostNames.unresolvedName(in: "Could not resolve host: a.example (more)") == nil)
        #expect(HostNames.unresolvedName(in: "Could not resolve host: " + String(repeating: "a", count: 254)) == nil)
        #expect(HostNames.unresolvedName(in: "Failed to connect to a.example port 80") == nil)
    }

    @Test func onlyTheNameOfTheHostAskedForCounts() {
        #expect(HostNames.isName("photos.example.com", of: "photos.example.com:443"))
        #expect(HostNames.isName("Photos.Example.COM", of: "photos.example.com:80"))
        // A SOCKS proxy's name (libcurl says "Could not resolve host" of it too), or a part of the host's.
        #expect(!HostNames.isName("proxy.example", of: "photos.example.com:443"))
        #expect(!HostNames.isName("photos", of: "photos.example.com:443"))
        #expect(!HostNames.isName("photos.example.com", of: "photos.example.com.evil:443"))
        #expect(!HostNames.isName("photos.example.com", of: "photos.example.com:443x"))
    }

    /// Whose name libcurl could not resolve: the host's however libcurl spelt
    /// it when no proxy is in the way; a proxy's by its variable; with a proxy
    /// for the scheme, another name only when it is the host's as asked for.
    @Test func theNameIsTheHostsOrTheProxys() {
        func failed(_ code: CURLcode, _ message: String, host: String? = "bücher.invalid:80",
                    scheme: String = "http", _ environment: [String: String] = [:]) -> UnresolvedName? {
            UnresolvedName(code: code, message: message, hostKey: host, scheme: scheme, proxies: ProxyEnvironment(environment))
        }
        // No proxy: an internationalised host converted, a percent-encoded one decoded, a redirect's host not known.
        #expect(failed(CURLE_COULDNT_RESOLVE_HOST, "Could not resolve host: xn--bcher-kva.invalid")
            == .init(name: "xn--bcher-kva.invalid", owner: .host))
        #expect(failed(CURLE_COULDNT_RESOLVE_HOST, "Could not resolve host: bad.invalid", host: nil)
            == .init(name: "bad.invalid", owner: .host))
        // An HTTP proxy's name, a SOCKS proxy's (as libcurl says it), and one the environment spells otherwise.
        let http = ["http_proxy": "http://Proxy.Invalid:3128"]
        #expect(failed(CURLE_COULDNT_RESOLVE_PROXY, "Could not resolve proxy: proxy.invalid", http)
            == .init(name: "proxy.invalid", owner: .proxy(variable: "http_proxy")))
        #expect(failed(CURLE_COULDNT_RESOLVE_PROXY, "Could not resolve proxy: xn--prxy-1ra.invalid", ["http_proxy": "http://prüxy.invalid"])
            == .init(name: "xn--prxy-1ra.invalid", owner: .proxy(variable: nil)))
        let socks = ["all_proxy": "socks5h://socks.invalid:1080"]
        #expect(failed(CURLE_COULDNT_RESOLVE_HOST, "Could not resolve host: socks.invalid", socks)
            == .init(name: "socks.invalid", owner: .proxy(variable: "all_proxy")))
        // With a proxy for the scheme, the host's name as asked for; another cannot be told apart.
        #expect(failed(CURLE_COULDNT_RESOLVE_HOST, "Could not resolve host: photos.invalid", host: "photos.invalid:80", socks)
            == .init(name: "photos.invalid", owner: .host))
        #expect(failed(CURLE_COULDNT_RESOLVE_HOST, "Could not resolve host: xn--bcher-kva.invalid", socks) == nil)
        // The other scheme's proxy is no obstacle; other failures name no name.
        #expect(failed(CURLE_COULDNT_RESOLVE_HOST, "Could not resolve host: xn--bcher-kva.invalid", scheme: "https", http)
            == .init(name: "xn--bcher-kva.invalid", owner: .host))
        #expect(failed(CURLE_COULDNT_CONNECT, "Could not resolve host: a.invalid") == nil)
        #expect(failed(CURLE_COULDNT_RESOLVE_HOST, "Resolving timed out after 15000 milliseconds") == nil)
    }

    @Test func onlyNoSuchNameSaysTheNameDoesNotExist() {
        #expect(HostNames.verdict(lookupStatus: EAI_NONAME) == .doesNotExist)
        // Offline, a resolver failing, or a name that resolves by now.
        for status in [EAI_AGAIN, EAI_FAIL, EAI_SYSTEM, 0] {
            #expect(HostNames.verdict(lookupStatus: status) == .unknown, "status \(status)")
        }
    }

    /// A resolver that counts its lookups and answers `verdict` once `release` is signalled.
    private final class HeldResolver: Sendable {
        let lookups = Mutex<[String]>([])
        let release = DispatchSemaphore(value: 0)
        let verdict: HostNames.Verdict
        init(_ verdict: HostNames.Verdict) { self.verdict = verdict }
        var lookupCount: Int { lookups.withLock { $0.count } }
        var names: HostNames {
            HostNames { [self] name in
                lookups.withLock { $0.append(name) }
                release.wait()
                return verdict
            }
        }
    }

    @Test func failuresOfOneNameMeanwhileShareOneLookupAndANameThatDoesNotExistIsRemembered() async throws {
        let resolver = HeldResolver(.doesNotExist)
        let verdicts = NameVerdicts(resolver.names, longestWait: .seconds(3600))
        let waiters = (0..<8).map { _ in Task { await verdicts.verdict(for: "typo.example") } }
        // Every waiter is waiting before the lookup answers.
        while verdicts.waiters(for: "typo.example") < waiters.count { try await Task.sleep(for: .milliseconds(5)) }
        #expect(!verdicts.knownNotToExist("typo.example"))
        resolver.release.signal()
        for waiter in waiters { #expect(await waiter.value == .doesNotExist) }
        let looked = resolver.lookups.withLock { $0 }
        #expect(looked == ["typo.example"])
        // Remembered: asked again, the resolver is not.
        #expect(await verdicts.verdict(for: "typo.example") == .doesNotExist)
        #expect(resolver.lookupCount == 1)
        #expect(verdicts.knownNotToExist("typo.example"))
        #expect(!verdicts.knownNotToExist("other.example"))
    }

    /// "Unknown" is kept 5 s, "does not exist" a minute: asked again only after.
    @Test(arguments: [HostNames.Verdict.unknown, .doesNotExist])
    func aVerdictIsAskedAgainOnlyOnceItsLifetimeIsOver(_ verdict: HostNames.Verdict) async throws {
        let resolver = HeldResolver(verdict)
        for _ in 0..<3 { resolver.release.signal() }
        func verdicts(living lifetime: Duration) -> NameVerdicts {
            verdict == .unknown ? NameVerdicts(resolver.names, longestWait: .seconds(3600), unknownLifetime: lifetime)
                : NameVerdicts(resolver.names, longestWait: .seconds(3600), doesNotExistLifetime: lifetime)
        }
        let shortLived = verdicts(living: .zero)
        #expect(await shortLived.verdict(for: "name.example") == verdict)
        #expect(!shortLived.knownNotToExist("name.example"))
        #expect(await shortLived.verdict(for: "name.example") == verdict)
        #expect(resolver.lookupCount == 2)
        let longLived = verdicts(living: .seconds(3600))
        #expect(await longLived.verdict(for: "name.example") == verdict)
        #expect(await longLived.verdict(for: "name.example") == verdict)
        #expect(resolver.lookupCount == 3)
        #expect(longLived.knownNotToExist("name.example") == (verdict == .doesNotExist))
    }

    /// A resolver that hangs holds no URL past `longestWait`: it is answered
    /// "unknown" (and tried again as before), and the lookup's verdict, when
    /// it comes, counts for the next failure.
    @Test func aLookupThatHangsIsWaitedForNoLongerThanTheLongestWait() async throws {
        let resolver = HeldResolver(.doesNotExist)
        let verdicts = NameVerdicts(resolver.names, longestWait: .milliseconds(50))
        #expect(await verdicts.verdict(for: "hung.example") == .unknown)
        #expect(verdicts.waiters(for: "hung.example") == 0)
        resolver.release.signal()
        while !verdicts.knownNotToExist("hung.example") {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(await verdicts.verdict(for: "hung.example") == .doesNotExist)
        #expect(resolver.lookupCount == 1)
    }

    /// Many names at once are looked up a few at a time, the rest in turn.
    @Test func lookupsRunAFewAtATime() async throws {
        let resolver = HeldResolver(.doesNotExist)
        let verdicts = NameVerdicts(resolver.names, longestWait: .seconds(3600))
        let count = NameVerdicts.lookupsAtOnce + 4
        let waiters = (0..<count).map { index in Task { await verdicts.verdict(for: "typo-\(index).example") } }
        while (0..<count).map({ verdicts.waiters(for: "typo-\($0).example") }).reduce(0, +) < count {
            try await Task.sleep(for: .milliseconds(5))
        }
        while resolver.lookupCount < NameVerdicts.lookupsAtOnce { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(resolver.lookupCount == NameVerdicts.lookupsAtOnce)
        for _ in 0..<count { resolver.release.signal() }
        for waiter in waiters { #expect(await waiter.value == .doesNotExist) }
        #expect(resolver.lookupCount == count)
        // All given back: a second burst gets as many at once again.
        let again = (0..<NameVerdicts.lookupsAtOnce).map { index in Task { await verdicts.verdict(for: "again-\(index).example") } }
        while resolver.lookupCount < count + NameVerdicts.lookupsAtOnce { try await Task.sleep(for: .milliseconds(5)) }
        for _ in again.indices { resolver.release.signal() }
        for waiter in again { #expect(await waiter.value == .doesNotExist) }
    }

    @Test func aCancelledWaiterIsAnsweredAtOnceWhileTheLookupGoesOn() async throws {
        let resolver = HeldResolver(.doesNotExist)
        let verdicts = NameVerdicts(resolver.names, longestWait: .seconds(3600))
        let cancelled = Task { await verdicts.verdict(for: "slow.example") }
        while resolver.lookupCount == 0 { try await Task.sleep(for: .milliseconds(5)) }
        while verdicts.waiters(for: "slow.example") == 0 { try await Task.sleep(for: .milliseconds(5)) }
        cancelled.cancel()
        // Answered while the lookup still blocks: without the cancel it would wait for `release`.
        #expect(await cancelled.value == .unknown)
        #expect(verdicts.waiters(for: "slow.example") == 0)
        resolver.release.signal()
        // The lookup's verdict still counts for the next failure.
        #expect(await verdicts.verdict(for: "slow.example") == .doesNotExist)
        #expect(resolver.lookupCount == 1)
    }
}
