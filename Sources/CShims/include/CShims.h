// C shims for what Swift's Glibc module does not expose: the OFD lock
// commands, and syscalls without a glibc wrapper (openat2). Kept tiny on
// purpose; every function is a direct pass-through that returns -1 and sets
// errno on failure, like the syscall it wraps.
#ifndef DP_CSHIMS_H
#define DP_CSHIMS_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW (open-file-description locks).
extern const int dp_F_OFD_GETLK;
extern const int dp_F_OFD_SETLK;
extern const int dp_F_OFD_SETLKW;

/// RESOLVE_* flags for openat2(2).
extern const uint64_t dp_RESOLVE_NO_XDEV;
extern const uint64_t dp_RESOLVE_NO_MAGICLINKS;
extern const uint64_t dp_RESOLVE_NO_SYMLINKS;
extern const uint64_t dp_RESOLVE_BENEATH;
extern const uint64_t dp_RESOLVE_IN_ROOT;

/// openat2(2): `flags` and `mode` as for openat, `resolve` a RESOLVE_* mask.
int dp_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve);

/// fcntl(2) with a struct flock argument (the OFD commands need it).
int dp_fcntl_lock(int fd, int cmd, short type, short whence, int64_t start, int64_t len, int32_t *out_pid);

/// syncfs(2): commits every file system buffer of the file system holding `fd`.
int dp_syncfs(int fd);

#ifdef __cplusplus
}
#endif
#endif
