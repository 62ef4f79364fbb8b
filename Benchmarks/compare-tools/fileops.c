/* One file operation per process on plain files (ext4, or a gocryptfs FUSE mount): the peer side of
 * `dp-bench fileops`, with the same arguments, buffer sizes and random offsets. No fsync.
 *
 *   fileops seq-write PATH MIB     a new file, MIB writes of 1 MiB
 *   fileops seq-read PATH MIB      the whole file in 1 MiB reads (MIB is checked)
 *   fileops small-write DIR N      N new 4 KiB files DIR/0 ... DIR/N-1: create+write+close
 *   fileops small-read DIR N       open+read+close of DIR/0 ... DIR/N-1
 *   fileops random-read PATH OPS   OPS preads of 4 KiB at 4 KiB-aligned offsets (fixed-seed LCG) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB (1 << 20)

static unsigned char buffer[MIB] __attribute__((aligned(64)));

static int fail(const char *what, const char *path) {
    fprintf(stderr, "fileops: %s %s: ", what, path);
    perror(NULL);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4 || atol(argv[3]) <= 0) {
        fprintf(stderr, "usage: fileops seq-write|seq-read PATH MIB | small-write|small-read DIR N | random-read PATH OPS\n");
        return 64;
    }
    const char *op = argv[1], *path = argv[2];
    long number = atol(argv[3]);
    char name[4096];
    for (size_t i = 0; i < sizeof buffer; i++) buffer[i] = (unsigned char)(i * 31);

    if (!strcmp(op, "seq-write")) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) return fail("open", path);
        for (long i = 0; i < number; i++)
            if (pwrite(fd, buffer, MIB, (off_t)i * MIB) != MIB) return fail("write", path);
        return close(fd) ? fail("close", path) : 0;
    }
    if (!strcmp(op, "seq-read")) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return fail("open", path);
        long long total = 0;
        ssize_t n;
        while ((n = read(fd, buffer, MIB)) > 0) total += n;
        if (n < 0) return fail("read", path);
        if (total != (long long)number * MIB) { fprintf(stderr, "fileops: read %lld bytes of %ld MiB from %s\n", total, number, path); return 1; }
        return close(fd);
    }
    if (!strcmp(op, "small-write") || !strcmp(op, "small-read")) {
        int writing = op[6] == 'w';
        for (long i = 0; i < number; i++) {
            snprintf(name, sizeof name, "%s/%ld", path, i);
            int fd = writing ? open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : open(name, O_RDONLY | O_CLOEXEC);
            if (fd < 0) return fail("open", name);
            if ((writing ? write(fd, buffer, 4096) : read(fd, buffer, 8192)) != 4096) return fail(writing ? "write" : "read", name);
            close(fd);
        }
        return 0;
    }
    if (!strcmp(op, "random-read")) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st)) return fail("open", path);
        uint64_t blocks = (uint64_t)st.st_size / 4096, state = 0x9E3779B97F4A7C15ull;
        for (long i = 0; i < number; i++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            if (pread(fd, buffer, 4096, (off_t)((state >> 33) % blocks) * 4096) != 4096) return fail("pread", path);
        }
        return close(fd);
    }
    fprintf(stderr, "fileops: unknown operation %s\n", op);
    return 64;
}
