import DataProtectionFormat
import Foundation
import DataProtection
// @testable: compares a recovery key parsed from its text with the original's key bytes, which no package API exposes.
@testable import DataProtectionKeys
import ProtectionCrypto
import XCTest

/// The keybag file: pure parsing, authentication of every byte, the recovery key's text form.
final class KeybagFormatTests: DomainTestCase {
    func testEncodeParseRoundTripAndSize() throws {
        _ = try makeDomain()
        let bytes = try readBytes(location.keybagPath)
        let (contents, body, mac) = try KeybagContents.parse(bytes)
        XCTAssertEqual(contents.body(), Array(body))
        XCTAssertEqual(mac.count, 32)
        XCTAssertEqual(contents.entries.count, 4)
        XCTAssertEqual(bytes.count, KeybagContents.headerSize + 4 * KeybagContents.entrySize + 64)
        XCTAssertEqual(contents.kdf, .minimumForTests)
        XCTAssertEqual(contents.version, 2)
        XCTAssertNotNil(contents.recoveryAuthentication)
        XCTAssertNotNil(contents.current(.completeUnlessOpen)?.wrappedPublicKey)
        XCTAssertNil(contents.current(.completeUnlessOpen)?.publicKey, "class B's public key must not be in the clear")
        XCTAssertNil(contents.current(.complete)?.wrappedPublicKey)
    }

    /// Every truncation, every extension and every single-bit flip is reported as a corrupt keybag, never half-read.
    func testEveryTruncationExtensionAndBitFlipIsCorruptKeybag() throws {
        _ = try makeDomain()
        let good = try readBytes(location.keybagPath)
        func expectRejected(_ bytes: [UInt8], _ what: String) throws {
            try writeBytes(bytes, location.keybagPath)
            assertProtectionError([.corruptKeybag, .unsupportedVersion], what) { _ = try ProtectionDomain.open(at: self.location, keyStore: self.store) }
        }
        for n in [0, 1, 7, 8, 50, 91, 92, good.count / 2, good.count - 65, good.count - 33, good.count - 1] { try expectRejected(Array(good[0..<n]), "truncated to \(n)") }
        try expectRejected(good + [0], "one trailing byte")
        try expectRejected(good + [UInt8](repeating: 0, count: KeybagContents.entrySize), "a trailing entry")
        for i in 0..<good.count {
            var b = good
            b[i] ^= UInt8(1 << (i % 8))
            try expectRejected(b, "bit \(i % 8) of byte \(i) flipped")
        }
        try writeBytes(good, location.keybagPath)
        XCTAssertNoThrow(try ProtectionDomain.open(at: location, keyStore: store))
    }

    /// A deliberate change with a recomputed checksum is caught by the MAC, which needs the device secret.
    func testDeliberateChangesWithAFixedChecksumFailTheMAC() throws {
        _ = try makeDomain()
        let good = try readBytes(location.keybagPath)
        let macEnd = good.count - KeybagContents.checksumSize
        for i in Array(0..<12) + Array(28..<macEnd) where i != 8 {  // all but the version byte and the domain identifier
            var b = Array(good[0..<macEnd])
            b[i] ^= 0x01
            b += try KeybagContents.checksum(b[...])
            try writeBytes(b, location.keybagPath)
            assertProtectionError([.corruptKeybag], "byte \(i)") { _ = try ProtectionDomain.open(at: self.location, keyStore: self.store) }
        }
    }

    func testAnotherDevicesSecretIsRejected() throws {
        _ = try makeDomain()
        let id = try KeybagContents.parse(try readBytes(location.keybagPath)).contents.domainID
        try writeBytes(try SecureRandom.bytes(32), location.deviceSecretPath(id))
        assertProtectionError([.corruptKeybag]) { _ = try ProtectionDomain.open(at: self.location, keyStore: self.store) }
    }

    func testRecoveryKeyTextRoundTripsAndReportsTypos() throws {
        let key = try RecoveryKey.random()
        let text = try key.withText { String(decoding: $0, as: UTF8.self) }
        XCTAssertEqual(text.count, RecoveryKey.textLength)
        XCTAssertEqual(text.split(separator: "-").count, 14)
        XCTAssertTrue(text.split(separator: "-").allSatisfy { $0.count == 4 })
        // Case, spacing and look-alike letters do not matter.
        let loose = text.lowercased().replacingOccurrences(of: "-", with: " ").replacingOccurrences(of: "0", with: "o")
        let parsed = try RecoveryKey(text: try SecretBytes(utf8: loose))
        XCTAssertTrue(parsed.key.constantTimeEquals(key.key))
        // One changed character is a typo, reported as such.
        var chars = Array(text)
        chars[5] = chars[5] == "A" ? "B" : "A"
        do {
            _ = try RecoveryKey(text: try SecretBytes(utf8: String(chars)))
            XCTFail("a typo was accepted")
        } catch let e as ProtectionError {
            XCTAssertEqual(e.code, .wrongPassphrase)
            XCTAssertTrue(e.message.contains("typo"), e.message)
        }
        assertProtectionError([.wrongPassphrase]) { _ = try RecoveryKey(text: try SecretBytes(utf8: String(text.dropLast(5)))) }
    }

    func testLocationDefaultsFollowTheDocumentedOrder() throws {
        let env = ["HOME": "/home/u"]
        XCTAssertEqual(try DomainLocation.resolve(environment: env), DomainLocation(home: "/home/u/.local/share/dataprotection", deviceDirectory: "/home/u/.local/state/dataprotection/devices"))
        let xdg = ["HOME": "/home/u", "XDG_DATA_HOME": "/d", "XDG_STATE_HOME": "/s"]
        XCTAssertEqual(try DomainLocation.resolve(environment: xdg), DomainLocation(home: "/d/dataprotection", deviceDirectory: "/s/dataprotection/devices"))
        let explicit = ["HOME": "/home/u", "DATAPROTECTION_HOME": "/h/", "DATAPROTECTION_DEVICE_DIR": "/dev-dir"]
        XCTAssertEqual(try DomainLocation.resolve(environment: explicit), DomainLocation(home: "/h", deviceDirectory: "/dev-dir"))
        XCTAssertEqual(try DomainLocation.resolve(home: "/cli", environment: explicit).home, "/cli")
        assertProtectionError([.invalidArgument]) { _ = try DomainLocation.resolve(environment: [:]) }
        assertProtectionError([.invalidArgument]) { _ = try KeyringParent.from(environment: ["DATAPROTECTION_KEYRING": "thread"]) }
    }

    func testDeviceSecretWithLooseModesIsRefusedWithTheChmodFix() throws {
        let (d, _) = try makeDomain()
        let path = location.deviceSecretPath(d.id)
        chmod(path, 0o644)
        do {
            _ = try ProtectionDomain.open(at: location, keyStore: store)
            XCTFail("a world-readable device secret was accepted")
        } catch {
            XCTAssertEqual(error.code, .insecurePermissions)
            XCTAssertTrue(error.message.contains("chmod 600 '\(path)'"), error.message)
        }
        chmod(path, 0o600)
        chmod(location.deviceDirectory, 0o755)
        assertProtectionError([.insecurePermissions]) { _ = try ProtectionDomain.open(at: self.location, keyStore: self.store) }
        chmod(location.deviceDirectory, 0o700)
        XCTAssertNoThrow(try ProtectionDomain.open(at: location, keyStore: store))
    }
}
