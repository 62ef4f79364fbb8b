// The directory calls and resource values the port test found missing: `ProtectedFileManager`'s listing, mkdir, move
// and remove by URL, and `URLResourceValues`' Data Protection keys, with their errors as Foundation reports them.
import DataProtectionFoundation
import DataProtection
import XCTest

final class FoundationDirectoryCallsTests: FoundationTestCase {
    /// Listing gives URLs inside the container (hidden names only on request), a move keeps the file's class and
    /// contents, and every failure is the CocoaError iOS gives with the library's error underneath.
    func testListCreateMoveRemoveByURL() throws {
        try inContext {
            let fm = ProtectedFileManager.default
            let folder = url("Documents/Folder")
            try fm.createDirectory(at: folder, withIntermediateDirectories: false)
            assertCocoa(.fileWriteFileExists, .alreadyExists) { try fm.createDirectory(at: folder, withIntermediateDirectories: false) }
            try fm.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data("one".utf8).write(protectedTo: folder.appendingPathComponent("a.txt"), options: .completeFileProtection)
            try Data("hidden".utf8).write(to: folder.appendingPathComponent(".h.txt"))
            XCTAssertEqual(try fm.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil, options: .skipsHiddenFiles).map(\.path), [folder.path + "/a.txt"])
            XCTAssertEqual(Set(try fm.contentsOfDirectory(atPath: folder.path)), ["a.txt", ".h.txt"])
            assertCocoa(.fileReadNoSuchFile, .notFound) { _ = try fm.contentsOfDirectory(at: url("Documents/Missing"), includingPropertiesForKeys: nil) }
            assertCocoa(.fileReadNoPermission, .escapesContainer) { _ = try fm.contentsOfDirectory(at: URL(fileURLWithPath: "/etc"), includingPropertiesForKeys: nil) }

            try fm.moveItem(at: folder.appendingPathComponent("a.txt"), to: folder.appendingPathComponent("b.txt"))
            XCTAssertEqual(try Data(contentsOf: folder.appendingPathComponent("b.txt")), Data("one".utf8))
            let attributes = try fm.attributesOfItem(atPath: folder.appendingPathComponent("b.txt").path)
            XCTAssertEqual((attributes[.protectionKey] as? FileProtectionType)?.rawValue, FileProtectionType.complete.rawValue)
            assertCocoa(.fileWriteFileExists, .alreadyExists) { try fm.moveItem(at: folder.appendingPathComponent(".h.txt"), to: folder.appendingPathComponent("b.txt")) }
            assertCocoa(.fileWriteNoPermission, .escapesContainer) { try fm.moveItem(at: folder.appendingPathComponent("b.txt"), to: URL(fileURLWithPath: "/tmp/b.txt")) }
            XCTAssertTrue(fm.fileExists(atPath: folder.appendingPathComponent("b.txt").path), "a refused move lost the file")

            try fm.removeItem(at: folder)
            XCTAssertFalse(fm.fileExists(atPath: folder.path))
        }
    }

    /// `setResourceValues` sets the backup flag and rewraps to another class (the contents still read); a URL
    /// outside the container is refused as a sandbox refuses it.
    func testResourceValuesSetExclusionAndClass() throws {
        try inContext {
            var file = url("Documents/report.txt")
            try Data("report".utf8).write(to: file)
            var values = ProtectedResourceValues()
            values.isExcludedFromBackup = true
            values.fileProtection = .complete
            try file.setResourceValues(values)
            let back = try file.protectedResourceValues(forKeys: [.isExcludedFromBackupKey, .fileProtectionKey])
            XCTAssertEqual(back.isExcludedFromBackup, true)
            XCTAssertEqual(back.fileProtection?.rawValue, FileProtectionType.complete.rawValue)
            XCTAssertEqual(try Data(contentsOf: file), Data("report".utf8))
            XCTAssertTrue(try context.container.isExcludedFromBackup("Documents/report.txt"))
            values.isExcludedFromBackup = false
            values.fileProtection = nil
            try file.setResourceValues(values)
            XCTAssertEqual(try file.protectedResourceValues(forKeys: [.isExcludedFromBackupKey]).isExcludedFromBackup, false)
            var outside = URL(fileURLWithPath: directory + "/elsewhere.txt")
            assertCocoa(.fileWriteNoPermission, .escapesContainer) { try outside.setResourceValues(values) }
        }
    }
}
