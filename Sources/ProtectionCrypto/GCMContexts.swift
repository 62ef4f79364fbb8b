internal import COpenSSL
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The OpenSSL contexts of one AES-256-GCM key, one per session that seals or opens under it at once.
///
/// The chunk cipher's AES-256-GCM runs on OpenSSL 3's libcrypto (about 2–2.3× libsodium 1.0.18's AES-GCM at 4 KiB
/// chunks on this project's machines, BENCHMARKS.md "Bulk AEAD backend"), with the key scheduled once per context
/// rather than per message (the provider's own context, called through its dispatch functions: `dp_gcm_backend`). A
/// context is mutable while it seals (nonce, GHASH state), so each session takes
/// a context of its own (`take`) and gives it back when it ends (`give`); the first is made with the pool, others
/// (keyed from the pool's copy of the key) only when sessions on several threads overlap.
///
/// **Key lifetime.** The key is kept in `SecretBytes` (locked memory); the contexts hold its expanded schedule and
/// GHASH table in OpenSSL's heap, which is not `mlock`ed and not excluded from core dumps. The provider's `freectx`
/// (also what `EVP_CIPHER_CTX_free` calls) cleanses a context before freeing it (`OPENSSL_clear_free`), and `deinit` frees every
/// context; the pool goes with its `AEADKey` or extended-nonce subkey, that is with the handle's keys, which close and
/// a lock drop (the key-residue test searches for the schedule). OpenSSL's AES code also leaves round keys in the
/// vector registers, which the next register save (the dynamic linker's lazy binding saves them on the stack) would
/// write where nothing wipes them: every call here that runs AES clears them before it returns
/// (`dp_clear_vector_registers`, COpenSSL/shim.h).
@usableFromInline
final class GCMContexts: @unchecked Sendable {  // `idle` is read and written only with `mutex` held
    private let key: SecretBytes
    /// One idle context (its address, or 0), taken and given back with one atomic operation each: sessions under one
    /// key rarely overlap (a handle's reads and writes are serialised), so a random 4 KiB read takes no mutex.
    private let spare: Atomic<UInt>
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var idle: [OpaquePointer] = []  // the contexts of overlapping sessions, once given back

    /// OpenSSL's AES-256-GCM, fetched once (an implicit fetch on every keying would cost a provider look-up).
    nonisolated(unsafe) private static let cipher: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)

    /// The vector registers to clear after each AES call (`dp_clear_vector_registers`).
    private static let vectorLevel = dp_vector_level()

    /// How every call reaches that cipher: its provider's functions directly, or EVP (`dp_gcm_backend`, COpenSSL/shim.h),
    /// chosen once per process; nil without the cipher. Never freed (it lives as long as the fetched cipher).
    nonisolated(unsafe) private static let backend: UnsafeMutablePointer<dp_gcm_backend>? = {
        guard let cipher else { return nil }
        let b = UnsafeMutablePointer<dp_gcm_backend>.allocate(capacity: 1)
        dp_gcm_backend_init(b, cipher, vectorLevel)
        return b
    }()

    /// Whether libcrypto provides AES-256-GCM.
    static var isAvailable: Bool { cipher != nil }

    /// Whether the chunk cipher calls the provider's functions directly rather than through EVP.
    static var callsProviderDirectly: Bool { backend?.pointee.direct == 1 }

    /// Schedules the 32-byte AES key at `key` into a first context (the caller keeps and wipes its bytes).
    /// - Throws: `.outOfMemory` when OpenSSL cannot allocate the context or no locked memory is left;
    ///   `.libraryUnavailable` without AES-256-GCM.
    init(key: UnsafeRawPointer) throws(CryptoError) {
        self.key = try SecretBytes(copying: UnsafeRawBufferPointer(start: key, count: AEADCipher.keySize))
        guard let first = Self.context(key) else {
            throw CryptoError(Self.cipher == nil ? .libraryUnavailable : .outOfMemory, "cannot set up OpenSSL's AES-256-GCM (EVP_CIPHER_fetch or the context failed)")
        }
        spare = Atomic(UInt(bitPattern: first))
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        // Each cleansed before it is freed; every session gave its context back.
        if let c = OpaquePointer(bitPattern: spare.load(ordering: .acquiring)) { Self.free(c) }
        for c in idle { Self.free(c) }
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// A new context keyed with the AES key at `key`, or nil.
    private static func context(_ key: UnsafeRawPointer) -> OpaquePointer? {
        guard let backend else { return nil }
        return dp_gcm_new(backend, key.assumingMemoryBound(to: UInt8.self), vectorLevel)
    }

    /// A context of one session's own, keyed with the 32-byte AES key at `key` (the caller wipes it), outside any
    /// pool; nil when OpenSSL cannot make one. Free it with `free`.
    @usableFromInline
    static func context(keyedWith key: UnsafeRawPointer) -> OpaquePointer? { context(key) }

    /// Frees a context from `context(keyedWith:)`, zeroing it first (the provider's freectx, or `EVP_CIPHER_CTX_free`).
    @usableFromInline
    static func free(_ c: OpaquePointer) { dp_gcm_free(backend!, c) }

    /// A context under this key for one session's exclusive use, until `give`.
    @usableFromInline
    func take() -> OpaquePointer {
        if let c = OpaquePointer(bitPattern: spare.exchange(0, ordering: .acquiring)) { return c }
        pthread_mutex_lock(mutex)
        let c = idle.popLast()
        pthread_mutex_unlock(mutex)
        if let c { return c }
        guard let made = key.withUnsafeBytes({ Self.context($0.baseAddress!) }) else { fatalError("OpenSSL cannot allocate an AES-256-GCM context") }
        return made
    }

    /// Returns a context from `take`.
    @usableFromInline
    func give(_ c: OpaquePointer) {
        if spare.compareExchange(expected: 0, desired: UInt(bitPattern: c), ordering: .releasing).exchanged { return }
        pthread_mutex_lock(mutex)
        idle.append(c)
        pthread_mutex_unlock(mutex)
    }

    /// Seals `count` bytes at `m` into `c` under the 12-byte nonce `n`, writing the tag to `t`.
    @inline(__always)
    static func seal(_ ctx: OpaquePointer, _ c: UnsafeMutablePointer<UInt8>, _ t: UnsafeMutablePointer<UInt8>, _ m: UnsafePointer<UInt8>, _ count: Int,
                     _ a: UnsafePointer<UInt8>?, _ adCount: Int, _ n: UnsafePointer<UInt8>) {
        guard dp_gcm_seal(backend!, ctx, c, t, m, count, a, adCount, n, vectorLevel) == 1 else { fatalError("OpenSSL failed to seal with AES-256-GCM") }
    }

    /// Opens `count` bytes at `c` into `m`; false when the tag does not verify (`m` then holds bytes the caller zeroes).
    @inline(__always)
    static func open(_ ctx: OpaquePointer, _ m: UnsafeMutablePointer<UInt8>, _ c: UnsafePointer<UInt8>, _ count: Int, _ t: UnsafePointer<UInt8>,
                     _ a: UnsafePointer<UInt8>?, _ adCount: Int, _ n: UnsafePointer<UInt8>) -> Bool {
        dp_gcm_open(backend!, ctx, m, c, count, t, a, adCount, n, vectorLevel) == 1
    }
}

extension AEADCipher {
    /// Whether AES-256-GCM runs on OpenSSL's provider functions directly (true), or through EVP (false: that provider
    /// does not list them, or they disagreed with EVP on a known answer): for tests, which check the path they cover.
    package static var aesGCMCallsProviderDirectly: Bool { GCMContexts.callsProviderDirectly }
}
