internal import CSodium

/// Wraps a secret key under another key with XChaCha20-Poly1305.
///
/// Output layout: `nonce (24) ‖ ciphertext (len) ‖ tag (16)`. The nonce is
/// random, so wrapping the same key twice gives unrelated outputs. The
/// associated data binds the wrapped key to its context (e.g. a file header).
public enum KeyWrap {
    /// Bytes added to the wrapped key: nonce plus tag.
    public static let overhead = AEADCipher.xchacha20poly1305.overhead

    /// Seals `key` under `kek` (32 bytes), binding `ad`.
    public static func wrap(
        _ key: borrowing SecretBytes, with kek: borrowing SecretBytes, ad: UnsafeRawBufferPointer
    ) throws(CryptoError) -> [UInt8] {
        try checkKEK(kek)
        let n = nonceSize
        var out = [UInt8](repeating: 0, count: n + key.count + AEADCipher.tagSize)
        out.withUnsafeMutableBytes { o in
            randombytes_buf(o.baseAddress!, n)
            let c = (o.baseAddress! + n).assumingMemoryBound(to: UInt8.self)
            // Encrypted straight from locked memory: the plaintext key never enters `out`.
            key.withUnsafeBytes { m in
                kek.withUnsafeBytes { k in
                    _ = crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
                        c, c + m.count, nil, m.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(m.count),
                        ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                        nil, o.baseAddress!.assumingMemoryBound(to: UInt8.self), k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        return out
    }

    /// Opens a key wrapped by `wrap`; the plaintext key goes straight into locked memory.
    /// - Throws: `.authenticationFailed` for a wrong `kek`, wrong `ad` or altered bytes;
    ///   `.invalidLength` for input too short to hold a key.
    public static func unwrap(
        _ wrapped: UnsafeRawBufferPointer, with kek: borrowing SecretBytes, ad: UnsafeRawBufferPointer
    ) throws(CryptoError) -> SecretBytes {
        try checkKEK(kek)
        let n = nonceSize
        guard wrapped.count > overhead else { throw CryptoError(.invalidLength, "a wrapped key needs more than \(overhead) bytes, got \(wrapped.count)") }
        let len = wrapped.count - overhead
        var key = try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: wrapped[n..<(n + len)]))
        let rc: Int32 = key.withUnsafeMutableBytes { k in
            kek.withUnsafeBytes { kk in
                let m = k.baseAddress!.assumingMemoryBound(to: UInt8.self)
                let w = wrapped.baseAddress!.assumingMemoryBound(to: UInt8.self)
                return crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
                    m, nil, m, UInt64(len), w + n + len, ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
                    w, kk.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard rc == 0 else {
            throw CryptoError(.authenticationFailed, "key unwrap failed: wrong key, wrong context, or altered wrapped key")
        }
        return key  // (on the failure path above, `key` is dropped and sodium_free zeroes it)
    }

    private static let nonceSize = AEADCipher.xchacha20poly1305.nonceSize

    private static func checkKEK(_ kek: borrowing SecretBytes) throws(CryptoError) {
        try Sodium.ensureReady()
        guard kek.count == AEADCipher.keySize else { throw CryptoError(.invalidLength, "a key-encryption key must be 32 bytes, got \(kek.count)") }
    }
}
