import DataProtection
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `dpctl audit`, run as the real binary on a container with planted plaintext.
final class AuditCommandTests: DpctlTestCase {
    func testAuditListsPlantedPlaintextWithTheFixAndExitsThree() throws {
        let root = dir + "/app"
        let c = try Container.create(at: root, keys: try InMemoryClassKeys.random())
        defer { c.close() }
        try c.write(Array("ok".utf8), to: "Documents/protected.txt")
        XCTAssertEqual(try ok(["audit", root]).out, "ok: no plaintext where the policy expects protection\n")
        XCTAssertTrue(FileManager.default.createFile(atPath: root + "/Documents/plain.txt", contents: Data("secret".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: root + "/Documents/.x.dp.tmp", contents: Data("forged".utf8)))
        XCTAssertTrue(FileManager.default.createFile(atPath: root + "/Library/Caches/c.bin", contents: Data("fine".utf8)))
        try FileManager.default.createSymbolicLink(atPath: root + "/Documents/link", withDestinationPath: "/etc/passwd")
        XCTAssertEqual(mkfifo(root + "/Documents/pipe", 0o600), 0)
        let r = try dpctl(["audit", root])
        XCTAssertEqual(r.status, 3, r.stderr)
        XCTAssertTrue(r.out.contains("plaintext     \(root)/Documents/plain.txt\n    fix: dpctl protect --class completeUntilFirstUserAuthentication '\(root)/Documents/plain.txt'"), r.out)
        XCTAssertTrue(r.out.contains("plaintext     \(root)/Documents/.x.dp.tmp"), r.out)
        XCTAssertTrue(r.out.contains("symbolicLink  \(root)/Documents/link"), r.out)
        XCTAssertTrue(r.out.contains("specialFile   \(root)/Documents/pipe"), r.out)
        XCTAssertFalse(r.out.contains("Caches"), r.out)
        XCTAssertTrue(r.stderr.contains("dpctl: error: 4 items not protected where the container's policy expects protection"), r.stderr)
        let j = try dpctl(["audit", "--json", root])
        XCTAssertEqual(j.status, 3)
        let rows = try XCTUnwrap(JSONSerialization.jsonObject(with: j.stdout) as? [[String: String]])
        XCTAssertEqual(rows.map { $0["kind"]! }, ["plaintext", "symbolicLink", "specialFile", "plaintext"])
        XCTAssertTrue(try ok(["--help"]).out.contains("  3    `audit` found plaintext"))
    }
}
