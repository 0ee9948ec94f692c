#define _GNU_SOURCE
#include "CFileSync.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#endif

#if defined(__linux__)
int mf_syncfs(int fd) { return syncfs(fd); }
#else
// Elsewhere there is no syncfs: a full sync() is the portable fallback.
int mf_syncfs(int fd) { (void)fd; sync(); return 0; }
#endif

int mf_renameat_noreplace(int fromDirectory, const char *from, int toDirectory, const char *to) {
#if defined(__linux__) && defined(RENAME_NOREPLACE)
    if (renameat2(fromDirectory, from, toDirectory, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
#endif
    if (linkat(fromDirectory, from, toDirectory, to, 0) != 0) return -1;
    return unlinkat(fromDirectory, from, 0);
}

long mf_filesystem_type(const char *path) {
#if defined(__linux__)
    struct statfs info;
    if (statfs(path, &info) != 0) return 0;
    return (long)info.f_type;
#else
    (void)path;
    return 0;
#endif
}

int mf_allocate_keeping_size(int fd, long long length) {
#if defined(__linux__) && defined(FALLOC_FL_KEEP_SIZE)
    return fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)length);
#else
    (void)fd; (void)length;
    errno = ENOTSUP;
    return -1;
#endif
}

void mf_start_writeback(int fd, long long offset, long long length) {
#if defined(__linux__)
    (void)sync_file_range(fd, (off_t)offset, (off_t)length, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd; (void)offset; (void)length;
#endif
}

int mf_set_direct_io(int fd, int enabled) {
#if defined(__linux__) && defined(O_DIRECT)
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    int wanted = enabled ? (flags | O_DIRECT) : (flags & ~O_DIRECT);
    if (wanted == flags) return 0;
    return fcntl(fd, F_SETFL, wanted);
#else
    (void)fd; (void)enabled;
    errno = ENOTSUP;
    return -1;
#endif
}

int mf_direct_open_flag(void) {
#if defined(__linux__) && defined(O_DIRECT)
    return O_DIRECT;
#else
    return 0;
#endif
}

void mf_tune_allocator(void) {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 16 << 20);
    mallopt(M_ARENA_MAX, 2);
#endif
}

int mf_pipe_cloexec(int ends[2]) {
#if defined(__linux__)
    return pipe2(ends, O_CLOEXEC);
#else
    if (pipe(ends) != 0) return -1;
    fcntl(ends[0], F_SETFD, FD_CLOEXEC);
    fcntl(ends[1], F_SETFD, FD_CLOEXEC);
    return 0;
#endif
}

int mf_close_unlocking(int fd) {
    (void)flock(fd, LOCK_UN);
    return close(fd);
}

int mf_lower_thread_priority(int steps) {
#if defined(__linux__)
    // With PRIO_PROCESS, Linux takes `who` for a thread: the process's id
    // is its main thread, 0 the calling thread.
    errno = 0;
    int process = getpriority(PRIO_PROCESS, (id_t)getpid());
    if (process == -1 && errno != 0) return -1;
    errno = 0;
    int current = getpriority(PRIO_PROCESS, 0);
    if (current == -1 && errno != 0) return -1;
    int lowered = process + (steps > 0 ? steps : 0);
    if (lowered > 19) lowered = 19;
    if (lowered <= current) return 0;
    return setpriority(PRIO_PROCESS, 0, lowered);
#else
    (void)steps;
    return 0;
#endif
}

void mf_name_this_thread(const char *name) {
#if defined(__APPLE__)
    (void)pthread_setname_np(name);
#else
    char kept[16];
    strncpy(kept, name, sizeof kept - 1);
    kept[sizeof kept - 1] = '\0';
    (void)pthread_setname_np(pthread_self(), kept);
#endif
}

int mf_rlimit_nproc(void) {
    return RLIMIT_NPROC;
}

#if defined(__linux__) && !defined(CLOSE_RANGE_UNSHARE)
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif

/// The quiet thread's stack: libsndfile and its decoders keep their state on
/// the heap (a FLAC, Vorbis, Opus, MP3 or ALAC decode of up to 8 channels
/// used 8–29 KiB of stack, measured).
static const size_t mf_quiet_stack_size = 512 << 10;

struct mf_quiet_run {
    void (*body)(void *);
    void (*then)(void *);
    void *context;
    char name[16];
};

/// The second thread of `mf_run_quietly`: its own table, /dev/null for 0–2, then the body.
static void *mf_quiet_body_main(void *argument) {
    struct mf_quiet_run *run = argument;
    if (run->name[0] != 0) mf_name_this_thread(run->name);
#if defined(__linux__) && defined(SYS_close_range)
    // The table is copied for this thread first, and only the copy's
    // descriptors from 3 on close. 0–2 stay the process's copies unless
    // /dev/null opens (as 3, the lowest free) to replace them.
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_UNSHARE) == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
            if (null > 2) close(null);
        }
    }
#endif
    run->body(run->context);
    return NULL;
}

/// The first thread of `mf_run_quietly`: starts the second, waits for it, then runs `then`.
static void *mf_quiet_run_main(void *argument) {
    struct mf_quiet_run run = *(struct mf_quiet_run *)argument;
    free(argument);
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, mf_quiet_stack_size);
    pthread_t body;
    int started = pthread_create(&body, &attributes, mf_quiet_body_main, &run);
    pthread_attr_destroy(&attributes);
    if (started == 0) {
        pthread_join(body, NULL);
    } else {
        run.body(run.context);
    }
    run.then(run.context);
    return NULL;
}

int mf_run_quietly(void (*body)(void *context), void (*then)(void *context), void *context, const char *name) {
    struct mf_quiet_run *run = calloc(1, sizeof *run);
    if (run == NULL) return ENOMEM;
    run->body = body;
    run->then = then;
    run->context = context;
    if (name != NULL) strncpy(run->name, name, sizeof run->name - 1);
    // The default stack: `then` runs the caller's own code (storing a body, starting downloads).
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    int result = pthread_create(&thread, &attributes, mf_quiet_run_main, run);
    pthread_attr_destroy(&attributes);
    if (result != 0) free(run);
    return result;
}
