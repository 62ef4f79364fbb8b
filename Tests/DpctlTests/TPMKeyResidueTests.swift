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
        let p = try hold(.unlock, tpm: tpm, lines: ["correct horse battery"])
        defer { p.end() }
        XCTAssertEqual(p.said, "UNLOCKED\n")

        // The test door: every secret of that unlock, derived again here (the TPM answers the same HMAC for the same auth).
        let domain = try ProtectionDomain.open(at: location, keyStore: .kernel(.session))
        var needles = try tpmDerivedSecrets(domain, passphrase: "correct horse battery")
        for c in [ProtectionClass.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication] {
            guard let s = try domain.store.secret(c, 1) else { return XCTFail("class \(c) is not in the keyring") }
            needles.append(("class key \(c)", s.exposedForTest()))
        }
        XCTAssertEqual(Set(needles.map(\.1)).count, needles.count, "distinct secrets")
        // The scrubbing commands after each HMAC (a refused authorisation of the noDA primary) count no failure.
        XCTAssertEqual(try TPM2Device(tcti: tpm.tcti).lockoutState().failures, 0, "the TPM counted a failure")
        try assertScanSeesTheKeybagBlob(of: domain, in: p.process)

        let r = try ok(["lock", "--evict-all", "--now"])
        let after = find(needles, in: try memory(of: p.process.processIdentifier))
        XCTAssertEqual(after, [], "left in the unlocking process after lock: \(after.sorted())")
        print("key residue, TPM-bound unlock: \(needles.count) secrets sought (Argon2id output, TPM auth value, TPM HMAC, bound secret, KEK, class keys A-C); \(after.count) found after lock; \(r.stderr.trimmingCharacters(in: .whitespacesAndNewlines))")
    }

    /// `passwd` on a bound domain creates a new TPM key for the new passphrase's auth value (ESAPI keeps a copy of a
    /// created object's sensitive part, and frees it unwiped): once it returns, the process holds neither the old
    /// passphrase's secrets nor the new one's, nor the class keys it rewrapped.
    func testNoSecretRemainsInTheProcessThatChangedTheBoundPassphrase() throws {
        let tpm = try SoftwareTPM()
        environment["DATAPROTECTION_TPM_TCTI"] = tpm.tcti
        try ok(["init", "--binding", "tpm2", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"])
        let location = DomainLocation(home: home, deviceDirectory: devices, tpmTCTI: tpm.tcti)
        var needles = try tpmDerivedSecrets(ProtectionDomain.open(at: location, keyStore: .kernel(.session)), passphrase: "correct horse battery")
            .map { ("old \($0.0)", $0.1) }

        let p = try hold(.passwd, tpm: tpm, lines: ["correct horse battery", "staple tumbler orbit"])
        defer { p.end() }
        XCTAssertEqual(p.said, "CHANGED\n")
        let domain = try ProtectionDomain.open(at: location, keyStore: .kernel(.session))
        needles += try tpmDerivedSecrets(domain, passphrase: "staple tumbler orbit").map { ("new \($0.0)", $0.1) }
        needles += try classKeys(domain, passphrase: "staple tumbler orbit")
        try assertNothingLeft(needles, in: p.process, domain: domain, after: "passwd")
    }

    /// `recover` on a bound domain binds it to a new TPM key (on this machine): once it returns, the process holds
    /// none of the new passphrase's secrets and none of the class keys it unwrapped with the recovery key.
    func testNoSecretRemainsInTheProcessThatRecoveredABoundDomain() throws {
        let tpm = try SoftwareTPM()
        environment["DATAPROTECTION_TPM_TCTI"] = tpm.tcti
        let r = try ok(["init", "--binding", "tpm2", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"])
        let recovery = r.out.trimmingCharacters(in: .whitespacesAndNewlines)
        let location = DomainLocation(home: home, deviceDirectory: devices, tpmTCTI: tpm.tcti)

        let p = try hold(.recover, tpm: tpm, lines: [recovery, "staple tumbler orbit"])
        defer { p.end() }
        XCTAssertEqual(p.said, "RECOVERED\n")
        let domain = try ProtectionDomain.open(at: location, keyStore: .kernel(.session))
        let needles = try tpmDerivedSecrets(domain, passphrase: "staple tumbler orbit") + (try classKeys(domain, passphrase: "staple tumbler orbit"))
        try assertNothingLeft(needles, in: p.process, domain: domain, after: "recover")
    }
}

/// The rig that runs one key operation in a process of its own and stays (Tests/Support/unlock-hold).
struct HeldOperation {
    enum Operation: String { case unlock, passwd, recover }
    let process: Process
    let input: Pipe
    /// What it printed when its operation returned.
    let said: String

    /// Closes its standard input (the rig exits) and waits for it.
    func end() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

extension KeyResidueTests {
    /// Starts unlock-hold for `operation` on this test's domain, feeds it `lines`, and waits for its answer.
    func hold(_ operation: HeldOperation.Operation, tpm: SoftwareTPM, lines: [String]) throws -> HeldOperation {
        let (p, input, output) = try startRig("unlock-hold", [home, devices, tpm.tcti, operation.rawValue])
        input.fileHandleForWriting.write(Data(lines.map { $0 + "\n" }.joined().utf8))
        let said = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        return HeldOperation(process: p, input: input, said: said)
    }

    /// Every secret an unlock of `domain`'s keybag with `passphrase` derives through the TPM, derived again here
    /// (the TPM answers the same HMAC for the same auth): the Argon2id output, the TPM auth value, the TPM's HMAC,
    /// the bound secret and the passphrase KEK.
    func tpmDerivedSecrets(_ domain: ProtectionDomain, passphrase: String) throws -> [(String, [UInt8])] {
        let bag = try domain.cache.bag()
        let location = domain.location
        guard case .tpm2(let pub, let priv)? = bag.contents.binding else { throw XCTSkip("the keybag is not TPM-bound") }
        let secret = try SecretBytes(utf8: passphrase)
        let stretched = try PasswordHash.deriveKey(passphrase: secret, salt: bag.contents.salt, parameters: bag.contents.kdf)
        let auth = try Keybag.tpmAuth(stretched)
        let answer = try TPM2Device(tcti: location.tpmTCTI).hmac(TPMKeyBlobs(public: pub, private: priv), auth: auth, message: Keybag.tpmMessage(bag.domainID))
        let bound = try bag.bound(stretched, tcti: location.tpmTCTI, keybag: location.keybagPath)
        let device = try DeviceSecret.load(for: bag.contents, at: location, io: SystemFileIO())
        let kek = try bag.passphraseKEK(secret, device, at: location)
        return [
            ("Argon2id output", stretched.exposedForTest()), ("TPM auth value", auth.exposedForTest()),
            ("TPM HMAC answer", answer.exposedForTest()), ("TPM-bound secret", bound.exposedForTest()), ("passphrase KEK", kek.exposedForTest()),
        ]
    }

    /// The class keys A–C of `domain`, read from this test's keyring after an unlock here (locked again before returning).
    func classKeys(_ domain: ProtectionDomain, passphrase: String) throws -> [(String, [UInt8])] {
        try domain.unlock(passphrase: try SecretBytes(utf8: passphrase))
        defer { _ = try? domain.lock(evictAll: true, grace: .zero) }
        return try [ProtectionClass.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication].map { c in
            guard let s = try domain.store.secret(c, 1) else { throw XCTSkip("class \(c) is not in the keyring after unlock") }
            return ("class key \(c)", s.exposedForTest())
        }
    }

    /// Control: the scan sees what the process does hold, its copy of the keybag's TPM private blob (not secret).
    func assertScanSeesTheKeybagBlob(of domain: ProtectionDomain, in process: Process) throws {
        guard case .tpm2(_, let priv)? = try domain.cache.bag().contents.binding else { return XCTFail("the keybag is not TPM-bound") }
        let control = ("TPM private blob (not secret)", Array(priv.suffix(32)))
        XCTAssertEqual(find([control], in: try memory(of: process.processIdentifier)), [control.0], "the memory scan cannot see what is there")
    }

    /// No needle is in `process`'s memory; prints the count (the control first proves the scan sees the keybag it read).
    func assertNothingLeft(_ needles: [(String, [UInt8])], in process: Process, domain: ProtectionDomain, after operation: String) throws {
        XCTAssertEqual(Set(needles.map(\.1)).count, needles.count, "distinct secrets")
        try assertScanSeesTheKeybagBlob(of: domain, in: process)
        let left = find(needles, in: try memory(of: process.processIdentifier))
        XCTAssertEqual(left, [], "left in the process after \(operation) returned: \(left.sorted())")
        print("key residue, TPM-bound \(operation): \(needles.count) secrets sought; \(left.count) found after it returned")
    }
}
