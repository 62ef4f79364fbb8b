// `ProtectionDomain.bind` (issue 24): an existing domain moves between the file binding and a TPM 2.0 one, against a
// real software TPM; a power cut at any disk-changing call of the move leaves the old binding or the new one.
@_spi(Testing) import DataProtection
import DataProtectionFormat
import Foundation
import ProtectionCrypto
import TestSupport
import XCTest

final class TPMBindTests: DomainTestCase {
    /// The `ProtectionError` `body` throws (nil on success or another error).
    func protectionError(_ body: () throws -> Void) -> ProtectionError? {
        do { try body() } catch let e as ProtectionError { return e } catch { return nil }
        return nil
    }

    func testBindMovesAFileBoundDomainToTheTPMAndBackKeepingFilesPassphraseAndRecovery() throws {
        let tpm = try SoftwareTPM()
        location.tpmTCTI = tpm.tcti
        let (d, recoveryText) = try makeDomain()
        let file = root + "/a"
        try d.unlock(passphrase: try secret("correct horse"))
        try d.files.write([1, 2, 3], to: file, protection: .complete)
        _ = try d.lock(grace: .zero)
        let before = try readBytes(location.keybagPath)

        // A wrong passphrase, or an absent TPM: nothing is written.
        XCTAssertEqual(protectionError { try d.bind(.tpm2(tcti: tpm.tcti), passphrase: try self.secret("wrong")) }?.code, .wrongPassphrase)
        XCTAssertEqual(protectionError { try d.bind(.tpm2(tcti: "device:/nonexistent/tpmrm0"), passphrase: try self.secret("correct horse")) }?.code, .tpmUnavailable)
        XCTAssertEqual(try readBytes(location.keybagPath), before, "a refused bind leaves the keybag as it was")

        XCTAssertEqual(try d.bind(.tpm2(tcti: tpm.tcti), passphrase: try secret("correct horse")), .file)
        XCTAssertEqual(try d.status().binding, .tpm2(tcti: tpm.tcti))
        XCTAssertEqual(try readBytes(location.keybagPath)[8], 3)
        // Bound for real: the KEK needs this TPM's answer (another TPM cannot load the key).
        let other = try SoftwareTPM()
        var elsewhere = location
        elsewhere.tpmTCTI = other.tcti
        let there = try ProtectionDomain.open(at: elsewhere, keyStore: store)
        XCTAssertEqual(protectionError { try there.unlock(passphrase: try self.secret("correct horse")) }?.code, .wrongTPM)
        try d.unlock(passphrase: try secret("correct horse"))
        XCTAssertEqual(try d.files.read(file), [1, 2, 3])
        _ = try d.lock(grace: .zero)

        // Asking for the binding it has writes nothing.
        let bound = try readBytes(location.keybagPath)
        XCTAssertEqual(try d.bind(.tpm2(tcti: tpm.tcti), passphrase: try secret("correct horse")), .tpm2(tcti: tpm.tcti))
        XCTAssertEqual(try readBytes(location.keybagPath), bound)

        // Back to the file: format 2 again, no TPM needed.
        XCTAssertEqual(try d.bind(.file, passphrase: try secret("correct horse")), .tpm2(tcti: tpm.tcti))
        XCTAssertEqual(try readBytes(location.keybagPath)[8], 2)
        tpm.stop()
        try d.unlock(passphrase: try secret("correct horse"))
        XCTAssertEqual(try d.files.read(file), [1, 2, 3])
        _ = try d.lock(grace: .zero)

        // The recovery key from init still recovers it.
        let key = try RecoveryKey(text: try secret(recoveryText))
        let recovered = try ProtectionDomain.recover(at: location, recoveryKey: key, newPassphrase: try secret("new"), kdf: .minimumForTests, keyStore: store)
        try recovered.unlock(passphrase: try secret("new"))
        XCTAssertEqual(try recovered.files.read(file), [1, 2, 3])
        _ = try recovered.lock(grace: .zero)
    }

    func testEveryPowerCutDuringBindLeavesTheOldBindingOrTheNew() throws {
        let tpm = try SoftwareTPM()
        let template = root + "/template", trial = root + "/trial", stash = root + "/stash"
        let templateLocation = DomainLocation(home: template + "/home", deviceDirectory: template + "/devices", tpmTCTI: tpm.tcti)
        let (d, _) = try makeDomain(at: templateLocation)
        let file = root + "/a"
        try d.unlock(passphrase: try secret("correct horse"))
        try d.files.write(Array("kept".utf8), to: file, protection: .complete)
        _ = try d.lock(grace: .zero)
        try FileManager.default.createDirectory(atPath: stash, withIntermediateDirectories: true)
        let at = DomainLocation(home: trial + "/home", deviceDirectory: trial + "/devices", tpmTCTI: tpm.tcti)
        func reset() throws {
            try? FileManager.default.removeItem(atPath: trial)
            let p = try Process.run(URL(fileURLWithPath: "/bin/cp"), arguments: ["-a", template, trial])
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0)
        }
        func bind(_ io: PowerLossIO) throws {
            try ProtectionDomain.open(at: at, keyStore: store, io: io).bind(.tpm2(tcti: tpm.tcti), passphrase: try secret("correct horse"))
        }

        // The dry run counts bind's disk-changing calls (the open makes none).
        try reset()
        let dry = PowerLossIO(cutAfter: nil, stash: stash)
        try bind(dry)
        let count = dry.count
        XCTAssertGreaterThan(count, 0)
        var seen: [String: Int] = [:]
        var failures: [String] = []
        for cut in 0...count {
            for reboot in 0..<2 {
                try reset()
                let io = PowerLossIO(cutAfter: cut, stash: stash)
                var completed = false
                do {
                    try bind(io)
                    completed = true
                } catch {}  // the cut stops it with EIO
                var rng = TestRNG(seed: UInt64(cut * 1000 + reboot))
                try io.powerCut(root: trial, using: &rng)
                do {
                    let after = try ProtectionDomain.open(at: at, keyStore: store)
                    let binding = try after.status().binding
                    if completed && binding == .file { failures.append("cut \(cut): bind returned, but the file binding came back") }
                    try after.unlock(passphrase: try secret("correct horse"))
                    if try after.files.read(file) != Array("kept".utf8) { failures.append("cut \(cut): the file reads otherwise") }
                    _ = try after.lock(grace: .zero)
                    let litter = try FileManager.default.contentsOfDirectory(atPath: at.home).filter { $0.hasSuffix(".tmp") }
                    if !litter.isEmpty { failures.append("cut \(cut): litter \(litter)") }
                    seen[binding == .file ? "file" : "tpm2", default: 0] += 1
                } catch {
                    failures.append("cut \(cut), reboot \(reboot): \(error)")
                }
            }
        }
        print("power-loss bind: \(count) disk-changing calls, \(count + 1) cut points × 2 reboots; after reboot \(seen["file"] ?? 0) × file, \(seen["tpm2"] ?? 0) × tpm2, \(failures.count) broken")
        XCTAssertEqual(failures, [])
        XCTAssertGreaterThan(seen["file"] ?? 0, 0, "some cut must land before the rename")
        XCTAssertGreaterThan(seen["tpm2"] ?? 0, 0, "some cut must land after it")
    }
}
