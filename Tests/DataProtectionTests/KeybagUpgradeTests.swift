import DataProtectionFormat
import Foundation
import DataProtection
// @testable: reads the class keys' secret bytes back to compare them across an upgrade (KeybagContents itself is DataProtectionFormat's public API).
@testable import DataProtectionKeys
import ProtectionCrypto
import XCTest

/// A keybag of format 1 (the frozen domain in `Fixtures/keybag-v1`, written before issue 19) keeps working:
/// it opens and unlocks as it is, and the next keybag write turns it into the current format.
final class KeybagUpgradeTests: DomainTestCase {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/keybag-v1").path
    var files: String { root + "/files" }
    var passphrase: String { (try? String(contentsOfFile: Self.fixture + "/passphrase.txt", encoding: .utf8)) ?? "" }
    var recoveryText: String { ((try? String(contentsOfFile: Self.fixture + "/recovery-key.txt", encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines) }

    override func setUpWithError() throws {
        try super.setUpWithError()
        for d in ["home", "devices", "files"] { try FileManager.default.copyItem(atPath: "\(Self.fixture)/\(d)", toPath: "\(root)/\(d)") }
        chmod(location.deviceDirectory, 0o700)
        for f in try FileManager.default.contentsOfDirectory(atPath: location.deviceDirectory) { chmod(location.deviceDirectory + "/" + f, 0o600) }
    }

    func plaintext(_ name: String) -> [UInt8] {
        Array((name.hasSuffix("-locked") ? "keybag v1 fixture, class completeUnlessOpen, created while locked\n" : "keybag v1 fixture, class \(name)\n").utf8)
    }

    func assertFilesRead(_ d: ProtectionDomain, file: StaticString = #filePath, line: UInt = #line) throws {
        for name in ProtectionClass.allCases.map(\.name) + ["completeUnlessOpen-locked"] {
            XCTAssertEqual(try d.files.read("\(files)/\(name).dpf"), plaintext(name), name, file: file, line: line)
        }
    }

    /// The v1 layout is parsed field by field and re-encodes to exactly the same bytes (what its MAC covers).
    func testTheV1LayoutParsesAndReEncodesExactly() throws {
        let bytes = try readBytes(location.keybagPath)
        let (contents, body, _) = try KeybagContents.parse(bytes)
        XCTAssertEqual(contents.version, 1)
        XCTAssertEqual(bytes.count, KeybagContents.v1HeaderSize + 4 * KeybagContents.v1EntrySize + 64)
        XCTAssertEqual(contents.body(), Array(body))
        XCTAssertNil(contents.recoveryAuthentication)
        XCTAssertNotNil(contents.current(.completeUnlessOpen)?.publicKey, "v1 kept class B's public key in the clear")
    }

    func testAV1KeybagOpensUnlocksAndStaysV1UntilTheNextWrite() throws {
        let before = try readBytes(location.keybagPath)
        XCTAssertEqual(before[8], 1)
        let d = try ProtectionDomain.open(at: location, keyStore: store)
        XCTAssertEqual(try d.files.read("\(files)/none.dpf"), plaintext("none"))
        try d.files.write([1], to: files + "/b-while-locked", protection: .completeUnlessOpen)  // class B's public key of a v1 keybag
        try d.unlock(passphrase: try secret(passphrase))
        try assertFilesRead(d)
        XCTAssertEqual(try d.files.read(files + "/b-while-locked"), [1])
        XCTAssertTrue(try readBytes(location.keybagPath) == before, "reading must not rewrite the keybag")
    }

    /// `passwd` writes format 2 under a new device secret; the v1 copy then no longer opens with the old passphrase.
    func testAPassphraseChangeUpgradesToTheCurrentFormat() throws {
        let v1 = try readBytes(location.keybagPath)
        let d = try ProtectionDomain.open(at: location, keyStore: store)
        try d.changePassphrase(old: try secret(passphrase), new: try secret("upgraded"))
        let (contents, _, _) = try KeybagContents.parse(try readBytes(location.keybagPath))
        XCTAssertEqual(contents.version, KeybagContents.unboundVersion, "an unbound keybag is written as format 2")
        XCTAssertNil(contents.recoveryAuthentication, "without the recovery key the v1 recovery entries cannot be authenticated")
        XCTAssertTrue(contents.entries.allSatisfy { $0.publicKey == nil })
        let reopened = try ProtectionDomain.open(at: location, keyStore: store)
        try reopened.unlock(passphrase: try secret("upgraded"))
        try assertFilesRead(reopened)
        try writeBytes(v1, location.keybagPath)
        assertProtectionError([.corruptKeybag]) {
            try ProtectionDomain.open(at: self.location, keyStore: self.store).unlock(passphrase: try self.secret(self.passphrase))
        }
    }

    /// A class-key rotation is a keybag write too: it upgrades, and the v1 domain keeps its passphrase and files.
    func testARotationUpgradesToTheCurrentFormat() throws {
        let d = try ProtectionDomain.open(at: location, keyStore: store)
        try d.unlock(passphrase: try secret(passphrase))
        _ = try d.rotate(.completeUnlessOpen, paths: [files], passphrase: try secret(passphrase))
        let (contents, _, _) = try KeybagContents.parse(try readBytes(location.keybagPath))
        XCTAssertEqual(contents.version, KeybagContents.unboundVersion, "an unbound keybag is written as format 2")
        XCTAssertEqual(contents.entries.filter { $0.protectionClass == .completeUnlessOpen }.map(\.generation), [2])
        XCTAssertNotNil(contents.current(.completeUnlessOpen)?.wrappedPublicKey)
        let reopened = try ProtectionDomain.open(at: location, keyStore: store)
        try reopened.lock(evictAll: true)
        try reopened.files.write([2], to: files + "/b-after", protection: .completeUnlessOpen)
        try reopened.unlock(passphrase: try secret(passphrase))
        try assertFilesRead(reopened)
        XCTAssertEqual(try reopened.files.read(files + "/b-after"), [2])
    }

    /// Recovery from a v1 keybag (unauthenticated recovery entries) gives every class a fresh current generation:
    /// a key planted in the v1 copy opens old files at most, never new ones.
    func testRecoveryFromV1MintsFreshGenerationsSoAPlantedKeyIsNeverUsed() throws {
        var (contents, _, _) = try KeybagContents.parse(try readBytes(location.keybagPath))
        let planted = try ClassKey.generate(.complete, generation: 2)
        let rpk = try X25519PublicKey(bytes: contents.recoveryPublicKey)
        let sealed = try KeybagContents.entryAD(contents.domainID, .complete, 2, recovery: true).span.bytes.withUnsafeBytes { (ad) throws(CryptoError) in
            try KeySealing.seal(planted.secret!.secret, to: rpk, ad: ad)
        }
        contents.entries.append(KeybagEntry(protectionClass: .complete, generation: 2, wrapped: try SecureRandom.bytes(KeybagContents.wrappedSize), recoverySealed: sealed))
        contents.entries.sort { ($0.protectionClass.rawValue, $0.generation) < ($1.protectionClass.rawValue, $1.generation) }
        try writeForgedKeybag(contents)

        let r = try ProtectionDomain.recover(at: location, recoveryKey: try RecoveryKey(text: try secret(recoveryText)), newPassphrase: try secret("new"), keyStore: store)
        XCTAssertEqual(try r.status().classes.map(\.currentGeneration), [3, 2, 2, 2])
        try r.unlock(passphrase: try secret("new"))
        try assertFilesRead(r)
        try r.files.write([7], to: files + "/new-a", protection: .complete)
        XCTAssertEqual(try r.files.info(files + "/new-a").classKeyGeneration, 3)
        assertProtectionError([.authenticationFailed]) {
            _ = try ProtectedFiles(keys: InMemoryClassKeys([ClassKey(.complete, generation: 3, secret: planted.secret)])).read(self.files + "/new-a")
        }
        let (after, _, _) = try KeybagContents.parse(try readBytes(location.keybagPath))
        XCTAssertEqual(after.version, KeybagContents.unboundVersion, "an unbound keybag is written as format 2")
        XCTAssertNotNil(after.recoveryAuthentication, "recovery authenticates the recovery entries from then on")
    }
}
