import DataProtectionFormat
import Foundation
import DataProtection
// @testable: reads the raw class keys from the domain's key store and the recovery key's bytes, doors no build product may have.
@testable import DataProtectionKeys
// @testable: unwraps per-file keys through the internal header unwrapping of the file layer.
@testable import DataProtectionFiles
import ProtectionCrypto
import XCTest

/// No key material is ever written to disk in plaintext: every file the domain, the device-secret
/// directory and the protected files' directory hold is scanned for the raw keys.
final class KeyMaterialTests: DpctlTestCase {
    func testNoClassKeyOrPerFileKeyIsWrittenToDiskInPlaintext() throws {
        let recoveryText = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let files = dir + "/files"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
        var paths: [String] = []
        for (i, c) in ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "none"].enumerated() {
            for n in [0, 100, 70_000] {
                let p = "\(files)/\(c)-\(n)"
                try ok(["put", "--class", c, p], input: Data((0..<n).map { UInt8(truncatingIfNeeded: $0 &+ i) }))
                paths.append(p)
            }
        }
        try ok(["protect", "--class", "A", dir + "/passphrase"])  // a converted file too
        paths.append(dir + "/passphrase")

        // The test door: the library's internal reads of the keys (the same session keyring the children used).
        let domain = try ProtectionDomain.open(at: DomainLocation(home: home, deviceDirectory: devices), keyStore: .kernel(.session))
        var needles: [(String, [UInt8])] = []
        for c in [ProtectionClass.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication] {
            guard let s = try domain.store.secret(c, 1) else { return XCTFail("class \(c) is not in the keyring") }
            needles.append(("class key \(c)", s.exposedForTest()))
        }
        let none = try XCTUnwrap(try domain.cache.noneKey(1)?.secret)
        needles.append(("class key none", none.secret.exposedForTest()))
        for p in paths { needles.append(("per-file key of \(p)", try domain.files.perFileKey(p).exposedForTest())) }
        let recovery = try RecoveryKey(text: try SecretBytes(utf8: recoveryText))
        needles.append(("recovery key", recovery.key.exposedForTest()))
        XCTAssertEqual(Set(needles.map { $0.1 }).count, needles.count, "keys must be distinct")
        XCTAssertTrue(needles.allSatisfy { $0.1.count == 32 && $0.1 != [UInt8](repeating: 0, count: 32) })

        let haystacks = try [home, devices, files, dir].flatMap { try filesBelow($0) }
        XCTAssertGreaterThan(haystacks.count, paths.count + 2)
        for (path, content) in haystacks {
            for (what, key) in needles { XCTAssertFalse(contains(content, key), "\(what) found in plaintext in \(path)") }
        }
        // The scan can fail: a file holding a key is found.
        try Data(needles[0].1).write(to: URL(fileURLWithPath: dir + "/leak"))
        XCTAssertTrue(try filesBelow(dir).contains { $0.0.hasSuffix("/leak") && contains($0.1, needles[0].1) })
    }

    private func filesBelow(_ d: String) throws -> [(String, [UInt8])] {
        try FileManager.default.subpathsOfDirectory(atPath: d).compactMap { rel in
            let p = d + "/" + rel
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: p, isDirectory: &isDir), !isDir.boolValue else { return nil }
            return (p, [UInt8](try Data(contentsOf: URL(fileURLWithPath: p))))
        }
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count, let first = needle.first else { return false }
        var i = 0
        while let j = haystack[i...].firstIndex(of: first), j + needle.count <= haystack.count {
            if haystack[j..<(j + needle.count)].elementsEqual(needle) { return true }
            i = j + 1
        }
        return false
    }
}

extension SecretBytes {
    /// Test-only copy of the secret, to search files for it.
    func exposedForTest() -> [UInt8] { withUnsafeBytes { Array($0) } }
}

extension ProtectedFiles {
    /// The per-file key of `path`, unwrapped with its class key inside `ClassKeys.admit` (tests scan disks and memory for it).
    func perFileKey(_ path: String) throws -> SecretBytes {
        let file = try XCTUnwrap(FileHandle(forReadingAtPath: path), "cannot read \(path)")
        defer { try? file.close() }
        let raw = [UInt8](try file.read(upToCount: FileHeader.size) ?? Data())
        let header = try FileHeader.parse(raw)
        return try keys.admit(header.protectionClass, via: .filesOpen) { (access, _) throws(ProtectionError) in
            try unwrapFileKey(header, raw: raw, access)
        }
    }
}
