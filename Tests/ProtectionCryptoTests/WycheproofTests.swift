import Foundation
import ProtectionCrypto
import XCTest

/// Runs Project Wycheproof's vectors through this module's own wrappers (not libsodium directly).
final class WycheproofTests: XCTestCase {
    struct File: Decodable { let testGroups: [Group] }
    struct Group: Decodable {
        let keySize: Int?
        let ivSize: Int?
        let tagSize: Int?
        let tests: [Case]
    }
    struct Case: Decodable {
        let tcId: Int
        let key: String?
        let iv: String?
        let aad: String?
        let msg: String?
        let ct: String?
        let tag: String?
        let `public`: String?
        let `private`: String?
        let shared: String?
        let result: String
    }

    func load(_ name: String) throws -> File {
        let url = try XCTUnwrap(Bundle.module.url(forResource: "Vectors/\(name)", withExtension: "json"), "missing vector file \(name).json")
        return try JSONDecoder().decode(File.self, from: Data(contentsOf: url))
    }

    func testAES256GCM() throws {
        try XCTSkipUnless(AEADCipher.aes256gcm.isAvailable, "AES-256-GCM is not available on this CPU")
        let n = try runAEAD(.aes256gcm, file: "aes_gcm_test") { $0.keySize == 256 && $0.ivSize == 96 && $0.tagSize == 128 }
        XCTAssertGreaterThan(n, 60)
        print("Wycheproof AES-256-GCM: \(n) vectors")
    }

    func testXChaCha20Poly1305() throws {
        let n = try runAEAD(.xchacha20poly1305, file: "xchacha20_poly1305_test") { $0.ivSize == 192 }
        XCTAssertGreaterThan(n, 250)
        print("Wycheproof XChaCha20-Poly1305: \(n) vectors")
    }

    /// Seals the message and compares ciphertext and tag; opens valid cases and rejects invalid ones.
    func runAEAD(_ cipher: AEADCipher, file: String, where include: (Group) -> Bool) throws -> Int {
        var count = 0
        for group in try load(file).testGroups where include(group) {
            for t in group.tests {
                let keyBytes = hex(t.key!), nonce = hex(t.iv!), ad = hex(t.aad!), msg = hex(t.msg!)
                let ct = hex(t.ct!), tag = hex(t.tag!)
                let key = try secret(keyBytes)
                let aead = try AEADKey(cipher, key: key)
                if t.result == "valid" {
                    var buf = msg, outTag = [UInt8](repeating: 0, count: AEADCipher.tagSize)
                    buf.withUnsafeMutableBytes { b in
                        ad.withUnsafeBytes { a in
                            outTag.withUnsafeMutableBytes { tg in
                                aead.sealInPlace(b.baseAddress ?? tg.baseAddress!, count: b.count, nonce: nonce, ad: a, tag: tg.baseAddress!)
                            }
                        }
                    }
                    XCTAssertEqual(buf, ct, "tcId \(t.tcId): ciphertext")
                    XCTAssertEqual(outTag, tag, "tcId \(t.tcId): tag")
                }
                var buf = ct
                let scratchPtr = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)
                defer { scratchPtr.deallocate() }
                let opened: Bool = buf.withUnsafeMutableBytes { b in
                    ad.withUnsafeBytes { a in
                        tag.withUnsafeBytes { tg in
                            do {
                                try aead.openInPlace(b.baseAddress ?? scratchPtr, count: b.count, nonce: nonce, ad: a, tag: tg.baseAddress!)
                                return true
                            } catch { return false }
                        }
                    }
                }
                if t.result == "valid" {
                    XCTAssertTrue(opened, "tcId \(t.tcId): valid case rejected")
                    XCTAssertEqual(buf, msg, "tcId \(t.tcId): plaintext")
                } else if t.result == "invalid" {
                    XCTAssertFalse(opened, "tcId \(t.tcId): invalid case accepted")
                    XCTAssertTrue(buf.allSatisfy { $0 == 0 }, "tcId \(t.tcId): rejected plaintext must be wiped")
                }
                count += 1
            }
        }
        return count
    }

    func testX25519() throws {
        var count = 0
        for group in try load("x25519_test").testGroups {
            for t in group.tests {
                let sk = try secret(hex(t.private!))
                let pk = try X25519PublicKey(bytes: hex(t.public!))
                let expected = hex(t.shared!)
                switch x25519Matches(sk, pk, expected) {
                case .success(let same): XCTAssertTrue(same, "tcId \(t.tcId)")
                case .failure(let e):
                    // libsodium refuses an all-zero shared secret; Wycheproof marks those "acceptable".
                    XCTAssertEqual(e.code, .invalidPublicKey)
                    XCTAssertTrue(expected.allSatisfy { $0 == 0 }, "tcId \(t.tcId): rejected a non-zero shared secret")
                }
                count += 1
            }
        }
        XCTAssertGreaterThan(count, 500)
        print("Wycheproof X25519: \(count) vectors")
    }
}

func hex(_ s: String) -> [UInt8] {
    var out = [UInt8](); out.reserveCapacity(s.count / 2)
    var it = s.utf8.makeIterator()
    func nib(_ c: UInt8) -> UInt8 { c >= 97 ? c - 87 : (c >= 65 ? c - 55 : c - 48) }
    while let a = it.next(), let b = it.next() { out.append(nib(a) << 4 | nib(b)) }
    return out
}

/// Test helper: public test bytes into a secret (tests only; real secrets never pass through arrays).
func secret(_ bytes: [UInt8]) throws -> SecretBytes {
    try bytes.span.bytes.withUnsafeBytes { (b) throws(CryptoError) -> SecretBytes in try SecretBytes(copying: b) }
}

func x25519Matches(_ sk: borrowing SecretBytes, _ pk: X25519PublicKey, _ expected: [UInt8]) -> Result<Bool, CryptoError> {
    do {
        let shared = try KeySealing.sharedSecret(secret: sk, peer: pk)
        return .success(expected.withUnsafeBytes { shared.constantTimeEquals($0) })
    } catch {
        return .failure(error)
    }
}
