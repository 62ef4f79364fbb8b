import DataProtection
import DataProtectionFormat
@_spi(Testing) import DataProtectionKeys
import Foundation
import ProtectionCrypto
import SystemLayer
import TestSupport
import TPMBinding
import XCTest

/// The key-residue scan (KeyResidueTests) for a TPM-bound domain (issue 24): after `lock` returns, the process that
/// unlocked it holds no class key A–C and none of the secrets the unlock derived through the TPM.
extension KeyResidueTests {
    func testNoClassKeyOrTPMDerivedSecretRemainsInTheProcessThatUnlockedABoundDomain() throws {
        let tpm = try SoftwareTPM()
        environment["DATAPROTECTION_TPM_TCTI"] = tpm.tcti
        try ok(["init", "--binding", "tpm2", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"])
        let location = DomainLocation(home: home, deviceDirectory: devices, tpmTCTI: tpm.tcti)

        // The unlocking process: unlocks in itself (Argon2id, the TPM's HMAC, the KEK, the class keys) and stays.
        let (p, input, output) = try startRig("unlock-hold", [home, devices, tpm.tcti])
        defer {
            try? input.fileHandleForWriting.close()
            p.waitUntilExit()
        }
        input.fileHandleForWriting.write(Data("correct horse battery\n".utf8))
        let said = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        XCTAssertEqual(said, "UNLOCKED\n")

        // The test door: every secret of that unlock, derived again here (the TPM answers the same HMAC for the same auth).
        let domain = try ProtectionDomain.open(at: location, keyStore: .kernel(.session))
        let bag = try domain.cache.bag()
        guard case .tpm2(let pub, let priv)? = bag.contents.binding else { return XCTFail("the keybag is not TPM-bound") }
        let passphrase = try SecretBytes(utf8: "correct horse battery")
        let stretched = try PasswordHash.deriveKey(passphrase: passphrase, salt: bag.contents.salt, parameters: bag.contents.kdf)
        let auth = try Keybag.tpmAuth(stretched)
        let answer = try TPM2Device(tcti: tpm.tcti).hmac(TPMKeyBlobs(public: pub, private: priv), auth: auth, message: Keybag.tpmMessage(bag.domainID))
        let bound = try bag.bound(stretched, tcti: tpm.tcti, keybag: location.keybagPath)
        let device = try DeviceSecret.load(for: bag.contents, at: location, io: SystemFileIO())
        let kek = try bag.passphraseKEK(passphrase, device, at: location)
        var needles: [(String, [UInt8])] = [
            ("Argon2id output", stretched.exposedForTest()), ("TPM auth value", auth.exposedForTest()),
            ("TPM HMAC answer", answer.exposedForTest()), ("TPM-bound secret", bound.exposedForTest()), ("passphrase KEK", kek.exposedForTest()),
        ]
        for c in [ProtectionClass.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication] {
            guard let s = try domain.store.secret(c, 1) else { return XCTFail("class \(c) is not in the keyring") }
            needles.append(("class key \(c)", s.exposedForTest()))
        }
        XCTAssertEqual(Set(needles.map(\.1)).count, needles.count, "distinct secrets")
        // The scrubbing commands after each HMAC (a refused authorisation of the noDA primary) count no failure.
        XCTAssertEqual(try TPM2Device(tcti: tpm.tcti).lockoutState().failures, 0, "the TPM counted a failure")
        // Control: the scan sees what the process does hold, its copy of the keybag's TPM private blob.
        let control = ("TPM private blob (not secret)", Array(priv.suffix(32)))
        XCTAssertEqual(find([control], in: try memory(of: p.processIdentifier)), [control.0], "the memory scan cannot see what is there")

        let r = try ok(["lock", "--evict-all", "--now"])
        let after = find(needles, in: try memory(of: p.processIdentifier))
        XCTAssertEqual(after, [], "left in the unlocking process after lock: \(after.sorted())")
        print("key residue, TPM-bound unlock: \(needles.count) secrets sought (Argon2id output, TPM auth value, TPM HMAC, bound secret, KEK, class keys A-C); \(after.count) found after lock; \(r.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
    }
}
