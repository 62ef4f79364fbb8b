internal import CSodium

/// The authenticated ciphers the project uses, by their format identifier.
public enum AEADCipher: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// XChaCha20-Poly1305 (IETF), 192-bit nonces: always available.
    case xchacha20poly1305 = 1
    /// AES-256-GCM, 96-bit nonces: only where the CPU has AES-NI and PCLMUL.
    case aes256gcm = 2

    public static let keySize = 32
    public static let tagSize = 16

    /// Nonce length in bytes.
    @inline(__always)
    public var nonceSize: Int { self == .aes256gcm ? 12 : 24 }

    /// Bytes each sealed message adds: nonce plus tag.
    @inline(__always)
    public var overhead: Int { nonceSize + Self.tagSize }

    /// Whether libsodium can run this cipher on this CPU (`crypto_aead_aes256gcm_is_available`).
    public var isAvailable: Bool {
        switch self {
        case .xchacha20poly1305: return Sodium.ready
        case .aes256gcm: return Sodium.ready && crypto_aead_aes256gcm_is_available() == 1
        }
    }

    /// The fastest available cipher: AES-256-GCM where supported, else XChaCha20-Poly1305.
    public static var preferred: AEADCipher { aes256gcm.isAvailable ? .aes256gcm : .xchacha20poly1305 }

    public var description: String { self == .aes256gcm ? "AES-256-GCM" : "XChaCha20-Poly1305" }
}

/// A 256-bit AEAD key, ready to seal and open, with AES-GCM's expanded key precomputed.
///
/// For AES-256-GCM the key schedule and GHASH tables are computed once
/// (`crypto_aead_aes256gcm_beforenm`) into locked memory, so each chunk pays
/// only for the cipher itself. Sealing and opening only read the key state,
/// so one `AEADKey` may be used from several threads at once.
public struct AEADKey: ~Copyable, @unchecked Sendable {
    // @unchecked Sendable: state is immutable after init and libsodium's
    // *_afternm / detached calls only read it.
    public let cipher: AEADCipher
    private let state: SecretBytes  // raw key (XChaCha) or expanded state (AES-GCM)

    /// Prepares `key` (32 bytes) for `cipher`.
    /// - Throws: `.invalidLength` for a key that is not 32 bytes; `.unsupportedCipher`
    ///   for AES-256-GCM on a CPU without support.
    public init(_ cipher: AEADCipher, key: borrowing SecretBytes) throws(CryptoError) {
        try Sodium.ensureReady()
        guard key.count == AEADCipher.keySize else {
            throw CryptoError(.invalidLength, "an AEAD key must be \(AEADCipher.keySize) bytes, got \(key.count)")
        }
        guard cipher.isAvailable else {
            throw CryptoError(.unsupportedCipher, "\(cipher) is not supported on this CPU (libsodium needs AES-NI and PCLMUL); use XChaCha20-Poly1305")
        }
        let prepared = try Self.prepare(cipher, key: key)
        self.cipher = cipher
        self.state = prepared
    }

    private static func prepare(_ cipher: AEADCipher, key: borrowing SecretBytes) throws(CryptoError) -> SecretBytes {
        guard cipher == .aes256gcm else { return try key.duplicate() }
        var st = try SecretBytes(zeroedCount: crypto_aead_aes256gcm_statebytes())
        st.withUnsafeMutableBytes { s in
            key.withUnsafeBytes { k in
                _ = crypto_aead_aes256gcm_beforenm(
                    s.baseAddress!.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self),
                    k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return st
    }

    /// Encrypts `count` bytes from `input` into `output` (which may equal `input`) and writes the tag.
    ///
    /// - Parameters:
    ///   - input: plaintext (`count` bytes; any valid pointer when `count` is 0).
    ///   - output: receives `count` bytes of ciphertext; may be `input` (in place).
    ///   - nonce: `cipher.nonceSize` bytes; MUST never repeat under this key.
    ///   - ad: associated data, authenticated but not encrypted.
    ///   - tag: receives `AEADCipher.tagSize` bytes.
    @inline(__always)
    public borrowing func seal(
        _ input: UnsafeRawPointer, count: Int, into output: UnsafeMutableRawPointer,
        nonce: UnsafeRawPointer, ad: UnsafeRawBufferPointer, tag: UnsafeMutableRawPointer
    ) {
        let m = input.assumingMemoryBound(to: UInt8.self)
        let c = output.assumingMemoryBound(to: UInt8.self)
        let n = nonce.assumingMemoryBound(to: UInt8.self)
        let a = ad.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let t = tag.assumingMemoryBound(to: UInt8.self)
        state.withUnsafeBytes { s in
            switch cipher {
            case .aes256gcm:
                _ = crypto_aead_aes256gcm_encrypt_detached_afternm(
                    c, t, nil, m, UInt64(count), a, UInt64(ad.count), nil, n,
                    s.baseAddress!.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self))
            case .xchacha20poly1305:
                _ = crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
                    c, t, nil, m, UInt64(count), a, UInt64(ad.count), nil, n,
                    s.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }

    /// Encrypts `count` bytes at `text` in place and writes the tag (see `seal(_:count:into:nonce:ad:tag:)`).
    @inline(__always)
    public borrowing func sealInPlace(
        _ text: UnsafeMutableRawPointer, count: Int, nonce: UnsafeRawPointer,
        ad: UnsafeRawBufferPointer, tag: UnsafeMutableRawPointer
    ) {
        seal(text, count: count, into: text, nonce: nonce, ad: ad, tag: tag)
    }

    /// Verifies `tag` and decrypts `count` bytes from `input` into `output` (which may equal `input`).
    ///
    /// On failure `output` is zeroed, so no unauthenticated plaintext is left behind.
    /// - Throws: `.authenticationFailed` when the tag does not verify.
    @inline(__always)
    public borrowing func open(
        _ input: UnsafeRawPointer, count: Int, into output: UnsafeMutableRawPointer,
        nonce: UnsafeRawPointer, ad: UnsafeRawBufferPointer, tag: UnsafeRawPointer
    ) throws(CryptoError) {
        let c = input.assumingMemoryBound(to: UInt8.self)
        let m = output.assumingMemoryBound(to: UInt8.self)
        let n = nonce.assumingMemoryBound(to: UInt8.self)
        let a = ad.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let t = tag.assumingMemoryBound(to: UInt8.self)
        let rc: Int32 = state.withUnsafeBytes { s in
            switch cipher {
            case .aes256gcm:
                return crypto_aead_aes256gcm_decrypt_detached_afternm(
                    m, nil, c, UInt64(count), t, a, UInt64(ad.count), n,
                    s.baseAddress!.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self))
            case .xchacha20poly1305:
                return crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
                    m, nil, c, UInt64(count), t, a, UInt64(ad.count), n,
                    s.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard rc == 0 else {
            if count > 0 { sodium_memzero(m, count) }
            throw CryptoError(.authenticationFailed, "authentication failed: the data, its nonce, its associated data or the key is wrong")
        }
    }

    /// Verifies and decrypts in place (see `open(_:count:into:nonce:ad:tag:)`).
    @inline(__always)
    public borrowing func openInPlace(
        _ text: UnsafeMutableRawPointer, count: Int, nonce: UnsafeRawPointer,
        ad: UnsafeRawBufferPointer, tag: UnsafeRawPointer
    ) throws(CryptoError) {
        try open(text, count: count, into: text, nonce: nonce, ad: ad, tag: tag)
    }
}
