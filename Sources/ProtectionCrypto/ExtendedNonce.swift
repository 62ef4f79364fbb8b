internal import CSodium

/// How an `AEADKey` turns a nonce into a cipher call.
public enum AEADNonceMode: Sendable, Equatable {
    /// The nonce goes to the cipher unchanged: `cipher.nonceSize` bytes (12 for AES-256-GCM, 24 for XChaCha20-Poly1305).
    case direct
    /// AES-256-GCM with 24-byte nonces `N1 ‖ N2`: `N1` (12 bytes, the *key nonce*) selects the subkey
    /// `BLAKE2b-256(key = K, salt = N1 ‖ 0⁴, personal = "AES256GCM-XN-KDF", message = ε)` of the key `K`, and
    /// `N2` (12 bytes) is the AES-GCM nonce under that subkey.
    ///
    /// Why: AES-GCM's 96-bit random nonces allow only about 2^32 messages per key (NIST SP 800-38D), and a
    /// protected file that is appended to re-seals its last chunk on every append. Here a nonce repeats under
    /// one subkey only if two messages share both halves: with each half uniformly random (below) and the `N2`
    /// of messages that share an `N1` distinct, that is at most `q²/2^193` after `q` messages, `2^−65` at
    /// 2^64 messages, the bound of XChaCha20-Poly1305 (FORMAT.md §7). The construction follows C2SP's
    /// XAES-256-GCM (a 24-byte nonce whose first half derives the key), with keyed BLAKE2b, libsodium's own KDF
    /// (`crypto_kdf_derive_from_key` with a 12-byte identifier instead of 8), in place of AES-CMAC, which
    /// libsodium does not expose. Cost: one BLAKE2b compression and one AES key expansion per key nonce
    /// (about 0.2 µs here, against 2.3 µs to seal 4 KiB), which a writer pays once per batch of chunks by
    /// sharing the key nonce (`AEADKey.fillNonces`), and a reader once per run of chunks sealed together.
    case extended

    /// Length of an extended nonce, and of its two halves.
    public static let extendedNonceSize = 24
    public static let keyNonceSize = 12

    /// BLAKE2b personalisation of the subkey derivation: 16 ASCII bytes.
    static let personal: StaticString = "AES256GCM-XN-KDF"

    /// The subkey that the key nonce `nonce[0..<12]` selects under `master` (for known-answer tests).
    /// - Throws: `.invalidLength` for a master key that is not 32 bytes or a nonce shorter than 12 bytes.
    public static func extendedSubkey(of master: borrowing SecretBytes, nonce: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes {
        try Sodium.ensureReady()
        guard master.count == AEADCipher.keySize, nonce.count >= keyNonceSize else {
            throw CryptoError(.invalidLength, "an extended-nonce subkey needs a 32-byte key and a 12-byte key nonce")
        }
        var out = try SecretBytes(zeroedCount: AEADCipher.keySize)
        out.withUnsafeMutableBytes { o in master.withUnsafeBytes { m in deriveSubkey(into: o.baseAddress!, master: m.baseAddress!, keyNonce: nonce.baseAddress!) } }
        return out
    }

    /// Writes the 32-byte subkey of `keyNonce` (12 bytes) under `master` (32 bytes) to `out`.
    @inline(__always)
    static func deriveSubkey(into out: UnsafeMutableRawPointer, master: UnsafeRawPointer, keyNonce: UnsafeRawPointer) {
        withUnsafeTemporaryAllocation(byteCount: 16, alignment: 8) { salt in
            salt.initializeMemory(as: UInt8.self, repeating: 0)
            salt.baseAddress!.copyMemory(from: keyNonce, byteCount: keyNonceSize)
            personal.withUTF8Buffer { p in
                _ = crypto_generichash_blake2b_salt_personal(
                    out.assumingMemoryBound(to: UInt8.self), AEADCipher.keySize, nil, 0,
                    master.assumingMemoryBound(to: UInt8.self), AEADCipher.keySize,
                    salt.baseAddress!.assumingMemoryBound(to: UInt8.self), p.baseAddress!)
            }
        }
    }

    /// Fills `count` extended nonces `stride` bytes apart: `N1 ‖ (R ⊕ k)` for k = 0..<count, from one CSPRNG call.
    ///
    /// Every `N2` is uniformly random on its own (R is), and the `N2` of one batch are distinct (the `k` are), so
    /// messages of one batch never repeat a nonce and messages of two batches repeat one only if both random halves
    /// collide (probability 2^−192 per pair).
    static func fillExtendedNonces(_ base: UnsafeMutableRawPointer, count: Int, stride: Int) throws(CryptoError) {
        guard count <= Int(UInt32.max) else { throw CryptoError(.invalidLength, "at most 2^32 extended nonces per batch") }
        try withUnsafeTemporaryAllocation(byteCount: extendedNonceSize, alignment: 8) { (fresh) throws(CryptoError) in
            try SecureRandom.fill(fresh)
            for k in 0..<count {
                let slot = base + k * stride
                slot.copyMemory(from: fresh.baseAddress!, byteCount: extendedNonceSize)
                var be = UInt32(truncatingIfNeeded: k).bigEndian
                withUnsafeBytes(of: &be) { kb in
                    for i in 0..<4 { slot.storeBytes(of: fresh[20 + i] ^ kb[i], toByteOffset: 20 + i, as: UInt8.self) }
                }
            }
        }
    }
}

/// Seals and opens under one `AEADKey` on one thread (see `AEADKey.withSession`).
///
/// For extended nonces it holds, in stack scratch that `withSession` zeroes when
/// the session ends, the expanded state of the last subkey and the key nonce it
/// belongs to: a message whose key nonce matches reuses it, any other derives
/// and expands its own. The subkey is never kept between sessions, so a lock that
/// drops the `AEADKey` (under the handle's lock, which every session runs inside)
/// leaves no subkey behind. libsodium's one-shot AES-GCM calls keep their
/// expanded key on the stack and zero it the same way.
public struct AEADSession: ~Copyable {
    let cipher: AEADCipher
    /// The `AEADKey`'s state: raw key (XChaCha, extended AES-GCM) or expanded state (direct AES-GCM).
    let key: UnsafeRawPointer
    /// Extended nonces only: [0..<512) expanded subkey, [512..<524) its key nonce, [524] 1 once set, [528..<560) subkey.
    let scratch: UnsafeMutableRawPointer?

    static let scratchSize = 576
    private static let keyNonceAt = 512, validAt = 524, subkeyAt = 528

    /// The AES-GCM state and the cipher nonce for `nonce`: the key's own, or (extended) the subkey's.
    @inline(__always)
    private func aesState(_ nonce: UnsafeRawPointer) -> (UnsafeMutablePointer<crypto_aead_aes256gcm_state>, UnsafePointer<UInt8>) {
        guard let scratch else {
            return (UnsafeMutablePointer(mutating: key.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self)), nonce.assumingMemoryBound(to: UInt8.self))
        }
        let st = scratch.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self)
        let n1 = AEADNonceMode.keyNonceSize
        if scratch.load(fromByteOffset: Self.validAt, as: UInt8.self) == 0 || sodium_memcmp(scratch + Self.keyNonceAt, nonce, n1) != 0 {
            let sub = scratch + Self.subkeyAt
            AEADNonceMode.deriveSubkey(into: sub, master: key, keyNonce: nonce)
            _ = crypto_aead_aes256gcm_beforenm(st, sub.assumingMemoryBound(to: UInt8.self))
            sodium_memzero(sub, AEADCipher.keySize)
            (scratch + Self.keyNonceAt).copyMemory(from: nonce, byteCount: n1)
            scratch.storeBytes(of: 1, toByteOffset: Self.validAt, as: UInt8.self)
        }
        return (st, (nonce + n1).assumingMemoryBound(to: UInt8.self))
    }

    /// Encrypts `count` bytes from `input` into `output` (which may equal `input`) and writes the tag (see `AEADKey.seal`).
    @inline(__always)
    public func seal(
        _ input: UnsafeRawPointer, count: Int, into output: UnsafeMutableRawPointer,
        nonce: UnsafeRawPointer, ad: UnsafeRawBufferPointer, tag: UnsafeMutableRawPointer
    ) {
        let m = input.assumingMemoryBound(to: UInt8.self)
        let c = output.assumingMemoryBound(to: UInt8.self)
        let a = ad.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let t = tag.assumingMemoryBound(to: UInt8.self)
        switch cipher {
        case .aes256gcm:
            let (st, n) = aesState(nonce)
            _ = crypto_aead_aes256gcm_encrypt_detached_afternm(c, t, nil, m, UInt64(count), a, UInt64(ad.count), nil, n, st)
        case .xchacha20poly1305:
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
                c, t, nil, m, UInt64(count), a, UInt64(ad.count), nil, nonce.assumingMemoryBound(to: UInt8.self), key.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// Verifies `tag` and decrypts `count` bytes from `input` into `output` (see `AEADKey.open`); `output` is zeroed on failure.
    /// - Throws: `.authenticationFailed` when the tag does not verify.
    @inline(__always)
    public func open(
        _ input: UnsafeRawPointer, count: Int, into output: UnsafeMutableRawPointer,
        nonce: UnsafeRawPointer, ad: UnsafeRawBufferPointer, tag: UnsafeRawPointer
    ) throws(CryptoError) {
        let c = input.assumingMemoryBound(to: UInt8.self)
        let m = output.assumingMemoryBound(to: UInt8.self)
        let a = ad.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let t = tag.assumingMemoryBound(to: UInt8.self)
        let rc: Int32
        switch cipher {
        case .aes256gcm:
            let (st, n) = aesState(nonce)
            rc = crypto_aead_aes256gcm_decrypt_detached_afternm(m, nil, c, UInt64(count), t, a, UInt64(ad.count), n, st)
        case .xchacha20poly1305:
            rc = crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
                m, nil, c, UInt64(count), t, a, UInt64(ad.count), nonce.assumingMemoryBound(to: UInt8.self), key.assumingMemoryBound(to: UInt8.self))
        }
        guard rc == 0 else {
            if count > 0 { sodium_memzero(m, count) }
            throw CryptoError(.authenticationFailed, "authentication failed: the data, its nonce, its associated data or the key is wrong")
        }
    }
}
