internal import CSodium

/// libsodium's one-shot AES-256-GCM, the chunk cipher's backend until issue 23: the reference that the OpenSSL backend
/// (`GCMContexts`) is cross-checked against (same ciphertext and tag; each opens the other's), for tests only.
package enum ReferenceAESGCM {
    /// Seals `plaintext` into `ciphertext` (same count) under `key` and the 12-byte `nonce`, writing the 16-byte `tag`.
    package static func seal(key: borrowing SecretBytes, nonce: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer, plaintext: UnsafeRawBufferPointer,
                             into ciphertext: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawBufferPointer) {
        precondition(key.count == 32 && nonce.count == 12 && tag.count == 16 && ciphertext.count == plaintext.count)
        key.withUnsafeBytes { k in
            _ = crypto_aead_aes256gcm_encrypt_detached(
                bytes(ciphertext), bytes(tag), nil, bytes(plaintext), UInt64(plaintext.count), bytes(ad), UInt64(ad.count), nil,
                bytes(nonce), bytes(k))
        }
    }

    /// Opens `ciphertext` into `plaintext`; false when `tag` does not verify.
    package static func open(key: borrowing SecretBytes, nonce: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer, ciphertext: UnsafeRawBufferPointer,
                             tag: UnsafeRawBufferPointer, into plaintext: UnsafeMutableRawBufferPointer) -> Bool {
        precondition(key.count == 32 && nonce.count == 12 && tag.count == 16 && ciphertext.count == plaintext.count)
        return key.withUnsafeBytes { k in
            crypto_aead_aes256gcm_decrypt_detached(
                bytes(plaintext), nil, bytes(ciphertext), UInt64(ciphertext.count), bytes(tag), bytes(ad), UInt64(ad.count), bytes(nonce), bytes(k)) == 0
        }
    }

    /// The bytes at `b` as libsodium takes them (a valid pointer even when `b` is empty).
    private static func bytes(_ b: UnsafeRawBufferPointer) -> UnsafePointer<UInt8> {
        b.baseAddress.map { $0.assumingMemoryBound(to: UInt8.self) } ?? UnsafePointer(empty)
    }
    private static func bytes(_ b: UnsafeMutableRawBufferPointer) -> UnsafeMutablePointer<UInt8> {
        b.baseAddress.map { $0.assumingMemoryBound(to: UInt8.self) } ?? empty
    }
    nonisolated(unsafe) private static let empty = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
}
