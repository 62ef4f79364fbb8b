import Locking

/// The extended nonces one `AEADKey` hands out for sealing: one random key nonce for a run of numbered seals.
///
/// At its first seal the key draws `N1` (12 bytes, the key nonce) and `R` (12 bytes) from the CSPRNG and gives its
/// seal number k the nonce `N1 ‖ (R ⊕ k)` (k big-endian in the last four bytes), k = 0, 1, 2, … across every
/// `fill`, so the GCM nonces under one key nonce never repeat. Before k reaches `limit` (2^32) it draws a fresh
/// `N1` and `R` and starts again at 0. A protected file's writer keeps its key for as long as its handle does
/// (until close, or a lock that drops the keys), so one writer session derives one subkey instead of one per batch.
///
/// Why the bound holds (FORMAT.md §7): every `N2` is uniformly random on its own (R is), and two seals of different
/// draws share a whole nonce only if both independent halves match (2^−192 per pair), so q seals under one file key
/// repeat a nonce with probability below q²/2^193; within a draw the k differ. At most 2^32 seals per subkey is also
/// the most AES-GCM invocations NIST SP 800-38D allows under one key.
final class KeyNonceSequence: Sendable {
    /// Seals under one key nonce before a fresh one is drawn.
    let limit: UInt64
    private let state = Locked(Draw())

    private struct Draw {
        var nonce: [UInt8] = []  // N1 ‖ R, empty before the first draw; public (it is written beside every chunk)
        var next: UInt64 = 0  // the next seal number k
    }

    /// - Parameter limit: seals per key nonce, 1 through 2^32 (smaller only to test the change of key nonce).
    init(limit: UInt64) {
        precondition(limit >= 1 && limit <= AEADNonceMode.maxSealsPerKeyNonce, "seals per key nonce must be 1 through 2^32")
        self.limit = limit
    }

    /// Writes the nonces of the next `count` seals `stride` bytes apart from `base`, numbered in that order.
    ///
    /// Runs under the sequence's lock, so two callers never get the same numbers; the pipeline threads that then seal
    /// pieces of one batch at once each use the nonces already in their slots.
    /// - Throws: `.libraryUnavailable` if the CSPRNG cannot run (the numbers already handed out stay used).
    func fill(_ base: UnsafeMutableRawPointer, count: Int, stride: Int) throws(CryptoError) {
        let size = AEADNonceMode.extendedNonceSize
        try state.withLock { (d) throws(CryptoError) in
            for i in 0..<count {
                if d.nonce.isEmpty || d.next == limit {
                    d.nonce = try SecureRandom.bytes(size)
                    d.next = 0
                }
                let slot = base + i * stride
                d.nonce.withUnsafeBytes { slot.copyMemory(from: $0.baseAddress!, byteCount: size) }
                var be = UInt32(truncatingIfNeeded: d.next).bigEndian
                withUnsafeBytes(of: &be) { kb in
                    for j in 0..<4 { slot.storeBytes(of: d.nonce[size - 4 + j] ^ kb[j], toByteOffset: size - 4 + j, as: UInt8.self) }
                }
                d.next += 1
            }
        }
    }
}
