import SystemLayer
import Foundation
import DataProtection
import XCTest

/// Backup policy through the API, and through restic, borg, GNU tar and rsync run for real.
final class ContainerBackupTests: XCTestCase {
    func testExcludeFlagPersistsCoversDirectoriesAndSurvivesAtomicReplaces() throws {
        let (c, keys, root) = try makeContainer(self)
        try c.write(Array("v1".utf8), to: "Documents/big.bin")
        XCTAssertFalse(try c.isExcludedFromBackup("Documents/big.bin"))
        try c.setExcludedFromBackup(true, for: "Documents/big.bin")
        XCTAssertTrue(try c.isExcludedFromBackup("Documents/big.bin"))
        // Rewriting through the container, and through a plain ProtectedFiles by path, keeps the flag.
        try c.write(Array("v2".utf8), to: "Documents/big.bin")
        XCTAssertTrue(try c.isExcludedFromBackup("Documents/big.bin"))
        try ProtectedFiles(keys: keys).write(Array("v3".utf8), to: root + "/Documents/big.bin", protection: .none)
        XCTAssertTrue(try c.isExcludedFromBackup("Documents/big.bin"))
        XCTAssertEqual(try c.read("Documents/big.bin"), Array("v3".utf8))
        XCTAssertEqual(try ExtendedAttributes.value(of: BackupPolicy.excludeAttribute, at: root + "/Documents/big.bin"), Array("1".utf8))
        // A directory's flag covers what is inside it, however deep, including files made later.
        try c.createDirectory("Documents/scratch/deep", withIntermediateDirectories: true)
        try c.setExcludedFromBackup(true, for: "Documents/scratch")
        try c.write(Array("x".utf8), to: "Documents/scratch/deep/later.txt")
        XCTAssertTrue(try c.isExcludedFromBackup("Documents/scratch/deep/later.txt"))
        // Policy: Caches and tmp never; Documents and Library yes.
        try c.write(Array("c".utf8), to: "Library/Caches/c")
        XCTAssertTrue(try c.isExcludedFromBackup("Library/Caches/c"))
        XCTAssertTrue(try c.isExcludedFromBackup("tmp"))
        XCTAssertFalse(try c.isExcludedFromBackup("Library/Application Support"))
        try c.setExcludedFromBackup(false, for: "Documents/big.bin")
        XCTAssertFalse(try c.isExcludedFromBackup("Documents/big.bin"))
        try c.setExcludedFromBackup(false, for: "Documents/big.bin")  // clearing twice is fine
        try writeBytes(Array("r".utf8), root + "/Bundle/res.txt")
        assertProtectionError([.readOnly]) { try c.setExcludedFromBackup(true, for: "Bundle/res.txt") }
    }

    func testPlanAndExcludeListsNameExactlyThePolicy() throws {
        let (c, _, root) = try makeContainer(self)
        try c.write(Array(repeating: 1, count: 5000), to: "Documents/keep.txt")
        try c.write(Array("e".utf8), to: "Documents/skip [1]*.bin")
        try c.setExcludedFromBackup(true, for: "Documents/skip [1]*.bin")
        let plan = try c.backupPlan()
        let keep = try XCTUnwrap(plan.first { $0.path == "Documents/keep.txt" })
        XCTAssertTrue(keep.isIncluded)
        XCTAssertEqual(keep.size, Int64(try FileManager.default.attributesOfItem(atPath: root + "/Documents/keep.txt")[.size] as! Int))
        XCTAssertEqual(plan.first { $0.path == "Library/Caches/CACHEDIR.TAG" }?.isCoveredByParent, true)
        XCTAssertEqual(try BackupPolicy.excludeList(containerAt: root, format: .borg).split(separator: "\n").map(String.init), [
            "pp:\(root)/.container.lock", "pp:\(root)/Bundle", "pp:\(root)/Documents/skip [1]*.bin", "pp:\(root)/Library/Caches", "pp:\(root)/tmp",
        ])
        XCTAssertTrue(try BackupPolicy.excludeList(containerAt: root, format: .restic).contains("\(root)/Documents/skip \\[1\\]\\*.bin\n"))
        XCTAssertTrue(try BackupPolicy.excludeList(containerAt: root, format: .rsync).contains("/Documents/skip \\[1\\]\\*.bin\n"))
        XCTAssertTrue(try BackupPolicy.excludeList(containerAt: root, format: .tar).contains("./Documents/skip [1]*.bin\n"))
    }

    // MARK: Real tools

    struct Scene {
        let root: String
        let work: String
        let keys: InMemoryClassKeys
        let classKeys: [ClassKey]
        let contents: [String: [UInt8]]
        /// Regular files a backup must hold (relative to the root), exactly.
        let expected: [String]
    }

    /// A container with user data of every class, excluded items, caches, tmp and a bundle.
    func makeScene() throws -> Scene {
        let work = try temporaryDirectory(self)
        let classKeys = try ProtectionClass.allCases.map { try ClassKey.generate($0) }
        let keys = InMemoryClassKeys(classKeys)
        let root = work + "/app"
        let c = try Container.create(at: root, keys: keys)
        defer { c.close() }
        var rng = TestRNG(seed: 6)
        var contents: [String: [UInt8]] = [:]
        func put(_ p: String, _ cls: ProtectionClass? = nil, size: Int = 3000) throws {
            let b = rng.bytes(size)
            try c.write(b, to: p, protection: cls)
            contents[p] = b
        }
        try put("Documents/report.txt", .complete, size: 70_000)
        try c.createDirectory("Documents/notes")
        try put("Documents/notes/n1.md")
        try put("Documents/odd name [1]*.txt", ProtectionClass.none)
        try put("Library/Application Support/db.sqlite", .completeUnlessOpen)
        try put("Documents/big-excluded.bin")
        try c.setExcludedFromBackup(true, for: "Documents/big-excluded.bin")
        try c.createDirectory("Documents/excluded-dir/sub", withIntermediateDirectories: true)
        try put("Documents/excluded-dir/a")
        try put("Documents/excluded-dir/sub/b")
        try c.setExcludedFromBackup(true, for: "Documents/excluded-dir")
        try put("Library/Application Support/session.state")
        try c.setExcludedFromBackup(true, for: "Library/Application Support/session.state")
        try put("Library/Application Support/session.state")  // rewritten: still excluded
        try put("Library/Caches/thumb.png")
        try c.createDirectory("Library/Caches/sub")
        try put("Library/Caches/sub/x")
        try put("tmp/scratch")
        try c.preferences().set("dark", forKey: "theme")
        try ProtectedFiles(keys: keys).write(rng.bytes(100), to: root + "/Documents/Inbox/in.txt", protection: .completeUntilFirstUserAuthentication)
        contents["Documents/Inbox/in.txt"] = try ProtectedFiles(keys: keys).read(root + "/Documents/Inbox/in.txt")
        try writeBytes(Array("resource".utf8), root + "/Bundle/res.txt")
        let expected = [
            ".container-policy", "Documents/Inbox/in.txt", "Documents/notes/n1.md", "Documents/odd name [1]*.txt", "Documents/report.txt",
            "Library/Application Support/db.sqlite", "Library/Preferences/.standard.lock", "Library/Preferences/standard.prefs",
        ]
        return Scene(root: root, work: work, keys: keys, classKeys: classKeys, contents: contents, expected: expected)
    }

    func tool(_ name: String) throws -> String {
        for dir in ["/usr/bin", "/usr/local/bin", "/bin"] where FileManager.default.isExecutableFile(atPath: "\(dir)/\(name)") { return "\(dir)/\(name)" }
        throw XCTSkip("\(name) is not installed and apt could not install it here; run `scripts/setup` (apt-get install restic borgbackup tar rsync)")
    }

    /// Locks every class, runs `backup`, checks the domain really was locked, unlocks.
    func whileLocked(_ s: Scene, _ backup: () throws -> Void) throws {
        s.keys.lock(Set(ProtectionClass.allCases))
        let c = try Container(at: s.root, keys: s.keys)
        assertProtectionError([.locked]) { _ = try c.read("Documents/report.txt") }
        assertProtectionError([.locked]) { _ = try c.read("Documents/notes/n1.md") }
        c.close()
        try backup()
        s.keys.install(s.classKeys)
    }

    /// The restored tree holds exactly the expected files, and each protected one reads back byte-exact.
    func checkRestored(_ s: Scene, at restored: String, tool: String) throws {
        XCTAssertEqual(regularFiles(under: restored), s.expected, "\(tool): the archive must hold exactly the backed-up items")
        let c = try Container.create(at: restored, keys: s.keys)  // puts back the never-backed-up directories
        defer { c.close() }
        for p in s.expected where s.contents[p] != nil {
            XCTAssertEqual(try c.read(p), s.contents[p], "\(tool): \(p)")
        }
        XCTAssertEqual(try c.preferences().string(forKey: "theme"), "dark", tool)
        XCTAssertEqual(try c.info("Documents/report.txt").protectionClass, .complete)
        XCTAssertEqual(try c.info("Documents/odd name [1]*.txt").protectionClass, ProtectionClass.none)
        XCTAssertEqual(try c.info("Library/Application Support/db.sqlite").protectionClass, .completeUnlessOpen)
    }

    func writeList(_ s: Scene, _ format: BackupPolicy.ExcludeFormat) throws -> String {
        let path = s.work + "/excludes.\(format.rawValue)"
        try writeBytes(Array(try BackupPolicy.excludeList(containerAt: s.root, format: format).utf8), path)
        return path
    }

    func testResticBacksUpExactlyThePolicyWhileLockedAndRestoresReadable() throws {
        let restic = try tool("restic")
        let s = try makeScene()
        let env = ["RESTIC_PASSWORD": "test-only", "RESTIC_REPOSITORY": s.work + "/restic-repo"]
        let list = try writeList(s, .restic)
        try whileLocked(s) {
            try runOK(restic, ["init", "--quiet", "--no-cache"], env: env)
            try runOK(restic, ["backup", "--quiet", "--no-cache", "--exclude-caches", "--exclude-file", list, s.root], env: env)
        }
        try runOK(restic, ["restore", "latest", "--no-cache", "--target", s.work + "/restic-out"], env: env)
        try checkRestored(s, at: s.work + "/restic-out" + s.root, tool: "restic")
        // CACHEDIR.TAG alone (no list): Caches and tmp contents are skipped with no configuration.
        try runOK(restic, ["backup", "--quiet", "--no-cache", "--exclude-caches", s.root], env: env)
        let listing = try runOK(restic, ["ls", "latest", "--no-cache"], env: env)
        XCTAssertFalse(listing.contains("thumb.png") || listing.contains("scratch") || listing.contains("Caches/sub"), listing)
        XCTAssertTrue(listing.contains("big-excluded.bin"), "without the list, flagged items are kept")
    }

    func testBorgBacksUpExactlyThePolicyWhileLockedAndRestoresReadable() throws {
        let borg = try tool("borg")
        let s = try makeScene()
        let env = ["BORG_BASE_DIR": s.work + "/borg-base", "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes", "BORG_RELOCATED_REPO_ACCESS_IS_OK": "yes"]
        let repo = s.work + "/borg-repo"
        let list = try writeList(s, .borg)
        try whileLocked(s) {
            try runOK(borg, ["init", "--encryption=none", repo], env: env)
            try runOK(borg, ["create", "--exclude-caches", "--exclude-from", list, repo + "::full", s.root], env: env)
        }
        let out = s.work + "/borg-out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try runOK(borg, ["extract", repo + "::full"], cwd: out, env: env)
        try checkRestored(s, at: out + s.root, tool: "borg")
        try runOK(borg, ["create", "--exclude-caches", repo + "::tags-only", s.root], env: env)
        let listing = try runOK(borg, ["list", "--short", repo + "::tags-only"], env: env)
        XCTAssertFalse(listing.contains("thumb.png") || listing.contains("scratch"), listing)
        XCTAssertTrue(listing.contains("big-excluded.bin"))
    }

    func testGnuTarBacksUpExactlyThePolicyWhileLockedAndRestoresReadable() throws {
        let tar = try tool("tar")
        let s = try makeScene()
        let list = try writeList(s, .tar)
        let archive = s.work + "/app.tar"
        try whileLocked(s) {
            try runOK(tar, ["-C", s.root, "--exclude-caches", "--anchored", "--no-wildcards", "--exclude-from=\(list)", "-cf", archive, "."])
        }
        let out = s.work + "/tar-out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        try runOK(tar, ["-C", out, "-xf", archive])
        try checkRestored(s, at: out, tool: "tar")
        let tagsOnly = s.work + "/tags.tar"
        try runOK(tar, ["-C", s.root, "--exclude-caches", "-cf", tagsOnly, "."])
        let listing = try runOK(tar, ["-tf", tagsOnly])
        XCTAssertFalse(listing.contains("thumb.png") || listing.contains("scratch"), listing)
        XCTAssertTrue(listing.contains("./Library/Caches/CACHEDIR.TAG") && listing.contains("big-excluded.bin"))
    }

    func testRsyncCopiesExactlyThePolicyWhileLocked() throws {
        let rsync = try tool("rsync")
        let s = try makeScene()
        let list = try writeList(s, .rsync)
        let out = s.work + "/rsync-out"
        try whileLocked(s) {
            try runOK(rsync, ["-a", "--exclude-from=\(list)", s.root + "/", out + "/"])
        }
        try checkRestored(s, at: out, tool: "rsync")
    }
}
