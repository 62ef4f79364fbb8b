import Foundation
import TestSupport
import TPMBinding
import XCTest

/// The hostile-environment suite with TPM-bound domains (issue 24): the TPM gone (a dead socket), refused (no such
/// TCTI), or in lockout. Each command fails with one typed error that names the TPM and the fix, and writes nothing.
extension HostileEnvironmentTests {
    func testATPMThatIsGoneRefusedOrLockedOutGivesOneTypedErrorAndWritesNothing() throws {
        let tpm = try SoftwareTPM()
        let files = dir + "/files"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: false)
        try boundDomainHolding("alpha", at: files + "/a", tpm: tpm)
        try ok(["put", "--class", "none", files + "/d"], input: Data("delta".utf8))
        let newPassphrase = dir + "/new-passphrase"
        try write("new passphrase\n", to: newPassphrase)
        tpm.stop()  // its port is closed now: the TCTI points at a dead socket
        let before = try snapshot(dir)
        let commands = [
            ["unlock", "--passphrase-file", passphraseFile], ["passwd", "--passphrase-file", passphraseFile, "--new-passphrase-file", newPassphrase],
            ["rotate", "--class", "A", "--passphrase-file", passphraseFile, files], ["bind", "--binding", "file", "--passphrase-file", passphraseFile],
        ]
        for (tcti, what) in [(tpm.tcti, "dead socket"), ("nosuchtcti:x", "no such TCTI")] {
            for args in commands {
                let r = try dpctl(args, env: ["DATAPROTECTION_TPM_TCTI": tcti])
                let about = "\(what), dpctl \(args[0]): \(r.stderr)"
                XCTAssertEqual(r.status, 80, about)
                XCTAssertEqual(r.stderr.components(separatedBy: "dpctl: error:").count, 2, "one error: \(about)")
                XCTAssertTrue(r.stderr.contains(tcti) && r.stderr.contains("--tpm-tcti"), "names the TPM and the fix: \(about)")
                XCTAssertTrue(r.stdout.isEmpty, about)
                assertUnchanged(before, try snapshot(dir), "nothing written: \(about)")
            }
        }
        // What needs no TPM still works: class none, and a locked class says so.
        XCTAssertEqual(try ok(["cat", files + "/d"]).out, "delta")
        XCTAssertEqual(try dpctl(["cat", files + "/a"]).status, 75)
        let fresh = ["DATAPROTECTION_HOME": dir + "/fresh-home", "DATAPROTECTION_DEVICE_DIR": dir + "/fresh-devices", "DATAPROTECTION_TPM_TCTI": tpm.tcti]
        let refused = try dpctl(["init", "--binding", "tpm2", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"], env: fresh)
        XCTAssertEqual(refused.status, 80, refused.stderr)
        assertUnchanged(before, try snapshot(dir), "init --binding tpm2 with the TPM gone")

        // In lockout: the right passphrase is refused, and nothing is written either.
        let locked = try SoftwareTPM()
        try locked.setDictionaryAttack(maxTries: 1, recoveryTime: 600)
        let other = ["DATAPROTECTION_HOME": dir + "/home2", "DATAPROTECTION_DEVICE_DIR": dir + "/devices2", "DATAPROTECTION_TPM_TCTI": locked.tcti]
        XCTAssertEqual(try dpctl(["init", "--binding", "tpm2", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"], env: other).status, 0)
        XCTAssertEqual(try dpctl(["unlock", "--passphrase-file", newPassphrase], env: other).status, 77, "the one wrong try")
        let lockedBefore = try snapshot(dir)
        for args in commands.prefix(2) {
            let r = try dpctl(args, env: other)
            XCTAssertEqual(r.status, 80, r.stderr)
            XCTAssertTrue(r.stderr.contains("lockout") && r.stderr.contains("try again in 600 s"), r.stderr)
            assertUnchanged(lockedBefore, try snapshot(dir), "nothing written in lockout: dpctl \(args[0])")
        }
    }
}

/// The other-uid suite with a TPM-bound domain (issue 24): a copy of everything on disk, even with the passphrase,
/// does not unlock on another TPM; on the same TPM each guess is counted by it.
extension OtherUidTests {
    func testAnotherUidCannotUnlockABoundDomainsCopy() throws {
        try ensureUser()
        let tpm = try SoftwareTPM(), theirs = try SoftwareTPM()
        let files = dir + "/files"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
        try boundDomainHolding("secret", at: files + "/complete", tpm: tpm)
        // Every door open but the TPM: the home, the keybag, the files and the passphrase readable, and the other
        // uid given its own copy of the device secret.
        for p in [dir, home, files] { chmod(p, 0o755) }
        for p in [home + "/keybag", files + "/complete", passphraseFile] { chmod(p, 0o644) }
        let guess = dir + "/guess"
        try write("guess\n", to: guess)
        chmod(guess, 0o644)
        let stolen = try stealDeviceSecret()
        func asOther(_ tcti: String, _ args: [String]) throws -> Run {
            let env = ["DATAPROTECTION_HOME=\(home)", "DATAPROTECTION_DEVICE_DIR=\(stolen)", "DATAPROTECTION_KEYRING=session", "DATAPROTECTION_TPM_TCTI=\(tcti)", "HOME=/nonexistent"]
            return try run("/usr/sbin/runuser", ["-u", user, "--", "/usr/bin/keyctl", "session", "-", "/usr/bin/env"] + env + [dpctlPath] + args)
        }
        // Its own machine's TPM: even the right passphrase does not unlock the copy.
        let elsewhere = try asOther(theirs.tcti, ["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(elsewhere.status, 80, elsewhere.stderr)
        XCTAssertTrue(elsewhere.stderr.contains("another TPM"), elsewhere.stderr)
        // This machine's TPM: a guess is refused and counted by the TPM, not by anything the other uid controls.
        let guessed = try asOther(tpm.tcti, ["unlock", "--passphrase-file", guess])
        XCTAssertEqual(guessed.status, 77, guessed.stderr)
        XCTAssertEqual(try TPM2Device(tcti: tpm.tcti).lockoutState().failures, 1, "the TPM counted the other uid's guess")
        let read = try asOther(tpm.tcti, ["cat", files + "/complete"])
        XCTAssertEqual(read.status, 75, read.stderr)
        XCTAssertTrue(read.stdout.isEmpty)
        // Control: the owner unlocks and reads.
        try ok(["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(try ok(["cat", files + "/complete"]).out, "secret")
        try ok(["lock", "--now"])
    }
}
