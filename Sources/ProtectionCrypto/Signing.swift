internal import CSodium

/// An Ed25519 verifying key (32 bytes).
public struct Ed25519PublicKey: Sendable, Hashable {
    public static let size = 32
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == Self.size else { throw CryptoError(.invalidLength, "an Ed25519 public key must be 32 bytes, got \(bytes.count)") }
        self.bytes = bytes
    }

    /// Whether `signature` is a valid Ed25519 signature of `message` (`crypto_sign_verify_detached`).
    public func isValidSignature(_ signature: [UInt8], for message: UnsafeRawBufferPointer) -> Bool {
        guard Sodium.ready, signature.count == Int(crypto_sign_BYTES) else { return false }
        return signature.withUnsafeBufferPointer { s in
            bytes.withUnsafeBufferPointer { k in
                crypto_sign_verify_detached(s.baseAddress!, message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count), k.baseAddress!) == 0
            }
        }
    }
}

/// An Ed25519 signing key pair; the secret half (64 bytes, libsodium's layout) lives in locked memory.
public struct Ed25519KeyPair: ~Copyable, Sendable {
    public let publicKey: Ed25519PublicKey
    public let secretKey: SecretBytes

    /// Generates a fresh signing key pair.
    public static func generate() throws(CryptoError) -> Ed25519KeyPair {
        try Sodium.ensureReady()
        var sk = try SecretBytes(zeroedCount: Int(crypto_sign_SECRETKEYBYTES))
        var pk = [UInt8](repeating: 0, count: Ed25519PublicKey.size)
        sk.withUnsafeMutableBytes { s in
            _ = pk.withUnsafeMutableBufferPointer { crypto_sign_keypair($0.baseAddress!, s.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        }
        return Ed25519KeyPair(publicKey: try Ed25519PublicKey(bytes: pk), secretKey: sk)
    }

    /// Rebuilds a key pair from a stored 64-byte libsodium secret key.
    public init(secretKey: consuming SecretBytes) throws(CryptoError) {
        guard secretKey.count == Int(crypto_sign_SECRETKEYBYTES) else {
            throw CryptoError(.invalidLength, "an Ed25519 secret key must be \(crypto_sign_SECRETKEYBYTES) bytes, got \(secretKey.count)")
        }
        var pk = [UInt8](repeating: 0, count: Ed25519PublicKey.size)
        secretKey.withUnsafeBytes { s in
            _ = pk.withUnsafeMutableBufferPointer { crypto_sign_ed25519_sk_to_pk($0.baseAddress!, s.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        }
        self.init(publicKey: try Ed25519PublicKey(bytes: pk), secretKey: secretKey)
    }

    private init(publicKey: Ed25519PublicKey, secretKey: consuming SecretBytes) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// Signs `message` (`crypto_sign_detached`); returns the 64-byte signature.
    public borrowing func sign(_ message: UnsafeRawBufferPointer) -> [UInt8] {
        var sig = [UInt8](repeating: 0, count: Int(crypto_sign_BYTES))
        secretKey.withUnsafeBytes { s in
            _ = sig.withUnsafeMutableBufferPointer {
                crypto_sign_detached($0.baseAddress!, nil, message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count), s.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return sig
    }
}
