// Package ProtectionCrypto wraps libsodium: the only module that imports it.
//
// Everything secret lives in `SecretBytes` (locked, guarded memory that zeroes
// itself); public values (nonces, public keys, wrapped keys, tags) are plain
// Swift bytes. libsodium is initialised once, lazily, before first use.
internal import CSodium

/// Runs `sodium_init()` exactly once; every public entry point calls it first.
enum Sodium {
    /// `true` when libsodium initialised; it only fails when no randomness source exists.
    static let ready: Bool = sodium_init() >= 0

    @inline(__always)
    static func ensureReady() throws(CryptoError) {
        guard ready else { throw CryptoError(.libraryUnavailable, "libsodium failed to initialise (sodium_init < 0): no usable randomness source") }
    }
}
