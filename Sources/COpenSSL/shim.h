// OpenSSL 3 libcrypto's AES-256-GCM through the EVP interface, as ProtectionCrypto's chunk cipher uses it (its only importer).
// Each EVP_CIPHER_CTX is keyed once (the key schedule and GHASH table computed then); each message sets only its
// 12-byte nonce. EVP_CIPHER_CTX_free cleanses the context (OPENSSL_clear_free), key schedule included.
#include <cpuid.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

/// Which vector registers this CPU and kernel use: 0 SSE (xmm0–15), 1 AVX (ymm0–15), 2 AVX-512 (zmm0–31).
static inline int dp_vector_level(void) {
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX)) return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6) return 0;                                           // the OS saves xmm and ymm state
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX512F) && (lo & 0xe0) == 0xe0) return 2;
    return 1;
}

/// Zeroes the vector registers that AES-NI code and memcpy leave key material in (`level` from dp_vector_level).
///
/// Why: the AES code keeps round keys in xmm registers and returns without clearing them, and glibc's memcpy on
/// AVX-512 machines moves bytes through ymm16–31, which no other code here clears. Whatever next saves the register file to memory
/// — the dynamic linker's lazy-binding trampoline saves it with XSAVE on the stack at every first call of a symbol —
/// then writes round keys into stack memory nothing wipes (the key-residue test found them there after a lock while
/// contexts were still copied with memcpy; SECURITY.md).
static inline void dp_clear_vector_registers(int level) {
#if defined(__x86_64__)
    if (level >= 1) {
        __asm__ volatile("vzeroall" ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                         "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    } else {
        __asm__ volatile("pxor %%xmm0,%%xmm0\n\tpxor %%xmm1,%%xmm1\n\tpxor %%xmm2,%%xmm2\n\tpxor %%xmm3,%%xmm3\n\t"
                         "pxor %%xmm4,%%xmm4\n\tpxor %%xmm5,%%xmm5\n\tpxor %%xmm6,%%xmm6\n\tpxor %%xmm7,%%xmm7\n\t"
                         "pxor %%xmm8,%%xmm8\n\tpxor %%xmm9,%%xmm9\n\tpxor %%xmm10,%%xmm10\n\tpxor %%xmm11,%%xmm11\n\t"
                         "pxor %%xmm12,%%xmm12\n\tpxor %%xmm13,%%xmm13\n\tpxor %%xmm14,%%xmm14\n\tpxor %%xmm15,%%xmm15"
                         ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                         "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    }
    if (level >= 2) {  // compiled code here never uses zmm16-31 (no AVX-512 target), so no clobbers to declare
        __asm__ volatile("vpxord %%zmm16,%%zmm16,%%zmm16\n\tvpxord %%zmm17,%%zmm17,%%zmm17\n\tvpxord %%zmm18,%%zmm18,%%zmm18\n\t"
                         "vpxord %%zmm19,%%zmm19,%%zmm19\n\tvpxord %%zmm20,%%zmm20,%%zmm20\n\tvpxord %%zmm21,%%zmm21,%%zmm21\n\t"
                         "vpxord %%zmm22,%%zmm22,%%zmm22\n\tvpxord %%zmm23,%%zmm23,%%zmm23\n\tvpxord %%zmm24,%%zmm24,%%zmm24\n\t"
                         "vpxord %%zmm25,%%zmm25,%%zmm25\n\tvpxord %%zmm26,%%zmm26,%%zmm26\n\tvpxord %%zmm27,%%zmm27,%%zmm27\n\t"
                         "vpxord %%zmm28,%%zmm28,%%zmm28\n\tvpxord %%zmm29,%%zmm29,%%zmm29\n\tvpxord %%zmm30,%%zmm30,%%zmm30\n\t"
                         "vpxord %%zmm31,%%zmm31,%%zmm31" ::: "memory");
    }
#endif
}

/// A context keyed with the 32-byte `key` for AES-256-GCM (`cipher` from EVP_CIPHER_fetch), or NULL.
static inline EVP_CIPHER_CTX *dp_gcm_new(const EVP_CIPHER *cipher, const unsigned char *key, int level) {
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx != NULL && EVP_CipherInit_ex(ctx, cipher, NULL, key, NULL, 1) != 1) { EVP_CIPHER_CTX_free(ctx); ctx = NULL; }
    dp_clear_vector_registers(level);
    return ctx;
}

/// Feeds `n` bytes of `in` through the context (AD when `out` is NULL) in pieces EVP's int lengths can carry.
static inline int dp_gcm_update(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in, size_t n) {
    while (n > 0) {
        int piece = n > (size_t)(INT_MAX & ~15) ? (INT_MAX & ~15) : (int)n, written = 0;
        if (EVP_CipherUpdate(ctx, out, &written, in, piece) != 1) return 0;
        if (out != NULL) out += piece;
        in += piece;
        n -= (size_t)piece;
    }
    return 1;
}

/// Seals `n` bytes of `in` into `out` (which may equal `in`) under the 12-byte `nonce`, authenticating `ad`; 1 on success.
/// Every function here that runs AES clears the vector registers before it returns (`level`: dp_vector_level()).
static inline int dp_gcm_seal(EVP_CIPHER_CTX *ctx, unsigned char *out, unsigned char tag[16], const unsigned char *in, size_t n,
                              const unsigned char *ad, size_t adlen, const unsigned char nonce[12], int level) {
    int written = 0;
    int ok = EVP_CipherInit_ex(ctx, NULL, NULL, NULL, nonce, 1) == 1 && (adlen == 0 || dp_gcm_update(ctx, NULL, ad, adlen))
        && dp_gcm_update(ctx, out, in, n) && EVP_CipherFinal_ex(ctx, out + n, &written) == 1
        && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1;
    dp_clear_vector_registers(level);
    return ok;
}

/// Verifies `tag` and opens `n` bytes of `in` into `out` (which may equal `in`); 1 when the tag verifies. On 0, `out`
/// holds unauthenticated plaintext: the caller zeroes it.
static inline int dp_gcm_open(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in, size_t n, const unsigned char tag[16],
                              const unsigned char *ad, size_t adlen, const unsigned char nonce[12], int level) {
    int written = 0;
    int ok = EVP_CipherInit_ex(ctx, NULL, NULL, NULL, nonce, 0) == 1 && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, (void *)tag) == 1
        && (adlen == 0 || dp_gcm_update(ctx, NULL, ad, adlen)) && dp_gcm_update(ctx, out, in, n)
        && EVP_CipherFinal_ex(ctx, out + n, &written) == 1;
    dp_clear_vector_registers(level);
    return ok;
}
