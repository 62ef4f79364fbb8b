#define _GNU_SOURCE
#include "CShims.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <linux/futex.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

const int dp_F_OFD_GETLK = F_OFD_GETLK;
const int dp_F_OFD_SETLK = F_OFD_SETLK;
const int dp_F_OFD_SETLKW = F_OFD_SETLKW;

const int dp_O_PATH = O_PATH;

const uint64_t dp_RESOLVE_NO_XDEV = RESOLVE_NO_XDEV;
const uint64_t dp_RESOLVE_NO_MAGICLINKS = RESOLVE_NO_MAGICLINKS;
const uint64_t dp_RESOLVE_NO_SYMLINKS = RESOLVE_NO_SYMLINKS;
const uint64_t dp_RESOLVE_BENEATH = RESOLVE_BENEATH;
const uint64_t dp_RESOLVE_IN_ROOT = RESOLVE_IN_ROOT;

int dp_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve) {
    struct open_how how = {.flags = flags, .mode = mode, .resolve = resolve};
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

int dp_fcntl_lock(int fd, int cmd, short type, short whence, int64_t start, int64_t len, int32_t *out_pid) {
    struct flock fl = {0};
    fl.l_type = type;
    fl.l_whence = whence;
    fl.l_start = (off_t)start;
    fl.l_len = (off_t)len;
    fl.l_pid = 0; /* required to be 0 for OFD commands */
    int rc = fcntl(fd, cmd, &fl);
    if (rc == 0 && out_pid != NULL) {
        *out_pid = (cmd == F_OFD_GETLK && fl.l_type == F_UNLCK) ? 0 : fl.l_pid;
    }
    return rc;
}

int dp_renameat_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, RENAME_NOREPLACE);
}

int dp_available_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (int)n : 1;
    }
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

uint64_t dp_atomic_load_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
void dp_atomic_store_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
uint64_t dp_atomic_fetch_add_u64(uint64_t *p, uint64_t v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
uint64_t dp_atomic_fetch_or_u64(uint64_t *p, uint64_t v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
uint64_t dp_atomic_fetch_and_u64(uint64_t *p, uint64_t v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
int dp_atomic_cas_u64(uint64_t *p, uint64_t expected, uint64_t desired) {
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static int dp_unix_address(const char *path, struct sockaddr_un *address) {
    memset(address, 0, sizeof(*address));
    address->sun_family = AF_UNIX;
    size_t length = strlen(path);
    if (length >= sizeof(address->sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(address->sun_path, path, length);
    return 0;
}

int dp_syncfs(int fd) { return syncfs(fd); }
int dp_statfs_type(const char *path, int64_t *out_type) {
    struct statfs st;
    int rc = statfs(path, &st);
    if (rc == 0 && out_type != NULL) {
        *out_type = (int64_t)st.f_type;
    }
    return rc;
}

int64_t dp_atomic_fetch_add_i64(int64_t *address, int64_t value) {
    return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
}


int dp_unix_listen(const char *path, int backlog) {
    struct sockaddr_un address;
    if (dp_unix_address(path, &address) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (bind(fd, (struct sockaddr *)&address, sizeof(address)) != 0 || listen(fd, backlog) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int dp_unix_connect(const char *path) {
    struct sockaddr_un address;
    if (dp_unix_address(path, &address) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int dp_poll_readable(int fd, int timeout_ms) {
    struct pollfd entry = {.fd = fd, .events = POLLIN, .revents = 0};
    int rc;
    do {
        rc = poll(&entry, 1, timeout_ms);
    } while (rc < 0 && errno == EINTR);
    return rc;
}

int dp_accept(int listener) {
    int fd;
    do {
        fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

uint32_t dp_atomic_load_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
void dp_atomic_store_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
int dp_atomic_cas_u32(uint32_t *p, uint32_t expected, uint32_t desired) {
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
uint32_t dp_atomic_fetch_add_u32(uint32_t *p, uint32_t v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

void dp_futex_wait(uint32_t *p, uint32_t expected) {
    syscall(SYS_futex, p, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void dp_futex_wake_all(uint32_t *p) {
    syscall(SYS_futex, p, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void dp_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

uint64_t dp_monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void dp_set_thread_name(const char *name) { pthread_setname_np(pthread_self(), name); }

int dp_set_noatime(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    if (flags & O_NOATIME) return 0;
    return fcntl(fd, F_SETFL, flags | O_NOATIME);
}
