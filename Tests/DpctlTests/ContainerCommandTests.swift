import DataProtection
import Foundation
import XCTest

/// The container commands, run as the real dpctl binary: backup-excludes, backup-list, purge, bundle.
final class ContainerCommandTests: DpctlTestCase {
    /// A container made through the library (these commands need no keys), with caches, tmp and a flagged file.
    func makeContainer() throws -> String {
        let root = dir + "/app"
        let c = try Container.create(at: root, keys: try InMemoryClassKeys.random())
        defer { c.close() }
        try c.write(Array(repeating: 1, count: 4000), to: "Documents/keep.txt")
        try c.write(Array("x".utf8), to: "Documents/skip.bin")
        try c.setExcludedFromBackup(true, for: "Documents/skip.bin")
        try c.write(Array("c".utf8), to: "Library/Caches/c.bin")
        try c.write(Array("t".utf8), to: "tmp/t.bin")
        return root
    }

    func testBackupExcludesAndListFollowThePolicy() throws {
        let root = try makeContainer()
        XCTAssertEqual(try ok(["backup-excludes", "--format", "borg", root]).out.split(separator: "\n").map(String.init), [
            "pp:\(root)/.container.lock", "pp:\(root)/Bundle", "pp:\(root)/Documents/skip.bin", "pp:\(root)/Library/Caches", "pp:\(root)/tmp",
        ])
        XCTAssertTrue(try ok(["backup-excludes", "--format", "tar", root]).out.contains("./Documents/skip.bin\n"))
        let list = try ok(["backup-list", root]).out
        XCTAssertTrue(list.contains("Documents/keep.txt"), list)
        XCTAssertFalse(list.contains("skip.bin") || list.contains("c.bin") || list.contains("t.bin"), list)
        XCTAssertTrue(list.contains("total bytes backed up"), list)
        let all = try ok(["backup-list", "--all", root]).out
        XCTAssertTrue(all.contains("Documents/skip.bin  (excluded from backup"), all)
        XCTAssertNotEqual(try dpctl(["backup-excludes", "--format", "zip", root]).status, 0)
    }

    func testTarWithTheExcludeListFromDpctlLeavesOutExactlyThePolicy() throws {
        let root = try makeContainer()
        let list = dir + "/excludes"
        try ok(["backup-excludes", "--format", "tar", root]).stdout.write(to: URL(fileURLWithPath: list))
        let archive = dir + "/app.tar"
        let tar = try run("/usr/bin/tar", ["-C", root, "--exclude-caches", "--anchored", "--no-wildcards", "--exclude-from=\(list)", "-cf", archive, "."])
        XCTAssertEqual(tar.status, 0, tar.stderr)
        let members = try run("/usr/bin/tar", ["-tf", archive]).out.split(separator: "\n").map(String.init).filter { !$0.hasSuffix("/") }.sorted()
        XCTAssertEqual(members, ["./.container-policy", "./Documents/keep.txt"])
    }

    func testPurgeSkipsAContainerInUseAndEmptiesItOtherwise() throws {
        let root = try makeContainer()
        let holder = try Container(at: root, keys: try InMemoryClassKeys.random())
        let skipped = try ok(["purge", root])
        XCTAssertTrue(skipped.out.contains("in use"), skipped.out)
        XCTAssertTrue(FileManager.default.fileExists(atPath: root + "/Library/Caches/c.bin"))
        holder.close()
        let purged = try ok(["purge", root])
        XCTAssertTrue(purged.out.contains("removed 2 items"), purged.out)
        XCTAssertFalse(FileManager.default.fileExists(atPath: root + "/Library/Caches/c.bin"))
        XCTAssertTrue(FileManager.default.fileExists(atPath: root + "/Documents/keep.txt"))
        XCTAssertEqual(try dpctl(["purge", "--until-free", "lots", root]).status, 64)
    }

    func testBundleSealAndVerifyForScripts() throws {
        let root = try makeContainer()
        try write("resource", to: root + "/Bundle/res.txt")
        let key = dir + "/bundle.key"
        let publicKey = try ok(["bundle", "keygen", key]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertEqual(publicKey.count, 64)
        XCTAssertEqual((try FileManager.default.attributesOfItem(atPath: key)[.posixPermissions] as? Int), 0o600)
        XCTAssertTrue(try ok(["bundle", "seal", "--key", key, root]).out.contains(publicKey))
        try ok(["bundle", "verify", "--public-key", publicKey, root])
        XCTAssertTrue(try ok(["bundle", "verify", root]).out.contains("not pinned"))
        // Tamper: exit 65 and a message naming the file and the fix.
        chmod(root + "/Bundle/res.txt", 0o644)
        try write("RESOURCE", to: root + "/Bundle/res.txt")
        chmod(root + "/Bundle/res.txt", 0o444)
        let r = try dpctl(["bundle", "verify", "--public-key", publicKey, root])
        XCTAssertEqual(r.status, 65, r.stderr)
        XCTAssertTrue(r.stderr.contains("modified 'res.txt'") && r.stderr.contains("dpctl bundle seal"), r.stderr)
        chmod(root + "/Bundle", 0o755)
    }
}

/// `dpctl ls` names each file's content type.
final class ListContentTypeTests: DpctlTestCase {
    func testListShowsContentTypes() throws {
        try initDomain()
        try write("text", to: dir + "/plain")
        try ok(["put", "--class", "D", "--from", dir + "/plain", dir + "/notes.txt"])
        try ok(["put", "--class", "D", "--from", dir + "/plain", dir + "/blob"])
        let listing = try XCTUnwrap(try JSONSerialization.jsonObject(with: try ok(["ls", "--json", dir + "/notes.txt", dir + "/blob"]).stdout) as? [[String: Any]])
        XCTAssertEqual(listing.map { $0["type"] as? String }, ["public.plain-text", "public.data"])
        XCTAssertTrue(try ok(["ls", dir + "/notes.txt"]).out.contains("public.plain-text"))
    }
}
