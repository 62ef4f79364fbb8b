import DataProtection
import ExamplePrograms
import Foundation
import TestSupport
import XCTest

/// The library and dpctl where the machine works against them: the kernel keyring refused by
/// seccomp, a read-only filesystem, a full disk (another uid: OtherUidTests). Each failure must be
/// one typed error that names the file (or the keyring) and the fix, and must leave everything on
/// disk as it was: no half-written file, no temporary file, nothing created.
///
/// The filesystems are small tmpfs mounts beneath the test's directory, always unmounted in
/// teardown; the tests skip, saying why, where mounting is not permitted (not root, or no CAP_SYS_ADMIN).
final class HostileEnvironmentTests: DpctlTestCase {
    // MARK: The keyring refused

    func testRefusedKeyringGivesOneClearErrorAndWritesNothing() throws {
        let deny = try builtProduct("keyctl-deny")
        let service = try builtProduct(ExamplePrograms.service)
        try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let files = dir + "/files"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: false)
        try ok(["put", "--class", "complete", files + "/a"], input: Data("alpha".utf8))
        let newPassphraseFile = dir + "/new-passphrase"
        try write("new passphrase\n", to: newPassphraseFile)
        let before = try snapshot(dir)
        // Docker's default profile answers EPERM; a kernel without CONFIG_KEYS answers ENOSYS.
        for errno in ["EPERM", "ENOSYS"] {
            for args in [
                ["unlock", "--passphrase-file", passphraseFile], ["put", "--class", "complete", files + "/b"],
                ["put", "--class", "none", files + "/a"], ["cat", files + "/a"], ["lock"],
                ["passwd", "--passphrase-file", passphraseFile, "--new-passphrase-file", newPassphraseFile],
            ] {
                // No standard input: a process refused before reading it would make writing it a SIGPIPE here.
                let r = try run(deny, ["--errno=\(errno)", dpctlPath] + args)
                let what = "\(errno) dpctl \(args[0]): \(r.stderr)"
                XCTAssertEqual(r.status, 69, what)
                XCTAssertEqual(r.stderr.components(separatedBy: "dpctl: error:").count, 2, "one error: \(what)")
                XCTAssertTrue(r.stderr.contains("kernel keyring is refused") && r.stderr.contains("seccomp"), "names the cause: \(what)")
                XCTAssertTrue(r.stderr.contains("keyctl") && r.stderr.contains("allow"), "names the fix: \(what)")
                XCTAssertTrue(r.stdout.isEmpty, "no plaintext or output: \(what)")
                assertUnchanged(before, try snapshot(dir), "nothing written: \(what)")
            }
        }
        // A new domain under a refused keyring: refused before the home or the device secret exists.
        let fresh = ["DATAPROTECTION_HOME": dir + "/fresh-home", "DATAPROTECTION_DEVICE_DIR": dir + "/fresh-devices"]
        let initRefused = try run(deny, [dpctlPath, "init", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"], env: fresh)
        XCTAssertEqual(initRefused.status, 69, initRefused.stderr)
        XCTAssertTrue(initRefused.stdout.isEmpty, "no recovery key shown for a domain that was not made")
        assertUnchanged(before, try snapshot(dir), "init created nothing")
        // A process embedding the library (the example service) gets the same single error, with the in-process alternative.
        let embedded = try run(deny, [service, "--work", dir + "/work", "--seconds", "1"])
        XCTAssertEqual(embedded.status, 70, embedded.stderr)
        let lines = embedded.stderr.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, embedded.stderr)
        XCTAssertTrue(lines.first?.hasPrefix("dp-example-service: error: the kernel keyring is refused") ?? false, embedded.stderr)
        XCTAssertTrue(embedded.stderr.contains("keyStore: .inProcess"), embedded.stderr)
        assertUnchanged(before, try snapshot(dir), "the service wrote nothing")
        // Control: with the keyring allowed, the same command works.
        XCTAssertEqual(try ok(["cat", files + "/a"]).out, "alpha")
    }

    // MARK: A read-only filesystem

    func testReadOnlyFilesystemStillReadsAndEveryWriteFailsNamingTheFile() throws {
        let mnt = try unlockedDomain(onTmpfs: "ro", size: "4m")
        try ok(["put", "--class", "complete", mnt + "/a"], input: Data("alpha".utf8))
        try ok(["put", "--class", "none", mnt + "/d"], input: Data("delta".utf8))
        let files = try libraryFiles()
        try files.write(Array("library".utf8), to: mnt + "/lib", protection: .completeUnlessOpen)
        try remount(mnt, "ro")
        let before = try snapshot(mnt)

        // Reads work: dpctl, the library whole-file and through a handle.
        XCTAssertEqual(try ok(["cat", mnt + "/a"]).out, "alpha")
        XCTAssertEqual(try ok(["cat", mnt + "/d"]).out, "delta")
        XCTAssertEqual(try ok(["ls", "--json", mnt]).status, 0)
        XCTAssertEqual(try files.read(mnt + "/lib"), Array("library".utf8))
        let h = try files.open(mnt + "/lib")
        XCTAssertEqual(try h.read(at: 3, count: 4), Array("rary".utf8))
        h.close()

        // Writes fail, each naming its file and the fix.
        let changed = dir + "/changed"
        try write("changed", to: changed)
        for (args, path) in [(["put", "--class", "complete", mnt + "/a"], mnt + "/a"), (["put", "--class", "none", mnt + "/new"], mnt + "/new")] {
            try expectIOError(args + ["--from", changed], naming: path, "read-only")  // --from, not stdin: dpctl may stop before reading it
        }
        // passwd first locks the device secret it replaces (opened for writing), then writes the new one before the keybag.
        try expectIOError(["passwd", "--passphrase-file", passphraseFile, "--new-passphrase-fd", "0"], input: Data("new passphrase\n".utf8), naming: try deviceSecret(next: false), "read-only")
        expectError(.io(EROFS), naming: mnt + "/lib", "read-only") { try files.write(Array("changed".utf8), to: mnt + "/lib", protection: .complete) }
        expectError(.io(EROFS), naming: mnt + "/new", "read-only") { _ = try files.create(mnt + "/new", protection: .complete) }
        expectError(.io(EROFS), naming: mnt + "/lib", "read-only") { _ = try files.open(mnt + "/lib", forWriting: true) }

        assertUnchanged(before, try snapshot(mnt), "a failed write on the read-only filesystem")
        XCTAssertEqual(try ok(["cat", mnt + "/a"]).out, "alpha")
        XCTAssertEqual(try files.read(mnt + "/lib"), Array("library".utf8))
        // Read-write again, the same write succeeds.
        try remount(mnt, "rw")
        try ok(["put", "--class", "complete", mnt + "/a", "--from", changed])
        XCTAssertEqual(try ok(["cat", mnt + "/a"]).out, "changed")
    }

    // MARK: A full disk

    func testFullDiskFailsNamingTheFileKeepsTheOldFileAndLeavesNoTemporaryFile() throws {
        let mnt = try unlockedDomain(onTmpfs: "full", size: "2m")
        try ok(["put", "--class", "complete", mnt + "/f"], input: Data("original".utf8))
        let files = try libraryFiles()
        try files.write(Array("library original".utf8), to: mnt + "/lib", protection: .complete)
        let keybag = try bytes(home + "/keybag")
        let filler = mnt + "/filler"
        try fill(filler)
        let before = try snapshot(mnt)
        let big = Data((0..<(256 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let bigFile = dir + "/big"  // given with --from: dpctl stops reading when the disk is full
        try big.write(to: URL(fileURLWithPath: bigFile))

        // dpctl: replacing a file and creating one.
        for path in [mnt + "/f", mnt + "/g"] {
            try expectIOError(["put", "--class", "complete", "--from", bigFile, path], naming: path, "free some space")
        }
        // The keybag: a passphrase change cannot be written, and the old passphrase keeps working.
        try expectIOError(["passwd", "--passphrase-file", passphraseFile, "--new-passphrase-fd", "0"], input: Data("new passphrase\n".utf8), naming: try deviceSecret(next: true), "free some space")
        XCTAssertEqual(try bytes(home + "/keybag"), keybag)
        try ok(["unlock", "--passphrase-file", passphraseFile])
        // The library: a whole-file write.
        expectError(.io(ENOSPC), naming: mnt + "/lib", "free some space") { try files.write([UInt8](big), to: mnt + "/lib", protection: .complete) }

        assertUnchanged(before, try snapshot(mnt), "a failed write on the full disk")
        XCTAssertEqual(try ok(["cat", mnt + "/f"]).out, "original")
        XCTAssertEqual(try files.read(mnt + "/lib"), Array("library original".utf8), "the old file no longer authenticates")

        // With space freed, every one of them succeeds.
        XCTAssertEqual(unlink(filler), 0)
        try ok(["put", "--class", "complete", "--from", bigFile, mnt + "/f"])
        XCTAssertEqual(try ok(["cat", mnt + "/f"]).stdout, big)
        try ok(["passwd", "--passphrase-file", passphraseFile, "--new-passphrase-fd", "0"], input: Data("new passphrase\n".utf8))
        try ok(["unlock", "--passphrase-fd", "0"], input: Data("new passphrase\n".utf8))
        try files.write([UInt8](big), to: mnt + "/lib", protection: .complete)
        XCTAssertEqual(try files.read(mnt + "/lib"), [UInt8](big))
    }

    /// A handle's write or append that runs out of space fails with ENOSPC naming the file,
    /// and leaves the file as it was last committed: it still authenticates and reads the same.
    func testFullDiskHandleWriteAndAppendKeepTheCommittedFile() throws {
        let mnt = try mountTmpfs("full", size: "1m")
        let files = try libraryFiles()
        let original = Array("committed before the disk filled".utf8)
        let operations: [(String, (ProtectedFileHandle) throws -> Void)] = [
            ("append", { try $0.append([UInt8](repeating: 7, count: 256 << 10)) }),
            ("write", { try $0.write([UInt8](repeating: 7, count: 256 << 10), at: 0) }),
        ]
        for (name, _) in operations { try files.write(original, to: "\(mnt)/\(name)", protection: .completeUnlessOpen) }
        try fill(mnt + "/filler")
        for (name, operation) in operations {
            let path = "\(mnt)/\(name)"
            let h = try files.open(path, forWriting: true)
            expectError(.io(ENOSPC), naming: path, "free some space") { try operation(h) }
            h.close()
            let after: [UInt8]
            do { after = try files.read(path) } catch {
                XCTFail("a handle's \(name) on a full disk left '\(path)' unreadable: \(error)")
                continue
            }
            XCTAssertEqual(after, original, "a handle's \(name) on a full disk changed the committed contents")
        }
        XCTAssertEqual(try names(mnt), ["append", "filler", "write"], "temporary files left")
        // With space freed, a handle's append succeeds.
        XCTAssertEqual(unlink(mnt + "/filler"), 0)
        try files.write(original, to: mnt + "/append", protection: .completeUnlessOpen)
        let h = try files.open(mnt + "/append", forWriting: true)
        try h.append(Array(" and after".utf8))
        try h.sync()
        h.close()
        XCTAssertEqual(try files.read(mnt + "/append"), original + Array(" and after".utf8))
    }

    // MARK: Helpers

    /// Mounts a tmpfs of `size` at `<test dir>/<name>` (mode 0700), unmounted in teardown.
    func mountTmpfs(_ name: String, size: String) throws -> String {
        guard getuid() == 0 else { throw XCTSkip("mounting a tmpfs needs root; run `sudo swift test`") }
        let path = dir + "/" + name
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let r = try run("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "dp-hostile", path])
        guard r.status == 0 else { throw XCTSkip("cannot mount a tmpfs here (no CAP_SYS_ADMIN?): \(r.stderr)") }
        // Teardown blocks run last-in first-out: this unmount comes before setUp's removal of the directory.
        addTeardownBlock { [environment] in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/umount")
            p.arguments = ["-l", path]
            p.environment = environment
            try? p.run()
            p.waitUntilExit()
        }
        return path
    }

    func remount(_ path: String, _ mode: String) throws {
        let r = try run("/usr/bin/mount", ["-o", "remount,\(mode)", path])
        XCTAssertEqual(r.status, 0, "remount \(mode): \(r.stderr)")
    }

    /// A new tmpfs (see `mountTmpfs`) holding the domain's home and device directory; the domain is created and unlocked.
    func unlockedDomain(onTmpfs name: String, size: String) throws -> String {
        let mount = try mountTmpfs(name, size: size)
        home = mount + "/home"
        devices = mount + "/devices"
        environment["DATAPROTECTION_HOME"] = home
        environment["DATAPROTECTION_DEVICE_DIR"] = devices
        try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        return mount
    }

    /// The library in this process, with its own in-memory class keys.
    func libraryFiles() throws -> ProtectedFiles {
        ProtectedFiles(keys: InMemoryClassKeys(try ProtectionClass.allCases.map { c throws(ProtectionError) in try ClassKey.generate(c) }))
    }

    /// Writes `path` until its filesystem has no space left.
    func fill(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let block = [UInt8](repeating: 0xAA, count: 64 << 10)
        for size in [block.count, 4096, 1] {
            while block.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, size) }) == size {}
        }
        XCTAssertEqual(errno, ENOSPC)
    }

    /// Every file and directory beneath `root` with its type, mode, size and a digest of its bytes:
    /// what a failed operation must leave as it was.
    func snapshot(_ root: String) throws -> [String: String] {
        var out: [String: String] = [:]
        let fm = FileManager.default
        for name in try fm.subpathsOfDirectory(atPath: root) {
            let path = root + "/" + name
            let attributes = try fm.attributesOfItem(atPath: path)
            let mode = (attributes[.posixPermissions] as? Int).map { String($0, radix: 8) } ?? "?"
            let type = (attributes[.type] as? FileAttributeType)?.rawValue ?? "?"
            let contents = type == FileAttributeType.typeRegular.rawValue ? try Data(contentsOf: URL(fileURLWithPath: path)) : Data()
            out[name] = "\(type) \(mode) \(contents.count) bytes, digest \(contents.hashValue)"
        }
        return out
    }

    /// Fails naming each item of `before` that changed, vanished or appeared in `after`.
    func assertUnchanged(_ before: [String: String], _ after: [String: String], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        for name in Set(before.keys).union(after.keys).sorted() where before[name] != after[name] {
            XCTFail("\(what): '\(name)' was \(before[name] ?? "absent"), now \(after[name] ?? "absent")", file: file, line: line)
        }
    }

    func names(_ path: String) throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: path).sorted() }

    /// Runs dpctl, which must exit 74 (I/O) with one error naming `path` and containing `fix`.
    /// The domain's device secret, or where `passwd` writes the new one before the keybag (`<devices>/<domain id>.next.secret`).
    func deviceSecret(next: Bool) throws -> String {
        let current = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: devices).first { $0.hasSuffix(".secret") && !$0.hasPrefix(".") })
        return devices + "/" + (next ? current.replacingOccurrences(of: ".secret", with: ".next.secret") : current)
    }

    func expectIOError(_ args: [String], input: Data = Data(), naming path: String, _ fix: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let r = try dpctl(args, input: input)
        XCTAssertEqual(r.status, 74, r.stderr, file: file, line: line)
        XCTAssertEqual(r.stderr.components(separatedBy: "dpctl: error:").count, 2, "one error: \(r.stderr)", file: file, line: line)
        XCTAssertTrue(r.stderr.contains("'\(path)'") && r.stderr.contains(fix), r.stderr, file: file, line: line)
    }

    /// Runs `body`, which must throw a `ProtectionError` with `code` whose message names `path` and contains `fix`.
    func expectError(_ code: ProtectionError.Code, naming path: String, _ fix: String, file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> Void) {
        do {
            try body()
            XCTFail("succeeded; expected \(code) naming '\(path)'", file: file, line: line)
        } catch {
            guard let e = error as? ProtectionError else { return XCTFail("not a ProtectionError: \(error)", file: file, line: line) }
            XCTAssertEqual(e.code, code, e.message, file: file, line: line)
            XCTAssertTrue(e.message.contains("'\(path)'") && e.message.contains(fix), e.message, file: file, line: line)
        }
    }
}
