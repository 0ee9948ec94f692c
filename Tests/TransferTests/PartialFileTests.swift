import Crypto
import Foundation
import Testing
import TestSupport
@testable import Transfer

#if canImport(Glibc)
import Glibc
#endif

@Suite struct PartialFileTests {
    private func mode(_ path: String) throws -> Int {
        try #require(try permissions(of: path))
    }

    @Test func aNewPartialIsReadOnlyAndSaysSoWhenComplete() async throws {
        try await TemporaryDirectory.with { directory in
            let partial = try PartialFile(directory: directory.path, url: "http://example.test/new")
            #expect(try mode(partial.path) == 0o444)
            let finished = try partial.complete(budget: FinishedFile.Budget(limit: 4))
            defer { finished.release() }
            #expect(finished.isReadOnly)
        }
    }

    @Test func aPartialWhoseModeChangedIsNotCountedReadOnly() async throws {
        try await TemporaryDirectory.with { directory in
            // A umask or a default ACL can give a new file another mode than asked for.
            let partial = try PartialFile(directory: directory.path, url: "http://example.test/changed")
            #expect(fchmod(partial.descriptor, 0o640) == 0)
            let finished = try partial.complete(budget: FinishedFile.Budget(limit: 4))
            defer { finished.release() }
            #expect(!finished.isReadOnly)
        }
    }

    @Test func theKeyIsTheURLsSHA256() {
        // Partials left by earlier versions are found by this name.
        let url = "http://example.test/sound.flac"
        #expect(PartialFile.key(for: url) == SHA256.hash(data: Data(url.utf8)).hexString.prefix(40))
    }
}

