import ProtectionCrypto

/// One generation of one class key: a symmetric key (classes A, C, D) or an
/// X25519 key pair (class B, whose private half may be absent while locked).
public final class ClassKey: Sendable {
    public let protectionClass: ProtectionClass
    public let generation: UInt32
    /// The symmetric key (A, C, D) or the X25519 private key (B); nil while locked.
    let secret: SharedSecret?
    public let publicKey: X25519PublicKey?

    /// A fresh random key of `protectionClass`.
    public static func generate(_ c: ProtectionClass, generation: UInt32 = 1) throws(ProtectionError) -> ClassKey {
        do {
            if c.usesPublicKeySealing {
                let pair = try X25519KeyPair.generate()
                let pk = pair.publicKey
                return ClassKey(c, generation, secret: SharedSecret(try pair.secretKey.duplicate()), publicKey: pk)
            }
            return ClassKey(c, generation, secret: SharedSecret(try SecretBytes.random(count: 32)), publicKey: nil)
        } catch {
            throw ProtectionError(.io(ENOMEM), "cannot generate a class key: \(error.message)", underlying: error)
        }
    }

    /// A class key from its secret half (32 bytes) and, for class B, its public key.
    ///
    /// A class-B key may be given with `secret == nil`: only its public half, as while locked.
    public init(_ c: ProtectionClass, generation: UInt32, secret: SharedSecret?, publicKey: X25519PublicKey? = nil) {
        protectionClass = c
        self.generation = generation
        self.secret = secret
        self.publicKey = publicKey
    }

    private convenience init(_ c: ProtectionClass, _ g: UInt32, secret: SharedSecret?, publicKey: X25519PublicKey?) {
        self.init(c, generation: g, secret: secret, publicKey: publicKey)
    }

    /// Whether this key can unwrap (it holds its secret half).
    public var canUnwrap: Bool { secret != nil }

    /// The same key without its secret half (what class B keeps while locked).
    public func publicOnly() -> ClassKey? {
        guard let pk = publicKey else { return nil }
        return ClassKey(protectionClass, generation: generation, secret: nil, publicKey: pk)
    }

    func wrap(_ fileKey: borrowing SecretBytes, ad: UnsafeRawBufferPointer) throws(ProtectionError) -> [UInt8] {
        do {
            if let pk = publicKey { return try KeySealing.seal(fileKey, to: pk, ad: ad) }
            guard let s = secret else { throw ProtectionError.locked(protectionClass) }
            return try KeyWrap.wrap(fileKey, with: s.secret, ad: ad)
        } catch let e as ProtectionError {
            throw e
        } catch let e as CryptoError {
            throw ProtectionError(.io(EIO), "cannot wrap a file key: \(e.message)", underlying: e)
        } catch {
            throw ProtectionError(.io(EIO), "cannot wrap a file key: \(error)")
        }
    }

    func unwrap(_ wrapped: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer) throws(ProtectionError) -> SecretBytes {
        do throws(CryptoError) {
            if let s = secret {
                if let pk = publicKey { return try KeySealing.open(wrapped, secretKey: s.secret, publicKey: pk, ad: ad) }
                return try KeyWrap.unwrap(wrapped, with: s.secret, ad: ad)
            }
        } catch {
            if error.code == .authenticationFailed {
                throw ProtectionError(.authenticationFailed, "the file key does not authenticate: the header was altered, or it belongs to another domain or key generation; restore the file from a backup", underlying: error)
            }
            throw ProtectionError(.io(EIO), "cannot unwrap a file key: \(error.message)", underlying: error)
        }
        throw .locked(protectionClass)
    }
}

#if canImport(Glibc)
import Glibc
#endif
