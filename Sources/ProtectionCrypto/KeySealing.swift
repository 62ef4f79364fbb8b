internal import CSodium

/// An X25519 public key (32 bytes); public, so plain bytes.
public struct X25519PublicKey: Sendable, Hashable {
    public static let size = 32
    public let bytes: [UInt8]

    /// Validates the length of `bytes`.
    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == Self.size else { throw CryptoError(.invalidLength, "an X25519 public key must be 32 bytes, got \(bytes.count)") }
        self.bytes = bytes
    }
}

/// An X25519 key pair whose private half lives in locked memory.
public struct X25519KeyPair: ~Copyable, Sendable {
    public let publicKey: X25519PublicKey
    public let secretKey: SecretBytes

    /// Generates a fresh key pair.
    public static func generate() throws(CryptoError) -> X25519KeyPair {
        let sk = try SecretBytes.random(count: Int(crypto_box_SECRETKEYBYTES))
        return try X25519KeyPair(secretKey: sk)
    }

    /// Rebuilds a key pair from its 32-byte private key (the public key is recomputed).
    public init(secretKey: consuming SecretBytes) throws(CryptoError) {
        guard secretKey.count == Int(crypto_scalarmult_SCALARBYTES) else {
            throw CryptoError(.invalidLength, "an X25519 private key must be 32 bytes, got \(secretKey.count)")
        }
        var pk = [UInt8](repeating: 0, count: X25519PublicKey.size)
        secretKey.withUnsafeBytes { s in
            _ = pk.withUnsafeMutableBufferPointer { crypto_scalarmult_base($0.baseAddress!, s.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        }
        self.publicKey = try X25519PublicKey(bytes: pk)
        self.secretKey = secretKey
    }
}

/// Seals a secret key to an X25519 public key, with associated data.
///
/// Construction (specified in FORMAT.md): a fresh ephemeral key pair `e`;
/// `shared = X25519(e.secret, recipient)` (rejected if all zero); the wrapping
/// key is `BLAKE2b-256(key: shared, "dp-seal-v1" ‖ e.public ‖ recipient)`; the
/// key is then wrapped with `KeyWrap` under it, binding `ad`. Output:
/// `e.public (32) ‖ KeyWrap output`. Unlike `crypto_box_seal`, the associated
/// data ties the sealed key to its file header.
public enum KeySealing {
    /// Bytes added to the sealed key: ephemeral public key plus `KeyWrap.overhead`.
    public static let overhead = X25519PublicKey.size + KeyWrap.overhead
    static let label: StaticString = "dp-seal-v1"

    /// Seals `key` to `recipient`, binding `ad`; needs only the public key.
    public static func seal(
        _ key: borrowing SecretBytes, to recipient: X25519PublicKey, ad: UnsafeRawBufferPointer
    ) throws(CryptoError) -> [UInt8] {
        let eph = try X25519KeyPair.generate()
        let wrapKey = try sharedKey(secret: eph.secretKey, peer: recipient, ephemeral: eph.publicKey, recipient: recipient)
        return eph.publicKey.bytes + (try KeyWrap.wrap(key, with: wrapKey, ad: ad))
    }

    /// Opens a key sealed by `seal` with the recipient's key pair.
    /// - Throws: `.authenticationFailed` for the wrong key pair, wrong `ad` or altered bytes.
    public static func open(
        _ sealed: UnsafeRawBufferPointer, with recipient: borrowing X25519KeyPair, ad: UnsafeRawBufferPointer
    ) throws(CryptoError) -> SecretBytes {
        try open(sealed, secretKey: recipient.secretKey, publicKey: recipient.publicKey, ad: ad)
    }

    /// Opens a sealed key with the recipient's private key and its public key.
    public static func open(
        _ sealed: UnsafeRawBufferPointer, secretKey: borrowing SecretBytes, publicKey: X25519PublicKey, ad: UnsafeRawBufferPointer
    ) throws(CryptoError) -> SecretBytes {
        guard sealed.count > overhead else { throw CryptoError(.invalidLength, "a sealed key needs more than \(overhead) bytes, got \(sealed.count)") }
        let eph = try X25519PublicKey(bytes: Array(sealed[0..<X25519PublicKey.size]))
        let wrapKey = try sharedKey(secret: secretKey, peer: eph, ephemeral: eph, recipient: publicKey)
        return try KeyWrap.unwrap(UnsafeRawBufferPointer(rebasing: sealed[X25519PublicKey.size...]), with: wrapKey, ad: ad)
    }

    private static func sharedKey(
        secret: borrowing SecretBytes, peer: X25519PublicKey, ephemeral: X25519PublicKey, recipient: X25519PublicKey
    ) throws(CryptoError) -> SecretBytes {
        let shared = try sharedSecret(secret: secret, peer: peer)
        var h = try StreamingHash(key: shared)
        label.withUTF8Buffer { h.update(UnsafeRawBufferPointer($0)) }
        ephemeral.bytes.withUnsafeBytes { h.update($0) }
        recipient.bytes.withUnsafeBytes { h.update($0) }
        return try h.finalizeSecret()
    }

    /// Raw X25519 (`crypto_scalarmult`); rejects an all-zero result (low-order peer key).
    package static func sharedSecret(secret: borrowing SecretBytes, peer: X25519PublicKey) throws(CryptoError) -> SecretBytes {
        var shared = try SecretBytes(zeroedCount: Int(crypto_scalarmult_BYTES))
        let rc: Int32 = shared.withUnsafeMutableBytes { out in
            secret.withUnsafeBytes { s in
                peer.bytes.withUnsafeBufferPointer { p in
                    crypto_scalarmult(out.baseAddress!.assumingMemoryBound(to: UInt8.self), s.baseAddress!.assumingMemoryBound(to: UInt8.self), p.baseAddress!)
                }
            }
        }
        guard rc == 0 else { throw CryptoError(.invalidPublicKey, "X25519 rejected a low-order public key") }
        return shared
    }
}
