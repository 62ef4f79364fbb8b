#if canImport(Glibc)
import Glibc
#endif

/// One extended-nonce subkey, scheduled for AES-256-GCM (`GCMContexts`), immutable once built.
///
/// The subkey's bytes are not kept: only its contexts (`GCMContexts`, zeroed when freed), which go with the last reference.
@usableFromInline
final class ExpandedSubkey: Sendable {
    /// The key nonce that selects the subkey (public: it is written beside every chunk sealed under it).
    private let keyNonce: (UInt64, UInt32)
    let contexts: GCMContexts

    /// Schedules the 32-byte subkey at `key` (the caller wipes it) of `keyNonce`.
    /// - Throws: `.outOfMemory` when no memory is left for the schedule or context.
    init(key: UnsafeRawPointer, keyNonce: UnsafeRawPointer) throws(CryptoError) {
        self.contexts = try GCMContexts(key: key)
        self.keyNonce = Self.keyNonce(keyNonce)
    }

    /// Whether the nonce at `nonce` starts with this subkey's key nonce.
    @inline(__always)
    func belongs(to nonce: UnsafeRawPointer) -> Bool { Self.keyNonce(nonce) == keyNonce }

    @inline(__always)
    private static func keyNonce(_ p: UnsafeRawPointer) -> (UInt64, UInt32) {
        (p.loadUnaligned(as: UInt64.self), p.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
    }
}

/// What an extended-nonce `AEADKey` changes as it is used, behind one mutex: the numbering of its seals and the
/// subkey it used last.
///
/// **The numbering.** At its first seal the key draws `N1` (12 bytes, the key nonce) and `R` (12 bytes) from the
/// CSPRNG and gives its seal number k the nonce `N1 ‖ (R ⊕ k)` (k big-endian in the last four bytes), k = 0, 1, 2, …
/// across every `fill`, so the GCM nonces under one key nonce never repeat. Before k reaches `limit` (2^32) it draws
/// a fresh `N1` and `R` and starts again at 0. A protected file's writer keeps its key for as long as its handle does
/// (until close, or a lock that drops the keys), so one writer session derives one subkey instead of one per batch.
///
/// Why the bound holds (FORMAT.md §7): every `N2` is uniformly random on its own (R is), and two seals of different
/// draws share a whole nonce only if both independent halves match (2^−192 per pair), so q seals under one file key
/// repeat a nonce with probability below q²/2^193; within a draw the k differ. At most 2^32 seals per subkey is also
/// the most AES-GCM invocations NIST SP 800-38D allows under one key.
///
/// **The last subkey.** A file written in one session has one key nonce, so every later read or append of it finds
/// its subkey here instead of deriving it again (one BLAKE2b and one OpenSSL context keyed, about 1.1 µs). An entry is
/// never changed: a session that meets another key nonce derives that subkey and swaps in a new entry under the lock,
/// while a session on another thread may go on using the old one, which it holds. The state goes with its key (the
/// handle's keys, dropped on close and on a lock), and the last reference to an entry cleanses its contexts.
///
/// One object and one mutex per key, because every protected-file handle makes a key: a small file's open pays for
/// these allocations once. A bare pthread mutex rather than `Locked` (one allocation fewer, and no generic
/// `withLock` across the module boundary on the read path); ThreadSanitizer still sees the pthread calls.
@usableFromInline
final class ExtendedKeyState: @unchecked Sendable {  // every var below is read and written only with `mutex` held
    /// Seals under one key nonce before a fresh one is drawn.
    let limit: UInt64
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// `N1 ‖ R` of the current draw (24 bytes; public: it is written beside every chunk), valid once `drawn`.
    private var draw: (UInt64, UInt64, UInt64) = (0, 0, 0)
    private var drawn = false
    /// The next seal number k under the current draw.
    private var next: UInt64 = 0
    /// The most recently published subkey.
    private var latest: ExpandedSubkey?

    /// - Parameter limit: seals per key nonce, 1 through 2^32 (smaller only to test the change of key nonce).
    init(limit: UInt64) {
        precondition(limit >= 1 && limit <= AEADNonceMode.maxSealsPerKeyNonce, "seals per key nonce must be 1 through 2^32")
        self.limit = limit
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Takes `bytes` (24, from the CSPRNG) as the first draw of `N1` and `R`, instead of drawing at the first seal.
    ///
    /// For a new file, whose file key and first key nonce come from one CSPRNG call (one `getrandom` instead of
    /// two); independent CSPRNG output either way. Ignored once a draw was made.
    func seed(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == AEADNonceMode.extendedNonceSize, "a key-nonce draw is 24 bytes")
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard !drawn else { return }
        withUnsafeMutableBytes(of: &draw) { $0.copyMemory(from: bytes) }
        drawn = true
        next = 0
    }

    /// Writes the nonces of the next `count` seals `stride` bytes apart from `base`, numbered in that order.
    ///
    /// Runs under the lock, so two callers never get the same numbers; the pipeline threads that then seal pieces of
    /// one batch at once each use the nonces already in their slots.
    /// - Throws: `.libraryUnavailable` if the CSPRNG cannot run (the numbers already handed out stay used).
    func fill(_ base: UnsafeMutableRawPointer, count: Int, stride: Int) throws(CryptoError) {
        let size = AEADNonceMode.extendedNonceSize
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        for i in 0..<count {
            if !drawn || next == limit {
                try withUnsafeMutableBytes(of: &draw) { (d) throws(CryptoError) in try SecureRandom.fill(d) }
                drawn = true
                next = 0
            }
            let slot = base + i * stride
            withUnsafeBytes(of: draw) { slot.copyMemory(from: $0.baseAddress!, byteCount: size) }
            // The seal number, big-endian, into the last four bytes: R ⊕ k.
            let r = slot.loadUnaligned(fromByteOffset: size - 4, as: UInt32.self)
            slot.storeBytes(of: r ^ UInt32(truncatingIfNeeded: next).bigEndian, toByteOffset: size - 4, as: UInt32.self)
            next += 1
        }
    }

    /// The most recently published subkey, if any.
    @inline(__always)
    var current: ExpandedSubkey? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return latest
    }

    /// Publishes `entry` as the most recent subkey (sessions that hold the one it replaces keep it until they end).
    func publish(_ entry: ExpandedSubkey) {
        pthread_mutex_lock(mutex)
        let replaced = latest
        latest = entry
        pthread_mutex_unlock(mutex)
        _ = replaced  // released (and its contexts cleansed) here, outside the lock, unless a session still holds it
    }
}
