#define _GNU_SOURCE
#include "CShims.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

const int dp_F_OFD_GETLK = F_OFD_GETLK;
const int dp_F_OFD_SETLK = F_OFD_SETLK;
const int dp_F_OFD_SETLKW = F_OFD_SETLKW;

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

int dp_statfs_type(const char *path, int64_t *out_type) {
    struct statfs st;
    int rc = statfs(path, &st);
    if (rc == 0 && out_type != NULL) {
        *out_type = (int64_t)st.f_type;
    }
    return rc;
}

uint64_t dp_atomic_load_u64(const uint64_t *address) {
    return __atomic_load_n(address, __ATOMIC_SEQ_CST);
}

uint64_t dp_atomic_fetch_add_u64(uint64_t *address, uint64_t value) {
    return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
}

int64_t dp_atomic_fetch_add_i64(int64_t *address, int64_t value) {
    return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
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
