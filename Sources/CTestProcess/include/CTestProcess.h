#ifndef MEDIAFETCH_CTESTPROCESS_H
#define MEDIAFETCH_CTESTPROCESS_H

/// Whether this process ignores SIGPIPE. A constructor of this target
/// (linked into the test bundle only, through TestSupport) makes the test
/// process ignore it before any test runs, as `mediafetch get` does for its
/// run: a write to a pipe or socket whose reader went, on any of the many
/// threads the in-process tests start, killed the whole test run with
/// signal 13 (seen once in about thirty full runs) instead of failing one
/// write with EPIPE. The processes the tests start get SIGPIPE back at its
/// default (`SpawnedProcess`), so they see what a shell's child sees.
int mf_test_process_ignores_sigpipe(void);

#endif
