#ifndef MEDIAFETCH_CPROCESSSTART_H
#define MEDIAFETCH_CPROCESSSTART_H

#include <stddef.h>

/// Whether standard descriptor `fd` (0, 1 or 2) was closed when the program
/// was loaded. A constructor of this target (linked into the executable
/// only: a library must not touch its host's descriptors) gives each closed
/// one a placeholder before any other code runs, so that no descriptor the
/// process opens takes its number: with standard input closed,
/// libdispatch's epoll descriptor took 0 and `-i -` read the list from it;
/// with standard output closed, `list` wrote its rows to a timer. The
/// placeholder is /dev/null opened the other way round (standard input for
/// writing, the others for reading), so a read or write on it still fails
/// with EBADF, as on the closed descriptor: `--version >&-` still says
/// that it could not write.
int mf_standard_descriptor_was_closed(int fd);

/// pthread_setattr_default_np(3): the stack size of threads created with
/// default attributes from now on (libcurl's name-lookup threads, and
/// others the process does not make itself), in place of `ulimit -s`
/// (8 MiB), which each takes from the address space a `ulimit -v` counts.
/// Returns 0, or an error number; ENOTSUP off glibc.
int mf_set_default_thread_stack_size(size_t bytes);

#endif
