// OpenSSL 3 libcrypto's AES-256-GCM, as ProtectionCrypto's chunk cipher uses it (its only importer).
// Each context is keyed once (the key schedule and GHASH table computed then); each message sets only its 12-byte
// nonce. Contexts are the provider's own, reached through its dispatch table (dp_gcm_backend), or EVP_CIPHER_CTXs where
// that table cannot be found; either way freeing one cleanses it (OPENSSL_clear_free), key schedule included.
#include <cpuid.h>
#include <limits.h>
#include <string.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>

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

/// One keyed AES-256-GCM context: the provider's own (PROV_AES_GCM_CTX) or an EVP_CIPHER_CTX (see dp_gcm_backend).
typedef struct dp_gcm_ctx dp_gcm_ctx;

/// How this process reaches AES-256-GCM: the functions of the provider that EVP_CIPHER_fetch chose, called directly
/// (`direct`), or EVP.
///
/// Why: OpenSSL 3.0's EVP layer asks the provider for the IV length through a parameter look-up (OSSL_PARAM_locate,
/// strcmp) on every EVP_CipherInit_ex that sets a nonce, and turns each tag get/set into another one; for a 4 KiB chunk
/// that was about 85 ns of 1,090 here (BENCHMARKS.md, "The pipeline after the backend"). The provider's own functions
/// (einit/dinit with the nonce, update, final, the tag as one parameter) do the same work without that layer, on
/// the same context memory, which the provider's freectx cleanses (OPENSSL_clear_free) as EVP_CIPHER_CTX_free did.
/// `dp_gcm_backend_init` takes them only if the provider lists AES-256-GCM under that name and a known-answer
/// check gives EVP's bytes; otherwise every call stays on EVP.
typedef struct {
    int direct;
    const EVP_CIPHER *cipher;
    void *provctx;
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_encrypt_init_fn *einit;
    OSSL_FUNC_cipher_decrypt_init_fn *dinit;
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
    OSSL_FUNC_cipher_set_ctx_params_fn *set_params;
    OSSL_FUNC_cipher_get_ctx_params_fn *get_params;
} dp_gcm_backend;

/// A context keyed with the 32-byte `key` for AES-256-GCM, or NULL.
static inline dp_gcm_ctx *dp_gcm_new(const dp_gcm_backend *b, const unsigned char *key, int level) {
    void *c;
    if (b->direct) {
        c = b->newctx(b->provctx);
        if (c != NULL && b->einit(c, key, 32, NULL, 0, NULL) != 1) { b->freectx(c); c = NULL; }
    } else {
        EVP_CIPHER_CTX *e = EVP_CIPHER_CTX_new();
        if (e != NULL && EVP_CipherInit_ex(e, b->cipher, NULL, key, NULL, 1) != 1) { EVP_CIPHER_CTX_free(e); e = NULL; }
        c = e;
    }
    dp_clear_vector_registers(level);
    return (dp_gcm_ctx *)c;
}

/// Frees a context from dp_gcm_new, cleansing it first (both the provider's freectx and EVP_CIPHER_CTX_free do).
static inline void dp_gcm_free(const dp_gcm_backend *b, dp_gcm_ctx *c) {
    if (b->direct) b->freectx(c); else EVP_CIPHER_CTX_free((EVP_CIPHER_CTX *)c);
}

/// Feeds `n` bytes of `in` through the EVP context (AD when `out` is NULL) in pieces EVP's int lengths can carry.
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
static inline int dp_gcm_seal(const dp_gcm_backend *b, dp_gcm_ctx *c, unsigned char *out, unsigned char tag[16], const unsigned char *in,
                              size_t n, const unsigned char *ad, size_t adlen, const unsigned char nonce[12], int level) {
    int ok;
    if (b->direct) {
        size_t written = 0;
        OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, 16), OSSL_PARAM_END };
        ok = b->einit(c, NULL, 0, nonce, 12, NULL) == 1 && (adlen == 0 || b->update(c, NULL, &written, adlen, ad, adlen) == 1)
            && (n == 0 || b->update(c, out, &written, n, in, n) == 1) && b->final(c, out + n, &written, 0) == 1 && b->get_params(c, p) == 1;
    } else {
        EVP_CIPHER_CTX *ctx = (EVP_CIPHER_CTX *)c;
        int written = 0;
        ok = EVP_CipherInit_ex(ctx, NULL, NULL, NULL, nonce, 1) == 1 && (adlen == 0 || dp_gcm_update(ctx, NULL, ad, adlen))
            && dp_gcm_update(ctx, out, in, n) && EVP_CipherFinal_ex(ctx, out + n, &written) == 1
            && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1;
    }
    dp_clear_vector_registers(level);
    return ok;
}

/// Verifies `tag` and opens `n` bytes of `in` into `out` (which may equal `in`); 1 when the tag verifies. On 0, `out`
/// holds unauthenticated plaintext: the caller zeroes it.
static inline int dp_gcm_open(const dp_gcm_backend *b, dp_gcm_ctx *c, unsigned char *out, const unsigned char *in, size_t n,
                              const unsigned char tag[16], const unsigned char *ad, size_t adlen, const unsigned char nonce[12], int level) {
    int ok;
    if (b->direct) {
        size_t written = 0;
        OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, (void *)tag, 16), OSSL_PARAM_END };
        ok = b->dinit(c, NULL, 0, nonce, 12, NULL) == 1 && b->set_params(c, p) == 1
            && (adlen == 0 || b->update(c, NULL, &written, adlen, ad, adlen) == 1) && (n == 0 || b->update(c, out, &written, n, in, n) == 1)
            && b->final(c, out + n, &written, 0) == 1;
    } else {
        EVP_CIPHER_CTX *ctx = (EVP_CIPHER_CTX *)c;
        int written = 0;
        ok = EVP_CipherInit_ex(ctx, NULL, NULL, NULL, nonce, 0) == 1 && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, (void *)tag) == 1
            && (adlen == 0 || dp_gcm_update(ctx, NULL, ad, adlen)) && dp_gcm_update(ctx, out, in, n)
            && EVP_CipherFinal_ex(ctx, out + n, &written) == 1;
    }
    dp_clear_vector_registers(level);
    return ok;
}

/// Whether `names` (a provider's "A:B:C" list) includes `name`.
static inline int dp_names_include(const char *names, const char *name) {
    size_t len = strlen(name);
    for (const char *p = names; p != NULL; p = strchr(p, ':'), p = p != NULL ? p + 1 : NULL) {
        if (strncmp(p, name, len) == 0 && (p[len] == ':' || p[len] == '\0')) return 1;
    }
    return 0;
}

/// Whether the direct functions in `b` seal and open a known message exactly as EVP does (a public test key).
static inline int dp_gcm_direct_agrees(dp_gcm_backend *b, int level) {
    unsigned char key[32], nonce[12], ad[19], msg[67], viaEVP[67], direct[67], back[67], tagEVP[16], tagDirect[16];
    for (unsigned i = 0; i < sizeof key; i++) key[i] = (unsigned char)(i * 7 + 1);
    for (unsigned i = 0; i < sizeof nonce; i++) nonce[i] = (unsigned char)(0xa0 + i);
    for (unsigned i = 0; i < sizeof ad; i++) ad[i] = (unsigned char)(i * 3);
    for (unsigned i = 0; i < sizeof msg; i++) msg[i] = (unsigned char)(i * 11 + 5);
    dp_gcm_backend evp = *b;
    evp.direct = 0;
    dp_gcm_ctx *e = dp_gcm_new(&evp, key, level), *d = dp_gcm_new(b, key, level);
    int ok = e != NULL && d != NULL && dp_gcm_seal(&evp, e, viaEVP, tagEVP, msg, sizeof msg, ad, sizeof ad, nonce, level)
        && dp_gcm_seal(b, d, direct, tagDirect, msg, sizeof msg, ad, sizeof ad, nonce, level)
        && memcmp(viaEVP, direct, sizeof msg) == 0 && memcmp(tagEVP, tagDirect, 16) == 0
        && dp_gcm_open(b, d, back, direct, sizeof msg, tagDirect, ad, sizeof ad, nonce, level) && memcmp(back, msg, sizeof msg) == 0;
    tagDirect[0] ^= 1;
    ok = ok && !dp_gcm_open(b, d, back, direct, sizeof msg, tagDirect, ad, sizeof ad, nonce, level);
    if (e != NULL) dp_gcm_free(&evp, e);
    if (d != NULL) dp_gcm_free(b, d);
    return ok;
}

/// Fills `b` for `cipher` (AES-256-GCM from EVP_CIPHER_fetch): the provider's functions if it lists them under that
/// name and they agree with EVP, else EVP alone.
static inline void dp_gcm_backend_init(dp_gcm_backend *b, const EVP_CIPHER *cipher, int level) {
    memset(b, 0, sizeof *b);
    b->cipher = cipher;
    const OSSL_PROVIDER *prov = EVP_CIPHER_get0_provider(cipher);
    int no_store = 0;
    const OSSL_ALGORITHM *all = prov != NULL ? OSSL_PROVIDER_query_operation(prov, OSSL_OP_CIPHER, &no_store) : NULL;
    for (const OSSL_ALGORITHM *a = all; a != NULL && a->algorithm_names != NULL; a++) {
        if (!dp_names_include(a->algorithm_names, "AES-256-GCM")) continue;
        for (const OSSL_DISPATCH *f = a->implementation; f->function_id != 0; f++) {
            switch (f->function_id) {
            case OSSL_FUNC_CIPHER_NEWCTX: b->newctx = (OSSL_FUNC_cipher_newctx_fn *)f->function; break;
            case OSSL_FUNC_CIPHER_FREECTX: b->freectx = (OSSL_FUNC_cipher_freectx_fn *)f->function; break;
            case OSSL_FUNC_CIPHER_ENCRYPT_INIT: b->einit = (OSSL_FUNC_cipher_encrypt_init_fn *)f->function; break;
            case OSSL_FUNC_CIPHER_DECRYPT_INIT: b->dinit = (OSSL_FUNC_cipher_decrypt_init_fn *)f->function; break;
            case OSSL_FUNC_CIPHER_UPDATE: b->update = (OSSL_FUNC_cipher_update_fn *)f->function; break;
            case OSSL_FUNC_CIPHER_FINAL: b->final = (OSSL_FUNC_cipher_final_fn *)f->function; break;
            case OSSL_FUNC_CIPHER_SET_CTX_PARAMS: b->set_params = (OSSL_FUNC_cipher_set_ctx_params_fn *)f->function; break;
            case OSSL_FUNC_CIPHER_GET_CTX_PARAMS: b->get_params = (OSSL_FUNC_cipher_get_ctx_params_fn *)f->function; break;
            }
        }
        break;
    }
    if (all != NULL) OSSL_PROVIDER_unquery_operation(prov, OSSL_OP_CIPHER, all);
    b->provctx = prov != NULL ? OSSL_PROVIDER_get0_provider_ctx(prov) : NULL;
    b->direct = b->newctx != NULL && b->freectx != NULL && b->einit != NULL && b->dinit != NULL && b->update != NULL && b->final != NULL
        && b->set_params != NULL && b->get_params != NULL;
    if (b->direct && !dp_gcm_direct_agrees(b, level)) b->direct = 0;
}
