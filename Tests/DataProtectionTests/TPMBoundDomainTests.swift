// Domains bound to a TPM 2.0 (issue 24), against real software TPMs (swtpm), the kernel keyring and real files:
// the round trip, a stolen copy on a second TPM, guessing limited by the TPM's lockout, and honest failures.
import DataProtectionFormat
import Foundation
import DataProtection
import ProtectionCrypto
import TestSupport
import XCTest

final class TPMBoundDomainTests: DomainTestCase {
    /// A domain bound to `tpm`, at `location` reaching it; returns it and its recovery key text.
    func makeBoundDomain(_ tpm: SoftwareTPM, passphrase: String = "correct horse") throws -> (ProtectionDomain, String) {
        location.tpmTCTI = tpm.tcti
        var text = ""
        let d = try ProtectionDomain.create(
            at: location, passphrase: try secret(passphrase), kdf: .minimumForTests, keyStore: store, binding: .tpm2(tcti: tpm.tcti)
        ) { (key) throws(ProtectionError) in text = (try? key.withText { String(decoding: $0, as: UTF8.self) }) ?? "" }
        return (d, text)
    }

    /// The `ProtectionError` `body` throws (nil on success or another error).
    func protectionError(_ body: () throws -> Void) -> ProtectionError? {
        do { try body() } catch let e as ProtectionError { return e } catch { return nil }
        return nil
    }

    func testABoundDomainUnlocksLocksAndKeepsItsBindingThroughAPassphraseChange() throws {
        let tpm = try SoftwareTPM()
        let (d, _) = try makeBoundDomain(tpm)
        let file = root + "/a"
        try d.unlock(passphrase: try secret("correct horse"))
        try d.files.write([1, 2, 3], to: file, protection: .complete)
        _ = try d.lock(grace: .zero)
        assertProtectionError([.locked]) { _ = try d.files.read(file) }
        XCTAssertEqual(try readBytes(location.keybagPath)[8], 3, "a bound keybag is format 3")
        XCTAssertEqual(try d.status().binding, .tpm2(tcti: tpm.tcti))

        let reopened = try ProtectionDomain.open(at: location, keyStore: store)
        assertProtectionError([.wrongPassphrase]) { try reopened.unlock(passphrase: try self.secret("wrong horse")) }
        try reopened.unlock(passphrase: try secret("correct horse"))
        XCTAssertEqual(try reopened.files.read(file), [1, 2, 3])

        try reopened.changePassphrase(old: try secret("correct horse"), new: try secret("battery staple"))
        _ = try reopened.lock(grace: .zero)
        XCTAssertEqual(try reopened.status().binding, .tpm2(tcti: tpm.tcti), "passwd keeps the binding")
        XCTAssertEqual(try readBytes(location.keybagPath)[8], 3)
        assertProtectionError([.wrongPassphrase]) { try reopened.unlock(passphrase: try self.secret("correct horse")) }
        try reopened.unlock(passphrase: try secret("battery staple"))
        XCTAssertEqual(try reopened.files.read(file), [1, 2, 3])
        _ = try reopened.lock(grace: .zero)
    }

    func testAStolenCopyOnAnotherTPMFailsNamingRecoveryWhichRebindsItThere() throws {
        let first = try SoftwareTPM(), second = try SoftwareTPM()
        let (d, recoveryText) = try makeBoundDomain(first)
        let file = root + "/secret.txt"
        try d.unlock(passphrase: try secret("correct horse"))
        try d.files.write(Array("plans".utf8), to: file, protection: .complete)
        _ = try d.lock(grace: .zero)

        // The thief copies the home, the device directory and the file to a second machine (its own TPM).
        let thief = try temporaryDirectory(self, "thief")
        for name in ["home", "devices", "secret.txt"] { try FileManager.default.copyItem(atPath: root + "/" + name, toPath: thief + "/" + name) }
        let stolen = DomainLocation(home: thief + "/home", deviceDirectory: thief + "/devices", tpmTCTI: second.tcti)
        let copy = try ProtectionDomain.open(at: stolen, keyStore: store)
        let e = protectionError { try copy.unlock(passphrase: try self.secret("correct horse")) }
        XCTAssertEqual(e?.code, .wrongTPM, "\(String(describing: e))")
        XCTAssertTrue(e?.message.contains("another machine") == true && e?.message.contains("dpctl recover") == true, e?.message ?? "")
        XCTAssertEqual(e?.path, stolen.keybagPath)
        print("stolen copy: \(e?.message ?? "")")
        assertProtectionError([.locked]) { _ = try copy.files.read(thief + "/secret.txt") }

        // The first machine is unaffected.
        try d.unlock(passphrase: try secret("correct horse"))
        XCTAssertEqual(try d.files.read(file), Array("plans".utf8))
        _ = try d.lock(grace: .zero)

        // The owner, on the new machine with the recovery key: recover binds the copy to this machine's TPM.
        let key = try RecoveryKey(text: try secret(recoveryText))
        let moved = try ProtectionDomain.recover(at: stolen, recoveryKey: key, newPassphrase: try secret("new machine"), keyStore: store)
        XCTAssertEqual(try moved.status().binding, .tpm2(tcti: second.tcti))
        try moved.unlock(passphrase: try secret("new machine"))
        XCTAssertEqual(try moved.files.read(thief + "/secret.txt"), Array("plans".utf8))
        _ = try moved.lock(grace: .zero)
    }

    func testWrongPassphrasesTripTheTPMLockoutWhichSaysWhenToRetry() throws {
        let tpm = try SoftwareTPM()
        try tpm.setDictionaryAttack(maxTries: 3, recoveryTime: 2)
        let (d, _) = try makeBoundDomain(tpm)
        var seen: [ProtectionError] = []
        for _ in 0..<4 { if let e = protectionError({ try d.unlock(passphrase: try self.secret("guess")) }) { seen.append(e) } }
        XCTAssertEqual(seen.map(\.code), [.wrongPassphrase, .wrongPassphrase, .wrongPassphrase, .tpmLockout])
        XCTAssertTrue(seen[0].message.contains("1 of 3 wrong tries"), seen[0].message)
        let lockout = protectionError { try d.unlock(passphrase: try self.secret("correct horse")) }
        XCTAssertEqual(lockout?.code, .tpmLockout, "the right passphrase is refused during the lockout too")
        XCTAssertTrue(lockout?.message.contains("lockout") == true && lockout?.message.contains("try again in 2 s") == true, lockout?.message ?? "")
        print("lockout: \(lockout?.message ?? "")")
        let start = Date()
        var unlocked = false
        while !unlocked, Date().timeIntervalSince(start) < 15 {
            do {
                try d.unlock(passphrase: try secret("correct horse"))
                unlocked = true
            } catch let e as ProtectionError where e.code == .tpmLockout { usleep(250_000) }
        }
        XCTAssertTrue(unlocked, "the right passphrase works after the lockout period")
        print("lockout: the right passphrase worked \(String(format: "%.1f", Date().timeIntervalSince(start))) s later (interval 2 s)")
        _ = try d.lock(grace: .zero)
    }

    func testATPMAskedForButAbsentFailsAndWritesNothing() throws {
        let e = protectionError {
            _ = try ProtectionDomain.create(
                at: self.location, passphrase: try self.secret("p"), kdf: .minimumForTests, keyStore: self.store,
                binding: .tpm2(tcti: "device:/nonexistent/tpmrm0")) { (_) throws(ProtectionError) in }
        }
        XCTAssertEqual(e?.code, .tpmUnavailable, "\(String(describing: e))")
        XCTAssertTrue(e?.message.contains("device:/nonexistent/tpmrm0") == true, e?.message ?? "")
        XCTAssertFalse(FileManager.default.fileExists(atPath: location.keybagPath), "no silent fallback: nothing was created")
    }

    func testAnUnboundDomainIsFormat2AndNeedsNoTPM() throws {
        location.tpmTCTI = "device:/nonexistent/tpmrm0"
        let (d, _) = try makeDomain(at: location)
        XCTAssertEqual(try readBytes(location.keybagPath)[8], 2, "without a binding the keybag is written as before")
        XCTAssertEqual(try d.status().binding, .file)
        try d.unlock(passphrase: try secret("correct horse"))
        _ = try d.lock(grace: .zero)
    }
}
