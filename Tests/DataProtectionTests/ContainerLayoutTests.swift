import Foundation
import DataProtection
import XCTest

final class ContainerLayoutTests: XCTestCase {
    func testCreateMakesTheStandardDirectoriesTagsAndLookups() throws {
        let (c, _, root) = try makeContainer(self)
        for d in ContainerDirectory.allCases {
            var isDir: ObjCBool = false
            XCTAssertTrue(FileManager.default.fileExists(atPath: root + "/" + d.relativePath, isDirectory: &isDir) && isDir.boolValue, d.relativePath)
            XCTAssertEqual(c.path(for: d), root + "/" + d.relativePath)
        }
        for d in ["Library/Caches", "tmp"] {
            let tag = try String(contentsOfFile: root + "/\(d)/CACHEDIR.TAG", encoding: .utf8)
            XCTAssertTrue(tag.hasPrefix("Signature: 8a477f597d28d172789f06886806bc55"), d)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/Documents/CACHEDIR.TAG"))
    }

    func testNewFilesInheritTheirDirectorysClassUnlessNamed() throws {
        let policy = ContainerPolicy(defaultClasses: [.documents: .complete, .library: .none])
        let (c, keys, root) = try makeContainer(self, policy: policy)
        try c.write(Array("a".utf8), to: "Documents/a.txt")
        try c.write(Array("b".utf8), to: "Library/Application Support/b.db")
        try c.write(Array("c".utf8), to: "Library/Caches/c.bin")
        try c.write(Array("t".utf8), to: "tmp/t")
        try c.write(Array("n".utf8), to: "Documents/n.txt", protection: .completeUnlessOpen)
        try c.createDirectory("Documents/sub/deeper", withIntermediateDirectories: true)
        try c.write(Array("s".utf8), to: "Documents/sub/deeper/s.txt")
        XCTAssertEqual(try c.info("Documents/a.txt").protectionClass, .complete)
        XCTAssertEqual(try c.info("Documents/sub/deeper/s.txt").protectionClass, .complete)
        XCTAssertEqual(try c.info("Library/Application Support/b.db").protectionClass, .none)
        XCTAssertEqual(try c.info("Library/Caches/c.bin").protectionClass, .none)
        XCTAssertEqual(try c.info("tmp/t").protectionClass, .completeUntilFirstUserAuthentication)
        XCTAssertEqual(try c.info("Documents/n.txt").protectionClass, .completeUnlessOpen)
        XCTAssertEqual(try c.read("Documents/sub/deeper/s.txt"), Array("s".utf8))
        // The policy is the container's: reopening (another process would) sees the same defaults.
        c.close()
        let again = try Container(at: root, keys: keys)
        defer { again.close() }
        XCTAssertEqual(again.policy, policy)
        XCTAssertEqual(try again.defaultProtection(for: "Documents/new.txt"), .complete)
        XCTAssertEqual(try again.defaultProtection(for: "Documents/Inbox/x"), .complete)
        XCTAssertEqual(try again.defaultProtection(for: "Library/Preferences/p"), .none)
        XCTAssertEqual(ContainerPolicy.standard.defaultClass(for: .documents), .completeUntilFirstUserAuthentication)
    }

    func testOpeningSomethingThatIsNotAContainerSaysHowToCreateOne() throws {
        let dir = try temporaryDirectory(self)
        do {
            _ = try Container(at: dir, keys: try InMemoryClassKeys.random())
            XCTFail("opened a plain directory as a container")
        } catch let e {
            XCTAssertEqual(e.code, .notFound)
            XCTAssertTrue(e.message.contains("Container.create"), e.message)
        }
    }

    func testListingHidesDotFilesAndNamesContentTypes() throws {
        let (c, _, _) = try makeContainer(self)
        try c.write(Array("x".utf8), to: "Documents/notes.txt")
        try c.write(Array("{}".utf8), to: "Documents/data.JSON")
        try c.write(Array("h".utf8), to: "Documents/.hidden")
        try c.createDirectory("Documents/folder")
        let items = try c.contentsOfDirectory("Documents")
        XCTAssertEqual(items.map(\.name), ["Inbox", "data.JSON", "folder", "notes.txt"])
        XCTAssertEqual(items.first { $0.name == "notes.txt" }?.contentType?.identifier, "public.plain-text")
        XCTAssertEqual(items.first { $0.name == "data.JSON" }?.contentType?.identifier, "public.json")
        XCTAssertEqual(items.first { $0.name == "folder" }?.kind, .directory)
        XCTAssertEqual(try c.contentsOfDirectory("Documents", includingHiddenFiles: true).map(\.name), [".hidden", "Inbox", "data.JSON", "folder", "notes.txt"])
        let root = try c.contentsOfDirectory(".")
        XCTAssertEqual(root.map(\.name), ["Bundle", "Documents", "Library", "tmp"])
    }

    func testContentTypesConformTransitivelyAndAcceptCustomTypes() throws {
        let types = ContentTypes()
        XCTAssertEqual(types.type(forExtension: "TXT")?.identifier, "public.plain-text")
        XCTAssertTrue(types.conforms("public.plain-text", to: "public.text"))
        XCTAssertTrue(types.conforms("public.plain-text", to: "public.data"))
        XCTAssertTrue(types.conforms("public.swift-source", to: "public.text"))
        XCTAssertFalse(types.conforms("public.png", to: "public.text"))
        XCTAssertFalse(types.conforms("public.text", to: "public.plain-text"))
        XCTAssertNil(types.type(forPath: "Makefile"))
        XCTAssertNil(types.type(forPath: ".profile"))
        try types.register(UniformType(identifier: "com.example.note", conformsTo: ["public.json"], filenameExtensions: ["NOTE"]))
        XCTAssertEqual(types.type(forPath: "Documents/a.note")?.identifier, "com.example.note")
        XCTAssertTrue(types.conforms("com.example.note", to: "public.text"))
        assertProtectionError([.invalidArgument]) { try types.register(UniformType(identifier: "com.example.x", conformsTo: ["com.example.missing"])) }
        assertProtectionError([.invalidArgument]) { try types.register(UniformType(identifier: "nodots", conformsTo: [])) }
        assertProtectionError([.alreadyExists]) { try types.register(UniformType(identifier: "public.text", conformsTo: [])) }
        XCTAssertNil(ContentTypes.shared.type(forExtension: "note"), "a private table's registrations stay private")
        // An app that declares it opens text: notes and Swift files yes, images no.
        XCTAssertEqual(types.type(forPath: "a.note", conformingToAnyOf: ["public.text"])?.identifier, "com.example.note")
        XCTAssertEqual(types.type(forPath: "main.swift", conformingToAnyOf: ["public.image", "public.text"])?.identifier, "public.swift-source")
        XCTAssertNil(types.type(forPath: "photo.png", conformingToAnyOf: ["public.text"]))
    }
}
