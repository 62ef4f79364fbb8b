import Foundation
import DataProtection
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `ContainerAudit`: plaintext, links, FIFOs and hard links where the policy expects protection are found; nothing
/// is followed or blocked on; names prove nothing.
final class ContainerAuditTests: XCTestCase {
    /// A container whose Documents default to complete, with one protected file per audited directory and a planted
    /// item of every kind. Returns the root and the paths expected in the findings.
    func plant() throws -> (Container, String) {
        let (c, _, root) = try makeContainer(self, policy: ContainerPolicy(defaultClasses: [.documents: .complete]))
        try c.write(Array("ok".utf8), to: "Documents/protected.txt")
        try c.write(Array("ok".utf8), to: "Library/Application Support/protected.bin")
        try c.write(Array("cache".utf8), to: "Library/Caches/plain-is-fine-here.bin", protection: ProtectionClass.none)
        let raw = { (rel: String, text: String) in XCTAssertTrue(FileManager.default.createFile(atPath: root + "/" + rel, contents: Data(text.utf8))) }
        raw("Documents/plain.txt", "secret")
        raw("Documents/.report.txt.dp.tmp", "secret under a temporary file's name")
        raw("Documents/.notes.dpjournal", "secret under a journal's name")
        raw("Documents/Inbox/handed.pdf", "%PDF plaintext")
        raw("Library/Application Support/store.db", "rows")
        raw("Library/Preferences/app.plist", "<plist/>")
        raw("Library/Caches/c.bin", "re-creatable")
        raw("tmp/t.bin", "scratch")
        try FileManager.default.createSymbolicLink(atPath: root + "/Documents/link.txt", withDestinationPath: "/etc/passwd")
        XCTAssertEqual(mkfifo(root + "/Documents/pipe", 0o600), 0)
        let outside = root + "/../outside.txt"
        raw("../outside.txt", "elsewhere")
        XCTAssertEqual(link(outside, root + "/Documents/hardlink.txt"), 0)
        return (c, root)
    }

    func testEveryPlantedItemIsFoundWithItsFixAndNothingElse() throws {
        let (c, root) = try plant()
        let started = Date()
        let findings = try ContainerAudit.run(containerAt: root)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "the FIFO must not block the audit")
        let got = findings.map { "\($0.kind.rawValue) \($0.path) \($0.expectedClass.name)" }
        XCTAssertEqual(got, [
            "plaintext Documents/.notes.dpjournal complete",
            "plaintext Documents/.report.txt.dp.tmp complete",
            "plaintext Documents/Inbox/handed.pdf complete",
            "hardLinked Documents/hardlink.txt complete",
            "symbolicLink Documents/link.txt complete",
            "specialFile Documents/pipe complete",
            "plaintext Documents/plain.txt complete",
            "plaintext Library/Application Support/store.db completeUntilFirstUserAuthentication",
            "plaintext Library/Preferences/app.plist completeUntilFirstUserAuthentication",
        ])
        let plain = try XCTUnwrap(findings.first { $0.path == "Documents/plain.txt" })
        XCTAssertEqual(plain.fix, "dpctl protect --class complete '\(root)/Documents/plain.txt'")
        XCTAssertTrue(plain.description.contains("is plaintext where the policy expects complete"), plain.description)
        XCTAssertEqual(findings.first { $0.kind == .symbolicLink }?.fix.hasPrefix("rm '\(root)/Documents/link.txt'"), true)
        XCTAssertEqual(try c.audit(), findings, "the container's audit is the same mechanism")
        // The link was not followed: /etc/passwd is plaintext but is not ours to report, and is unchanged.
        XCTAssertFalse(findings.contains { $0.path.contains("passwd") })
    }

    func testProtectingTheFindingsClearsTheAudit() throws {
        let (c, root) = try plant()
        for f in try c.audit() {
            switch f.kind {
            case .plaintext where f.directory != .preferences && f.directory != .inbox: XCTAssertTrue(try c.files.protectInPlace(f.path, as: f.expectedClass))
            default: try FileManager.default.removeItem(atPath: root + "/" + f.path)
            }
        }
        XCTAssertEqual(try c.audit(), [])
        XCTAssertEqual(try c.read("Documents/plain.txt"), Array("secret".utf8))
        XCTAssertEqual(try c.info("Documents/plain.txt").protectionClass, .complete)
    }

    func testAStandardDirectoryReplacedByALinkIsAClearError() throws {
        let (c, _, root) = try makeContainer(self)
        c.close()
        try FileManager.default.removeItem(atPath: root + "/Library/Preferences")
        try FileManager.default.createSymbolicLink(atPath: root + "/Library/Preferences", withDestinationPath: "/etc")
        do {
            _ = try ContainerAudit.run(containerAt: root)
            XCTFail("audited through a link")
        } catch let e as ProtectionError {
            XCTAssertTrue(e.message.contains("Library/Preferences"), e.message)
        }
    }
}
