import Foundation
import ProtectionCrypto
import XCTest

final class PrimitivesTests: XCTestCase {
    func testSecretBytesEqualityAndRedaction() throws {
        let a = try SecretBytes.random(count: 32)
        let b = try a.duplicate()
        let c = try SecretBytes.random(count: 32)
        XCTAssertTrue(a.constantTimeEquals(b))
        XCTAssertFalse(a.constantTimeEquals(c))
        XCTAssertFalse(a.constantTimeEquals(try SecretBytes.random(count: 16)))
        let hexBytes = a.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
        XCTAssertFalse(a.description.contains(hexBytes))
        XCTAssertTrue(a.description.contains("redacted"))
        XCTAssertEqual(try SecretBytes(zeroedCount: 8).withUnsafeBytes { Array($0) }, [UInt8](repeating: 0, count: 8))
        XCTAssertEqual(try SecretBytes(utf8: "pässword").count, 9)
    }

    func testPoolSlotsAreZeroedBeforeReuse() throws {
        for size in [1, 32, 33, 500, 1024, 4000] {
            var first: UInt = 0
            do {
                var s = try SecretBytes(zeroedCount: size)
                s.withUnsafeMutableBytes { b in first = UInt(bitPattern: b.baseAddress); for i in 0..<b.count { b[i] = 0xAA } }
            }
            let t = try SecretBytes(zeroedCount: size)
            t.withUnsafeBytes { b in
                if size <= 1024 { XCTAssertEqual(UInt(bitPattern: b.baseAddress), first, "a pool slot is reused (LIFO)") }
                XCTAssertTrue(b.allSatisfy { $0 == 0 }, "size \(size): a reused slot must come back zeroed")
            }
        }
    }

    func testKeyWrapRoundTripAndBinding() throws {
        let kek = try SecretBytes.random(count: 32)
        let key = try SecretBytes.random(count: 32)
        let ad: [UInt8] = Array("header".utf8)
        let wrapped = try ad.withUnsafeBytes { try KeyWrap.wrap(key, with: kek, ad: $0) }
        XCTAssertEqual(wrapped.count, 32 + KeyWrap.overhead)
        let back = try unwrap(wrapped, kek, ad)
        XCTAssertTrue(back.constantTimeEquals(key))
        // Another AD, another KEK, or any flipped bit fails.
        XCTAssertThrowsError(try { _ = try unwrap(wrapped, kek, Array("other".utf8)) }())
        XCTAssertThrowsError(try { _ = try unwrap(wrapped, try SecretBytes.random(count: 32), ad) }())
        for i in 0..<wrapped.count {
            var bad = wrapped; bad[i] ^= 0x01
            XCTAssertThrowsError(try { _ = try unwrap(bad, kek, ad) }()) {
                XCTAssertEqual(($0 as? CryptoError)?.code, .authenticationFailed)
            }
        }
    }

    func testSealingToPublicKey() throws {
        let pair = try X25519KeyPair.generate()
        let other = try X25519KeyPair.generate()
        let key = try SecretBytes.random(count: 32)
        let ad: [UInt8] = [1, 2, 3]
        let sealed = try ad.withUnsafeBytes { try KeySealing.seal(key, to: pair.publicKey, ad: $0) }
        XCTAssertEqual(sealed.count, 32 + KeySealing.overhead)
        let back = try open(sealed, pair, ad)
        XCTAssertTrue(back.constantTimeEquals(key))
        XCTAssertThrowsError(try { _ = try open(sealed, other, ad) }())
        XCTAssertThrowsError(try { _ = try open(sealed, pair, [9]) }())
        // Rebuilding a pair from its secret half gives the same public key.
        let rebuilt = try X25519KeyPair(secretKey: try pair.secretKey.duplicate())
        XCTAssertEqual(rebuilt.publicKey, pair.publicKey)
    }

    func testKDFSubkeysAreIndependentAndDeterministic() throws {
        let master = try SecretBytes.random(count: 32)
        let a1 = try KeyDerivation.subkey(of: master, context: "dptest01", id: 1)
        let a2 = try KeyDerivation.subkey(of: master, context: "dptest01", id: 1)
        let b = try KeyDerivation.subkey(of: master, context: "dptest01", id: 2)
        let c = try KeyDerivation.subkey(of: master, context: "dptest02", id: 1)
        XCTAssertTrue(a1.constantTimeEquals(a2))
        XCTAssertFalse(a1.constantTimeEquals(b))
        XCTAssertFalse(a1.constantTimeEquals(c))
        XCTAssertThrowsError(try { _ = try KeyDerivation.subkey(of: master, context: "short", id: 1) }())
    }

    func testArgon2idIsDeterministicPerSalt() throws {
        let pass = try SecretBytes(utf8: "correct horse")
        let salt = [UInt8](repeating: 7, count: PasswordHash.saltSize)
        let p = Argon2Parameters.minimumForTests
        let k1 = try PasswordHash.deriveKey(passphrase: pass, salt: salt, parameters: p)
        let k2 = try PasswordHash.deriveKey(passphrase: pass, salt: salt, parameters: p)
        let k3 = try PasswordHash.deriveKey(passphrase: pass, salt: [UInt8](repeating: 8, count: PasswordHash.saltSize), parameters: p)
        XCTAssertTrue(k1.constantTimeEquals(k2))
        XCTAssertFalse(k1.constantTimeEquals(k3))
        XCTAssertThrowsError(try { _ = try PasswordHash.deriveKey(passphrase: pass, salt: [1], parameters: p) }())
    }

    func testMACAndSignatures() throws {
        let key = try SecretBytes.random(count: 32)
        let m1 = try [UInt8]("abc".utf8).withUnsafeBytes { try GenericHash.mac(key: key, $0) }
        let m2 = try [UInt8]("ab".utf8).withUnsafeBytes { a in try [UInt8]("c".utf8).withUnsafeBytes { try GenericHash.mac(key: key, a, $0) } }
        XCTAssertEqual(m1, m2)
        XCTAssertNotEqual(m1, try [UInt8]("abc".utf8).withUnsafeBytes { try GenericHash.hash($0) })
        let signer = try Ed25519KeyPair.generate()
        let msg = [UInt8]("manifest".utf8)
        let sig = msg.withUnsafeBytes { signer.sign($0) }
        XCTAssertTrue(msg.withUnsafeBytes { signer.publicKey.isValidSignature(sig, for: $0) })
        var bad = sig; bad[0] ^= 1
        XCTAssertFalse(msg.withUnsafeBytes { signer.publicKey.isValidSignature(bad, for: $0) })
        let rebuilt = try Ed25519KeyPair(secretKey: try signer.secretKey.duplicate())
        XCTAssertEqual(rebuilt.publicKey, signer.publicKey)
    }
}

/// Unwraps public wrapped bytes (test convenience around the pointer API).
func unwrap(_ wrapped: [UInt8], _ kek: borrowing SecretBytes, _ ad: [UInt8]) throws -> SecretBytes {
    try wrapped.span.bytes.withUnsafeBytes { (w) throws(CryptoError) -> SecretBytes in
        try ad.span.bytes.withUnsafeBytes { (a) throws(CryptoError) -> SecretBytes in try KeyWrap.unwrap(w, with: kek, ad: a) }
    }
}

/// Opens public sealed bytes (test convenience around the pointer API).
func open(_ sealed: [UInt8], _ pair: borrowing X25519KeyPair, _ ad: [UInt8]) throws -> SecretBytes {
    try sealed.span.bytes.withUnsafeBytes { (w) throws(CryptoError) -> SecretBytes in
        try ad.span.bytes.withUnsafeBytes { (a) throws(CryptoError) -> SecretBytes in try KeySealing.open(w, with: pair, ad: a) }
    }
}
