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
    /// one subkey only if two messages share both halves: with each half uniformly random and the `N2`
    /// of messages that share an `N1` distinct, that is at most `q²/2^193` after `q` messages, `2^−65` at
    /// 2^64 messages, the bound of XChaCha20-Poly1305 (FORMAT.md §7). The construction follows C2SP's
    /// XAES-256-GCM (a 24-byte nonce whose first half derives the key), with keyed BLAKE2b, libsodium's own KDF
    /// (`crypto_kdf_derive_from_key` with a 12-byte identifier instead of 8), in place of AES-CMAC, which
    /// libsodium does not expose. Cost: one BLAKE2b compression and one OpenSSL context keyed per key nonce
    /// (about 1.1 µs here, mostly OpenSSL's context set-up, against 1.3 µs to seal 4 KiB; `dp-bench seal-cost`). A key numbers its seals under one key nonce for up
    /// to 2^32 seals (`KeyNonceSequence`), and keeps the last subkey's expanded state (`SubkeyCache`), so a
    /// writer derives once per session and a reader of a file written in one session once per handle.
    case extended

    /// Length of an extended nonce, and of its two halves.
    public static let extendedNonceSize = 24
    public static let keyNonceSize = 12
    /// The most seals one key uses under one key nonce (the seal number k fills the GCM nonce's last four bytes).
    public static let maxSealsPerKeyNonce: UInt64 = 1 << 32

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
}

/// Seals and opens under one `AEADKey` on one thread (see `AEADKey.withSession`).
///
/// AES-256-GCM runs on the backend's contexts (`GCMContexts`): the session borrows one context of the key it seals under
/// (the `AEADKey`'s own, or with extended nonces the message's subkey's) and gives it back when it moves to another
/// subkey or ends. For extended nonces it finds each message's subkey in this order: the entry of the key's
/// `ExtendedKeyState` it holds, the cache's latest entry; only then does it derive the subkey (into the stack
/// scratch, zeroed at once), schedule it into a new entry and publish that to the cache; a session that shares no
/// subkeys instead keys one context of its own for the key nonce it met last. Nothing a session holds
/// outlives it except what the cache holds, which goes with the `AEADKey` (dropped under the handle's lock, which
/// every session runs inside, so a lock leaves no subkey behind).
public struct AEADSession: ~Copyable {
    @usableFromInline let cipher: AEADCipher
    /// The `AEADKey`'s raw key: the key (XChaCha), or the master of the subkeys (extended AES-GCM); unused for direct AES-GCM.
    @usableFromInline let key: UnsafeRawPointer
    /// Extended nonces only: 32 bytes for a subkey while it is scheduled.
    @usableFromInline let scratch: UnsafeMutableRawPointer?
    /// Extended nonces only: the key's state, which holds its last subkey.
    @usableFromInline let cache: ExtendedKeyState?
    /// Direct AES-GCM only: the key's contexts.
    @usableFromInline let contexts: GCMContexts?
    /// The subkey entry this session last used (kept alive while the session may still use it).
    @usableFromInline var entry: ExpandedSubkey?
    /// The context this session borrowed, and the contexts it came from (given back on a change of key and at the end).
    @usableFromInline var held: OpaquePointer?
    @usableFromInline var heldFrom: GCMContexts?
    /// Whether the scratch received a subkey (and must be wiped when the session ends).
    @usableFromInline var derived = false
    /// A session that shares no subkeys (`cache` nil): the context of the subkey it derived last, its own, freed
    /// (zeroed) when the session moves to another key nonce or ends, and that key nonce.
    @usableFromInline var own: OpaquePointer?
    @usableFromInline var ownKeyNonce: (UInt64, UInt32) = (0, 0)

    @usableFromInline static let scratchSize = 32

    @usableFromInline
    init(cipher: AEADCipher, key: UnsafeRawPointer, scratch: UnsafeMutableRawPointer?, cache: ExtendedKeyState?, contexts: GCMContexts?) {
        self.cipher = cipher
        self.key = key
        self.scratch = scratch
        self.cache = cache
        self.contexts = contexts
    }

    deinit {
        if let held, let heldFrom { heldFrom.give(held) }
        if let own { GCMContexts.free(own) }
    }

    /// Zeroes a session's scratch (after a session that derived a subkey into it).
    @usableFromInline
    static func wipe(_ scratch: UnsafeMutableRawBufferPointer) { wipeMemory(scratch) }

    /// A context of `from` for this session: the one it holds, or one borrowed (giving back the one it held).
    @inline(__always)
    private mutating func context(of from: GCMContexts) -> OpaquePointer {
        if let held, heldFrom === from { return held }
        if let held, let heldFrom { heldFrom.give(held) }
        let c = from.take()
        held = c
        heldFrom = from
        return c
    }

    /// The AES-GCM context and the 12-byte cipher nonce for `nonce`: the key's own, or (extended) the subkey's.
    @inline(__always)
    private mutating func aesContext(_ nonce: UnsafeRawPointer) -> (OpaquePointer, UnsafePointer<UInt8>) {
        guard let scratch else { return (context(of: contexts!), nonce.assumingMemoryBound(to: UInt8.self)) }
        let n2 = (nonce + AEADNonceMode.keyNonceSize).assumingMemoryBound(to: UInt8.self)
        if let e = entry, e.belongs(to: nonce) { return (context(of: e.contexts), n2) }
        if let e = cache?.current, e.belongs(to: nonce) {
            entry = e
            return (context(of: e.contexts), n2)
        }
        let keyNonce = (nonce.loadUnaligned(as: UInt64.self), nonce.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        if cache == nil, let own, ownKeyNonce == keyNonce { return (own, n2) }
        derived = true
        AEADNonceMode.deriveSubkey(into: scratch, master: key, keyNonce: nonce)
        if cache == nil {
            // Nobody else will want this subkey (a small file's only chunk, read once at open): one context of the
            // session's own, without a shared entry, its lock and a kept copy of the key.
            let made = GCMContexts.context(keyedWith: scratch)
            wipeMemory(UnsafeMutableRawBufferPointer(start: scratch, count: AEADCipher.keySize))
            guard let made else { fatalError("cannot schedule an AES-256-GCM subkey: out of memory") }
            if let own { GCMContexts.free(own) }
            own = made
            ownKeyNonce = keyNonce
            return (made, n2)
        }
        let made = Result { () throws(CryptoError) in try ExpandedSubkey(key: scratch, keyNonce: nonce) }
        wipeMemory(UnsafeMutableRawBufferPointer(start: scratch, count: AEADCipher.keySize))
        guard case .success(let e) = made else { fatalError("cannot schedule an AES-256-GCM subkey: out of memory") }
        entry = e
        cache?.publish(e)
        return (context(of: e.contexts), n2)
    }

    /// Encrypts `count` bytes from `input` into `output` (which may equal `input`) and writes the tag (see `AEADKey.seal`).
    @inline(__always)
    public mutating func seal(
        _ input: UnsafeRawPointer, count: Int, into output: UnsafeMutableRawPointer,
        nonce: UnsafeRawPointer, ad: UnsafeRawBufferPointer, tag: UnsafeMutableRawPointer
    ) {
        let m = input.assumingMemoryBound(to: UInt8.self)
        let c = output.assumingMemoryBound(to: UInt8.self)
        let a = ad.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let t = tag.assumingMemoryBound(to: UInt8.self)
        switch cipher {
        case .aes256gcm:
            let (ctx, n) = aesContext(nonce)
            GCMContexts.seal(ctx, c, t, m, count, a, ad.count, n)
        case .xchacha20poly1305:
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt_detached(
                c, t, nil, m, UInt64(count), a, UInt64(ad.count), nil, nonce.assumingMemoryBound(to: UInt8.self), key.assumingMemoryBound(to: UInt8.self))
        }
    }

    /// Verifies `tag` and decrypts `count` bytes from `input` into `output` (see `AEADKey.open`); `output` is zeroed on failure.
    /// - Throws: `.authenticationFailed` when the tag does not verify.
    @inline(__always)
    public mutating func open(
        _ input: UnsafeRawPointer, count: Int, into output: UnsafeMutableRawPointer,
        nonce: UnsafeRawPointer, ad: UnsafeRawBufferPointer, tag: UnsafeRawPointer
    ) throws(CryptoError) {
        let c = input.assumingMemoryBound(to: UInt8.self)
        let m = output.assumingMemoryBound(to: UInt8.self)
        let a = ad.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let t = tag.assumingMemoryBound(to: UInt8.self)
        let ok: Bool
        switch cipher {
        case .aes256gcm:
            let (ctx, n) = aesContext(nonce)
            ok = GCMContexts.open(ctx, m, c, count, t, a, ad.count, n)
        case .xchacha20poly1305:
            ok = crypto_aead_xchacha20poly1305_ietf_decrypt_detached(
                m, nil, c, UInt64(count), t, a, UInt64(ad.count), nonce.assumingMemoryBound(to: UInt8.self), key.assumingMemoryBound(to: UInt8.self)) == 0
        }
        guard ok else {
            if count > 0 { sodium_memzero(m, count) }
            throw CryptoError(.authenticationFailed, "authentication failed: the data, its nonce, its associated data or the key is wrong")
        }
    }
}
