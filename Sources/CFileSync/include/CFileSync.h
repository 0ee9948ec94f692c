#ifndef MEDIAFETCH_CFILESYNC_H
#define MEDIAFETCH_CFILESYNC_H

/// syncfs(2): writes back every dirty page of the filesystem holding `fd`.
/// One call makes a whole group of files durable, where an fsync per file
/// would force one journal commit each. Not exported by Swift's Glibc module
/// (it is a GNU extension), hence this wrapper. Returns 0 or -1 with errno.
int mf_syncfs(int fd);

/// renameat2(2) with RENAME_NOREPLACE: moves `from` (relative to the
/// directory `fromDirectory`) to `to` (relative to `toDirectory`) unless `to`
/// exists (then fails with EEXIST), in one atomic step, so "store unless
/// already stored" needs no separate existence check. Names relative to open
/// directories spare the kernel a walk of the whole path for every file.
/// Where the kernel or filesystem lacks it, falls back to linkat(2) +
/// unlinkat(2), which is also atomic about the existing name. Either
/// directory may be AT_FDCWD. Returns 0 or -1 with errno.
int mf_renameat_noreplace(int fromDirectory, const char *from, int toDirectory, const char *to);

/// sync_file_range(2) with SYNC_FILE_RANGE_WRITE: starts writing back the
/// given range of `fd` without waiting, so a later flush finds the bytes on
/// disk already. A hint: failures are ignored (and it is a no-op off Linux).
void mf_start_writeback(int fd, long long offset, long long length);

/// Turns O_DIRECT on (`enabled` non-zero) or off for the open file `fd`
/// (fcntl F_SETFL). With it on, write(2) moves the bytes from the caller's
/// buffer to the device instead of copying them into the page cache: no
/// copy, and nothing left to write back when the file is flushed. The
/// buffer address, the file offset and the length must then be multiples of
/// the device's block size. Swift's Glibc module does not export O_DIRECT
/// (a GNU extension). Returns 0, or -1 with errno (EINVAL where the
/// filesystem does not support it); always -1 with ENOTSUP off Linux.
int mf_set_direct_io(int fd, int enabled);

/// The O_DIRECT flag for open(2), or 0 where there is none: a new file can
/// be created for direct I/O in one call instead of an open and two fcntl.
int mf_direct_open_flag(void);

/// mallopt(3) for a process that runs many short transfers: blocks up to
/// 1 MiB come from the heap instead of a fresh mmap each, and the heap is not
/// trimmed after every free. libcurl allocates a transfer's receive buffer
/// when it starts and frees it when it ends; this keeps those pages warm
/// instead of faulting in new ones per transfer. It also caps glibc at two
/// heap arenas: each of the process's ten or so threads would otherwise get
/// an arena of its own, each keeping what it once held (32,000 small files:
/// peak RSS 74 MiB with the default, 57 MiB with two, at the same speed).
/// No-op off glibc.
void mf_tune_allocator(void);

/// fallocate(2) with FALLOC_FL_KEEP_SIZE: gives the first `length` bytes of
/// `fd` blocks of their own (holes filled, room past the end kept for it)
/// without changing its size or contents. A file mapped with holes in it
/// turns a store into a hole on a full disk into SIGBUS; allocated first, it
/// cannot. Returns 0, or -1 with errno (EOPNOTSUPP where the filesystem
/// cannot; ENOSPC when there is no room); -1 with ENOTSUP off Linux.
int mf_allocate_keeping_size(int fd, long long length);

/// The filesystem type of `path` (statfs(2)'s f_type, such as 0xEF53 for
/// ext2/3/4), or 0 when it cannot be told. Swift's Glibc module does not
/// export statfs, and statvfs has no type.
long mf_filesystem_type(const char *path);

/// pipe2(2) with O_CLOEXEC: a pipe whose ends are close-on-exec from the
/// moment they exist, so a child another thread starts at that instant
/// cannot inherit them (pipe + fcntl leaves a window). Swift's Glibc module
/// does not export pipe2. Elsewhere, pipe + fcntl. Returns 0 or -1 with errno.
int mf_pipe_cloexec(int ends[2]);

/// Releases `fd`'s flock(2) lock (LOCK_UN), then closes it. Closing alone
/// leaves the lock with any copy of the descriptor: a process that another
/// thread of the program is starting (posix_spawn, fork) holds one until it
/// execs, and a partial download or catalog file closed meanwhile was found
/// locked by the next opening in this process. An unlock acts on the open
/// file itself. Harmless on a descriptor that holds no lock. Returns
/// close(2)'s result.
int mf_close_unlocking(int fd);

/// How many nice levels below the process work that can wait for the
/// transfer thread runs: hashing and writing bodies, making the store's
/// directories ahead (see `mf_lower_thread_priority`).
#define MF_BACKGROUND_NICE_STEPS 5

/// Sets the calling thread's CPU priority `steps` nice levels below the
/// process's (its main thread's; never past 19), for work that can wait for
/// other threads of the process. On Linux a thread's nice value is its own,
/// set with setpriority(2) on the calling thread. A new thread inherits its
/// creator's, and an unprivileged thread cannot raise its own: whatever a
/// lowered thread starts (a Dispatch worker that libdispatch starts from it,
/// say) runs as low unless it sets a level itself. This helper counts from
/// the process, not from the caller, so that one lowered thread that starts
/// another calling it does not push that one further down. With `steps` 0
/// it puts a thread at the process's level at least: libdispatch runs its
/// workers at levels of its own where it may (as root, a default-priority
/// one at 0 whatever the process's nice), and a thread one of them starts
/// inherits that. A process started with `nice` keeps its order; never a
/// raise. Returns 0, or -1 with errno; a no-op returning 0 off Linux, where
/// setpriority(2) acts on the whole process.
int mf_lower_thread_priority(int steps);

/// pthread_setname_np(3) for the calling thread: the name `top -H`, `perf`
/// and debuggers show for it, cut to the 15 bytes Linux keeps. Foundation's
/// `Thread.name` sets no such name on Linux (every thread showed the name of
/// the Dispatch thread that started it), and Swift's Glibc module does not
/// export the call. Best effort.
void mf_name_this_thread(const char *name);

/// RLIMIT_NPROC (the limit on a user's processes, threads among them), which
/// Swift's Glibc module does not export.
int mf_rlimit_nproc(void);

/// Runs `body(context)` on a thread whose standard output and error go to
/// /dev/null, then `then(context)` on an ordinary thread, without touching
/// the rest of the process. Decoders that print their notes to stderr
/// (libmpg123 under libsndfile: "Note: Trying to resync...") then cannot
/// write into the terminal's progress line.
///
/// A new detached thread starts a second one and waits for it. The second
/// takes a descriptor table of its own (close_range(2) with
/// CLOSE_RANGE_UNSHARE, Linux 5.9 and later), in which every descriptor but
/// 0, 1 and 2 is closed and those three are /dev/null; `body` runs there. A
/// descriptor opened in that table means nothing in the process's, so
/// `body` must close what it opens, start no thread (a thread shares the
/// table of the one that starts it) and hand nothing on: `then` runs on
/// the first thread, with the process's table, once the second has ended.
/// Where the second cannot start or the kernel cannot give it a table,
/// `body` runs with the process's. `name` (NULL for none; cut to the 15
/// bytes Linux keeps) names the second thread. Returns 0, or ENOMEM or
/// pthread_create's error for the first thread (neither function ran).
int mf_run_quietly(void (*body)(void *context), void (*then)(void *context), void *context, const char *name);

#endif
