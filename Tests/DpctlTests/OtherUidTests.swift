import Foundation
import XCTest

/// Another uid can neither read the class keys from the keyring nor unlock the domain's files — even with every file on disk readable.
final class OtherUidTests: DpctlTestCase {
    private let keyctl = "/usr/bin/keyctl"
    /// Our own throwaway user: `dpkeytest`, shared with other suites on this machine, was seen
    /// deleted in the middle of a run by something outside this package.
    let user = "dpkeybagtest"

    /// Skips unless root; creates the throwaway user when it is missing.
    func ensureUser() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: creates the throwaway user \(user) and switches to it; run `sudo swift test`") }
        if try run("/usr/bin/id", ["-u", user]).status != 0 {
            var created = try run("/usr/sbin/useradd", ["--system", "--no-create-home", user])
            // 9: the user or its group exists (created meanwhile, or a deleted user left its group).
            if created.status == 9, try run("/usr/bin/id", ["-u", user]).status != 0 {
                created = try run("/usr/sbin/useradd", ["--system", "--no-create-home", "-g", user, user])
            }
            XCTAssertEqual(try run("/usr/bin/id", ["-u", user]).status, 0, "useradd \(user): \(created.stderr)")
        }
    }

    /// The other user's own copy of the device secret, in a directory it owns (as if it had stolen everything on disk).
    func stealDeviceSecret() throws -> String {
        let stolen = dir + "/stolen-devices"
        try FileManager.default.createDirectory(atPath: stolen, withIntermediateDirectories: false)
        let secretName = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: devices).first)
        try FileManager.default.copyItem(atPath: "\(devices)/\(secretName)", toPath: "\(stolen)/\(secretName)")
        chmod(stolen, 0o700)
        XCTAssertEqual(try run("/bin/chown", ["-R", user, stolen]).status, 0)
        return stolen
    }

    func testAnotherUidCanReadNeitherTheClassKeysNorTheProtectedFiles() throws {
        try ensureUser()
        try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let files = dir + "/files"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
        for c in ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "none"] {
            try ok(["put", "--class", c, "\(files)/\(c)"], input: Data("secret of \(c)".utf8))
        }
        // As the library leaves them, the keybag and the device secret are the owner's alone: the other uid
        // cannot read either, even with their directories opened to it. What it can read of the protected files is ciphertext.
        for p in [dir, home, devices] { chmod(p, 0o755) }
        for p in [home + "/keybag", try XCTUnwrap(try FileManager.default.subpathsOfDirectory(atPath: devices).first.map { "\(devices)/\($0)" })] {
            let r = try run("/usr/sbin/runuser", ["-u", user, "--", "/usr/bin/cat", p])
            XCTAssertNotEqual(r.status, 0, "another uid read \(p)")
            XCTAssertTrue(r.stdout.isEmpty, "another uid read \(p)")
        }
        chmod(devices, 0o700)
        for c in ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "none"] {
            XCTAssertNil(try bytes("\(files)/\(c)").range(of: Data("secret of \(c)".utf8)), "plaintext of \(c) on disk")
        }
        // Open every door but the keys: the home, the keybag and the files readable by all, and the
        // other user given its own copy of the device secret (as if it had stolen everything on disk).
        for p in [dir, home, files] { chmod(p, 0o755) }
        for p in try FileManager.default.contentsOfDirectory(atPath: files).map({ "\(files)/\($0)" }) + [home + "/keybag"] { chmod(p, 0o644) }
        let stolen = try stealDeviceSecret()

        let classes = try XCTUnwrap(try status()["classes"] as? [[String: Any]])
        let serials = classes.prefix(3).compactMap { ($0["keyIDs"] as? [String: Any])?["1"] as? Int }
        XCTAssertEqual(serials.count, 3)
        XCTAssertEqual(Set(serials).count, 1, "one domain key holds A, B and C")
        for serial in Set(serials) {
            // Same uid, another session (not a possessor): reads it, through the owner bits.
            let same = try run(keyctl, ["session", "-", keyctl, "pipe", String(serial)])
            XCTAssertEqual(same.status, 0, same.stderr)
            XCTAssertEqual(same.stdout.count, 2 + 3 * 37, "the domain key: A, B and C in one payload")
            // Another uid in its own session: refused by the kernel.
            let other = try run("/usr/sbin/runuser", ["-u", user, "--", keyctl, "session", "-", keyctl, "pipe", String(serial)])
            XCTAssertNotEqual(other.status, 0)
            XCTAssertTrue(other.stderr.contains("Permission denied"), other.stderr)
            XCTAssertTrue(other.stdout.isEmpty, "another uid read key bytes")
        }
        for keyring in ["user", "session"] {
            let env = ["DATAPROTECTION_HOME=\(home)", "DATAPROTECTION_DEVICE_DIR=\(stolen)", "DATAPROTECTION_KEYRING=\(keyring)", "HOME=/nonexistent"]
            func asOther(_ args: [String]) throws -> Run {
                try run("/usr/sbin/runuser", ["-u", user, "--", keyctl, "session", "-", "/usr/bin/env"] + env + [dpctlPath] + args)
            }
            for c in ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication"] {
                let r = try asOther(["cat", "\(files)/\(c)"])
                XCTAssertEqual(r.status, 75, "\(c) via @\(keyring.prefix(1)): \(r.stderr)")
                XCTAssertTrue(r.stdout.isEmpty)
            }
            // Class none is protected by the device secret alone, by design: with a stolen copy it reads.
            XCTAssertEqual(try asOther(["cat", "\(files)/none"]).out, "secret of none")
            // And it cannot unlock without the passphrase.
            let guess = try asOther(["unlock", "--passphrase-fd", "0"])
            XCTAssertNotEqual(guess.status, 0)
        }
        // Control: the owner, in this session, reads every class.
        XCTAssertEqual(try ok(["cat", "\(files)/complete"]).out, "secret of complete")
    }
}
