// Which filesystems hold OFD locks: the verdict table and a real probe.
import FileCoordination
import Foundation
import XCTest

final class LockSupportTests: XCTestCase {
    func testVerdicts() {
        XCTAssertTrue(LockSupport.assess(magic: 0xEF53, mountType: "ext4").isReliable)
        XCTAssertTrue(LockSupport.assess(magic: 0x0102_1994, mountType: "tmpfs").isReliable)
        XCTAssertTrue(LockSupport.assess(magic: 0x6969, mountType: "nfs4").isReliable)
        let nfs3 = LockSupport.assess(magic: 0x6969, mountType: "nfs")
        XCTAssertFalse(nfs3.isReliable)
        XCTAssertEqual(nfs3.filesystem, "nfs")
        XCTAssertFalse(LockSupport.assess(magic: 0x6573_5546, mountType: "fuse.gocryptfs").isReliable)
        XCTAssertFalse(LockSupport.assess(magic: 0xFF53_4D42, mountType: "cifs").isReliable)
        XCTAssertEqual(LockSupport.assess(magic: 0x6573_5546, mountType: nil).filesystem, "0x65735546")
    }

    func testProbeOfLocalFilesystems() throws {
        let tmp = try LockSupport.probe(path: "/tmp")
        XCTAssertTrue(tmp.isReliable, "\(tmp)")
        XCTAssertFalse(tmp.filesystem.isEmpty)
        if FileManager.default.fileExists(atPath: "/dev/shm") {
            XCTAssertEqual(try LockSupport.probe(path: "/dev/shm").filesystem, "tmpfs")
        }
        XCTAssertThrowsError(try LockSupport.probe(path: "/nonexistent/dir")) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .lockDirectoryUnavailable)
        }
    }

    func testMachineWideDomainCoordinatesAnyPath() throws {
        let domain = try CoordinationDomain.machineWide()
        XCTAssertEqual(domain.root.path, "/")
        let item = try makeScratchDirectory().appendingPathComponent("anywhere")
        let seen = try FileCoordinator(domain: domain).coordinate(writingItemAt: item) { $0 }
        XCTAssertEqual(seen, item)
    }

    func testOneLockDirectoryServesOneRoot() throws {
        let first = try makeScratchDirectory()
        let second = try makeScratchDirectory()
        let locks = first.appendingPathComponent("locks")
        _ = try CoordinationDomain(root: first, lockDirectory: locks)
        XCTAssertThrowsError(try CoordinationDomain(root: second, lockDirectory: locks)) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .invalidRequest)
        }
    }

    func testCanonicallyEquivalentRootsAreTwoDomains() throws {
        // "caf\u{e9}" (NFC) and "cafe\u{301}" (NFD) are equal as Strings but two directories to the kernel:
        // each must get its own lock directory, not share the first one's (and lock the other tree's items).
        let base = try makeScratchDirectory()
        let composed = base.appendingPathComponent("caf\u{e9}"), decomposed = base.appendingPathComponent("cafe\u{301}")
        for url in [composed, decomposed] { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false) }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: base.path).count, 2)
        let first = try CoordinationDomain(root: composed), second = try CoordinationDomain(root: decomposed)
        XCTAssertEqual(Array(first.lockDirectory.path.utf8), Array((composed.path + "/.coordination").utf8))
        XCTAssertEqual(Array(second.lockDirectory.path.utf8), Array((decomposed.path + "/.coordination").utf8))
        XCTAssertTrue(FileManager.default.fileExists(atPath: decomposed.path + "/.coordination/locks"))
    }

    func testDomainReportsItsFilesystem() throws {
        let root = try makeScratchDirectory()
        let domain = try CoordinationDomain(root: root)
        XCTAssertTrue(domain.lockSupport.isReliable)
        XCTAssertEqual(domain.lockDirectory.path, root.appendingPathComponent(".coordination").path)
    }
}
