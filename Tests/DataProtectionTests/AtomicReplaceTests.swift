import SystemLayer
import Foundation
@_spi(Testing) import DataProtection  // the testing SPI: the file-system seam, test hooks
import ProtectionCrypto
import Locking
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The one atomic replace (SystemLayer/AtomicReplace.swift): every whole-file replace the library makes goes through
/// it, under its one temporary-name rule.
final class AtomicReplaceTests: DomainTestCase {
    /// Simulates a disk that fails (EDQUOT, a quota exceeded) the one atomic replace's rename (`renameAt`) of the
    /// file named `target`, and records every rename asked of the seam: the routine's, and the path `rename`.
    final class RenameFaultIO: ForwardingIO, @unchecked Sendable {
        let target: String
        let renames = Locked<[String]>([])
        init(failing target: String) { self.target = target }

        func renameAt(_ directory: Int32, _ from: String, to: String) throws(SystemError) {
            renames.withLock { $0.append("renameAt \(from) -> \(to)") }
            if to == target { throw SystemError(EDQUOT) }
            try SystemFileIO().renameAt(directory, from, to: to)
        }

        func rename(_ from: String, to: String) throws(SystemError) {
            renames.withLock { $0.append("rename \(from) -> \(to)") }
            try SystemFileIO().rename(from, to: to)
        }
    }

    /// A fault injected at the routine's rename reaches the keybag, put, unprotect and a container's metadata
    /// write alike: each fails with that fault, names its file, leaves the old file as it was and no temporary
    /// behind; and each renamed a temporary named by the one rule (`.<name>.dp.tmp`). Against the old code (four
    /// routines, three name rules: `.keybag.<hex>.tmp`, `.<name>.dp.tmp`, `.<name>.dp-<hex>.tmp`, renames by path)
    /// the fault reaches none of them.
    func testAFaultAtTheOneRenameReachesEveryCaller() throws {
        let dir = root + "/files"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let (domain, _) = try makeDomain()
        try domain.unlock(passphrase: try secret("correct horse"))
        let old = [UInt8](repeating: 1, count: 5000)
        var reached: [String] = []

        /// Runs `body` through a seam failing the rename onto `target`; checks the failure, the rename's names and the directory.
        func check(_ caller: String, target: String, in directory: String, _ body: (RenameFaultIO) throws -> Void) throws {
            let io = RenameFaultIO(failing: target)
            let before = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
            do {
                try body(io)
                XCTFail("\(caller): succeeded although its rename failed")
            } catch let e as ProtectionError {
                XCTAssertEqual(e.code, .io(EDQUOT), "\(caller): \(e.message)")
                XCTAssertTrue(e.message.contains("'"), "\(caller): the message names no file: \(e.message)")
                reached.append(caller)
            }
            XCTAssertEqual(io.renames.withLock { $0.last }, "renameAt .\(target).dp.tmp -> \(target)", "\(caller): not the one routine's rename")
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory).sorted(), before, "\(caller): the directory changed")
        }

        // The keybag (DurableFile): a new domain's keybag write fails; its home keeps no keybag and no temporary.
        let other = DomainLocation(home: root + "/home2", deviceDirectory: root + "/devices2")
        try FileManager.default.createDirectory(atPath: other.home, withIntermediateDirectories: true)
        try check("keybag", target: "keybag", in: other.home) { io in
            _ = try ProtectionDomain.create(at: other, passphrase: try secret("p"), kdf: .minimumForTests, keyStore: store, io: io) { _ in }
        }
        // put (ProtectedFiles.replace).
        let f = dir + "/f"
        try domain.files.write(old, to: f, protection: .complete)
        try check("put", target: "f", in: dir) { io in
            try ProtectedFiles(keys: domain.keys, io: io).write([9, 9], to: f, protection: .complete)
        }
        XCTAssertEqual(try domain.files.read(f), old)
        // unprotect (ProtectedFiles+Convert).
        try check("unprotect", target: "f", in: dir) { io in try ProtectedFiles(keys: domain.keys, io: io).unprotectInPlace(f) }
        XCTAssertEqual(try domain.files.read(f), old, "still the protected file")
        // A container's plain metadata file (Confinement+Files), through the confined seam.
        let c = root + "/container"
        try check("container", target: ".container-policy", in: root) { io in
            var options = Container.OpenOptions()
            options.io = io
            do {
                _ = try Container.create(at: c, keys: domain.keys, options: options)
            } catch {
                let policy = try FileManager.default.contentsOfDirectory(atPath: c).filter { $0.contains("policy") || $0.hasSuffix(".tmp") }
                XCTAssertEqual(policy, [], "container: a policy file or a temporary was left")
                try FileManager.default.removeItem(atPath: c)
                throw error
            }
        }
        XCTAssertEqual(reached, ["keybag", "put", "unprotect", "container"])
    }

    /// The sweep at a domain's open removes a dead keybag writer's temporary under the one rule's names and under
    /// the names of versions before it (`.keybag.<hex>.tmp`), which users still have on disk.
    func testDomainOpenSweepsOldAndNewTemporaryNames() throws {
        _ = try makeDomain()
        let litter = [".keybag.dp.tmp", ".keybag.dp-0a1b2c.tmp", ".keybag.0dead.tmp"].map { location.home + "/" + $0 }
        for p in litter { try writeBytes([1, 2, 3], p) }
        _ = try ProtectionDomain.open(at: location, keyStore: store)
        for p in litter { XCTAssertFalse(FileManager.default.fileExists(atPath: p), "\(p) survived the open") }
    }
}
