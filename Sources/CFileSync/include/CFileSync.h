#ifndef MEDIAFETCH_CFILESYNC_H
#define MEDIAFETCH_CFILESYNC_H

/// syncfs(2): writes back every dirty page of the filesystem holding `fd`.
/// One call makes a whole group of files durable, where an fsync per file
/// would force one journal commit each. Not exported by Swift's Glibc module
/// (it is a GNU extension), hence this wrapper. Returns 0 or -1 with errno.
int mf_syncfs(int fd);

#endif
