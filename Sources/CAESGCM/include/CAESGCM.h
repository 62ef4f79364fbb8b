// AES-256-GCM on VAES and VPCLMULQDQ (256-bit vector AES and carry-less multiply): the chunk cipher's fast path
// (issue 23), used by ProtectionCrypto only, where dp_vgcm_available() says the CPU and kernel support it.
//
// A key (dp_vgcm_key) holds the AES-256 round keys and the powers H^1..H^16 of GHASH's hash key, in memory the caller
// provides and zeroes; it is immutable once made, so any number of threads may seal and open under one key at once.
// Every call that touches key material clears the vector registers and the stack it used before it returns.
#ifndef DP_CAESGCM_H
#define DP_CAESGCM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp_vgcm_key dp_vgcm_key;

/// 1 when this CPU has AES-NI, PCLMULQDQ, AVX2, VAES and VPCLMULQDQ and the kernel saves the ymm registers; else 0.
int dp_vgcm_available(void);

/// The bytes a key needs (a multiple of 64), in memory aligned to 32 bytes that the caller provides.
size_t dp_vgcm_key_bytes(void);

/// Schedules the 32 bytes at `key` (the caller keeps and wipes them) into `memory` (dp_vgcm_key_bytes() bytes,
/// 32-byte aligned), and returns it as a key; NULL when `memory` is misaligned or dp_vgcm_available() is 0. The
/// caller zeroes the memory when the key ends: nothing else refers to it.
dp_vgcm_key *dp_vgcm_init(void *memory, const uint8_t key[32]);

/// 1 when this code was compiled with optimisation. Unoptimised, vector intrinsics run 50 times slower than OpenSSL's
/// assembly, so the library chooses OpenSSL in such builds unless told otherwise.
int dp_vgcm_optimised(void);

/// Seals `n` bytes of `in` into `out` (which may equal `in`, or not overlap it) under the 12-byte `nonce`,
/// authenticating `adlen` bytes of `ad`, and writes the 16-byte tag. Returns 1, or 0 when `n` is beyond what one GCM
/// message may hold (2^36 - 32 bytes; nothing is written then).
int dp_vgcm_seal(const dp_vgcm_key *k, uint8_t *out, uint8_t tag[16], const uint8_t *in, size_t n,
                 const uint8_t *ad, size_t adlen, const uint8_t nonce[12]);

/// Decrypts the `n` bytes of ciphertext at `in` into `out` (which may equal `in`, or not overlap it) and verifies `tag`
/// over `ad` and the ciphertext. Returns 1 when the tag verifies; 0 otherwise (or for a length beyond one GCM message),
/// and then `out` has been zeroed: no unauthenticated plaintext is left behind.
int dp_vgcm_open(const dp_vgcm_key *k, uint8_t *out, const uint8_t *in, size_t n, const uint8_t tag[16],
                 const uint8_t *ad, size_t adlen, const uint8_t nonce[12]);

#ifdef __cplusplus
}
#endif

#endif
