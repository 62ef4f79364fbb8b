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
        let aead = try AEADKey(.xchacha20poly1305, key: kek)
        let n = aead.cipher.nonceSize
        var out = [UInt8](repeating: 0, count: n + key.count + AEADCipher.tagSize)
        out.withUnsafeMutableBytes { o in
            randombytes_buf(o.baseAddress!, n)
            key.withUnsafeBytes { k in (o.baseAddress! + n).copyMemory(from: k.baseAddress!, byteCount: k.count) }
            aead.sealInPlace(o.baseAddress! + n, count: key.count, nonce: o.baseAddress!, ad: ad, tag: o.baseAddress! + n + key.count)
        }
        return out
    }

    /// Opens a key wrapped by `wrap`; the plaintext key goes straight into locked memory.
    /// - Throws: `.authenticationFailed` for a wrong `kek`, wrong `ad` or altered bytes;
    ///   `.invalidLength` for input too short to hold a key.
    public static func unwrap(
        _ wrapped: UnsafeRawBufferPointer, with kek: borrowing SecretBytes, ad: UnsafeRawBufferPointer
    ) throws(CryptoError) -> SecretBytes {
        let aead = try AEADKey(.xchacha20poly1305, key: kek)
        let n = aead.cipher.nonceSize
        guard wrapped.count > overhead else { throw CryptoError(.invalidLength, "a wrapped key needs more than \(overhead) bytes, got \(wrapped.count)") }
        let len = wrapped.count - overhead
        var key = try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: wrapped[n..<(n + len)]))
        try key.withUnsafeMutableBytes { (k: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            try aead.openInPlace(k.baseAddress!, count: len, nonce: wrapped.baseAddress!, ad: ad, tag: wrapped.baseAddress! + n + len)
        }
        return key
    }
}
