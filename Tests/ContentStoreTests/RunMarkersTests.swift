import Foundation
import Testing
import TestSupport
@testable import ContentStore

#if canImport(Glibc)
import Glibc
#endif

@Suite struct RunMarkersTests {
    /// A run sees another run's mark while that run holds it, never its
    /// own, and not once the other has removed it.
    @Test func aRunSeesAnotherRunsMarkWhileItIsHeld() async throws {
        try await TemporaryDirectory.with { directory in
            let markers = RunMarkers(root: directory.path)
            let own = try #require(markers.mark())
            #expect(!markers.othersAtWork(own: own))

            // (Locks of two descriptions of a file conflict as two processes' do.)
            let other = try #require(markers.mark())
            #expect(markers.othersAtWork(own: own))
            #expect(markers.othersAtWork(own: other))

            other.remove()
            #expect(!markers.othersAtWork(own: own))
            own.remove()
            #expect(try FileManager.default.contentsOfDirectory(atPath: markers.directory).isEmpty)
        }
    }

    /// A mark no process holds is a killed run's: it does not count, and it
    /// is removed once a minute old (a younger one may be a run's that has
    /// named it and not yet locked it).
    @Test func aKilledRunsMarkDoesNotCountAndGoesOnceAMinuteOld() async throws {
        try await TemporaryDirectory.with { directory in
            let markers = RunMarkers(root: directory.path)
            try FileManager.default.createDirectory(atPath: markers.directory, withIntermediateDirectories: true)
            let old = "\(markers.directory)/123-456", young = "\(markers.directory)/123-789"
            for path in [old, young] { #expect(FileManager.default.createFile(atPath: path, contents: nil)) }
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -120)], ofItemAtPath: old)

            #expect(!markers.othersAtWork(own: nil))
            #expect(try FileManager.default.contentsOfDirectory(atPath: markers.directory) == ["123-789"])
        }
    }

    /// A mark being made is locked under a hidden name before it is named:
    /// a look in between finds a run at work, and never takes the lock
    /// that would make the mark fail.
    @Test func aMarkBeingMadeCountsAsARunAtWork() async throws {
        try await TemporaryDirectory.with { directory in
            let markers = RunMarkers(root: directory.path)
            try FileManager.default.createDirectory(atPath: markers.directory, withIntermediateDirectories: true)
            let fd = open("\(markers.directory)/.123-456", O_RDWR | O_CREAT | O_EXCL, 0o644)
            #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            #expect(markers.othersAtWork(own: nil))
            close(fd)
            #expect(!markers.othersAtWork(own: nil))
        }
    }

    /// A cache that cannot be written gets no mark, and no error: a mark
    /// only spares other runs' downloads.
    @Test func noMarkWhereTheCacheCannotBeWritten() async throws {
        try await TemporaryDirectory.with { directory in
            let markers = RunMarkers(root: directory.path)
            #expect(FileManager.default.createFile(atPath: markers.directory, contents: Data("a file".utf8)))
            #expect(markers.mark() == nil)
            #expect(!markers.othersAtWork(own: nil))
        }
    }

    /// When `runs/` changed is read off the directory: a mark made or removed changes it.
    @Test func makingAMarkChangesTheDirectory() async throws {
        try await TemporaryDirectory.with { directory in
            let markers = RunMarkers(root: directory.path)
            #expect(markers.lastChange() == nil)
            let mark = try #require(markers.mark())
            defer { mark.remove() }
            #expect(markers.lastChange() != nil)
        }
    }
}
