// C shims for what Swift's Glibc module does not expose: the OFD lock
// commands, and syscalls without a glibc wrapper (openat2). Kept tiny on
// purpose; every function is a direct pass-through that returns -1 and sets
// errno on failure, like the syscall it wraps.
#ifndef DP_CSHIMS_H
#define DP_CSHIMS_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/xattr.h> /* getxattr/setxattr family (not in Swift's Glibc module) */

#ifdef __cplusplus
extern "C" {
#endif

/// F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW (open-file-description locks).
extern const int dp_F_OFD_GETLK;
extern const int dp_F_OFD_SETLK;
extern const int dp_F_OFD_SETLKW;

/// O_PATH (glibc hides it without _GNU_SOURCE).
extern const int dp_O_PATH;

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

/// Sets O_NOATIME on an open file description (fcntl F_SETFL, keeping its other flags); -1 and errno on failure (EPERM
/// when the caller does not own the file).
int dp_set_noatime(int fd);

/// Sequentially consistent 64-bit atomics on shared (mmap'd) memory.
uint64_t dp_atomic_load_u64(const uint64_t *p);
void dp_atomic_store_u64(uint64_t *p, uint64_t v);
uint64_t dp_atomic_fetch_add_u64(uint64_t *p, uint64_t v);
uint64_t dp_atomic_fetch_or_u64(uint64_t *p, uint64_t v);
uint64_t dp_atomic_fetch_and_u64(uint64_t *p, uint64_t v);
int dp_atomic_cas_u64(uint64_t *p, uint64_t expected, uint64_t desired);

/// renameat2(2) with RENAME_NOREPLACE: fails with EEXIST instead of replacing `newpath`.
int dp_renameat_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);

/// CPUs this process may run on (sched_getaffinity + CPU_COUNT); at least 1.
int dp_available_cpus(void);

/// syncfs(2): commits every file system buffer of the file system holding `fd`.
int dp_syncfs(int fd);

/// statfs(2) of `path`: stores the filesystem magic (f_type) in `out_type`.
int dp_statfs_type(const char *path, int64_t *out_type);

/// Signed fetch-add on shared memory (see the atomics above).
int64_t dp_atomic_fetch_add_i64(int64_t *address, int64_t value);

/// A listening Unix stream socket bound at `path` (close-on-exec); -1 and errno on failure
/// (ENAMETOOLONG when `path` does not fit in sockaddr_un).
int dp_unix_listen(const char *path, int backlog);

/// A Unix stream socket connected to `path` (close-on-exec); -1 and errno on failure.
int dp_unix_connect(const char *path);

/// accept4(2) with SOCK_CLOEXEC, retrying on EINTR; -1 and errno on failure.
int dp_accept(int listener);

/// poll(2) for readability of one descriptor: 1 readable (or hung up), 0 timeout, -1 error.
int dp_poll_readable(int fd, int timeout_ms);

/// The hand-off word of a chunk worker (ChunkWorkers.swift): sequentially consistent 32-bit atomics,
/// and a process-private futex to sleep on the word while it holds `expected` (returns at once if it
/// does not, and on a wake-up or a signal; callers re-check the word).
uint32_t dp_atomic_load_u32(const uint32_t *p);
void dp_atomic_store_u32(uint32_t *p, uint32_t v);
int dp_atomic_cas_u32(uint32_t *p, uint32_t expected, uint32_t desired);
uint32_t dp_atomic_fetch_add_u32(uint32_t *p, uint32_t v);
void dp_futex_wait(uint32_t *p, uint32_t expected);
void dp_futex_wake_all(uint32_t *p);
/// A spin-wait hint for the CPU (x86 `pause`); nothing on other architectures.
void dp_cpu_relax(void);
/// Names the calling thread (at most 15 bytes shown; in ps, top and perf).
void dp_set_thread_name(const char *name);
/// CLOCK_MONOTONIC in nanoseconds (vDSO: no system call).
uint64_t dp_monotonic_ns(void);

#ifdef __cplusplus
}
#endif
#endif
