import Foundation
import Synchronization
import Testing
@testable import Transfer

/// What the resolver says of names libcurl could not resolve, and how often it is asked.
@Suite struct HostNamesTests {
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
        let verdicts = NameVerdicts(resolver.names)
        let waiters = (0..<8).map { _ in Task { await verdicts.verdict(for: "typo.example") } }
        // Every waiter is waiting before the lookup answers.
        while verdicts.waiters(for: "typo.example") < waiters.count { try await Task.sleep(for: .milliseconds(5)) }
        #expect(!verdicts.knownNotToExist(named: "Could not resolve host: typo.example"))
        resolver.release.signal()
        for waiter in waiters { #expect(await waiter.value == .doesNotExist) }
        let looked = resolver.lookups.withLock { $0 }
        #expect(looked == ["typo.example"])
        // Remembered: asked again, the resolver is not.
        #expect(await verdicts.verdict(for: "typo.example") == .doesNotExist)
        #expect(resolver.lookupCount == 1)
        #expect(verdicts.knownNotToExist(named: "Could not resolve host: typo.example"))
        #expect(!verdicts.knownNotToExist(named: "Could not resolve host: other.example"))
    }

    @Test func anUnknownVerdictIsAskedAgainOnlyOnceItsLifetimeIsOver() async throws {
        let resolver = HeldResolver(.unknown)
        for _ in 0..<4 { resolver.release.signal() }
        let shortLived = NameVerdicts(resolver.names, unknownLifetime: .zero)
        #expect(await shortLived.verdict(for: "offline.example") == .unknown)
        #expect(await shortLived.verdict(for: "offline.example") == .unknown)
        #expect(resolver.lookupCount == 2)
        let longLived = NameVerdicts(resolver.names, unknownLifetime: .seconds(3600))
        #expect(await longLived.verdict(for: "offline.example") == .unknown)
        #expect(await longLived.verdict(for: "offline.example") == .unknown)
        #expect(resolver.lookupCount == 3)
        #expect(!longLived.knownNotToExist(named: "Could not resolve host: offline.example"))
    }

    @Test func aCancelledWaiterIsAnsweredAtOnceWhileTheLookupGoesOn() async throws {
        let resolver = HeldResolver(.doesNotExist)
        let verdicts = NameVerdicts(resolver.names)
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
