import DataProtectionFoundation
import DataProtection
import ProtectionCrypto
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `Bundle`'s resource look-ups on the sealed bundle: found, verified, and never handed out once tampered.
final class ProtectedBundleTests: FoundationTestCase {
    var signer: Ed25519PublicKey!
    var trusted: AppContext!
    var bundle: String { context.container.path(for: .bundle) }

    override func setUpWithError() throws {
        try super.setUpWithError()
        let fm = FileManager.default  // Foundation's: the bundle is plain files, sealed
        try fm.createDirectory(atPath: bundle + "/Resources/en", withIntermediateDirectories: true)
        XCTAssertTrue(fm.createFile(atPath: bundle + "/app.conf", contents: Data("main".utf8)))
        XCTAssertTrue(fm.createFile(atPath: bundle + "/Resources/en/strings.txt", contents: Data("hello".utf8)))
        XCTAssertTrue(fm.createFile(atPath: bundle + "/Resources/en/help.txt", contents: Data("help".utf8)))
        XCTAssertTrue(fm.createFile(atPath: bundle + "/Resources/logo", contents: Data([1, 2, 3])))
        let pair = try Ed25519KeyPair.generate()
        try BundleSeal.seal(containerAt: context.container.root, signingKey: pair)
        signer = pair.publicKey
        let c = try Container(at: context.container.root, keys: domain.keys, options: Container.OpenOptions(trustedBundleKey: signer))
        trusted = AppContext(domain: domain, container: c)
        addTeardownBlock { c.close() }
    }

    /// Overwrites `relative` in the bundle in place, keeping its mode (tests run as root, which ignores 0444).
    func overwrite(_ relative: String, _ bytes: String) throws {
        let h = try XCTUnwrap(FileHandle(forWritingAtPath: bundle + "/" + relative))
        try h.write(contentsOf: Data(bytes.utf8))
        try h.close()
    }

    func testResourcesAreFoundByNameExtensionAndSubdirectory() throws {
        let main = ProtectedBundle(context: trusted)
        XCTAssertEqual(main.url(forResource: "app", withExtension: "conf")?.path, bundle + "/app.conf")
        XCTAssertEqual(main.url(forResource: "app", withExtension: ".conf")?.path, bundle + "/app.conf")
        XCTAssertEqual(main.path(forResource: "strings", ofType: "txt", inDirectory: "Resources/en"), bundle + "/Resources/en/strings.txt")
        XCTAssertEqual(main.url(forResource: "logo", withExtension: nil, subdirectory: "Resources")?.path, bundle + "/Resources/logo")
        XCTAssertEqual(main.url(forResource: nil, withExtension: "txt", subdirectory: "Resources/en")?.lastPathComponent, "help.txt")
        XCTAssertEqual(main.urls(forResourcesWithExtension: "txt", subdirectory: "Resources/en")?.map(\.lastPathComponent), ["help.txt", "strings.txt"])
        XCTAssertEqual(String(decoding: try XCTUnwrap(FileManager.default.contents(atPath: main.path(forResource: "app", ofType: "conf")!)), as: UTF8.self), "main")
        XCTAssertEqual(main.bundlePath, bundle)
        // Through the current context, as iOS code calls `Bundle.main`.
        XCTAssertEqual(inContext { ProtectedBundle.main.path(forResource: "app", ofType: "conf") }, bundle + "/app.conf")
    }

    func testMissingAndOutsideNamesAreNotFound() throws {
        let main = ProtectedBundle(context: trusted)
        XCTAssertNil(main.url(forResource: "nope", withExtension: "txt"))
        XCTAssertNil(main.url(forResource: "strings", withExtension: "txt"), "not at the top level")
        XCTAssertNil(main.url(forResource: "../.container-policy", withExtension: nil), "only sealed names match")
        XCTAssertNil(main.url(forResource: ".bundle-seal", withExtension: nil))
        assertCocoa(.fileReadNoSuchFile, .notFound) { _ = try main.verifiedURL(forResource: "nope", withExtension: "txt") }
        XCTAssertNil(ProtectedBundle.main.url(forResource: "app", withExtension: "conf"), "no app context")
    }

    func testAModifiedResourceIsNotReturnedAndSaysWhy() throws {
        let main = ProtectedBundle(context: trusted)
        try overwrite("Resources/en/strings.txt", "HELLO")
        XCTAssertNil(main.path(forResource: "strings", ofType: "txt", inDirectory: "Resources/en"))
        assertCocoa(.fileReadCorruptFile, .bundleTampered) { _ = try main.verifiedURL(forResource: "strings", withExtension: "txt", subdirectory: "Resources/en") }
        do { _ = try main.verifiedURL(forResource: "strings", withExtension: "txt", subdirectory: "Resources/en") } catch {
            XCTAssertTrue(error.localizedDescription.contains("modified 'Resources/en/strings.txt'"), error.localizedDescription)
            XCTAssertTrue(error.localizedDescription.contains("dpctl bundle seal"), error.localizedDescription)
        }
        XCTAssertEqual(main.urls(forResourcesWithExtension: "txt", subdirectory: "Resources/en")?.map(\.lastPathComponent), ["help.txt"])
        XCTAssertNotNil(main.url(forResource: "app", withExtension: "conf"), "the untouched resources stay usable")
    }

    func testALinkOrFIFOPlantedInPlaceIsRefusedNotFollowedOrWaitedOn() throws {
        let main = ProtectedBundle(context: trusted)
        let fm = FileManager.default
        try fm.removeItem(atPath: bundle + "/app.conf")
        try fm.createSymbolicLink(atPath: bundle + "/app.conf", withDestinationPath: "/etc/hostname")
        assertCocoa(.fileReadCorruptFile, .bundleTampered) { _ = try main.verifiedURL(forResource: "app", withExtension: "conf") }
        try fm.removeItem(atPath: bundle + "/Resources/logo")
        XCTAssertEqual(mkfifo(bundle + "/Resources/logo", 0o444), 0)
        let started = Date()
        assertCocoa(.fileReadCorruptFile, .bundleTampered) { _ = try main.verifiedURL(forResource: "logo", withExtension: nil, subdirectory: "Resources") }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "a FIFO with no writer must not block the look-up")
        try fm.removeItem(atPath: bundle + "/Resources/en/help.txt")
        assertCocoa(.fileReadCorruptFile, .bundleTampered) { _ = try main.verifiedURL(forResource: "help", withExtension: "txt", subdirectory: "Resources/en") }
    }

    func testABundleResealedByAnotherKeyIsRefusedWhenAKeyIsTrusted() throws {
        try overwrite("app.conf", "evil")
        try BundleSeal.seal(containerAt: context.container.root, signingKey: try Ed25519KeyPair.generate())
        assertCocoa(.fileReadCorruptFile, .bundleTampered) { _ = try ProtectedBundle(context: trusted).verifiedURL(forResource: "app", withExtension: "conf") }
        // Without a trusted key, the seal only detects damage: the re-sealed bundle is consistent.
        XCTAssertNotNil(ProtectedBundle(context: context).url(forResource: "app", withExtension: "conf"))
    }
}
