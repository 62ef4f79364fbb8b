import Foundation
import DataProtection
import ProtectionCrypto
import XCTest

/// Class-key rotation: headers rewrapped, contents untouched, resumable after an interruption.
final class RotationTests: DomainTestCase {
    /// A passphrase change in another domain object while the files are rewrapped replaces the device secret; the rotation
    /// must then refuse to seal the keybag under the shredded one (which would leave a keybag nothing unlocks) and resume later.
    func testAPassphraseChangeDuringARotationNeverLeavesAKeybagSealedUnderADeadDeviceSecret() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        try FileManager.default.createDirectory(atPath: root + "/files", withIntermediateDirectories: true)
        for i in 0..<3 { try d.files.write([UInt8(i)], to: "\(root)/files/\(i)", protection: .complete) }
        let other = try ProtectionDomain.open(at: location, keyStore: store)
        var changed = false
        assertProtectionError([.wrongPassphrase]) {
            _ = try d.rotate(.complete, paths: [self.root + "/files"], passphrase: try self.secret("correct horse")) { _ in
                if !changed {
                    changed = true
                    do { try other.changePassphrase(old: try self.secret("correct horse"), new: try self.secret("battery staple")) } catch { XCTFail("passwd: \(error)") }
                }
                return true
            }
        }
        XCTAssertTrue(changed)
        let reopened = try ProtectionDomain.open(at: location, keyStore: store)
        try reopened.unlock(passphrase: try secret("battery staple"))
        let r = try reopened.rotate(.complete, paths: [], passphrase: try secret("battery staple"))
        XCTAssertTrue(r.resumed)
        XCTAssertEqual(try reopened.status().classes[0].generations, [2])
        for i in 0..<3 { XCTAssertEqual(try reopened.files.read("\(root)/files/\(i)"), [UInt8(i)]) }
    }

    func testRotationRewrapsEveryFileAndRetiresTheOldGeneration() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        let dir = root + "/files/sub"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var bodies: [String: [UInt8]] = [:], plain: [String: [UInt8]] = [:]
        for i in 0..<12 {
            let p = "\(dir)/f\(i)"
            plain[p] = [UInt8](repeating: UInt8(i), count: 5000 + i)
            try d.files.write(plain[p]!, to: p, protection: i % 3 == 0 ? .completeUntilFirstUserAuthentication : .complete)
            bodies[p] = try readBytes(p)
        }
        try writeBytes([1, 2, 3], root + "/files/plain.txt")  // not protected: ignored
        assertProtectionError([.invalidArgument], "a rotation without paths would orphan every file") {
            _ = try d.rotate(.complete, paths: [], passphrase: try self.secret("correct horse"))
        }
        XCTAssertEqual(try d.status().classes[0].generations, [1])
        var seen: [Int] = []
        let r = try d.rotate(.complete, paths: [root + "/files"], passphrase: try secret("correct horse")) { p in seen.append(p.done); return true }
        XCTAssertEqual(r.from, [1])
        XCTAssertEqual(r.to, 2)
        XCTAssertEqual(r.rewrapped, 8)
        XCTAssertEqual(seen, Array(1...8))
        XCTAssertEqual(try d.status().classes[0].generations, [2])
        XCTAssertFalse(FileManager.default.fileExists(atPath: location.journalPath))
        for (p, before) in bodies {
            let info = try d.files.info(p)
            XCTAssertEqual(info.classKeyGeneration, info.protectionClass == .complete ? 2 : 1)
            XCTAssertEqual(Array(try readBytes(p)[176...]), Array(before[176...]), "contents must not be re-encrypted")
            XCTAssertEqual(try d.files.read(p), plain[p])
        }
        // New files use the new generation; the old one is gone from the keyring too.
        try d.files.write([1], to: root + "/new", protection: .complete)
        XCTAssertEqual(try d.files.info(root + "/new").classKeyGeneration, 2)
        XCTAssertNil(try d.store.serial(.complete, 1))
        // After lock and unlock (a fresh process would do the same) everything still reads.
        try d.lock(evictAll: true)
        try d.unlock(passphrase: try secret("correct horse"))
        for p in bodies.keys { XCTAssertNoThrow(try d.files.read(p)) }
    }

    /// An interrupted rotation keeps both generations, leaves every file readable, and a second call finishes it.
    func testInterruptedRotationResumesFromItsJournal() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        let dir = root + "/files"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for i in 0..<10 { try d.files.write([UInt8(i)], to: "\(dir)/f\(i)", protection: .completeUnlessOpen) }
        let first = try d.rotate(.completeUnlessOpen, paths: [dir], passphrase: try secret("correct horse")) { $0.done < 4 }
        XCTAssertTrue(first.interrupted)
        XCTAssertTrue(FileManager.default.fileExists(atPath: location.journalPath))
        XCTAssertEqual(try d.status().classes[1].generations, [1, 2])
        XCTAssertEqual(try d.status().pendingRotation, "completeUnlessOpen 1→2")
        let gens = try (0..<10).map { try d.files.info("\(dir)/f\($0)").classKeyGeneration }
        XCTAssertEqual(gens.filter { $0 == 2 }.count, 4)
        for i in 0..<10 { XCTAssertEqual(try d.files.read("\(dir)/f\(i)"), [UInt8(i)]) }
        // Another class cannot start meanwhile; a wrong passphrase changes nothing.
        assertProtectionError([.invalidArgument]) { _ = try d.rotate(.complete, paths: [dir], passphrase: try self.secret("correct horse")) }
        assertProtectionError([.wrongPassphrase]) { _ = try d.rotate(.completeUnlessOpen, paths: [], passphrase: try self.secret("nope")) }
        // A file deleted meanwhile is not an error.
        try FileManager.default.removeItem(atPath: "\(dir)/f9")
        let second = try d.rotate(.completeUnlessOpen, paths: [], passphrase: try secret("correct horse"))
        XCTAssertTrue(second.resumed)
        XCTAssertFalse(second.interrupted)
        XCTAssertEqual(second.rewrapped, 5)
        XCTAssertEqual(second.missing, 1)
        XCTAssertEqual(try d.status().classes[1].generations, [2])
        XCTAssertNil(try d.status().pendingRotation)
        for i in 0..<9 {
            XCTAssertEqual(try d.files.info("\(dir)/f\(i)").classKeyGeneration, 2)
            XCTAssertEqual(try d.files.read("\(dir)/f\(i)"), [UInt8(i)])
        }
    }

    /// A tampered file stops the retirement of the old generation; the journal stays for a later run.
    func testTamperedFileKeepsTheOldGeneration() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"))
        try d.files.write([1], to: root + "/good", protection: .none)
        try d.files.write([2], to: root + "/bad", protection: .none)
        var bad = try readBytes(root + "/bad")
        bad[150] ^= 1  // inside the header MAC's coverage (wrapped key slot padding is checked by parse; 150 is the MAC)
        try writeBytes(bad, root + "/bad")
        assertProtectionError([.authenticationFailed]) { _ = try d.rotate(.none, paths: [self.root], passphrase: try self.secret("correct horse")) }
        XCTAssertEqual(try d.status().classes[3].generations, [1, 2])
        XCTAssertEqual(try d.files.read(root + "/good"), [1])
        XCTAssertTrue(FileManager.default.fileExists(atPath: location.journalPath))
        try FileManager.default.removeItem(atPath: root + "/bad")
        _ = try d.rotate(.none, paths: [], passphrase: try secret("correct horse"))
        XCTAssertEqual(try d.status().classes[3].generations, [2])
        XCTAssertEqual(try d.files.read(root + "/good"), [1])
    }

    /// Relative paths are recorded absolute, so a resume from another directory finds the same files;
    /// the auto-lock deadline of an unlock with a timeout survives the rotation.
    func testResumeFromAnotherDirectoryAndDeadlineSurvive() throws {
        let (d, _) = try makeDomain()
        try d.unlock(passphrase: try secret("correct horse"), timeout: 600)
        try FileManager.default.createDirectory(atPath: root + "/files", withIntermediateDirectories: true)
        for i in 0..<3 { try d.files.write([UInt8(i)], to: "\(root)/files/f\(i)", protection: .complete) }
        let cwd = FileManager.default.currentDirectoryPath
        defer { _ = FileManager.default.changeCurrentDirectoryPath(cwd) }
        XCTAssertTrue(FileManager.default.changeCurrentDirectoryPath(root))
        XCTAssertTrue(try d.rotate(.complete, paths: ["files"], passphrase: try secret("correct horse")) { _ in false }.interrupted)
        XCTAssertTrue(FileManager.default.changeCurrentDirectoryPath("/"))
        let r = try d.rotate(.complete, paths: [], passphrase: try secret("correct horse"))
        XCTAssertEqual(r.missing, 0)
        XCTAssertEqual(r.rewrapped, 2)
        for i in 0..<3 { XCTAssertEqual(try d.files.info("\(root)/files/f\(i)").classKeyGeneration, 2) }
        XCTAssertNotNil(try d.status().autoLockDeadline, "rotation must not clear the auto-lock deadline")
        XCTAssertEqual(try d.status().classes[0].keySerials.keys.sorted(), [2])
    }
}
