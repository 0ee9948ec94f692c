import Foundation
import Testing
import TestSupport

/// The tests' own launcher of child processes (posix_spawn, not
/// Foundation's `Process`, whose `run()` crashed a full test run about once in ten).
@Suite struct CommandRunnerTests {
    /// A child holds no descriptor of the test process but its standard
    /// three: one it held (a pipe end, a listening socket) kept another
    /// test's reads from ending, or a port from being freed.
    @Test func aChildGetsOnlyItsStandardDescriptors() async throws {
        // A descriptor of the test's own, not close-on-exec, open while the child starts.
        let held = open("/dev/null", O_RDONLY)
        #expect(held > 2)
        defer { close(held) }
        let result = try await BuiltProducts.runShell("ls /proc/self/fd")
        #expect(result.status == 0, "\(result.stderr)")
        // ls's own directory descriptor is the fourth.
        #expect(result.stdout.split(separator: "\n") == ["0", "1", "2", "3"], "\(result.stdout)")
    }

    /// The test process ignores SIGPIPE (a write to a pipe or socket whose
    /// reader went fails one write, not the whole run); a child gets it at its
    /// default, as a shell's child does, so `mediafetch list | head` is seen as a person sees it.
    @Test func theTestProcessIgnoresSIGPIPEAndAChildDoesNot() async throws {
        #expect(TestProcess.ignoresSIGPIPE)
        let status = try await BuiltProducts.runShell("grep '^SigIgn:' /proc/$$/status")
        let mask = status.stdout.split(separator: "\t").last.flatMap { UInt64($0.trimmingCharacters(in: .whitespacesAndNewlines), radix: 16) }
        #expect(mask.map { $0 & (1 << (UInt64(SIGPIPE) - 1)) == 0 } == true, "\(status.stdout)")
    }

    @Test func theStatusIsTheExitCodeOrTheSignal() async throws {
        #expect(try await BuiltProducts.runShell("exit 7").status == 7)
        #expect(try await BuiltProducts.runShell("kill -KILL $$").status == SIGKILL)
        let echoed = try await BuiltProducts.runShell("echo out; echo err >&2; cat")
        #expect(echoed.stdout == "out\n" && echoed.stderr == "err\n")
    }
}
