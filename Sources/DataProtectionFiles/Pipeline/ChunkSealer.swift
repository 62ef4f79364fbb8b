import DataProtectionKeys
import ProtectionCrypto

/// Seals and opens the chunks of one protected file (FORMAT.md §4).
///
/// A chunk on disk is `nonce ‖ ciphertext ‖ tag`. Its associated data is
/// `fileID (16) ‖ chunk index (u64, big-endian) ‖ last-chunk flag (1 byte)`,
/// so a chunk cannot be moved to another file or index, and truncation or
/// extension changes which chunk must carry the flag.
///
/// A sealer is one writer session (FORMAT.md §6.1): with extended nonces its
/// keys draw one key nonce and number the sealer's seals under it across every
/// batch (`fillNonces`, a fresh key nonce before 2^32 seals), and keep the
/// expanded subkey they used last, which every session (`withSession`, one per
/// thread) shares. So a handle derives a subkey once for all the appends it
/// makes, and once for all the random reads of a file written in one session.
/// The handle drops its sealer on close and on a lock, and the subkey with it.
struct ChunkSealer: Sendable {
    let fileID: [UInt8]
    let keys: FileKeys
    var nonceSize: Int { keys.content.nonceSize }
    static let adSize = 25

    /// Builds the associated data for chunk `index` into `ad` (25 bytes).
    @inline(__always)
    func fillAD(_ ad: UnsafeMutableRawBufferPointer, index: Int64, last: Bool) {
        fileID.withUnsafeBytes { ad.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: 16) }
        var be = UInt64(index).bigEndian
        withUnsafeBytes(of: &be) { (ad.baseAddress! + 16).copyMemory(from: $0.baseAddress!, byteCount: 8) }
        ad[24] = last ? 1 : 0
    }

    /// Runs `body` with a session of the content key (see `AEADKey.withSession`).
    @inline(__always)
    func withSession<R, E: Error>(sharingSubkeys: Bool = true, _ body: (inout AEADSession) throws(E) -> R) throws(E) -> R {
        try keys.content.withSession(sharingSubkeys: sharingSubkeys, body)
    }

    /// Seals `count` plaintext bytes from `plaintext` into the chunk slot at `slot`
    /// (`nonce ‖ ciphertext ‖ tag`); the nonce must already be in the slot's first bytes.
    @inline(__always)
    func seal(_ plaintext: UnsafeRawPointer, count: Int, intoSlot slot: UnsafeMutableRawPointer, index: Int64, last: Bool, in session: inout AEADSession) {
        let n = nonceSize
        withUnsafeTemporaryAllocation(byteCount: Self.adSize, alignment: 8) { ad in
            fillAD(ad, index: index, last: last)
            session.seal(plaintext, count: count, into: slot + n, nonce: slot, ad: UnsafeRawBufferPointer(ad), tag: slot + n + count)
        }
    }

    /// Opens the chunk in `slot` holding `count` plaintext bytes into `output` (may be `slot + nonceSize`).
    /// - Throws: `CryptoError.authenticationFailed`; `output` is zeroed then.
    @inline(__always)
    func open(
        slot: UnsafeRawPointer, count: Int, into output: UnsafeMutableRawPointer, index: Int64, last: Bool, in session: inout AEADSession
    ) throws(CryptoError) {
        let n = nonceSize
        try withUnsafeTemporaryAllocation(byteCount: Self.adSize, alignment: 8) { (ad) throws(CryptoError) in
            fillAD(ad, index: index, last: last)
            try session.open(slot + n, count: count, into: output, nonce: slot, ad: UnsafeRawBufferPointer(ad), tag: slot + n + count)
        }
    }

    /// Fills the nonce of each of `count` slots spaced `stride` apart for one batch of seals (FORMAT.md §6.1: random
    /// nonces; with extended nonces the session's key nonce and its next `count` GCM nonces). Call it under the
    /// handle's lock before the pipeline threads seal the batch's pieces: each piece then seals with its own nonces.
    func fillNonces(_ base: UnsafeMutableRawPointer, count: Int, stride: Int) throws(CryptoError) {
        try keys.content.fillNonces(base, count: count, stride: stride)
    }
}
