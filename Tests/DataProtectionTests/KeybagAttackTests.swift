import DataProtectionFormat
import Foundation
import DataProtection
// @testable: wraps forged entries with a class key's secret bytes and reads the key store to check what unlock admitted (KeybagContents is public in DataProtectionFormat).
@testable import DataProtectionKeys
import ProtectionCrypto
import XCTest

/// What someone holding a copy of the keybag (a backup or sync server) can do with it: issue 19 defects 4, 7 and 8.
final class KeybagAttackTests: DomainTestCase {
    /// Defect 4: a class-A key sealed to the recovery public key with only what the keybag shows in the clear
    /// (domain identifier, recovery public key), planted at the next generation, must not become current on `recover`.
    func testRecoverRefusesAClassKeyPlantedWithOnlyPublicInformation() throws {
        let (_, recovery) = try makeDomain()
        var (contents, _, _) = try KeybagContents.parse(try readBytes(location.keybagPath))
        let next = try XCTUnwrap(contents.current(.complete)).generation + 1
        let planted = try ClassKey.generate(.complete, generation: next)  // the attacker's own key
        let rpk = try X25519PublicKey(bytes: contents.recoveryPublicKey)
        let sealed = try KeybagContents.entryAD(contents.domainID, .complete, next, recovery: true).span.bytes.withUnsafeBytes { (ad) throws(CryptoError) in
            try KeySealing.seal(planted.secret!.secret, to: rpk, ad: ad)
        }
        contents.entries.append(KeybagEntry(protectionClass: .complete, generation: next, publicKey: nil, wrapped: try SecureRandom.bytes(KeybagContents.wrappedSize), recoverySealed: sealed))
        let plantedBag = try writeForgedKeybag(contents)  // no device secret: no MAC
        assertKeybagRefused(location.keybagPath, "recover accepted a class key planted with public information") {
            _ = try ProtectionDomain.recover(at: self.location, recoveryKey: try RecoveryKey(text: try self.secret(recovery)), newPassphrase: try self.secret("n"), keyStore: self.store)
        }
        XCTAssertTrue(try readBytes(location.keybagPath) == plantedBag, "a refused recovery must not rewrite the keybag")
    }

    /// Defect 8: after `changePassphrase`, a keybag copy from before it, with the old passphrase, on the same machine, opens nothing.
    func testAKeybagCopyFromBeforeAPassphraseChangeNoLongerUnlocks() throws {
        let (d, _) = try makeDomain()
        let copy = try readBytes(location.keybagPath)
        let secretBefore = try readBytes(location.deviceSecretPath(d.id))
        try d.changePassphrase(old: try secret("correct horse"), new: try secret("battery staple"))
        XCTAssertNotEqual(try readBytes(location.deviceSecretPath(d.id)), secretBefore, "the device secret must be replaced")
        try writeBytes(copy, location.keybagPath)  // the attacker puts the old copy back
        assertKeybagRefused("dpctl recover", "an old keybag copy with the old passphrase still unlocks") {
            try ProtectionDomain.open(at: self.location, keyStore: self.store).unlock(passphrase: try self.secret("correct horse"))
        }
    }

    /// Defect 7: the keybag copy alone does not give class B's public key, so it cannot be used to forge class-B files;
    /// a file sealed to any other public key fails authentication.
    func testAKeybagCopyDoesNotGiveTheClassBPublicKey() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        let g = try XCTUnwrap(d.status().classes.first { $0.protectionClass == .completeUnlessOpen }).currentGeneration
        guard let sk = try d.store.secret(.completeUnlessOpen, g) else { return XCTFail("class B is not unlocked") }
        let pk = try X25519KeyPair(secretKey: sk).publicKey.bytes
        let copy = try readBytes(location.keybagPath)
        XCTAssertFalse(contains(copy, pk), "class B's public key is readable in the keybag")
        // The best the attacker can do: seal to a key pair of its own.
        let forged = ClassKey(.completeUnlessOpen, generation: g, secret: nil, publicKey: try X25519KeyPair.generate().publicKey)
        try ProtectedFiles(keys: InMemoryClassKeys([forged])).write(Array("forged".utf8), to: root + "/forged", protection: .completeUnlessOpen)
        assertProtectionError([.authenticationFailed]) { _ = try d.files.read(self.root + "/forged") }
        // Creating while locked still works, and the file opens after unlock.
        try d.lock()
        try d.files.write([4, 2], to: root + "/b", protection: .completeUnlessOpen)
        try d.unlock(passphrase: try secret("correct horse"))
        XCTAssertEqual(try d.files.read(root + "/b"), [4, 2])
    }

    /// Defect 4: generations must be contiguous; an entry planted past a gap is refused before any key is used.
    func testRecoverRefusesNonContiguousGenerations() throws {
        let (_, recovery) = try makeDomain()
        var (contents, _, _) = try KeybagContents.parse(try readBytes(location.keybagPath))
        var e = try XCTUnwrap(contents.current(.complete))
        e.generation += 2
        contents.entries.append(e)
        try writeForgedKeybag(contents)
        assertKeybagRefused("not contiguous", "recover accepted a generation past a gap") {
            _ = try ProtectionDomain.recover(at: self.location, recoveryKey: try RecoveryKey(text: try self.secret(recovery)), newPassphrase: try self.secret("n"), keyStore: self.store)
        }
    }

    /// The recovery entries stay authenticated through rotation and passphrase changes (each re-MACs them), and the
    /// recovery key still opens a keybag copy from before a passphrase change (by design).
    func testRecoveryWorksAfterRotationAndPassphraseChangeAndFromAnOldCopy() throws {
        let (d, recovery) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        try FileManager.default.createDirectory(atPath: root + "/files", withIntermediateDirectories: true)
        for c in ProtectionClass.allCases { try d.files.write(Array(c.name.utf8), to: "\(root)/files/\(c.name)", protection: c) }
        let oldCopy = try readBytes(location.keybagPath)
        _ = try d.rotate(.complete, paths: [root + "/files"], passphrase: try secret("correct horse"))
        _ = try d.rotate(.completeUnlessOpen, paths: [root + "/files"], passphrase: try secret("correct horse"))
        try d.changePassphrase(old: try secret("correct horse"), new: try secret("battery staple"))
        let entries = try FileManager.default.contentsOfDirectory(atPath: location.deviceDirectory)
        XCTAssertEqual(entries, ["\(d.id).secret"], "the old device secret and the rotation's next file must be gone")
        let r = try ProtectionDomain.recover(at: location, recoveryKey: try RecoveryKey(text: try secret(recovery)), newPassphrase: try secret("after"), keyStore: store)
        try r.unlock(passphrase: try secret("after"))
        XCTAssertEqual(try r.status().classes.map(\.currentGeneration), [2, 2, 1, 1])
        for c in ProtectionClass.allCases { XCTAssertEqual(try r.files.read("\(root)/files/\(c.name)"), Array(c.name.utf8)) }
        // The copy from before the passphrase change and the rotations: the recovery key opens it.
        try writeBytes(oldCopy, location.keybagPath)
        let fromCopy = try ProtectionDomain.recover(at: location, recoveryKey: try RecoveryKey(text: try secret(recovery)), newPassphrase: try secret("x"), keyStore: store)
        XCTAssertEqual(try fromCopy.status().classes.map(\.currentGeneration), [1, 1, 1, 1])
    }
}
