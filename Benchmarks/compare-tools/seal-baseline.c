/* The minimal single-threaded baseline for "plain file in, encrypted file out, and back":
 * read 64 KiB, seal it with libsodium's AES-256-GCM (a counter nonce), write ciphertext and tag;
 * `open` does the reverse and stops at the first chunk that does not authenticate.
 *
 *   seal-baseline seal KEYFILE IN OUT    (KEYFILE: 32 bytes; made with random bytes when missing)
 *   seal-baseline open KEYFILE IN OUT    (OUT "-": standard output, as it is, not truncated)
 *
 * No header, no per-file key, no fsync: the floor that dpctl put/cat are compared against. */
#include <sodium.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (64 * 1024)
#define TAG crypto_aead_aes256gcm_ABYTES

static int die(const char *what) { perror(what); return 1; }

/* Reads exactly n bytes unless end of file comes first; returns the count, or -1. */
static ssize_t read_full(int fd, unsigned char *p, size_t n) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = read(fd, p + done, n - done);
        if (r < 0) return -1;
        if (r == 0) break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

static int write_full(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return -1;
        p += w; n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5 || (strcmp(argv[1], "seal") && strcmp(argv[1], "open"))) {
        fprintf(stderr, "usage: seal-baseline seal|open KEYFILE IN OUT\n");
        return 64;
    }
    if (sodium_init() < 0 || !crypto_aead_aes256gcm_is_available()) {
        fprintf(stderr, "seal-baseline: AES-256-GCM is not available on this CPU\n");
        return 1;
    }
    int sealing = strcmp(argv[1], "seal") == 0;
    unsigned char key[crypto_aead_aes256gcm_KEYBYTES];
    int kfd = open(argv[2], O_RDONLY);
    if (kfd < 0 && sealing) {
        randombytes_buf(key, sizeof key);
        kfd = open(argv[2], O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (kfd < 0 || write_full(kfd, key, sizeof key)) return die(argv[2]);
    } else if (kfd < 0 || read_full(kfd, key, sizeof key) != (ssize_t)sizeof key) {
        return die(argv[2]);
    }
    close(kfd);
    crypto_aead_aes256gcm_state state;
    crypto_aead_aes256gcm_beforenm(&state, key);
    sodium_memzero(key, sizeof key);

    int in = open(argv[3], O_RDONLY), out = strcmp(argv[4], "-") == 0 ? 1 : open(argv[4], O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0) return die(argv[3]);
    if (out < 0) return die(argv[4]);
    static unsigned char plain[CHUNK], sealed[CHUNK + TAG];
    unsigned char nonce[crypto_aead_aes256gcm_NPUBBYTES] = {0};
    for (;;) {
        ssize_t n = read_full(in, sealing ? plain : sealed, sealing ? CHUNK : CHUNK + TAG);
        if (n < 0) return die(argv[3]);
        if (n == 0) break;
        unsigned long long m;
        if (sealing) {
            crypto_aead_aes256gcm_encrypt_afternm(sealed, &m, plain, (unsigned long long)n, NULL, 0, NULL, nonce, &state);
            if (write_full(out, sealed, (size_t)m)) return die(argv[4]);
        } else {
            if (n < TAG || crypto_aead_aes256gcm_decrypt_afternm(plain, &m, NULL, sealed, (unsigned long long)n, NULL, 0, nonce, &state)) {
                fprintf(stderr, "seal-baseline: a chunk of %s does not authenticate\n", argv[3]);
                return 1;
            }
            if (write_full(out, plain, (size_t)m)) return die(argv[4]);
        }
        sodium_increment(nonce, sizeof nonce);
    }
    return close(out) ? die(argv[4]) : 0;
}
