#define _GNU_SOURCE
#include "CShims.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
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

int dp_syncfs(int fd) { return syncfs(fd); }
