// AES-256-GCM (NIST SP 800-38D) on VAES and VPCLMULQDQ, two blocks per 256-bit register, sixteen blocks per loop.
//
// GHASH is computed as POLYVAL (RFC 8452, appendix A): GHASH(H, X1..Xn) = ByteReverse(POLYVAL(mulX(ByteReverse(H)),
// ByteReverse(X1)..ByteReverse(Xn))). POLYVAL's field elements are little-endian, so a byte-reversed GCM block is a
// plain 128-bit integer, and POLYVAL's product a·b·x^-128 is a carry-less multiply followed by a Montgomery
// reduction, with no bit shifts. Sixteen blocks are multiplied by H^16..H^1 and their products added before one
// reduction, between the AES rounds of the next sixteen counter blocks (sealing) or of their own (opening), so that the
// AES and carry-less multiply units work at once.
//
// Secrets: the round keys and hash-key powers live in the caller's memory (locked memory that the caller zeroes);
// values in vector registers are cleared before every public function returns (vzeroall), and so is the stack the
// call used (wipe_stack below: values that did not fit in registers were spilled there, as every value is in builds
// without optimisation).
#include "CAESGCM.h"

#include <cpuid.h>
#include <immintrin.h>
#include <string.h>

struct dp_vgcm_key {
    __m256i rk[15];     // AES-256 round keys, each in both 128-bit lanes
    __m256i h[8];       // POLYVAL hash-key powers by pairs: {H^16, H^15}, {H^14, H^13}, …, {H^2, H^1} (low lane first)
    __m128i h1;         // H^1 alone, for single blocks
};

/// The CPU's answer, asked once: CPUID traps to the hypervisor in a virtual machine (tens of microseconds here).
static int cpu_has_vaes(void) {
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (!(c & bit_AES) || !(c & bit_PCLMUL) || !(c & bit_OSXSAVE) || !(c & bit_AVX)) return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6) return 0;  // the kernel saves xmm and ymm state
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b & bit_AVX2) && (c & bit_VAES) && (c & bit_VPCLMULQDQ);
}

int dp_vgcm_available(void) {
    static _Atomic int known = -1;  // -1 until asked; every thread that asks at once gets the same answer
    int v = known;
    if (v < 0) known = v = cpu_has_vaes();
    return v;
}

/// The stack pointer: where the function that reads it has its frame. The functions that hold secrets in their frames
/// record it for their public caller, which then wipes down to there.
#define STACK_POINTER() ({ uintptr_t sp_; __asm__ volatile("mov %%rsp, %0" : "=r"(sp_)); sp_; })

/// Zeroes the stack between the caller's frame and `low`, the lowest frame the call that just returned used (its
/// STACK_POINTER), and 256 bytes more (the 128-byte red zone below it): where that call kept what did not fit in the
/// sixteen vector registers (AES states, GHASH partial products, blocks of the message; unoptimised, every value).
__attribute__((noinline)) static void wipe_stack(uintptr_t low) {
    uintptr_t top = STACK_POINTER();
    size_t bytes = (top > low ? (size_t)(top - low) : 0) + 256;
    volatile unsigned char area[bytes];  // right below this frame, where the frames of the call were
    memset((unsigned char *)area, 0, bytes);
    __asm__ volatile("" : : "r"(area) : "memory");
}

// Constants as data, loaded where used (built from _mm256_set_* they would be assembled element by element in
// unoptimised builds). __m128i and __m256i are vectors of 64-bit integers, low element first.
static const __m128i reverse128 = {0x08090a0b0c0d0e0fLL, 0x0001020304050607LL};  // byte i <- byte 15 - i
static const __m256i reverse256 = {0x08090a0b0c0d0e0fLL, 0x0001020304050607LL, 0x08090a0b0c0d0e0fLL, 0x0001020304050607LL};
static const __m128i polyval_poly = {1, (long long)0xc200000000000000ULL};  // x^128 = x^127 + x^126 + x^121 + 1
static const __m128i one128 = {1, 0};
static const __m256i lane1_plus1 = {0, 0, 1, 0};
/// {2k, 2k} for k = 0…8: the counter increments of the main loop, in each lane's first dword.
static const __m256i plus[9] = {
    {0, 0, 0, 0}, {2, 0, 2, 0}, {4, 0, 4, 0}, {6, 0, 6, 0}, {8, 0, 8, 0},
    {10, 0, 10, 0}, {12, 0, 12, 0}, {14, 0, 14, 0}, {16, 0, 16, 0},
};

#pragma clang attribute push(__attribute__((target("aes,pclmul,avx2,vaes,vpclmulqdq"))), apply_to = function)

__attribute__((always_inline)) static inline __m128i bswap128(__m128i x) {
    return _mm_shuffle_epi8(x, reverse128);
}

__attribute__((always_inline)) static inline __m256i bswap256(__m256i x) {
    return _mm256_shuffle_epi8(x, reverse256);
}

/// Montgomery reduction of the 256-bit product hi·x^128 + mid·x^64 + lo: the POLYVAL product a·b·x^-128.
__attribute__((always_inline)) static inline __m128i reduce(__m128i lo, __m128i mid, __m128i hi) {
    const __m128i poly = polyval_poly;
    lo = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
    hi = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
    __m128i t = _mm_clmulepi64_si128(lo, poly, 0x10);
    lo = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4e), t);
    t = _mm_clmulepi64_si128(lo, poly, 0x10);
    lo = _mm_xor_si128(_mm_shuffle_epi32(lo, 0x4e), t);
    return _mm_xor_si128(hi, lo);
}

/// POLYVAL's product a·b·x^-128.
__attribute__((always_inline)) static inline __m128i polyval_mul(__m128i a, __m128i b) {
    __m128i lo = _mm_clmulepi64_si128(a, b, 0x00);
    __m128i hi = _mm_clmulepi64_si128(a, b, 0x11);
    __m128i mid = _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10));
    return reduce(lo, mid, hi);
}

/// Absorbs eight GCM blocks, two per register in order: acc = (acc + X1)·H^8 + X2·H^7 + … + X8·H.
__attribute__((always_inline)) static inline __m128i absorb8(const dp_vgcm_key *k, __m128i acc, const __m256i x[4]) {
    __m256i lo = _mm256_setzero_si256(), mid = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i y = bswap256(x[j]), h = k->h[4 + j];
        if (j == 0) y = _mm256_xor_si256(y, _mm256_zextsi128_si256(acc));
        lo = _mm256_xor_si256(lo, _mm256_clmulepi64_epi128(y, h, 0x00));
        hi = _mm256_xor_si256(hi, _mm256_clmulepi64_epi128(y, h, 0x11));
        mid = _mm256_xor_si256(mid, _mm256_xor_si256(_mm256_clmulepi64_epi128(y, h, 0x01), _mm256_clmulepi64_epi128(y, h, 0x10)));
    }
    __m128i l = _mm_xor_si128(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1));
    __m128i h = _mm_xor_si128(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
    __m128i m = _mm_xor_si128(_mm256_castsi256_si128(mid), _mm256_extracti128_si256(mid, 1));
    return reduce(l, m, h);
}

/// Absorbs one 16-byte GCM block (not yet byte-reversed).
__attribute__((always_inline)) static inline __m128i absorb1(const dp_vgcm_key *k, __m128i acc, __m128i block) {
    return polyval_mul(_mm_xor_si128(acc, bswap128(block)), k->h1);
}

/// Copies `n` < 16 bytes with inline moves (no call to memcpy, across which secrets in registers would be saved).
__attribute__((always_inline)) static inline void copy_partial(uint8_t *dst, const uint8_t *src, size_t n) {
    size_t i = 0;
    if (n & 8) { __builtin_memcpy_inline(dst + i, src + i, 8); i += 8; }
    if (n & 4) { __builtin_memcpy_inline(dst + i, src + i, 4); i += 4; }
    if (n & 2) { __builtin_memcpy_inline(dst + i, src + i, 2); i += 2; }
    if (n & 1) dst[i] = src[i];
}

/// Absorbs `n` bytes of GCM input, the last partial block padded with zeros (the associated data).
__attribute__((always_inline)) static inline __m128i absorb_bytes(const dp_vgcm_key *k, __m128i acc, const uint8_t *p, size_t n) {
    for (; n >= 16; p += 16, n -= 16) acc = absorb1(k, acc, _mm_loadu_si128((const __m128i *)p));
    if (n > 0) {
        uint8_t last[16] = {0};
        copy_partial(last, p, n);
        acc = absorb1(k, acc, _mm_loadu_si128((const __m128i *)last));
        memset(last, 0, sizeof last);
        __asm__ volatile("" : : "r"(last) : "memory");
    }
    return acc;
}

/// AES-256 of one block.
__attribute__((always_inline)) static inline __m128i aes1(const dp_vgcm_key *k, __m128i x) {
    x = _mm_xor_si128(x, _mm256_castsi256_si128(k->rk[0]));
    for (int r = 1; r < 14; r++) x = _mm_aesenc_si128(x, _mm256_castsi256_si128(k->rk[r]));
    return _mm_aesenclast_si128(x, _mm256_castsi256_si128(k->rk[14]));
}

__attribute__((always_inline)) static inline __m128i expand_a(__m128i a, __m128i assist) {  // the round key after a RotWord+SubWord+Rcon step
    assist = _mm_shuffle_epi32(assist, 0xff);
    a = _mm_xor_si128(a, _mm_slli_si128(a, 4));
    a = _mm_xor_si128(a, _mm_slli_si128(a, 4));
    a = _mm_xor_si128(a, _mm_slli_si128(a, 4));
    return _mm_xor_si128(a, assist);
}

__attribute__((always_inline)) static inline __m128i expand_b(__m128i a, __m128i b) {  // the round key after a SubWord step (AES-256's odd keys)
    __m128i assist = _mm_shuffle_epi32(_mm_aeskeygenassist_si128(a, 0), 0xaa);
    b = _mm_xor_si128(b, _mm_slli_si128(b, 4));
    b = _mm_xor_si128(b, _mm_slli_si128(b, 4));
    b = _mm_xor_si128(b, _mm_slli_si128(b, 4));
    return _mm_xor_si128(b, assist);
}

static void schedule(dp_vgcm_key *k, const uint8_t key[32], uintptr_t *low) {
    *low = STACK_POINTER();
    __m128i rk[15];
    rk[0] = _mm_loadu_si128((const __m128i *)key);
    rk[1] = _mm_loadu_si128((const __m128i *)(key + 16));
#define STEP(i, rcon)                                                                                                  \
    rk[i] = expand_a(rk[i - 2], _mm_aeskeygenassist_si128(rk[i - 1], rcon));                                         \
    if (i < 14) rk[i + 1] = expand_b(rk[i], rk[i - 1]);
    STEP(2, 0x01) STEP(4, 0x02) STEP(6, 0x04) STEP(8, 0x08) STEP(10, 0x10) STEP(12, 0x20) STEP(14, 0x40)
#undef STEP
    for (int i = 0; i < 15; i++) k->rk[i] = _mm256_broadcastsi128_si256(rk[i]);
    memset(rk, 0, sizeof rk);
    __asm__ volatile("" : : "r"(rk) : "memory");

    // H = AES_K(0), then POLYVAL's key mulX(ByteReverse(H)) and its powers.
    __m128i h = bswap128(aes1(k, _mm_setzero_si128()));
    __m128i carry = _mm_srai_epi32(_mm_shuffle_epi32(h, 0xff), 31);  // all ones when bit 127 is set
    h = _mm_or_si128(_mm_slli_epi64(h, 1), _mm_srli_epi64(_mm_slli_si128(h, 8), 63));
    h = _mm_xor_si128(h, _mm_and_si128(carry, polyval_poly));
    __m128i p[17];
    p[1] = h;
    for (int i = 2; i <= 16; i++) p[i] = polyval_mul(p[i - 1], h);
    k->h1 = h;
    for (int j = 0; j < 8; j++) k->h[j] = _mm256_set_m128i(p[15 - 2 * j], p[16 - 2 * j]);
    memset(p, 0, sizeof p);
    __asm__ volatile("" : : "r"(p) : "memory");
}

/// GHASH's three running sums of carry-less products over sixteen blocks, before their reduction.
typedef struct {
    __m256i lo, mid, hi;
} products;

/// One step of GHASH over sixteen blocks: blocks 2j and 2j+1 at `src` times {H^(16-2j), H^(15-2j)}, into `p` (the
/// accumulator enters with the first pair).
__attribute__((always_inline)) static inline void gstep(const dp_vgcm_key *k, const uint8_t *src, int j, __m128i acc, products *p) {
    __m256i x = bswap256(_mm256_loadu_si256((const __m256i *)(src + 32 * j)));
    __m256i h = k->h[j];
    if (j == 0) {
        x = _mm256_xor_si256(x, _mm256_zextsi128_si256(acc));
        p->lo = _mm256_clmulepi64_epi128(x, h, 0x00);
        p->hi = _mm256_clmulepi64_epi128(x, h, 0x11);
        p->mid = _mm256_xor_si256(_mm256_clmulepi64_epi128(x, h, 0x01), _mm256_clmulepi64_epi128(x, h, 0x10));
    } else {
        p->lo = _mm256_xor_si256(p->lo, _mm256_clmulepi64_epi128(x, h, 0x00));
        p->hi = _mm256_xor_si256(p->hi, _mm256_clmulepi64_epi128(x, h, 0x11));
        p->mid = _mm256_xor_si256(p->mid, _mm256_clmulepi64_epi128(x, h, 0x01));
        p->mid = _mm256_xor_si256(p->mid, _mm256_clmulepi64_epi128(x, h, 0x10));
    }
}

/// The reduction that ends a GHASH of sixteen blocks: the new accumulator.
__attribute__((always_inline)) static inline __m128i gfinish(const products *p) {
    return reduce(_mm_xor_si128(_mm256_castsi256_si128(p->lo), _mm256_extracti128_si256(p->lo, 1)),
                  _mm_xor_si128(_mm256_castsi256_si128(p->mid), _mm256_extracti128_si256(p->mid, 1)),
                  _mm_xor_si128(_mm256_castsi256_si128(p->hi), _mm256_extracti128_si256(p->hi, 1)));
}

/// GHASH of the sixteen blocks at `src` alone.
__attribute__((always_inline)) static inline __m128i ghash16(const dp_vgcm_key *k, const uint8_t *src, __m128i acc) {
    products p;
    for (int j = 0; j < 8; j++) gstep(k, src, j, acc, &p);
    return gfinish(&p);
}

/// The CTR pass of sixteen blocks from `in` to `out` (which may be equal), with GHASH over the sixteen blocks at
/// `gsrc` (NULL for none) computed between the AES rounds, so that the AES and carry-less multiply units work at once.
/// `gsrc` is read before anything is stored. Written as loops over arrays, which the optimiser unrolls into registers
/// and which keep an unoptimised build's stack frame small.
__attribute__((always_inline)) static inline void ctr16(const dp_vgcm_key *k, __m256i *ctr, const uint8_t *in, uint8_t *out,
                                                        const uint8_t *gsrc, __m128i *acc) {
    __m256i s[8];
    products p;
    for (int j = 0; j < 8; j++) s[j] = _mm256_xor_si256(bswap256(_mm256_add_epi32(*ctr, plus[j])), k->rk[0]);
    *ctr = _mm256_add_epi32(*ctr, plus[8]);
#pragma clang loop unroll(full)
    for (int r = 1; r < 14; r++) {
        for (int j = 0; j < 8; j++) s[j] = _mm256_aesenc_epi128(s[j], k->rk[r]);
        if (gsrc != NULL && r <= 8) gstep(k, gsrc, r - 1, *acc, &p);
        if (gsrc != NULL && r == 9) *acc = gfinish(&p);
    }
    for (int j = 0; j < 8; j++) {
        __m256i y = _mm256_xor_si256(_mm256_aesenclast_epi128(s[j], k->rk[14]), _mm256_loadu_si256((const __m256i *)(in + 32 * j)));
        _mm256_storeu_si256((__m256i *)(out + 32 * j), y);
    }
}

/// The CTR pass of eight blocks, with their GHASH (of the input when `decrypt`, else of the output).
__attribute__((always_inline)) static inline void ctr8(const dp_vgcm_key *k, __m256i *ctr, const uint8_t *in, uint8_t *out,
                                                       __m128i *acc, const int decrypt) {
    __m256i s[4], x[4];
    for (int j = 0; j < 4; j++) {
        s[j] = _mm256_xor_si256(bswap256(_mm256_add_epi32(*ctr, plus[j])), k->rk[0]);
        x[j] = _mm256_loadu_si256((const __m256i *)(in + 32 * j));
    }
    *ctr = _mm256_add_epi32(*ctr, plus[4]);
    if (decrypt) *acc = absorb8(k, *acc, x);
    for (int r = 1; r < 14; r++) {
        for (int j = 0; j < 4; j++) s[j] = _mm256_aesenc_epi128(s[j], k->rk[r]);
    }
    for (int j = 0; j < 4; j++) {
        x[j] = _mm256_xor_si256(_mm256_aesenclast_epi128(s[j], k->rk[14]), x[j]);
        _mm256_storeu_si256((__m256i *)(out + 32 * j), x[j]);
    }
    if (!decrypt) *acc = absorb8(k, *acc, x);
}

/// The CTR pass and GHASH of one message: `decrypt` 0 seals (GHASH over the output), 1 opens (GHASH over the input).
/// Returns the POLYVAL accumulator after the ciphertext, before the length block.
__attribute__((always_inline)) static inline __m128i ctr_ghash(const dp_vgcm_key *k, uint8_t *out, const uint8_t *in,
                                                               size_t n, __m128i acc, __m128i j0, const int decrypt) {
    // Counter blocks byte-reversed, so the 32-bit big-endian counter is each lane's first dword: {2, 3} first.
    __m128i first = _mm_add_epi32(bswap128(j0), one128);
    __m256i ctr = _mm256_add_epi32(_mm256_broadcastsi128_si256(first), lane1_plus1);
    if (n >= 256) {
        if (decrypt) {
            for (; n >= 256; in += 256, out += 256, n -= 256) ctr16(k, &ctr, in, out, in, &acc);
        } else {
            ctr16(k, &ctr, in, out, NULL, &acc);  // the first sixteen blocks' GHASH goes with the next sixteen's AES
            for (in += 256, out += 256, n -= 256; n >= 256; in += 256, out += 256, n -= 256) ctr16(k, &ctr, in, out, out - 256, &acc);
            acc = ghash16(k, out - 256, acc);
        }
    }
    if (n >= 128) {
        ctr8(k, &ctr, in, out, &acc, decrypt);
        in += 128, out += 128, n -= 128;
    }
    __m128i next = _mm256_castsi256_si128(ctr);  // the next counter, byte-reversed
    for (; n >= 16; in += 16, out += 16, n -= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)in);
        if (decrypt) acc = absorb1(k, acc, x);
        __m128i y = _mm_xor_si128(aes1(k, bswap128(next)), x);
        next = _mm_add_epi32(next, one128);
        _mm_storeu_si128((__m128i *)out, y);
        if (!decrypt) acc = absorb1(k, acc, y);
    }
    if (n > 0) {
        uint8_t last[16] = {0};
        copy_partial(last, in, n);
        __m128i x = _mm_loadu_si128((const __m128i *)last);
        __m128i y = _mm_xor_si128(aes1(k, bswap128(next)), x);
        _mm_storeu_si128((__m128i *)last, y);
        copy_partial(out, last, n);
        memset(last + n, 0, 16 - n);  // GHASH takes the ciphertext's last block padded with zeros
        acc = absorb1(k, acc, decrypt ? x : _mm_loadu_si128((const __m128i *)last));
        memset(last, 0, sizeof last);
        __asm__ volatile("" : : "r"(last) : "memory");
    }
    return acc;
}

/// The tag of a message whose ciphertext left the accumulator at `acc`.
__attribute__((always_inline)) static inline __m128i finish(const dp_vgcm_key *k, __m128i acc, __m128i j0, size_t n, size_t adlen) {
    // GCM's length block, byte-reversed: len(C) in bits in the low half, len(A) in bits in the high half.
    acc = polyval_mul(_mm_xor_si128(acc, _mm_set_epi64x((long long)((uint64_t)adlen * 8), (long long)((uint64_t)n * 8))), k->h1);
    return _mm_xor_si128(bswap128(acc), aes1(k, j0));
}

__attribute__((always_inline)) static inline __m128i j0_of(const uint8_t nonce[12]) {
    uint8_t b[16];
    memcpy(b, nonce, 12);
    b[12] = 0; b[13] = 0; b[14] = 0; b[15] = 1;
    return _mm_loadu_si128((const __m128i *)b);
}

/// GCM's limit on one message's plaintext: 2^32 - 2 blocks.
static const uint64_t max_bytes = ((1ULL << 32) - 2) * 16;

static int seal_impl(const dp_vgcm_key *k, uint8_t *out, uint8_t tag[16], const uint8_t *in, size_t n,
                     const uint8_t *ad, size_t adlen, const uint8_t nonce[12], uintptr_t *low) {
    *low = STACK_POINTER();
    if ((uint64_t)n > max_bytes || (uint64_t)adlen > (UINT64_MAX >> 3)) return 0;
    __m128i j0 = j0_of(nonce);
    __m128i acc = absorb_bytes(k, _mm_setzero_si128(), ad, adlen);
    acc = ctr_ghash(k, out, in, n, acc, j0, 0);
    _mm_storeu_si128((__m128i *)tag, finish(k, acc, j0, n, adlen));
    return 1;
}

static int open_impl(const dp_vgcm_key *k, uint8_t *out, const uint8_t *in, size_t n, const uint8_t tag[16],
                     const uint8_t *ad, size_t adlen, const uint8_t nonce[12], uintptr_t *low) {
    *low = STACK_POINTER();
    if ((uint64_t)n > max_bytes || (uint64_t)adlen > (UINT64_MAX >> 3)) {
        if (n > 0) memset(out, 0, n);
        return 0;
    }
    __m128i j0 = j0_of(nonce);
    __m128i acc = absorb_bytes(k, _mm_setzero_si128(), ad, adlen);
    acc = ctr_ghash(k, out, in, n, acc, j0, 1);
    __m128i diff = _mm_xor_si128(finish(k, acc, j0, n, adlen), _mm_loadu_si128((const __m128i *)tag));
    int ok = _mm_testz_si128(diff, diff);  // constant time: one test of all 128 bits
    if (!ok && n > 0) {
        memset(out, 0, n);
        __asm__ volatile("" : : "r"(out) : "memory");
    }
    return ok;
}

static void init_impl(dp_vgcm_key *k, const uint8_t key[32], uintptr_t *low) {
    schedule(k, key, low);
    _mm256_zeroall();
}

static int seal_checked(const dp_vgcm_key *k, uint8_t *out, uint8_t tag[16], const uint8_t *in, size_t n,
                        const uint8_t *ad, size_t adlen, const uint8_t nonce[12], uintptr_t *low) {
    int ok = seal_impl(k, out, tag, in, n, ad, adlen, nonce, low);
    _mm256_zeroall();
    return ok;
}

static int open_checked(const dp_vgcm_key *k, uint8_t *out, const uint8_t *in, size_t n, const uint8_t tag[16],
                        const uint8_t *ad, size_t adlen, const uint8_t nonce[12], uintptr_t *low) {
    int ok = open_impl(k, out, in, n, tag, ad, adlen, nonce, low);
    _mm256_zeroall();
    return ok;
}

#pragma clang attribute pop

// The public functions are compiled for the baseline CPU, so that nothing here runs a VAES or AVX2 instruction
// before dp_vgcm_available() has been asked.

size_t dp_vgcm_key_bytes(void) { return (sizeof(dp_vgcm_key) + 63) & ~(size_t)63; }

int dp_vgcm_optimised(void) {
#ifdef __OPTIMIZE__
    return 1;
#else
    return 0;
#endif
}

dp_vgcm_key *dp_vgcm_init(void *memory, const uint8_t key[32]) {
    if (memory == NULL || ((uintptr_t)memory & 31) != 0 || !dp_vgcm_available()) return NULL;
    dp_vgcm_key *k = memory;
    uintptr_t low = STACK_POINTER();
    init_impl(k, key, &low);
    wipe_stack(low);
    return k;
}

int dp_vgcm_seal(const dp_vgcm_key *k, uint8_t *out, uint8_t tag[16], const uint8_t *in, size_t n,
                 const uint8_t *ad, size_t adlen, const uint8_t nonce[12]) {
    uintptr_t low = STACK_POINTER();
    int ok = seal_checked(k, out, tag, in, n, ad, adlen, nonce, &low);
    wipe_stack(low);
    return ok;
}

int dp_vgcm_open(const dp_vgcm_key *k, uint8_t *out, const uint8_t *in, size_t n, const uint8_t tag[16],
                 const uint8_t *ad, size_t adlen, const uint8_t nonce[12]) {
    uintptr_t low = STACK_POINTER();
    int ok = open_checked(k, out, in, n, tag, ad, adlen, nonce, &low);
    wipe_stack(low);
    return ok;
}
