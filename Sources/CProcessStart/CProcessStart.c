#define _GNU_SOURCE
#include "CProcessStart.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

static int mf_closed_standard_descriptors = 0;

__attribute__((constructor))
static void mf_guard_standard_descriptors(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        // The lowest free number: `fd` itself, as those below it are open.
        int opened = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
        if (opened >= 0 && opened != fd) {
            dup2(opened, fd);
            close(opened);
        }
        mf_closed_standard_descriptors |= 1 << fd;
    }
}

int mf_standard_descriptor_was_closed(int fd) {
    return fd >= 0 && fd <= 2 && ((mf_closed_standard_descriptors >> fd) & 1);
}

int mf_set_default_thread_stack_size(size_t bytes) {
#if defined(__GLIBC__)
    pthread_attr_t attributes;
    int error = pthread_getattr_default_np(&attributes);
    if (error != 0) return error;
    error = pthread_attr_setstacksize(&attributes, bytes);
    if (error == 0) error = pthread_setattr_default_np(&attributes);
    pthread_attr_destroy(&attributes);
    return error;
#else
    (void)bytes;
    return ENOTSUP;
#endif
}
