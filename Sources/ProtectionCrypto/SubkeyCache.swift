internal import CSodium
#if canImport(Glibc)
import Glibc
#endif

/// The expanded AES-GCM state of one extended-nonce subkey (`crypto_aead_aes256gcm_beforenm`), immutable once built.
///
/// The state lives in `SecretBytes` (a `SecurePool` slot: locked memory, zeroed when the last reference goes).
final class ExpandedSubkey: Sendable {
    /// The key nonce that selects the subkey (public: it is written beside every chunk sealed under it).
    private let keyNonce: (UInt64, UInt32)
    let state: SecretBytes

    /// Copies the expanded state at `state` (`crypto_aead_aes256gcm_statebytes()` bytes) of the subkey of `keyNonce`.
    /// - Throws: `.outOfMemory` when no locked memory is left.
    init(copying state: UnsafeRawPointer, keyNonce: UnsafeRawPointer) throws(CryptoError) {
        self.state = try SecretBytes(copying: UnsafeRawBufferPointer(start: state, count: crypto_aead_aes256gcm_statebytes()))
        self.keyNonce = Self.keyNonce(keyNonce)
    }

    /// Whether the nonce at `nonce` starts with this subkey's key nonce.
    @inline(__always)
    func belongs(to nonce: UnsafeRawPointer) -> Bool { Self.keyNonce(nonce) == keyNonce }

    @inline(__always)
    private static func keyNonce(_ p: UnsafeRawPointer) -> (UInt64, UInt32) {
        (p.loadUnaligned(as: UInt64.self), p.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
    }

    /// Calls `body` with the expanded state; libsodium's `*_afternm` calls only read it, so threads may share it.
    @inline(__always)
    func withState<R>(_ body: (UnsafeMutablePointer<crypto_aead_aes256gcm_state>) -> R) -> R {
        state.withUnsafeBytes { body(UnsafeMutablePointer(mutating: $0.baseAddress!.assumingMemoryBound(to: crypto_aead_aes256gcm_state.self))) }
    }
}

/// The subkey an extended-nonce `AEADKey` used last, shared by its sessions on every thread.
///
/// A file written in one session has one key nonce (`KeyNonceSequence`), so every later read or append of it finds
/// its subkey here instead of deriving it again (one BLAKE2b and one AES key expansion, about 0.25 µs). An entry is
/// never changed: a session that meets another key nonce derives that subkey and swaps in a new entry under the lock,
/// while a session on another thread may go on using the old one, which it holds. The cache goes with its key (the
/// handle's keys, dropped on close and on a lock), and the last reference to an entry zeroes its state.
final class SubkeyCache: @unchecked Sendable {  // `latest` is read and written only with `mutex` held
    // A bare pthread mutex rather than `Locked`: a random 4 KiB read looks here once, and the generic `withLock`
    // across the module boundary cost about as much again as the lock itself. TSan still sees the pthread calls.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var latest: ExpandedSubkey?

    init() {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// The most recently published subkey, if any.
    @inline(__always)
    var current: ExpandedSubkey? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return latest
    }

    /// Publishes a copy of the expanded state at `state` for `keyNonce` and returns it; nil when locked memory runs
    /// out (the caller then keeps using its own copy).
    func publish(copying state: UnsafeRawPointer, keyNonce: UnsafeRawPointer) -> ExpandedSubkey? {
        guard let entry = try? ExpandedSubkey(copying: state, keyNonce: keyNonce) else { return nil }
        pthread_mutex_lock(mutex)
        let replaced = latest
        latest = entry
        pthread_mutex_unlock(mutex)
        _ = replaced  // released (and its state zeroed) here, outside the lock, unless a session still holds it
        return entry
    }
}
