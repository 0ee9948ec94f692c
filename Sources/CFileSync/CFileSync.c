#define _GNU_SOURCE
#include "CFileSync.h"
#include <unistd.h>

#if defined(__linux__)
int mf_syncfs(int fd) { return syncfs(fd); }
#else
// Elsewhere there is no syncfs: a full sync() is the portable fallback.
int mf_syncfs(int fd) { (void)fd; sync(); return 0; }
#endif
