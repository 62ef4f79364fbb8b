// The Foundation-shaped layer on a real domain, real container and real files: iOS's calls, classes and errors.
import DataProtectionFoundation
import DataProtection
import DataProtectionFormat
import XCTest

final class FoundationLayerTests: FoundationTestCase {
    /// Moved from ContainerLayoutTests with the code (FoundationCompat → Container+Foundation).
    func testFoundationNamesMapToClassesAndContainerWritesHonourThem() throws {
        XCTAssertEqual(ProtectionClass(FileProtectionType.complete), .complete)
        XCTAssertEqual(ProtectionClass(FileProtectionType.completeUnlessOpen), .completeUnlessOpen)
        XCTAssertEqual(ProtectionClass(FileProtectionType.completeUntilFirstUserAuthentication), .completeUntilFirstUserAuthentication)
        XCTAssertEqual(ProtectionClass(FileProtectionType.none), ProtectionClass.none)
        for c in ProtectionClass.allCases { XCTAssertEqual(ProtectionClass(c.fileProtectionType), c) }
        XCTAssertEqual(ProtectionClass(writingOptions: [.atomic, .completeFileProtection]), .complete)
        XCTAssertEqual(ProtectionClass(writingOptions: .completeFileProtectionUnlessOpen), .completeUnlessOpen)
        XCTAssertEqual(ProtectionClass(writingOptions: .completeFileProtectionUntilFirstUserAuthentication), .completeUntilFirstUserAuthentication)
        XCTAssertEqual(ProtectionClass(writingOptions: .noFileProtection), ProtectionClass.none)
        XCTAssertNil(ProtectionClass(writingOptions: .atomic))

        let c = context.container
        XCTAssertEqual(try c.url(for: .documentDirectory).path, c.root + "/Documents")
        XCTAssertEqual(try c.url(for: .applicationSupportDirectory).path, c.root + "/Library/Application Support")
        XCTAssertEqual(try c.url(for: .cachesDirectory).path, c.root + "/Library/Caches")
        XCTAssertEqual(c.temporaryDirectoryURL.path, c.root + "/tmp")
        XCTAssertThrowsError(try c.url(for: .desktopDirectory)) { XCTAssertEqual(($0 as? ProtectionError)?.code, .invalidArgument) }
        let url = try c.url(for: .documentDirectory).appendingPathComponent("ported.txt")
        try c.write(Data("hello".utf8), to: url, options: [.atomic, .completeFileProtection])
        XCTAssertEqual(try c.info("Documents/ported.txt").protectionClass, .complete)
        XCTAssertEqual(try c.contents(of: url), Data("hello".utf8))
        try c.write(Data("p".utf8), to: "Documents/p", protection: FileProtectionType.none)
        XCTAssertEqual(try c.info("Documents/p").protectionClass, ProtectionClass.none)
        XCTAssertThrowsError(try c.write(Data("x".utf8), to: URL(fileURLWithPath: "/tmp/outside.txt"))) { XCTAssertEqual(($0 as? ProtectionError)?.code, .escapesContainer) }
        XCTAssertThrowsError(try c.relativePath(of: URL(fileURLWithPath: c.root + "-sibling/a")))
        XCTAssertThrowsError(try c.relativePath(of: URL(fileURLWithPath: c.root)))
        XCTAssertEqual(try c.relativePath(of: URL(fileURLWithPath: c.root + "/Documents/./a/../b\u{301}")), "Documents/b\u{301}")
    }

    /// The trap: in this file, which imports the module, the unported iOS call `data.write(to:)` writes a protected
    /// file (the header's magic on disk, not the plaintext), and `Data(contentsOf:)` reads it back. Against the old
    /// structure (no such overloads) the same lines resolve to Foundation's and the file on disk is the plaintext.
    func testUnportedWriteAndReadInAFileThatImportsTheModuleAreProtected() throws {
        let secret = Data("the note nobody may read on disk".utf8)
        try inContext {
            try secret.write(to: url("Documents/note.txt"))
            XCTAssertEqual(try Data(contentsOf: url("Documents/note.txt")), secret)
        }
        let raw = rawBytes("Documents/note.txt")
        XCTAssertEqual(Array(raw.prefix(FileHeader.magic.count)), FileHeader.magic, "not a protected file on disk")
        XCTAssertNil(raw.firstRange(of: Array(secret)), "plaintext on disk")
        XCTAssertEqual(try context.container.info("Documents/note.txt").protectionClass, .completeUntilFirstUserAuthentication)
        print("foundation trap: data.write(to:) wrote \(raw.count) bytes, magic \(raw.prefix(4).map { String(format: "%02x", $0) }.joined()), plaintext found 0 times")
    }

    /// Each protection option gives its class; `.withoutOverwriting` refuses an existing file as iOS does.
    func testWriteOptionsGiveTheirClassesAndWithoutOverwritingRefuses() throws {
        let cases: [(Data.WritingOptions, ProtectionClass)] = [
            ([.atomic, .completeFileProtection], .complete), (.completeFileProtectionUnlessOpen, .completeUnlessOpen),
            (.completeFileProtectionUntilFirstUserAuthentication, .completeUntilFirstUserAuthentication), (.noFileProtection, .none),
            ([.withoutOverwriting, .completeFileProtection], .complete),
        ]
        try inContext {
            for (i, (options, c)) in cases.enumerated() {
                let name = "Documents/o\(i)"
                try Data("v\(i)".utf8).write(protectedTo: url(name), options: options)
                XCTAssertEqual(try context.container.info(name).protectionClass, c, "\(options)")
                XCTAssertEqual(try Data(contentsOf: url(name)), Data("v\(i)".utf8))
                XCTAssertEqual(Array(rawBytes(name).prefix(8)), FileHeader.magic)
            }
            assertCocoa(.fileWriteFileExists, .alreadyExists) { try Data("x".utf8).write(protectedTo: self.url("Documents/o0"), options: .withoutOverwriting) }
            XCTAssertEqual(try Data(contentsOf: url("Documents/o0")), Data("v0".utf8), "the refused write changed the file")
        }
    }

    /// A locked class surfaces as iOS reports it: `.fileReadNoPermission` / `.fileWriteNoPermission` with the
    /// library's `.locked` underneath; not found, outside the container and read-only map the same way.
    func testErrorsAreCocoaErrorsWithTheProtectionErrorUnderneath() throws {
        try inContext {
            try Data("a".utf8).write(protectedTo: url("Documents/a"), options: .completeFileProtection)
            try domain.lock(grace: .zero)
            assertCocoa(.fileReadNoPermission, .locked) { _ = try Data(contentsOf: self.url("Documents/a")) }
            assertCocoa(.fileWriteNoPermission, .locked) { try Data("b".utf8).write(protectedTo: self.url("Documents/b"), options: .completeFileProtection) }
            XCTAssertFalse(FileManager.default.fileExists(atPath: url("Documents/b").path), "a failed write left a file")
            assertCocoa(.fileReadNoSuchFile, .notFound) { _ = try Data(contentsOf: self.url("Documents/missing")) }
            assertCocoa(.fileWriteNoPermission, .escapesContainer) { try Data("x".utf8).write(to: URL(fileURLWithPath: "/tmp/dpf-outside")) }
            assertCocoa(.fileWriteNoPermission, .readOnly) { try Data("x".utf8).write(to: self.url("Bundle/x")) }
            XCTAssertNil(ProtectedFileManager.default.contents(atPath: url("Documents/a").path))
            XCTAssertFalse(ProtectedFileManager.default.createFile(atPath: url("Documents/c").path, contents: Data("c".utf8), attributes: [.protectionKey: FileProtectionType.complete]))
        }
    }

    /// The FileHandle-shaped cursor: seek, read, write, offset, synchronize, close; revoked by lock for class A.
    func testCursorReadsWritesAndIsRevokedByLock() throws {
        try inContext {
            let u = url("Documents/cursor")
            try Data(repeating: 0x61, count: 10_000).write(protectedTo: u, options: .completeFileProtection)
            let w = try ProtectedFileCursor(forUpdating: u)
            try w.seek(toOffset: 9_998)
            try w.write(contentsOf: Data("XYZ".utf8))
            XCTAssertEqual(try w.offset(), 10_001)
            try w.synchronize()
            try w.close()
            let r = try ProtectedFileCursor(forReadingFrom: u)
            XCTAssertEqual(try r.read(upToCount: 4), Data("aaaa".utf8))
            try r.seek(toOffset: 9_997)
            XCTAssertEqual(try r.readToEnd(), Data("aXYZ".utf8))
            XCTAssertNil(try r.read(upToCount: 1), "end of file is nil, as FileHandle's")
            XCTAssertEqual(try r.seekToEnd(), 10_001)
            try r.seek(toOffset: 0)
            try domain.lock(grace: .zero)
            assertCocoa(.fileReadNoPermission, .locked) { _ = try r.read(upToCount: 10) }
            try r.close()
            assertCocoa(.fileReadNoPermission, .locked) { _ = try ProtectedFileCursor(forReadingFrom: u) }
        }
    }

    /// FileManager's shape: url(for:), createFile with .protectionKey, attributesOfItem, setAttributes, contents(atPath:).
    func testFileManagerShapeHonoursTheProtectionKey() throws {
        try inContext {
            let fm = ProtectedFileManager.default
            let docs = try fm.url(for: .documentDirectory, in: .userDomainMask, appropriateFor: nil, create: true)
            XCTAssertEqual(docs.path, context.container.root + "/Documents")
            XCTAssertEqual(try fm.url(for: .cachesDirectory, in: .userDomainMask, appropriateFor: nil, create: false).path, context.container.root + "/Library/Caches")
            XCTAssertEqual(try fm.url(for: .applicationSupportDirectory, in: .userDomainMask, appropriateFor: nil, create: false).path, context.container.root + "/Library/Application Support")
            XCTAssertEqual(try fm.temporaryDirectory.path, context.container.root + "/tmp")
            assertCocoa(.fileNoSuchFile, .invalidArgument) { _ = try fm.url(for: .desktopDirectory, in: .userDomainMask, appropriateFor: nil, create: false) }

            let path = docs.appendingPathComponent("f.txt").path
            XCTAssertTrue(fm.createFile(atPath: path, contents: Data("hello".utf8), attributes: [.protectionKey: FileProtectionType.complete]))
            XCTAssertEqual(Array(rawBytes("Documents/f.txt").prefix(8)), FileHeader.magic)
            XCTAssertEqual(fm.contents(atPath: path), Data("hello".utf8))
            var a = try fm.attributesOfItem(atPath: path)
            XCTAssertEqual((a[.protectionKey] as? FileProtectionType)?.rawValue, FileProtectionType.complete.rawValue)
            XCTAssertEqual((a[.size] as? NSNumber)?.int64Value, 5)
            XCTAssertEqual(a[.type] as? FileAttributeType, .typeRegular)
            try fm.setAttributes([.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication], ofItemAtPath: path)
            a = try fm.attributesOfItem(atPath: path)
            XCTAssertEqual((a[.protectionKey] as? FileProtectionType)?.rawValue, FileProtectionType.completeUntilFirstUserAuthentication.rawValue)
            XCTAssertEqual(fm.contents(atPath: path), Data("hello".utf8), "a rewrap changed the contents")
            assertCocoa(.fileReadNoSuchFile, .notFound) { _ = try fm.attributesOfItem(atPath: docs.appendingPathComponent("none").path) }
            assertCocoa(.fileWriteUnknown, .unsupportedFeature) { try fm.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path) }

            // A plain file planted in Documents has no class; setting one protects it in place.
            XCTAssertTrue(FileManager.default.createFile(atPath: docs.appendingPathComponent("plain").path, contents: Data("plain".utf8)))
            XCTAssertNil(try fm.attributesOfItem(atPath: docs.appendingPathComponent("plain").path)[.protectionKey])
            try fm.setAttributes([.protectionKey: FileProtectionType.complete], ofItemAtPath: docs.appendingPathComponent("plain").path)
            XCTAssertEqual(Array(rawBytes("Documents/plain").prefix(8)), FileHeader.magic)
            XCTAssertEqual(fm.contents(atPath: docs.appendingPathComponent("plain").path), Data("plain".utf8))
        }
    }

    /// Without a context nothing is written anywhere; bootstrap is once (a second one is refused, naming both
    /// containers); a scoped context wins over the bootstrapped one.
    func testBootstrapIsOnceAndScopesWin() throws {
        XCTAssertNil(AppContext.current, "bootstrapped before this test: it must be the only one that bootstraps")
        assertCocoa(.fileWriteInvalidFileName, .invalidArgument) { try Data("x".utf8).write(to: self.url("Documents/x")) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: url("Documents/x").path))
        try AppContext.bootstrap(context)
        XCTAssertTrue(AppContext.current === context)
        XCTAssertThrowsError(try AppContext.bootstrap(context)) { XCTAssertEqual(($0 as? ProtectionError)?.code, .invalidArgument) }
        let other = try AppContext(domain: domain, containerAt: directory + "/other")
        defer { other.container.close() }
        AppContext.withCurrent(other) { XCTAssertTrue(AppContext.current === other) }
        XCTAssertTrue(AppContext.current === context)
    }
}
