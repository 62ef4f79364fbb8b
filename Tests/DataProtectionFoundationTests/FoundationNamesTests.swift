// `displayName(atPath:)` and `NSHomeDirectory()`: the names iOS code shows and builds paths from, on the container.
import DataProtectionFoundation
import DataProtection
import XCTest

/// The port's one line for `NSHomeDirectory()` (PortingFromIOS.md): this file's declaration wins over Foundation's.
fileprivate func NSHomeDirectory() -> String { ProtectedHomeDirectory() }

final class FoundationNamesTests: FoundationTestCase {
    /// The documented rule, case by case: a known extension is hidden (case-insensitively), an unknown one shown, a
    /// dot file and a name ending in a dot kept whole, only the last extension dropped, a folder named like a file kept
    /// whole, trailing slashes ignored, a missing item named as a file.
    func testDisplayNameHidesOnlyExtensionsTheTypeTableKnows() throws {
        let manager = ProtectedFileManager(context: context)
        let docs = context.container.root + "/Documents"
        XCTAssertTrue(manager.createFile(atPath: docs + "/report.pdf", contents: Data("%PDF".utf8)))
        try manager.createDirectory(at: URL(fileURLWithPath: docs + "/Photos.png"), withIntermediateDirectories: false)
        let cases: [(String, String)] = [
            (docs + "/report.pdf", "report"),
            (docs + "/Notes.TXT", "Notes"),
            (docs + "/archive.tar.gz", "archive.tar"),
            (docs + "/data.json", "data"),
            (docs + "/notes.draft", "notes.draft"),
            (docs + "/.json", ".json"),
            (docs + "/notes.", "notes."),
            (docs + "/README", "README"),
            (docs + "/Photos.png", "Photos.png"),
            (docs + "/Photos.png/", "Photos.png"),
            (docs + "/missing.csv", "missing"),
            (docs + "/", "Documents"),
            ("/", "/"),
        ]
        for (path, expected) in cases { XCTAssertEqual(manager.displayName(atPath: path), expected, path) }
        XCTAssertEqual(inContext { ProtectedFileManager.default.displayName(atPath: docs + "/report.pdf") }, "report")
        print("displayName: " + cases.map { "\(URL(fileURLWithPath: $0.0).lastPathComponent) → \(manager.displayName(atPath: $0.0))" }.joined(separator: ", "))
    }

    /// `NSHomeDirectory()`, ported with the file-private line above, is the container's root, as on iOS, and the paths
    /// ported code builds from it reach the container's directories; without a context it is Foundation's answer.
    func testNSHomeDirectoryIsTheContainerRoot() throws {
        let home = inContext { NSHomeDirectory() }
        XCTAssertEqual(home, context.container.root)
        XCTAssertEqual(try inContext { try ProtectedFileManager.default.homeDirectoryForCurrentUser.path }, context.container.root)
        let documents = inContext { URL(fileURLWithPath: NSHomeDirectory()).appendingPathComponent("Documents/from-home.txt") }
        try inContext { try Data("home".utf8).write(to: documents) }
        XCTAssertEqual(inContext { ProtectedFileManager.default.contents(atPath: documents.path) }, Data("home".utf8))
        XCTAssertNotEqual(rawBytes("Documents/from-home.txt"), Array("home".utf8), "the file is protected, not plaintext")
        XCTAssertEqual(inContext { ProtectedHomeDirectory() }, context.container.root)
        if AppContext.current == nil { XCTAssertEqual(ProtectedHomeDirectory(), Foundation.NSHomeDirectory()) }
        print("NSHomeDirectory() in context: \(home)")
    }
}
