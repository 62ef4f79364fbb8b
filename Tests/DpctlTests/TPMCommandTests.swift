import Foundation
import TestSupport
import XCTest

/// dpctl on TPM-bound domains (issue 24), against real software TPMs (swtpm): init's choice of binding, status,
/// the round trip, a stolen copy on a second TPM and its recovery, and the TPM's lockout, all through the binary.
final class TPMCommandTests: DpctlTestCase {
    /// A TCTI where nothing answers: a swtpm that was started and stopped, so its port is closed.
    func deadTCTI() throws -> String {
        let tpm = try SoftwareTPM()
        tpm.stop()
        return tpm.tcti
    }

    /// `dpctl init --binding <binding>` reaching the TPM at `tcti`; returns the run.
    func initBound(_ binding: String, tcti: String, env: [String: String] = [:]) throws -> Run {
        try dpctl(["init", "--binding", binding, "--tpm-tcti", tcti, "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"], env: env)
    }

    /// The lines of `stderr` that start with `dpctl: error:`.
    func errorLines(_ r: Run) -> [Substring] { r.stderr.split(separator: "\n").filter { $0.hasPrefix("dpctl: error:") } }

    func testInitTpm2IsShownByStatusAndTheBoundDomainRoundTrips() throws {
        let tpm = try SoftwareTPM()
        environment["DATAPROTECTION_TPM_TCTI"] = tpm.tcti
        let created = try dpctl(["init", "--binding", "tpm2", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"])
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertTrue(created.stderr.contains("binding: tpm2 at '\(tpm.tcti)'"), "init says what it chose: \(created.stderr)")
        XCTAssertEqual(try bytes(home + "/keybag")[8], 3, "a bound keybag is format 3")
        XCTAssertEqual(try status()["binding"] as? String, "tpm2")
        XCTAssertTrue(try ok(["status"]).out.contains("binding  tpm2\n"))

        let file = dir + "/a"
        try ok(["unlock", "--passphrase-file", passphraseFile])
        try ok(["put", "--class", "complete", file], input: Data("bound".utf8))
        XCTAssertEqual(try ok(["cat", file]).out, "bound")
        try ok(["lock", "--now"])
        let locked = try dpctl(["cat", file])
        XCTAssertEqual(locked.status, 75, locked.stderr)
        XCTAssertTrue(locked.stdout.isEmpty)
        try ok(["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(try ok(["cat", file]).out, "bound")
        try ok(["lock", "--now"])
    }

    func testInitAutoSaysWhichBindingItChose() throws {
        let tpm = try SoftwareTPM()
        let bound = try initBound("auto", tcti: tpm.tcti)
        XCTAssertEqual(bound.status, 0, bound.stderr)
        XCTAssertTrue(bound.stderr.contains("binding: tpm2 at '\(tpm.tcti)'"), bound.stderr)
        XCTAssertEqual(try status()["binding"] as? String, "tpm2")

        let dead = try deadTCTI()
        let other = ["DATAPROTECTION_HOME": dir + "/home2", "DATAPROTECTION_DEVICE_DIR": dir + "/devices2"]
        let unbound = try initBound("auto", tcti: dead, env: other)
        XCTAssertEqual(unbound.status, 0, unbound.stderr)
        XCTAssertTrue(unbound.stderr.contains("No TPM answers at '\(dead)'"), "auto says it fell back, and why: \(unbound.stderr)")
        XCTAssertTrue(unbound.stderr.contains("binding: file (no hardware binding)"), unbound.stderr)
        let s = try dpctl(["status", "--json"], env: other)
        XCTAssertEqual((try JSONSerialization.jsonObject(with: s.stdout) as? [String: Any])?["binding"] as? String, "file")
        XCTAssertTrue(try dpctl(["status"], env: other).out.contains("binding  file (no hardware binding)\n"))
    }

    func testInitTpm2WithoutATPMExits80CreatesNothingAndNeverFallsBack() throws {
        for tcti in ["device:/nonexistent/tpmrm0", try deadTCTI()] {
            let r = try initBound("tpm2", tcti: tcti)
            XCTAssertEqual(r.status, 80, "\(tcti): \(r.stderr)")
            XCTAssertEqual(errorLines(r).count, 1, r.stderr)
            XCTAssertTrue(r.stderr.contains(tcti), "names the TCTI: \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("--tpm-tcti"), "names the fix: \(r.stderr)")
            XCTAssertTrue(r.stdout.isEmpty, "no recovery key for a domain that was not made")
            XCTAssertFalse(FileManager.default.fileExists(atPath: home), "\(tcti): no home created")
            XCTAssertFalse(FileManager.default.fileExists(atPath: devices), "\(tcti): no device secret created")
        }
    }

    func testAStolenCopyOnASecondTPMFailsNamingRecoverWhichBindsItThere() throws {
        let first = try SoftwareTPM(), second = try SoftwareTPM()
        let (keyFile, file) = try boundDomainHolding("plans", at: dir + "/plans", tpm: first)

        // A second machine: a copy of the home and the device directory, and its own TPM.
        let thief = dir + "/thief"
        try FileManager.default.createDirectory(atPath: thief, withIntermediateDirectories: false)
        for name in ["home", "devices"] { try FileManager.default.copyItem(atPath: dir + "/" + name, toPath: thief + "/" + name) }
        let there = ["DATAPROTECTION_HOME": thief + "/home", "DATAPROTECTION_DEVICE_DIR": thief + "/devices", "DATAPROTECTION_TPM_TCTI": second.tcti]
        let stolen = try dpctl(["unlock", "--passphrase-file", passphraseFile], env: there)
        XCTAssertEqual(stolen.status, 80, stolen.stderr)
        XCTAssertEqual(errorLines(stolen).count, 1, stolen.stderr)
        XCTAssertTrue(stolen.stderr.contains("another TPM") && stolen.stderr.contains("dpctl recover"), "cause and fix: \(stolen.stderr)")
        XCTAssertTrue(stolen.stderr.contains(thief + "/home/keybag"), "names the keybag: \(stolen.stderr)")
        print("stolen copy through dpctl: \(stolen.stderr)")
        XCTAssertEqual(try dpctl(["cat", file], env: there).status, 75, "still locked there")

        // The first machine is unaffected.
        try ok(["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(try ok(["cat", file]).out, "plans")
        try ok(["lock", "--now"])

        // The owner on the second machine, with the recovery key: recover binds the copy to its TPM.
        let newPassphrase = dir + "/new-passphrase"
        try write("second machine\n", to: newPassphrase)
        let recovered = try dpctl(
            ["recover", "--recovery-key-file", keyFile, "--new-passphrase-file", newPassphrase, "--kdf-preset", "minimum"], env: there)
        XCTAssertEqual(recovered.status, 0, recovered.stderr)
        let s = try dpctl(["status", "--json"], env: there)
        XCTAssertEqual((try JSONSerialization.jsonObject(with: s.stdout) as? [String: Any])?["binding"] as? String, "tpm2")
        XCTAssertEqual(try dpctl(["unlock", "--passphrase-file", newPassphrase], env: there).status, 0)
        XCTAssertEqual(try dpctl(["cat", file], env: there).out, "plans")
        XCTAssertEqual(try dpctl(["lock", "--now"], env: there).status, 0)
        // Now bound to the second TPM: the first one does not open it.
        let back = try dpctl(["unlock", "--passphrase-file", newPassphrase], env: there.merging(["DATAPROTECTION_TPM_TCTI": first.tcti]) { $1 })
        XCTAssertEqual(back.status, 80, back.stderr)
    }

    func testWrongPassphrasesTripTheTPMLockoutAndDpctlSaysWhenToRetry() throws {
        let tpm = try SoftwareTPM()
        try tpm.setDictionaryAttack(maxTries: 3, recoveryTime: 2)
        environment["DATAPROTECTION_TPM_TCTI"] = tpm.tcti
        XCTAssertEqual(try dpctl(["init", "--binding", "tpm2", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"]).status, 0)
        let wrong = dir + "/wrong"
        try write("guess\n", to: wrong)
        var runs: [Run] = []
        for _ in 0..<4 { runs.append(try dpctl(["unlock", "--passphrase-file", wrong])) }
        XCTAssertEqual(runs.map(\.status), [77, 77, 77, 80], runs.map(\.stderr).joined())
        XCTAssertTrue(runs[0].stderr.contains("1 of 3"), runs[0].stderr)
        XCTAssertTrue(runs[3].stderr.contains("lockout") && runs[3].stderr.contains("try again in 2 s"), runs[3].stderr)
        for r in runs {
            XCTAssertEqual(errorLines(r).count, 1, r.stderr)
            XCTAssertTrue(r.stdout.isEmpty)
        }
        print("lockout through dpctl: \(runs[3].stderr)")
        let during = try dpctl(["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(during.status, 80, "the right passphrase is refused during the lockout: \(during.stderr)")
        let start = Date()
        let worked = eventually(within: .seconds(15)) { (try? dpctl(["unlock", "--passphrase-file", passphraseFile]).status) == 0 }
        XCTAssertTrue(worked, "the right passphrase works after the lockout period")
        print("lockout through dpctl: the right passphrase worked \(String(format: "%.1f", Date().timeIntervalSince(start))) s later (interval 2 s)")
        XCTAssertEqual(try unlocked(), [true, true, true, true])
        try ok(["lock", "--now"])
    }

    func testBindMovesAFileBoundDomainToTheTPMAndBackInOneKeybagWrite() throws {
        let tpm = try SoftwareTPM()
        try initDomain()
        environment["DATAPROTECTION_TPM_TCTI"] = tpm.tcti
        let file = dir + "/a"
        try ok(["unlock", "--passphrase-file", passphraseFile])
        try ok(["put", "--class", "complete", file], input: Data("alpha".utf8))
        try ok(["lock", "--now"])
        let keybag = home + "/keybag"
        let before = try bytes(keybag)

        let wrong = dir + "/wrong"
        try write("guess\n", to: wrong)
        let refused = try dpctl(["bind", "--passphrase-file", wrong])
        XCTAssertEqual(refused.status, 77, refused.stderr)
        let absent = try dpctl(["bind", "--passphrase-file", passphraseFile, "--tpm-tcti", try deadTCTI()])
        XCTAssertEqual(absent.status, 80, absent.stderr)
        XCTAssertEqual(errorLines(absent).count, 1, absent.stderr)
        XCTAssertEqual(try bytes(keybag), before, "a refused bind writes nothing")

        let bound = try dpctl(["bind", "--binding", "tpm2", "--passphrase-file", passphraseFile])
        XCTAssertEqual(bound.status, 0, bound.stderr)
        XCTAssertTrue(bound.stderr.contains("bound: tpm2 at '\(tpm.tcti)' (was file (no hardware binding))"), bound.stderr)
        XCTAssertEqual(try status()["binding"] as? String, "tpm2")
        XCTAssertEqual(try bytes(keybag)[8], 3)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: home).filter { $0.hasSuffix(".tmp") }, [], "no temporary left")
        try ok(["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(try ok(["cat", file]).out, "alpha")
        try ok(["lock", "--now"])
        let again = try ok(["bind", "--passphrase-file", passphraseFile])
        XCTAssertTrue(again.stderr.contains("already bound"), again.stderr)

        let unbound = try dpctl(["bind", "--binding", "file", "--passphrase-file", passphraseFile])
        XCTAssertEqual(unbound.status, 0, unbound.stderr)
        XCTAssertEqual(try bytes(keybag)[8], 2)
        environment["DATAPROTECTION_TPM_TCTI"] = "device:/nonexistent/tpmrm0"
        XCTAssertEqual(try status()["binding"] as? String, "file")
        try ok(["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(try ok(["cat", file]).out, "alpha")
        try ok(["lock", "--now"])
    }

    func testAWrongPassphraseOnABoundDomainPrintsOneErrorAndNoTSS2Line() throws {
        let tpm = try SoftwareTPM()
        environment["DATAPROTECTION_TPM_TCTI"] = tpm.tcti
        XCTAssertEqual(try dpctl(["init", "--binding", "tpm2", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"]).status, 0)
        let wrong = dir + "/wrong"
        try write("guess\n", to: wrong)
        let thief = dir + "/thief"
        try FileManager.default.createDirectory(atPath: thief, withIntermediateDirectories: false)
        for name in ["home", "devices"] { try FileManager.default.copyItem(atPath: dir + "/" + name, toPath: thief + "/" + name) }
        let other = try SoftwareTPM()
        let elsewhere = ["DATAPROTECTION_HOME": thief + "/home", "DATAPROTECTION_DEVICE_DIR": thief + "/devices", "DATAPROTECTION_TPM_TCTI": other.tcti]
        let cases: [(String, [String], [String: String], Int32)] = [
            ("wrong passphrase", ["unlock", "--passphrase-file", wrong], [:], 77),
            ("another TPM", ["unlock", "--passphrase-file", passphraseFile], elsewhere, 80),
            ("no TPM", ["unlock", "--passphrase-file", passphraseFile], ["DATAPROTECTION_TPM_TCTI": "device:/nonexistent/tpmrm0"], 80),
        ]
        for (what, args, env, code) in cases {
            let r = try dpctl(args, env: env)
            XCTAssertEqual(r.status, code, "\(what): \(r.stderr)")
            let lines = r.stderr.split(separator: "\n")
            XCTAssertEqual(errorLines(r).count, 1, "\(what): \(r.stderr)")
            XCTAssertEqual(lines.first?.hasPrefix("dpctl: error:"), true, "\(what): dpctl's error comes first: \(r.stderr)")
            XCTAssertFalse(lines.contains { $0.hasPrefix("WARNING:") || $0.hasPrefix("ERROR:") || $0.contains("tss2") }, "\(what): tpm2-tss log lines: \(r.stderr)")
            XCTAssertFalse(r.stderr.contains("dpctl: hint:") && code == 80, "\(what): the fix is said once, in the message: \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("dpctl recover") || r.stderr.contains("--tpm-tcti"), "\(what): names the fix: \(r.stderr)")
            print("\(what): \(lines.count) line(s): \(r.stderr)")
        }
        // Control: a TSS2_LOG the user set is kept, and the same check sees tpm2-tss's lines then.
        let traced = try dpctl(["unlock", "--passphrase-file", wrong], env: ["TSS2_LOG": "all+WARNING"])
        XCTAssertEqual(traced.status, 77, traced.stderr)
        XCTAssertTrue(traced.stderr.split(separator: "\n").contains { $0.hasPrefix("WARNING:esys") }, "TSS2_LOG=all+WARNING shows tss2's warnings: \(traced.stderr)")
    }

    func testWithoutItsTPMABoundDomainIsRecoveredToTheFileBinding() throws {
        let tpm = try SoftwareTPM()
        let (keyFile, file) = try boundDomainHolding("alpha", at: dir + "/a", tpm: tpm)
        tpm.stop()
        let gone = try dpctl(["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(gone.status, 80, gone.stderr)
        XCTAssertTrue(gone.stderr.contains("dpctl recover --binding file"), gone.stderr)
        // Keeping the kind it had needs the TPM: refused, nothing written.
        let keybag = try bytes(home + "/keybag")
        let kept = try dpctl(["recover", "--recovery-key-file", keyFile, "--new-passphrase-file", passphraseFile, "--kdf-preset", "minimum"])
        XCTAssertEqual(kept.status, 80, kept.stderr)
        XCTAssertEqual(try bytes(home + "/keybag"), keybag)
        try ok(["recover", "--binding", "file", "--recovery-key-file", keyFile, "--new-passphrase-file", passphraseFile, "--kdf-preset", "minimum"])
        XCTAssertEqual(try status()["binding"] as? String, "file")
        try ok(["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(try ok(["cat", file]).out, "alpha")
        try ok(["lock", "--now"])
    }
}

extension DpctlTestCase {
    /// `init --binding tpm2` on `tpm` (its TCTI becomes the tests' default), then a class complete file at `path`
    /// holding `contents`, locked again; returns the recovery key's file and the protected file.
    @discardableResult
    func boundDomainHolding(_ contents: String, at path: String, tpm: SoftwareTPM) throws -> (keyFile: String, file: String) {
        environment["DATAPROTECTION_TPM_TCTI"] = tpm.tcti
        let created = try dpctl(["init", "--binding", "tpm2", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"])
        XCTAssertEqual(created.status, 0, created.stderr)
        let keyFile = dir + "/recovery-key"
        try write(created.out, to: keyFile)
        try ok(["unlock", "--passphrase-file", passphraseFile])
        try ok(["put", "--class", "complete", path], input: Data(contents.utf8))
        try ok(["lock", "--now"])
        return (keyFile, path)
    }
}
