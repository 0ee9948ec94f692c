import CTestProcess

/// The test process itself (see `CTestProcess`).
public enum TestProcess {
    /// Whether SIGPIPE is ignored here, as `CTestProcess`'s constructor sets it before any test.
    public static var ignoresSIGPIPE: Bool { mf_test_process_ignores_sigpipe() == 1 }
}
