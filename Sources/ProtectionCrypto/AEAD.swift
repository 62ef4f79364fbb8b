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

    /// Whether this cipher runs on this CPU: AES-256-GCM only with AES-NI and PCLMUL (`crypto_aead_aes256gcm_is_available`,
    /// so that OpenSSL runs its constant-time hardware path) and OpenSSL's libcrypto providing it.
    public var isAvailable: Bool {
        switch self {
        case .xchacha20poly1305: return Sodium.ready
        case .aes256gcm: return Sodium.ready && crypto_aead_aes256gcm_is_available() == 1 && GCMContexts.isAvailable
        }
    }

    /// The fastest available cipher: AES-256-GCM where supported, else XChaCha20-Poly1305.
    public static var preferred: AEADCipher { aes256gcm.isAvailable ? .aes256gcm : .xchacha20poly1305 }

    public var description: String { self == .aes256gcm ? "AES-256-GCM" : "XChaCha20-Poly1305" }
}

/// A 256-bit AEAD key, ready to seal and open, with AES-GCM's key schedule precomputed.
///
/// AES-256-GCM runs on the process's backend (`GCMContexts`: the project's VAES code or OpenSSL's libcrypto),
/// XChaCha20-Poly1305 on libsodium. For AES-256-GCM with direct nonces the key is scheduled once (VAES: one schedule
/// every thread shares; OpenSSL: a context per thread that seals at once), so each
/// message pays only for the cipher itself. With extended nonces
/// (`AEADNonceMode.extended`) the key is a master key and each nonce selects a
/// subkey: the key numbers its seals under one key nonce (`fillNonces`) and
/// keeps the scheduled contexts of the subkey it used last (`ExtendedKeyState`,
/// cleansed when the key goes), so it derives a subkey only when the key
/// nonce changes. Sealing and opening only read the key state, so one `AEADKey`
/// may be used from several threads at once (each thread in its own session, with a context of its own).
public struct AEADKey: ~Copyable, @unchecked Sendable {
    // @unchecked Sendable: state is immutable after init and libsodium's
    // detached calls only read it; sessions keep their own scratch and borrow a context (VAES: the shared, immutable schedule);
    // the contexts and the extended-nonce state are classes behind their own locks.
    public let cipher: AEADCipher
    public let nonceMode: AEADNonceMode
    @usableFromInline let state: SecretBytes  // the raw key
    @usableFromInline let contexts: GCMContexts?  // direct AES-GCM: the key scheduled for the backend
    @usableFromInline let extended: ExtendedKeyState?  // extended nonces: the numbering of its seals, its last subkey

    /// Nonce length in bytes: the cipher's, or 24 for extended nonces.
    @inline(__always)
    public var nonceSize: Int { nonceMode == .extended ? AEADNonceMode.extendedNonceSize : cipher.nonceSize }

    /// Bytes each sealed message adds: nonce plus tag.
    @inline(__always)
    public var overhead: Int { nonceSize + AEADCipher.tagSize }

    /// Prepares `key` (32 bytes) for `cipher`.
    /// - Parameter nonceMode: `.extended` (AES-256-GCM only) for 24-byte nonces with a subkey per nonce.
    /// - Throws: `.invalidLength` for a key that is not 32 bytes; `.unsupportedCipher`
    ///   for AES-256-GCM on a CPU without support, or extended nonces with XChaCha20-Poly1305.
    public init(_ cipher: AEADCipher, key: borrowing SecretBytes, nonceMode: AEADNonceMode = .direct) throws(CryptoError) {
        try self.init(cipher, key: try key.duplicate(), nonceMode: nonceMode, sealsPerKeyNonce: AEADNonceMode.maxSealsPerKeyNonce)
    }

    /// Prepares `key` for `cipher`, taking it over, with extended nonces that change key nonce every `sealsPerKeyNonce` seals.
    ///
    /// The seam through which tests cross the change of key nonce (1 through 2^32; the public initialiser uses 2^32),
    /// and the library's own way in: the key is not copied (a protected file's open makes one such key).
    package init(_ cipher: AEADCipher, key: consuming SecretBytes, nonceMode: AEADNonceMode, sealsPerKeyNonce: UInt64) throws(CryptoError) {
        try Sodium.ensureReady()
        guard key.count == AEADCipher.keySize else {
            throw CryptoError(.invalidLength, "an AEAD key must be \(AEADCipher.keySize) bytes, got \(key.count)")
        }
        guard cipher.isAvailable else {
            throw CryptoError(.unsupportedCipher, "\(cipher) is not supported on this CPU (it needs AES-NI and PCLMUL, and OpenSSL's libcrypto); use XChaCha20-Poly1305")
        }
        guard nonceMode == .direct || cipher == .aes256gcm else {
            throw CryptoError(.unsupportedCipher, "extended nonces are defined for AES-256-GCM only; \(cipher) already takes 24-byte nonces")
        }
        self.contexts = cipher == .aes256gcm && nonceMode == .direct ? try key.withUnsafeBytes { (k) throws(CryptoError) in try GCMContexts(key: k.baseAddress!) } : nil
        self.cipher = cipher
        self.nonceMode = nonceMode
        self.state = key
        self.extended = nonceMode == .extended ? ExtendedKeyState(limit: sealsPerKeyNonce) : nil
    }

    /// Runs `body` with a session that seals and opens under this key.
    ///
    /// The session borrows a context of the key (AES-256-GCM; `GCMContexts`) and gives it back when `body` returns. With
    /// extended nonces it takes each message's subkey from the key's cache or derives it (on the stack, zeroed at once)
    /// and publishes it to the cache (see `AEADSession`). Use one session per thread; it must not escape `body`.
    ///
    /// Inlinable so that callers in other modules are specialized: unspecialized, the temporary allocation's
    /// `Result<R, E>` metadata was looked up at run time on every call (about 1,100 instructions per small-file open).
    /// - Parameter sharingSubkeys: false for a session whose subkey no later session will need (it then neither
    ///   looks in the key's cache nor publishes to it, and keys a context of its own, freed (zeroed) when it ends:
    ///   a small file's only chunk, opened once at open, skips the shared entry). Only speed depends on it.
    @inlinable @inline(__always)
    public borrowing func withSession<R, E: Error>(sharingSubkeys: Bool = true, _ body: (inout AEADSession) throws(E) -> R) throws(E) -> R {
        try state.withUnsafeBytes { (k) throws(E) -> R in
            guard let extended else {
                var session = AEADSession(cipher: cipher, key: k.baseAddress!, scratch: nil, cache: nil, contexts: contexts)
                return try body(&session)
            }
            return try withUnsafeTemporaryAllocation(byteCount: AEADSession.scratchSize, alignment: 16) { (scratch) throws(E) -> R in
                var session = AEADSession(cipher: cipher, key: k.baseAddress!, scratch: scratch.baseAddress!, cache: sharingSubkeys ? extended : nil, contexts: nil)
                // Only a session that derived a subkey wrote key material there (a cached one costs no wipe).
                defer { if session.derived { AEADSession.wipe(scratch) } }
                return try body(&session)
            }
        }
    }

    /// Encrypts `count` bytes from `input` into `output` (which may equal `input`) and writes the tag.
    ///
    /// - Parameters:
    ///   - input: plaintext (`count` bytes; any valid pointer when `count` is 0).
    ///   - output: receives `count` bytes of ciphertext; may be `input` (in place).
    ///   - nonce: `nonceSize` bytes; MUST never repeat under this key.
    ///   - ad: associated data, authenticated but not encrypted.
    ///   - tag: receives `AEADCipher.tagSize` bytes.
    @inline(__always)
    public borrowing func seal(
        _ input: UnsafeRawPointer, count: Int, into output: UnsafeMutableRawPointer,
        nonce: UnsafeRawPointer, ad: UnsafeRawBufferPointer, tag: UnsafeMutableRawPointer
    ) {
        withSession { $0.seal(input, count: count, into: output, nonce: nonce, ad: ad, tag: tag) }
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
        try withSession { (s) throws(CryptoError) in try s.open(input, count: count, into: output, nonce: nonce, ad: ad, tag: tag) }
    }

    /// Verifies and decrypts in place (see `open(_:count:into:nonce:ad:tag:)`).
    @inline(__always)
    public borrowing func openInPlace(
        _ text: UnsafeMutableRawPointer, count: Int, nonce: UnsafeRawPointer,
        ad: UnsafeRawBufferPointer, tag: UnsafeRawPointer
    ) throws(CryptoError) {
        try open(text, count: count, into: text, nonce: nonce, ad: ad, tag: tag)
    }

    /// With extended nonces, takes `bytes` (24 bytes of CSPRNG output) as the first key nonce and `R` instead of
    /// drawing them at the first seal (`ExtendedKeyState.seed`); nothing with direct nonces.
    package borrowing func seedKeyNonce(_ bytes: UnsafeRawBufferPointer) { extended?.seed(bytes) }

    /// Fills the nonces of the next `count` messages to be sealed under this key, `stride` bytes apart.
    ///
    /// Direct nonces are independent random values from one CSPRNG call.
    /// Extended nonces are numbered (`ExtendedKeyState`): one random key nonce
    /// `N1` and GCM nonces `R ⊕ k` for this key's seals k = 0, 1, 2, … across
    /// calls, each uniformly random and distinct under one `N1`, with a fresh
    /// `N1` and `R` before k reaches 2^32. Nonces are assigned under a lock, so
    /// fill a batch's nonces first, then seal its pieces on several threads.
    /// - Throws: `.libraryUnavailable` if the CSPRNG cannot run.
    public borrowing func fillNonces(_ base: UnsafeMutableRawPointer, count: Int, stride: Int) throws(CryptoError) {
        if let extended {
            try extended.fill(base, count: count, stride: stride)
            return
        }
        let n = nonceSize
        try withUnsafeTemporaryAllocation(byteCount: n * count, alignment: 8) { (buf) throws(CryptoError) in
            try SecureRandom.fill(buf)
            for i in 0..<count { (base + i * stride).copyMemory(from: buf.baseAddress! + i * n, byteCount: n) }
        }
    }
}
