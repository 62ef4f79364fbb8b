import Foundation
import DataProtection
// @testable: builds a domain-style ClassKeys over an in-memory key table on a LiveLock (as LiveLockTests does).
@testable import DataProtectionKeys
import ProtectionCrypto
import XCTest

/// A service's shutdown in the library: `retireKeys` (no admission afterwards; open handles commit and wipe) and
/// `stopListening` (the listener thread ends at once and its endpoint goes).
final class KeyRetirementTests: XCTestCase {
    func testRetiredKeysRefuseEveryOpenAndCommitOpenHandles() throws {
        let dir = try temporaryDirectory(self)
        let live = try LiveLock(domainID: "retire\(UInt32.random(in: 0...UInt32.max))", runtimeDirectory: dir + "/run")
        live.unlock()  // a fresh page says locked until the first unlock
        let table = InMemoryKeyTable(try ProtectionClass.allCases.map { try ClassKey.generate($0) })
        let files = ProtectedFiles(keys: ClassKeys(provider: table, revocation: live.revocation))
        try files.write([1, 2, 3], to: "\(dir)/whole", protection: .complete)
        let writer = try files.open("\(dir)/whole", forWriting: true)
        try writer.write([9], at: 3)  // journaled, not yet committed
        let reader = try files.open("\(dir)/whole")

        XCTAssertEqual(live.retireKeys(), 2)
        for (what, call) in [
            ("open", { _ = try files.open("\(dir)/whole") }), ("create", { _ = try files.create("\(dir)/new", protection: .none) }),
            ("write", { try files.write([1], to: "\(dir)/other", protection: .none) }), ("read", { _ = try files.read("\(dir)/whole") }),
            ("handle write", { try writer.write([1], at: 0) }), ("handle read", { _ = try reader.read(at: 0, count: 1) }),
        ] as [(String, () throws -> Void)] {
            XCTAssertThrowsError(try call(), what) { XCTAssertEqual(($0 as? ProtectionError)?.code, .shuttingDown, "\(what): \($0)") }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/new") || FileManager.default.fileExists(atPath: "\(dir)/other"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/.whole.dpjournal"), "the writer's journal was not committed")
        writer.close()
        reader.close()
        XCTAssertEqual(live.openHandleCount, 0)
        // The write made before the shutdown was committed by it.
        let afterLive = try LiveLock(domainID: "other\(UInt32.random(in: 0...UInt32.max))", runtimeDirectory: dir + "/run")
        afterLive.unlock()
        let after = ProtectedFiles(keys: ClassKeys(provider: table, revocation: afterLive.revocation))
        XCTAssertEqual(try after.read("\(dir)/whole"), [1, 2, 3, 9])
    }

    func testStopListeningEndsTheListenerAtOnceAndRemovesItsEndpoint() throws {
        let dir = try temporaryDirectory(self)
        let id = "stop\(UInt32.random(in: 0...UInt32.max))"
        let live = try LiveLock(domainID: id, runtimeDirectory: dir + "/run")
        let other = try LiveLock(domainID: id, runtimeDirectory: dir + "/run")
        func endpoints() throws -> Int { try FileManager.default.contentsOfDirectory(atPath: "\(dir)/run/\(id)").filter { $0.hasSuffix(".sock") }.count }
        XCTAssertEqual(try endpoints(), 2)
        let started = ContinuousClock.now
        live.stopListening()
        let took = ContinuousClock.now - started
        XCTAssertEqual(try endpoints(), 1, "the stopped listener's endpoint is still there when stopListening returns")
        // The listener used to end only at its next tick (up to 500 ms); it is woken now.
        XCTAssertLessThan(took, .milliseconds(250))
        live.stopListening()  // twice is fine
        let report = try other.lock(grace: .zero) { () throws(ProtectionError) in }
        XCTAssertEqual(report.processesAcknowledged, 1, "only the listener still running acknowledges")
        print("stopListening returned in \(took); a later lock was acknowledged by \(report.processesAcknowledged) listener")
    }
}

/// `ProtectionDomain.retireKeys` on a real domain: opens refused, and an in-process key store emptied.
final class DomainRetirementTests: DomainTestCase {
    func testRetireKeysEmptiesAnInProcessStoreAndRefusesOpens() throws {
        let domain = try ProtectionDomain.create(at: location, passphrase: try secret("pw"), kdf: .minimumForTests, keyStore: .inProcess) { (_) throws(ProtectionError) in }
        try domain.unlock(passphrase: try secret("pw"))
        try domain.files.write([7], to: root + "/f", protection: .complete)
        let h = try domain.files.open(root + "/f")
        XCTAssertTrue(try domain.store.isPresent(.complete, 1), "the in-process store holds class complete once unlocked")
        XCTAssertEqual(domain.retireKeys(), 1)
        XCTAssertFalse(try domain.store.isPresent(.complete, 1), "the in-process store still holds class complete after retireKeys")
        XCTAssertThrowsError(try domain.files.read(root + "/f")) { XCTAssertEqual(($0 as? ProtectionError)?.code, .shuttingDown) }
        XCTAssertThrowsError(try h.read(at: 0, count: 1)) { XCTAssertEqual(($0 as? ProtectionError)?.code, .shuttingDown) }
        h.close()
    }
}
