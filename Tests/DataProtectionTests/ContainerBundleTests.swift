import Foundation
import DataProtection
// @testable: forges bundle manifests through the internal BundleManifest encoding and its hex form.
@testable import DataProtectionContainers
import ProtectionCrypto
import XCTest

/// The sealed bundle: signed manifest, read-only files, launch refuses a tampered bundle.
final class ContainerBundleTests: XCTestCase {
    func makeSealed() throws -> (root: String, keys: InMemoryClassKeys, signer: Ed25519PublicKey) {
        let (c, keys, root) = try makeContainer(self)
        c.close()
        try FileManager.default.createDirectory(atPath: root + "/Bundle/Resources/en", withIntermediateDirectories: true)
        try writeBytes(Array("main".utf8), root + "/Bundle/app.conf")
        try writeBytes(Array("hello".utf8), root + "/Bundle/Resources/en/strings.txt")
        try writeBytes(Array(repeating: 9, count: 200_000), root + "/Bundle/Resources/odd name %.bin")
        let pair = try Ed25519KeyPair.generate()
        let manifest = try BundleSeal.seal(containerAt: root, signingKey: pair)
        XCTAssertEqual(manifest.entries.map(\.path), ["Resources", "Resources/en", "Resources/en/strings.txt", "Resources/odd name %.bin", "app.conf"])
        addTeardownBlock { _ = try? runOK("/bin/chmod", ["-R", "u+w", root + "/Bundle"]) }
        return (root, keys, pair.publicKey)
    }

    func testSealMakesTheBundleReadOnlyAndLaunchVerifiesIt() throws {
        let (root, keys, signer) = try makeSealed()
        for (p, mode) in [("Bundle", 0o555), ("Bundle/app.conf", 0o444), ("Bundle/Resources/en", 0o555), ("Bundle/.bundle-seal", 0o444)] {
            XCTAssertEqual((try FileManager.default.attributesOfItem(atPath: root + "/" + p)[.posixPermissions] as? Int), mode, p)
        }
        let seal = try String(contentsOfFile: root + "/Bundle/.bundle-seal", encoding: .utf8)
        XCTAssertTrue(seal.hasPrefix("dataprotection-bundle-seal v1\nkey \(hex(signer.bytes))\n"), seal)
        XCTAssertTrue(seal.contains("f 444 5 "), seal)
        XCTAssertTrue(seal.contains(" Resources/odd%20name%20%25.bin\n"), seal)
        let c = try Container(at: root, keys: keys, options: .launch(trusting: signer))
        c.close()
        XCTAssertEqual(try BundleSeal.verify(containerAt: root, trusting: signer).entries.count, 5)
        XCTAssertEqual(try BundleSeal.verify(containerAt: root, trusting: nil).publicKey, signer)
    }

    func testEveryKindOfTamperingIsRefusedAtLaunch() throws {
        let tamperings: [(String, (String) throws -> Void, String)] = [
            ("modified", { r in try writeBytes(Array("HELLO".utf8), r + "/Bundle/Resources/en/strings.txt") }, "modified 'Resources/en/strings.txt'"),
            ("same size, one bit", { r in var b = try readBytes(r + "/Bundle/Resources/odd name %.bin"); b[100_000] ^= 1; try writeBytes(b, r + "/Bundle/Resources/odd name %.bin") }, "modified"),
            ("added", { r in try writeBytes(Array("x".utf8), r + "/Bundle/Resources/extra.txt") }, "not sealed"),
            ("added directory", { r in try FileManager.default.createDirectory(atPath: r + "/Bundle/Plugins", withIntermediateDirectories: false) }, "'Plugins'"),
            ("removed", { r in try FileManager.default.removeItem(atPath: r + "/Bundle/app.conf") }, "lacks 'app.conf'"),
            ("made writable", { r in try runOK("/bin/chmod", ["u+w", r + "/Bundle/app.conf"]) }, "mode"),
            ("replaced by a symlink", { r in try FileManager.default.removeItem(atPath: r + "/Bundle/app.conf"); try FileManager.default.createSymbolicLink(atPath: r + "/Bundle/app.conf", withDestinationPath: "/etc/hostname") }, "symbolic link"),
            ("seal edited", { r in
                var s = try String(contentsOfFile: r + "/Bundle/.bundle-seal", encoding: .utf8)
                s = s.replacingOccurrences(of: "f 444 4 ", with: "f 444 5 ")
                try writeBytes(Array(s.utf8), r + "/Bundle/.bundle-seal") }, "signature does not verify"),
            ("seal removed", { r in try FileManager.default.removeItem(atPath: r + "/Bundle/.bundle-seal") }, "not sealed"),
            ("resealed by someone else", { r in
                try writeBytes(Array("evil".utf8), r + "/Bundle/app.conf")
                try runOK("/bin/chmod", ["-R", "u+w", r + "/Bundle"])
                try BundleSeal.seal(containerAt: r, signingKey: try Ed25519KeyPair.generate()) }, "different key"),
        ]
        var refused = 0
        for (name, tamper, phrase) in tamperings {
            let (root, keys, signer) = try makeSealed()
            try runOK("/bin/chmod", ["-R", "u+w", root + "/Bundle"])
            try tamper(root)
            if name != "made writable" && name != "resealed by someone else" && name != "seal removed" && name != "seal edited" {
                _ = try? runOK("/bin/chmod", ["-R", "a-w", root + "/Bundle"])
            }
            guard let e = launchError(root, keys, signer) else {
                XCTFail("launch accepted a bundle that was \(name)")
                continue
            }
            XCTAssertEqual(e.code, .bundleTampered, "\(name): \(e.message)")
            XCTAssertTrue(e.message.contains(phrase), "\(name): \(e.message)")
            XCTAssertTrue(e.message.contains("dpctl bundle seal"), e.message)
            if e.code == .bundleTampered { refused += 1 }
        }
        print("bundle seal: \(refused) of \(tamperings.count) tamperings refused at launch")
        XCTAssertEqual(refused, tamperings.count)
    }

    /// The error opening the container for launch gives, or nil when it opens.
    func launchError(_ root: String, _ keys: InMemoryClassKeys, _ signer: Ed25519PublicKey) -> ProtectionError? {
        do {
            let c = try Container(at: root, keys: keys, options: .launch(trusting: signer))
            c.close()
            return nil
        } catch {
            return error
        }
    }

    func testSealRefusesSymbolicLinksAndTheBundleIsReadOnlyThroughTheAPI() throws {
        let (c, _, root) = try makeContainer(self)
        try FileManager.default.createSymbolicLink(atPath: root + "/Bundle/link", withDestinationPath: "/etc/passwd")
        assertProtectionError([.invalidArgument]) { try BundleSeal.seal(containerAt: root, signingKey: try Ed25519KeyPair.generate()) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/Bundle/.bundle-seal"))
        assertProtectionError([.readOnly]) { try c.write(Array("x".utf8), to: "Bundle/new") }
        assertProtectionError([.readOnly]) { try c.removeItem("Bundle/link") }
    }

    func testManifestTextRoundTrips() throws {
        let key = try Ed25519KeyPair.generate().publicKey
        let m = BundleManifest(publicKey: key, entries: [
            .init(path: "a b/ü%.txt", isDirectory: false, mode: 0o444, size: 3, hash: Array(repeating: 7, count: 32)),
            .init(path: "a b", isDirectory: true, mode: 0o555, size: 0, hash: []),
        ])
        XCTAssertEqual(BundleSeal.parse(BundleSeal.body(m)), m)
        XCTAssertTrue(BundleSeal.body(m).contains("a%20b/%c3%bc%25.txt"))
        XCTAssertNil(BundleSeal.parse("dataprotection-bundle-seal v2\n"))
    }
}
