import Foundation
import XCTest

/// passwd, rotate, recover and wipe through the real binary: files written before them still read after.
final class KeybagCommandTests: DpctlTestCase {
    private let classes = ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "none"]

    private func putOnePerClass(in d: String) throws {
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        for c in classes { try ok(["put", "--class", c, "\(d)/\(c)"], input: Data("data of \(c)".utf8)) }
    }

    private func assertAllRead(in d: String, file: StaticString = #filePath, line: UInt = #line) throws {
        for c in classes { XCTAssertEqual(try ok(["cat", "\(d)/\(c)"], file: file, line: line).out, "data of \(c)", c, file: file, line: line) }
    }

    func testFilesWrittenBeforePasswdAndRotationStillReadAfterThem() throws {
        try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let files = dir + "/files"
        try putOnePerClass(in: files)
        // Old and new passphrase on one descriptor, one line each.
        try ok(["passwd", "--passphrase-fd", "0", "--new-passphrase-fd", "0"], input: Data("correct horse battery\nstaple\n".utf8))
        try ok(["lock", "--evict-all"])
        XCTAssertEqual(try dpctl(["unlock", "--passphrase-file", passphraseFile]).status, 77, "the old passphrase must no longer work")
        try write("staple\n", to: passphraseFile)
        try ok(["unlock", "--passphrase-file", passphraseFile])
        try assertAllRead(in: files)

        for c in classes {
            let r = try ok(["rotate", "--class", c, "--passphrase-file", passphraseFile, files])
            XCTAssertTrue(r.stderr.contains("1 files rewrapped"), r.stderr)
        }
        let gens = try XCTUnwrap(try status()["classes"] as? [[String: Any]]).map { $0["generation"] as? Int }
        XCTAssertEqual(gens, [2, 2, 2, 2])
        let listing = try XCTUnwrap(try JSONSerialization.jsonObject(with: try ok(["ls", "--json", files]).stdout) as? [[String: Any]])
        XCTAssertEqual(listing.map { $0["generation"] as? Int }, [2, 2, 2, 2])
        try assertAllRead(in: files)
        try ok(["lock", "--evict-all"])
        try ok(["unlock", "--passphrase-file", passphraseFile])
        try assertAllRead(in: files)
    }

    func testRecoverWithTheRecoveryKeyAfterTheDeviceSecretIsLost() throws {
        let recovery = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        try putOnePerClass(in: dir + "/files")
        try ok(["lock", "--evict-all"])
        // The home on a new machine: the device secret stays behind.
        try FileManager.default.removeItem(atPath: devices)
        let lost = try dpctl(["cat", dir + "/files/none"])
        XCTAssertEqual(lost.status, 66, lost.stderr)
        XCTAssertTrue(lost.stderr.contains("dpctl recover"), lost.stderr)
        try write("0000-" + recovery.dropFirst(5) + "\n", to: dir + "/typo")
        let typo = try dpctl(["recover", "--recovery-key-file", dir + "/typo", "--new-passphrase-file", passphraseFile])
        XCTAssertEqual(typo.status, 77, typo.stderr)
        try write(recovery.lowercased() + "\n", to: dir + "/recovery")
        try write("brand new\n", to: dir + "/new")
        try ok(["recover", "--recovery-key-file", dir + "/recovery", "--new-passphrase-file", dir + "/new", "--kdf-preset", "minimum"])
        try ok(["unlock", "--passphrase-file", dir + "/new"])
        try assertAllRead(in: dir + "/files")
    }

    func testWipeMakesEveryFileOfTheDomainUnreadable() throws {
        let recovery = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        try putOnePerClass(in: dir + "/files")
        let r = try ok(["wipe", "--yes"])
        XCTAssertTrue(r.stderr.contains("wiped"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: home + "/keybag"))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: devices), [])
        for c in classes { XCTAssertEqual(try dpctl(["cat", "\(dir)/files/\(c)"]).status, 66, c) }
        try write(recovery + "\n", to: dir + "/recovery")
        XCTAssertEqual(try dpctl(["recover", "--recovery-key-file", dir + "/recovery", "--new-passphrase-file", passphraseFile]).status, 66)
        let emptied = try eventually(within: .seconds(10)) { !(try run("/usr/bin/keyctl", ["show", "@s"]).out.contains("dataprotection:")) }
        XCTAssertTrue(emptied, "wipe must evict the domain's keys")
    }

    func testProtectUnprotectAndSetClassConvertTreesInPlace() throws {
        try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let tree = dir + "/tree"
        try FileManager.default.createDirectory(atPath: tree + "/a/b", withIntermediateDirectories: true)
        var originals: [String: Data] = [:]
        for (i, p) in ["x.txt", "a/y.bin", "a/b/z", "a/b/empty"].enumerated() {
            let data = Data((0..<(i == 3 ? 0 : 20_000 * i + 7)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try data.write(to: URL(fileURLWithPath: "\(tree)/\(p)"))
            originals["\(tree)/\(p)"] = data
        }
        try ok(["protect", "--class", "C", tree])
        for (p, data) in originals {
            XCTAssertNotEqual(try bytes(p).prefix(8), data.prefix(8), "\(p) is still plain")
            XCTAssertEqual(try ok(["cat", p]).stdout, data)
        }
        XCTAssertTrue(try ok(["protect", "--class", "C", tree]).stderr.contains("protected 0 files"), "protect is idempotent")
        try ok(["set-class", "--class", "complete", tree + "/a"])
        let listing = try XCTUnwrap(try JSONSerialization.jsonObject(with: try ok(["ls", "--json", tree]).stdout) as? [[String: Any]])
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: listing.map { ($0["path"] as! String, $0["class"] as! String) }), [
            tree + "/x.txt": "completeUntilFirstUserAuthentication", tree + "/a/y.bin": "complete",
            tree + "/a/b/z": "complete", tree + "/a/b/empty": "complete",
        ])
        try ok(["lock"])
        XCTAssertEqual(try dpctl(["unprotect", tree]).status, 75, "unprotect needs the class key")
        XCTAssertEqual(try ok(["cat", tree + "/x.txt"]).stdout, originals[tree + "/x.txt"], "a failed unprotect leaves files intact")
        try ok(["unlock", "--passphrase-file", passphraseFile])
        try ok(["unprotect", tree])
        for (p, data) in originals { XCTAssertEqual(try bytes(p), data, p) }
        XCTAssertTrue(try FileManager.default.subpathsOfDirectory(atPath: tree).allSatisfy { !$0.hasSuffix(".tmp") })
    }
}
