internal import CAESGCM
internal import COpenSSL
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The AES-256-GCM implementations of the chunk cipher, one chosen per process (`GCMContexts.backend`).
public enum AESGCMBackend: String, Sendable, CaseIterable {
    /// The project's own AES-256-GCM on VAES and VPCLMULQDQ (`CAESGCM`): 16 blocks per loop, two per 256-bit register,
    /// AES and GHASH interleaved. One immutable key schedule per key, in locked memory, shared by every thread.
    case vaes
    /// OpenSSL 3's libcrypto (`COpenSSL`): one provider context per session that seals at once.
    case openssl

    /// The environment variable that overrides the choice for a process: `vaes` or `openssl` (any other value, or
    /// `vaes` on a CPU without VAES, leaves the default). For tests and benchmarks that compare the two.
    public static let environmentVariable = "DATAPROTECTION_AES_GCM_BACKEND"
}

/// The scheduled AES-256-GCM key of one `AEADKey` (or extended-nonce subkey), with what sessions under it seal with.
///
/// **Which implementation** (`backend`, chosen once per process): the project's own VAES code where the CPU has VAES
/// and VPCLMULQDQ and the library was compiled with optimisation, OpenSSL's libcrypto elsewhere. Measured on this
/// project's machines (AMD EPYC, Zen 3, BENCHMARKS.md "Bulk AEAD backend"), at 4 KiB chunks on one core, VAES seals
/// at about 2× OpenSSL 3.0 (which has no VAES code for AES-GCM) and 3.5× libsodium 1.0.18; unoptimised, vector
/// intrinsics run some 50 times slower than OpenSSL's assembly, so debug builds keep OpenSSL unless
/// `DATAPROTECTION_AES_GCM_BACKEND=vaes` asks for VAES (the test script's VAES phase does). Both give the same bytes.
///
/// **VAES.** The key schedule (round keys and the GHASH key's powers, 768 bytes) is computed once into a slot of
/// `SecurePool` (locked memory, excluded from core dumps, zeroed on release) and never changes, so every session
/// under the key uses it at once: `take` returns it, `give` does nothing. Each call clears the vector registers and
/// the stack it used before it returns (CAESGCM/aesgcm.c).
///
/// **OpenSSL.** A context is mutable while it seals (nonce, GHASH state), so each session takes
/// a context of its own (`take`) and gives it back when it ends (`give`); the first is made with the pool, others
/// (keyed from the pool's copy of the key) only when sessions on several threads overlap. The provider's own context
/// is called through its dispatch functions (`dp_gcm_backend`).
///
/// **Key lifetime.** With OpenSSL the key is kept in `SecretBytes` (locked memory); the contexts hold its expanded schedule and
/// GHASH table in OpenSSL's heap, which is not `mlock`ed and not excluded from core dumps. The provider's `freectx`
/// (also what `EVP_CIPHER_CTX_free` calls) cleanses a context before freeing it (`OPENSSL_clear_free`), and `deinit` frees every
/// context; the pool goes with its `AEADKey` or extended-nonce subkey, that is with the handle's keys, which close and
/// a lock drop (the key-residue test searches for the schedule). OpenSSL's AES code also leaves round keys in the
/// vector registers, which the next register save (the dynamic linker's lazy binding saves them on the stack) would
/// write where nothing wipes them: every call here that runs AES clears them before it returns
/// (`dp_clear_vector_registers`, COpenSSL/shim.h).
@usableFromInline
final class GCMContexts: @unchecked Sendable {  // `idle` is read and written only with `mutex` held
    /// The raw key (OpenSSL, to key more contexts), or the VAES key schedule.
    private let material: SecretBytes
    /// One idle context (its address, or 0), taken and given back with one atomic operation each: sessions under one
    /// key rarely overlap (a handle's reads and writes are serialised), so a random 4 KiB read takes no mutex.
    private let spare: Atomic<UInt>
    /// OpenSSL only: guards `idle` (a VAES schedule is never handed out exclusively, so it needs none).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>?
    private var idle: [OpaquePointer] = []  // the contexts of overlapping sessions, once given back

    /// The implementation this process runs (see the type's documentation).
    @usableFromInline
    static let backend: AESGCMBackend = {
        let vaes = dp_vgcm_available() == 1
        if let chosen = getenv(AESGCMBackend.environmentVariable).flatMap({ AESGCMBackend(rawValue: String(cString: $0)) }) {
            if chosen == .openssl || vaes { return chosen }
        }
        return vaes && dp_vgcm_optimised() == 1 ? .vaes : .openssl
    }()

    /// Bytes of one VAES key schedule (a multiple of 64, so that `SecretBytes` aligns it even outside the pool).
    private static let scheduleBytes = dp_vgcm_key_bytes()

    /// OpenSSL's AES-256-GCM, fetched once (an implicit fetch on every keying would cost a provider look-up).
    nonisolated(unsafe) private static let cipher: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)

    /// The vector registers to clear after each AES call (`dp_clear_vector_registers`).
    private static let vectorLevel = dp_vector_level()

    /// How every call reaches that cipher: its provider's functions directly, or EVP (`dp_gcm_backend`, COpenSSL/shim.h),
    /// chosen once per process; nil without the cipher. Never freed (it lives as long as the fetched cipher).
    nonisolated(unsafe) private static let openSSL: UnsafeMutablePointer<dp_gcm_backend>? = {
        guard let cipher else { return nil }
        let b = UnsafeMutablePointer<dp_gcm_backend>.allocate(capacity: 1)
        dp_gcm_backend_init(b, cipher, vectorLevel)
        return b
    }()

    /// Whether AES-256-GCM can run: on VAES, or libcrypto provides it.
    static var isAvailable: Bool { backend == .vaes || cipher != nil }

    /// Whether the chunk cipher calls the provider's functions directly rather than through EVP.
    static var callsProviderDirectly: Bool { openSSL?.pointee.direct == 1 }

    /// Schedules the 32-byte AES key at `key` (the caller keeps and wipes its bytes): VAES's schedule, or a first
    /// OpenSSL context.
    /// - Throws: `.outOfMemory` when no locked memory is left or OpenSSL cannot allocate the context;
    ///   `.libraryUnavailable` without AES-256-GCM.
    init(key: UnsafeRawPointer) throws(CryptoError) {
        if Self.backend == .vaes {
            var schedule = try SecretBytes(zeroedCount: Self.scheduleBytes)
            let made = schedule.withUnsafeMutableBytes { dp_vgcm_init($0.baseAddress!, key.assumingMemoryBound(to: UInt8.self)) }
            Self.clearUpperVectorRegisters()  // the caller's copy of the key may have passed through zmm16–31
            guard let made else { throw CryptoError(.outOfMemory, "cannot schedule an AES-256-GCM key: its locked memory is not 32-byte aligned") }
            material = schedule
            spare = Atomic(UInt(bitPattern: made))
            mutex = nil
            return
        }
        material = try SecretBytes(copying: UnsafeRawBufferPointer(start: key, count: AEADCipher.keySize))
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        self.mutex = mutex
        guard let first = Self.openSSLContext(key) else {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
            throw CryptoError(Self.cipher == nil ? .libraryUnavailable : .outOfMemory, "cannot set up OpenSSL's AES-256-GCM (EVP_CIPHER_fetch or the context failed)")
        }
        spare = Atomic(UInt(bitPattern: first))
    }

    deinit {
        // OpenSSL: each context cleansed before it is freed; every session gave its context back. VAES: the schedule
        // is `material`, zeroed when it goes.
        guard let mutex else { return }
        if let c = OpaquePointer(bitPattern: spare.load(ordering: .acquiring)) { Self.free(c) }
        for c in idle { Self.free(c) }
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// A new OpenSSL context keyed with the AES key at `key`, or nil.
    private static func openSSLContext(_ key: UnsafeRawPointer) -> OpaquePointer? {
        guard let openSSL else { return nil }
        return dp_gcm_new(openSSL, key.assumingMemoryBound(to: UInt8.self), vectorLevel)
    }

    /// A context of one session's own, keyed with the 32-byte AES key at `key` (the caller wipes it), outside any
    /// pool; nil when no memory is left for it. Free it with `free`.
    @usableFromInline
    static func context(keyedWith key: UnsafeRawPointer) -> OpaquePointer? {
        guard backend == .vaes else { return openSSLContext(key) }
        guard let slot = SecurePool.slotClass(for: scheduleBytes), let memory = SecurePool.allocate(slot) else { return nil }
        let keyed = dp_vgcm_init(memory, key.assumingMemoryBound(to: UInt8.self))
        clearUpperVectorRegisters()
        guard let made = keyed else {
            SecurePool.release(memory, slot)
            return nil
        }
        return made
    }

    /// Frees a context from `context(keyedWith:)`, zeroing it first (VAES: the pool's release; OpenSSL: the provider's
    /// freectx, or `EVP_CIPHER_CTX_free`).
    @usableFromInline
    static func free(_ c: OpaquePointer) {
        if backend == .vaes { SecurePool.release(UnsafeMutableRawPointer(c), SecurePool.slotClass(for: scheduleBytes)!) } else { dp_gcm_free(openSSL!, c) }
    }

    /// A context under this key for one session's exclusive use, until `give`.
    @usableFromInline
    func take() -> OpaquePointer {
        if Self.backend == .vaes { return OpaquePointer(bitPattern: spare.load(ordering: .relaxed))! }  // shared, immutable
        if let c = OpaquePointer(bitPattern: spare.exchange(0, ordering: .acquiring)) { return c }
        pthread_mutex_lock(mutex!)
        let c = idle.popLast()
        pthread_mutex_unlock(mutex!)
        if let c { return c }
        guard let made = material.withUnsafeBytes({ Self.openSSLContext($0.baseAddress!) }) else { fatalError("OpenSSL cannot allocate an AES-256-GCM context") }
        return made
    }

    /// Returns a context from `take`.
    @usableFromInline
    func give(_ c: OpaquePointer) {
        if Self.backend == .vaes { return }
        if spare.compareExchange(expected: 0, desired: UInt(bitPattern: c), ordering: .releasing).exchanged { return }
        pthread_mutex_lock(mutex!)
        idle.append(c)
        pthread_mutex_unlock(mutex!)
    }

    /// Seals `count` bytes at `m` into `c` under the 12-byte nonce `n`, writing the tag to `t`.
    @inline(__always)
    static func seal(_ ctx: OpaquePointer, _ c: UnsafeMutablePointer<UInt8>, _ t: UnsafeMutablePointer<UInt8>, _ m: UnsafePointer<UInt8>, _ count: Int,
                     _ a: UnsafePointer<UInt8>?, _ adCount: Int, _ n: UnsafePointer<UInt8>) {
        // Fails only for a message beyond GCM's 2^36 - 32 bytes (VAES; chunks are far smaller) or an OpenSSL failure.
        let sealed: Int32
        if backend == .vaes {
            sealed = dp_vgcm_seal(ctx, c, t, m, count, a, adCount, n)
            clearUpperVectorRegisters()
        } else {
            sealed = dp_gcm_seal(openSSL!, ctx, c, t, m, count, a, adCount, n, vectorLevel)
        }
        guard sealed == 1 else { fatalError("AES-256-GCM (\(backend)) failed to seal \(count) bytes") }
    }

    /// Opens `count` bytes at `c` into `m`; false when the tag does not verify (`m` then holds bytes the caller zeroes).
    @inline(__always)
    static func open(_ ctx: OpaquePointer, _ m: UnsafeMutablePointer<UInt8>, _ c: UnsafePointer<UInt8>, _ count: Int, _ t: UnsafePointer<UInt8>,
                     _ a: UnsafePointer<UInt8>?, _ adCount: Int, _ n: UnsafePointer<UInt8>) -> Bool {
        guard backend == .vaes else { return dp_gcm_open(openSSL!, ctx, m, c, count, t, a, adCount, n, vectorLevel) == 1 }
        let opened = dp_vgcm_open(ctx, m, c, count, t, a, adCount, n) == 1
        clearUpperVectorRegisters()
        return opened
    }

    /// After a VAES call: every vector register cleared, `zmm16–31` too. The VAES code clears the sixteen it uses
    /// (`vzeroall`), but glibc's `memcpy` on AVX-512 moves bytes through `ymm16–31`, so bytes copied just before (a page,
    /// a key) stay there, and the dynamic linker's lazy-binding trampoline later saves the whole register file to the
    /// stack (XSAVE) at the first call of a symbol. That is how the database key-residue test found a row of a complete
    /// database in a worker's stack after lock, under VAES only: OpenSSL's calls clear `zmm16–31` as well
    /// (`dp_clear_vector_registers`, COpenSSL/shim.h), the one clear both backends now use.
    @inline(__always)
    private static func clearUpperVectorRegisters() { dp_clear_vector_registers(vectorLevel) }
}

extension AEADCipher {
    /// The AES-256-GCM implementation this process runs (`GCMContexts.backend`).
    public static var aesGCMBackend: AESGCMBackend { GCMContexts.backend }

    /// Whether this CPU and kernel can run the VAES backend (AES-NI, PCLMULQDQ, AVX2, VAES, VPCLMULQDQ, ymm state saved).
    package static var aesGCMVAESRunsHere: Bool { dp_vgcm_available() == 1 }


    /// Whether AES-256-GCM runs on OpenSSL's provider functions directly (true), or through EVP (false: that provider
    /// does not list them, or they disagreed with EVP on a known answer): for tests, which check the path they cover.
    package static var aesGCMCallsProviderDirectly: Bool { GCMContexts.callsProviderDirectly }
}
