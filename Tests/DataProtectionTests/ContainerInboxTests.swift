import Foundation
import DataProtection
import XCTest

/// The Inbox is read-and-delete; the bundle is read-only; Preferences belong to the store; the root holds only the layout.
final class ContainerInboxTests: XCTestCase {
    /// Drops a protected file into the Inbox the way another app would: outside the container API.
    func deliver(_ c: Container, _ keys: InMemoryClassKeys, _ name: String, _ text: String) throws {
        try ProtectedFiles(keys: keys).write(Array(text.utf8), to: c.path(for: .inbox) + "/" + name, protection: .completeUntilFirstUserAuthentication)
    }

    func testInboxItemsCanBeReadAndDeletedButNotCreatedOrModified() throws {
        let (c, keys, root) = try makeContainer(self)
        try deliver(c, keys, "letter.txt", "dear app")
        XCTAssertEqual(try c.read("Documents/Inbox/letter.txt"), Array("dear app".utf8))
        let h = try c.open("Documents/Inbox/letter.txt")
        h.close()
        assertProtectionError([.readOnly]) { try c.write(Array("x".utf8), to: "Documents/Inbox/letter.txt") }
        assertProtectionError([.readOnly]) { try c.write(Array("x".utf8), to: "Documents/Inbox/new.txt") }
        assertProtectionError([.readOnly]) { _ = try c.create("Documents/Inbox/new.txt") }
        assertProtectionError([.readOnly]) { _ = try c.open("Documents/Inbox/letter.txt", forWriting: true) }
        assertProtectionError([.readOnly]) { try c.createDirectory("Documents/Inbox/sub") }
        assertProtectionError([.readOnly]) { try c.moveItem(from: "Documents/victim.txt", to: "Documents/Inbox/in.txt") }
        XCTAssertEqual(try c.read("Documents/Inbox/letter.txt"), Array("dear app".utf8), "unchanged after the refusals")
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/Documents/Inbox/new.txt"))
        try deliver(c, keys, "junk.txt", "junk")
        try c.removeItem("Documents/Inbox/junk.txt")
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/Documents/Inbox/junk.txt"))
        do {
            try c.write(Array("x".utf8), to: "Documents/Inbox/letter.txt")
            XCTFail("wrote to the Inbox")
        } catch let e {
            XCTAssertTrue(e.message.contains("moveOutOfInbox"), e.message)
            XCTAssertEqual(e.path, "Documents/Inbox/letter.txt")
        }
    }

    func testMovingOutOfTheInboxMakesTheItemEditable() throws {
        let (c, keys, _) = try makeContainer(self)
        try deliver(c, keys, "letter.txt", "dear app")
        let moved = try c.moveOutOfInbox("letter.txt")
        XCTAssertEqual(moved, "Documents/letter.txt")
        try c.write(Array("edited".utf8), to: moved)
        XCTAssertEqual(try c.read(moved), Array("edited".utf8))
        try deliver(c, keys, "letter.txt", "second")
        assertProtectionError([.alreadyExists]) { try c.moveOutOfInbox("Documents/Inbox/letter.txt") }
        XCTAssertEqual(try c.moveOutOfInbox("Documents/Inbox/letter.txt", to: "Library/Application Support/letter-2.txt"), "Library/Application Support/letter-2.txt")
        XCTAssertEqual(try c.read("Library/Application Support/letter-2.txt"), Array("second".utf8))
        try c.write(Array("n".utf8), to: "Documents/not-inbox.txt")
        assertProtectionError([.invalidArgument]) { try c.moveOutOfInbox("Documents/not-inbox.txt") }
    }

    func testRulesFollowTheRealDirectoryNotThePathSpelling() throws {
        let (c, _, root) = try makeContainer(self)
        // A link and a `..` detour into the Inbox and the bundle are still the Inbox and the bundle.
        try FileManager.default.createSymbolicLink(atPath: root + "/Documents/to-inbox", withDestinationPath: "Inbox")
        try FileManager.default.createSymbolicLink(atPath: root + "/Library/Application Support/to-bundle", withDestinationPath: "../../Bundle")
        assertProtectionError([.readOnly]) { try c.write(Array("x".utf8), to: "Documents/to-inbox/sneaky.txt") }
        assertProtectionError([.readOnly]) { try c.write(Array("x".utf8), to: "Documents/../Documents/Inbox/sneaky.txt") }
        assertProtectionError([.readOnly]) { try c.write(Array("x".utf8), to: "Library/Application Support/to-bundle/res.txt") }
        assertProtectionError([.readOnly]) { try c.write(Array("x".utf8), to: "Bundle/res.txt") }
        assertProtectionError([.readOnly]) { try c.write(Array("x".utf8), to: "Library/Preferences/direct.prefs") }
        assertProtectionError([.invalidArgument]) { try c.write(Array("x".utf8), to: "at-root.txt") }
        assertProtectionError([.invalidArgument]) { try c.removeItem("Documents") }
        assertProtectionError([.invalidArgument]) { try c.removeItem("Library/Caches") }
        assertProtectionError([.invalidArgument]) { try c.removeItem(".container-policy") }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: root + "/Documents/Inbox"), [])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: root + "/Bundle"), [])
    }
}
