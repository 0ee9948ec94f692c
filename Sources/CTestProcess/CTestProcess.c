#include "CTestProcess.h"
#include <signal.h>
#include <stddef.h>

__attribute__((constructor)) static void mf_ignore_sigpipe_in_tests(void) {
    signal(SIGPIPE, SIG_IGN);
}

int mf_test_process_ignores_sigpipe(void) {
    struct sigaction current;
    if (sigaction(SIGPIPE, NULL, &current) != 0) return 0;
    return current.sa_handler == SIG_IGN;
}
