import Foundation
import TestSupport
import XCTest

/// The real dpctl binary through a domain's life: init, unlock, lock, status, timeouts, wrong passphrases.
final class LifecycleTests: DpctlTestCase {
    func testInitUnlockPutCatLockStatusRoundTrip() throws {
        let recovery = try initDomain()
        XCTAssertNotNil(recovery.range(of: #"^([0-9A-Z]{4}-){13}[0-9A-Z]{4}$"#, options: .regularExpression), recovery)
        XCTAssertEqual(try unlocked(), [false, false, false, true])
        try ok(["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(try unlocked(), [true, true, true, true])
        let classes = try XCTUnwrap(try status()["classes"] as? [[String: Any]])
        XCTAssertEqual(classes.map { ($0["keyIDs"] as? [String: Any])?.count ?? 0 }, [1, 1, 1, 0], "status shows one keyring key id per unlocked class")

        for c in ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "none"] {
            try ok(["put", "--class", c, "\(dir)/\(c)"], input: Data("secret \(c)\n".utf8))
            XCTAssertEqual(try ok(["cat", "\(dir)/\(c)"]).out, "secret \(c)\n")
        }
        let listing = try XCTUnwrap(try JSONSerialization.jsonObject(with: try ok(["ls", "--json", dir]).stdout) as? [[String: Any]])
        XCTAssertEqual(listing.count, 4)
        XCTAssertEqual(Set(listing.compactMap { $0["class"] as? String }), ["complete", "completeUnlessOpen", "completeUntilFirstUserAuthentication", "none"])
        XCTAssertEqual(listing.first { $0["class"] as? String == "none" }?["size"] as? Int, 12)

        try ok(["lock"])
        XCTAssertEqual(try unlocked(), [false, false, true, true])
        for c in ["complete", "completeUnlessOpen"] {
            let r = try dpctl(["cat", "\(dir)/\(c)"])
            XCTAssertEqual(r.status, 75, r.stderr)
            XCTAssertTrue(r.out.isEmpty, "no plaintext on a locked read")
            XCTAssertTrue(r.stderr.hasPrefix("dpctl: error: unable to open '\(dir)/\(c)': class \(c) is locked"), r.stderr)
            XCTAssertTrue(r.stderr.contains("dpctl: hint: unlock the domain: `dpctl unlock`"), r.stderr)
        }
        XCTAssertEqual(try ok(["cat", "\(dir)/completeUntilFirstUserAuthentication"]).out, "secret completeUntilFirstUserAuthentication\n")
        // Create while locked: B works (public key), A fails and leaves nothing behind.
        try ok(["put", "--class", "B", "\(dir)/b-locked"], input: Data("b".utf8))
        let lockedPut = try dpctl(["put", "--class", "A", "\(dir)/a-locked"], input: Data("a".utf8))
        XCTAssertEqual(lockedPut.status, 75)
        XCTAssertTrue(lockedPut.stderr.hasPrefix("dpctl: error: unable to create '\(dir)/a-locked': class complete is locked"), lockedPut.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/a-locked"))
        XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: dir).allSatisfy { !$0.hasSuffix(".tmp") })

        try ok(["lock", "--evict-all"])
        XCTAssertEqual(try unlocked(), [false, false, false, true])
        XCTAssertEqual(try dpctl(["cat", "\(dir)/completeUntilFirstUserAuthentication"]).status, 75)
        XCTAssertEqual(try ok(["cat", "\(dir)/none"]).out, "secret none\n")
        try ok(["unlock", "--passphrase-fd", "0"], input: Data("correct horse battery\n".utf8))
        XCTAssertEqual(try ok(["cat", "\(dir)/complete", "\(dir)/b-locked"]).out, "secret complete\nb")
    }

    /// The default: keys under the user keyring @u, shared by every session of the uid. Each dpctl runs in a
    /// fresh anonymous session (`keyctl session -`), so none possesses the keyring another one created.
    func testDefaultUserKeyringIsSharedAcrossSessions() throws {
        let user = ["DATAPROTECTION_KEYRING": "user"]
        func inNewSession(_ args: [String]) throws -> Run { try run("/usr/bin/keyctl", ["session", "-", dpctlPath] + args, env: user) }
        XCTAssertEqual(try run(dpctlPath, ["init", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"], env: user).status, 0)
        defer { _ = try? inNewSession(["lock", "--evict-all"]) }  // leave nothing in @u
        XCTAssertEqual(try inNewSession(["unlock", "--passphrase-file", passphraseFile, "--timeout", "600"]).status, 0)
        XCTAssertEqual(try inNewSession(["put", "--class", "A", dir + "/a"]).status, 0)
        XCTAssertEqual(try inNewSession(["cat", dir + "/a"]).status, 0)
        let again = try inNewSession(["unlock", "--passphrase-file", passphraseFile])  // re-unlock from another session: no timeout now
        XCTAssertEqual(again.status, 0, again.stderr)
        let status = try inNewSession(["status", "--json"])
        let parsed = try XCTUnwrap(try JSONSerialization.jsonObject(with: status.stdout) as? [String: Any])
        XCTAssertEqual(parsed["keyring"] as? String, "@u")
        XCTAssertTrue(parsed["autoLockDeadline"] is NSNull, "a later unlock without --timeout clears the deadline")
        XCTAssertEqual(try inNewSession(["lock"]).status, 0)
        XCTAssertEqual(try inNewSession(["cat", dir + "/a"]).status, 75)
        XCTAssertEqual(try inNewSession(["lock", "--evict-all"]).status, 0)
        let domainID = try XCTUnwrap(parsed["domain"] as? String)
        let gone = try eventually(within: .seconds(10)) {
            try ["dataprotection:\(domainID)", "dataprotection:\(domainID):expiring"].allSatisfy { try run("/usr/bin/keyctl", ["search", "@u", "user", $0]).status != 0 }
        }
        XCTAssertTrue(gone, "lock --evict-all must remove the domain's keys from @u")
    }

    /// `--log-level debug` (before or after the command's name, or `$DP_LOG_LEVEL`) sends the domain's structured log to standard error: the unlock and lock
    /// lines with the domain's id as metadata, and never the passphrase (given on standard input, as above, and on a
    /// file); without it, standard error holds only the usual note. An unknown level is a usage error.
    func testLogLevelWritesTheDomainsLockAndUnlockLinesNeverThePassphrase() throws {
        try initDomain()
        let passphrase = "correct horse battery"
        let domainID = try XCTUnwrap(try status()["domain"] as? String)
        XCTAssertEqual(try ok(["unlock", "--passphrase-file", passphraseFile]).stderr, "unlocked\n", "no log without --log-level")
        XCTAssertEqual(try ok(["lock", "--now"]).stderr.components(separatedBy: "\n").filter { $0.contains("domain=") }, [])

        let unlock = try ok(["--log-level", "debug", "unlock", "--passphrase-fd", "0"], input: Data((passphrase + "\n").utf8))
        let lock = try dpctl(["lock", "--now"], env: ["DP_LOG_LEVEL": "debug"])
        XCTAssertEqual(lock.status, 0, lock.stderr)
        let again = try dpctl(["unlock", "--log-level", "trace", "--passphrase-file", passphraseFile])
        XCTAssertEqual(again.status, 0, again.stderr)
        func lines(_ r: Run, _ message: String) -> [Substring] {
            r.stderr.split(separator: "\n").filter { $0.contains(message) && $0.contains("domain=\(domainID)") }
        }
        XCTAssertEqual(lines(unlock, "unlocked domain").count, 1, unlock.stderr)
        XCTAssertTrue(lines(unlock, "unlocked domain").allSatisfy { $0.contains("info") && $0.contains("operation=unlock") }, unlock.stderr)
        XCTAssertEqual(lines(lock, "locked domain").count, 1, lock.stderr)
        XCTAssertTrue(lines(lock, "locked domain").allSatisfy { $0.contains("operation=lock") }, lock.stderr)
        XCTAssertEqual(lines(again, "unlocked domain").count, 1, again.stderr)
        for r in [unlock, lock, again] {
            XCTAssertFalse(r.stderr.contains(passphrase), "the passphrase reached the log: \(r.stderr)")
            XCTAssertFalse(r.stderr.contains("horse"), "part of the passphrase reached the log")
            XCTAssertTrue(r.out.isEmpty, "logs go to standard error only")
        }
        let bad = try dpctl(["status", "--log-level", "loud"])
        XCTAssertEqual(bad.status, 64, bad.stderr)
        XCTAssertTrue(bad.stderr.hasPrefix("dpctl: error: unknown log level 'loud'"), bad.stderr)
        print("dpctl --log-level debug: unlock wrote \(unlock.stderr.split(separator: "\n").count) stderr lines, lock "
            + "\(lock.stderr.split(separator: "\n").count), trace unlock \(again.stderr.split(separator: "\n").count); no passphrase in any; "
            + "e.g. \(lines(unlock, "unlocked domain").first ?? "-")")
    }

    func testWrongPassphraseGivesItsExitCodeAndLeavesTheKeybagByteIdentical() throws {
        try initDomain()
        let keybag = try bytes(home + "/keybag")
        let secretFile = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: devices).first)
        let device = try bytes(devices + "/" + secretFile)
        try write("correct horse Battery\n", to: dir + "/wrong")
        let r = try dpctl(["unlock", "--passphrase-file", dir + "/wrong"])
        XCTAssertEqual(r.status, 77, r.stderr)
        XCTAssertTrue(r.stderr.hasPrefix("dpctl: error: wrong passphrase"), r.stderr)
        XCTAssertTrue(r.stderr.contains("dpctl: hint:") && r.stderr.contains("dpctl recover"), r.stderr)
        let p = try dpctl(["passwd", "--passphrase-file", dir + "/wrong", "--new-passphrase-file", passphraseFile])
        XCTAssertEqual(p.status, 77, p.stderr)
        let rot = try dpctl(["rotate", "--class", "A", "--passphrase-file", dir + "/wrong", dir])
        XCTAssertEqual(rot.status, 77, rot.stderr)
        XCTAssertEqual(try bytes(home + "/keybag"), keybag)
        XCTAssertEqual(try bytes(devices + "/" + secretFile), device)
        XCTAssertEqual(try unlocked(), [false, false, false, true])
        XCTAssertFalse(FileManager.default.fileExists(atPath: home + "/rotation.journal"))
    }

    func testTimeoutLocksByItselfThroughTheKernelsKeyExpiry() throws {
        try initDomain()
        // The files first, so a slow machine (or a sanitizer build) cannot run out the 3 s before they exist.
        try ok(["unlock", "--passphrase-file", passphraseFile])
        try ok(["put", "--class", "complete", dir + "/a"], input: Data("a".utf8))
        try ok(["put", "--class", "C", dir + "/c"], input: Data("c".utf8))
        let before = Date().timeIntervalSince1970
        try ok(["unlock", "--passphrase-file", passphraseFile, "--timeout", "3s"])  // unlocking again sets the timeout
        let after = Date().timeIntervalSince1970
        let deadline = Double(try XCTUnwrap(try status()["autoLockDeadline"] as? Int))
        XCTAssertTrue(deadline >= before + 3 - 1 && deadline <= after + 3 + 1, "deadline \(deadline) not 3 s after the unlock (\(before)…\(after))")
        let locked = try eventually(within: .seconds(20)) { try dpctl(["cat", dir + "/a"]).status == 75 }
        XCTAssertTrue(locked, "class complete did not lock by itself after --timeout 3s")
        XCTAssertEqual(try unlocked(), [false, false, true, true])
        XCTAssertEqual(try ok(["cat", dir + "/c"]).out, "c", "class C has no timeout: it stays until lock --evict-all")
        XCTAssertTrue(try status()["autoLockDeadline"] is NSNull)
        // Unlocking again replaces the expired keys.
        try ok(["unlock", "--passphrase-file", passphraseFile])
        XCTAssertEqual(try ok(["cat", dir + "/a"]).out, "a")
    }

    func testPassphraseNeverComesFromArgvOrWithoutATerminal() throws {
        try initDomain()
        let argv = try dpctl(["unlock", "correct horse battery"])
        XCTAssertEqual(argv.status, 64, argv.stderr)
        XCTAssertTrue(argv.stderr.hasPrefix("dpctl: error:"), argv.stderr)
        // setsid: no controlling terminal, so there is nobody to ask.
        let noTTY = try run("/usr/bin/setsid", ["--wait", dpctlPath, "unlock"])
        XCTAssertEqual(noTTY.status, 64, noTTY.stderr)
        XCTAssertTrue(noTTY.stderr.contains("no terminal") && noTTY.stderr.contains("--passphrase-fd"), noTTY.stderr)
        let wipe = try run("/usr/bin/setsid", ["--wait", dpctlPath, "wipe"])
        XCTAssertEqual(wipe.status, 64, wipe.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: home + "/keybag"))
        XCTAssertEqual(try dpctl(["unlock", "--timeout", "soon", "--passphrase-file", passphraseFile]).status, 64)
    }

    func testMissingDomainAndRefusedKeyringGiveTheirExitCodes() throws {
        let none = try dpctl(["status"])
        XCTAssertEqual(none.status, 66, none.stderr)
        XCTAssertTrue(none.stderr.contains("dpctl init"), none.stderr)
        try initDomain()
        XCTAssertEqual(try dpctl(["init", "--passphrase-file", passphraseFile, "--kdf-preset", "minimum"]).status, 73)
        let deny = try builtProduct("keyctl-deny")
        let refused = try run(deny, [dpctlPath, "status"])
        XCTAssertEqual(refused.status, 69, refused.stderr)
        XCTAssertEqual(refused.stderr.components(separatedBy: "dpctl: error:").count, 2, "one clear error: \(refused.stderr)")
        XCTAssertTrue(refused.stderr.contains("kernel keyring is refused") && refused.stderr.contains("seccomp"), refused.stderr)
    }

    func testHelpDocumentsExitCodesAndCompletionsAreGenerated() throws {
        let help = try ok(["--help"]).out
        for code in ["64", "65", "66", "69", "74", "75", "77"] { XCTAssertTrue(help.contains("  \(code) "), "exit code \(code) missing from --help") }
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs").standardized.path
        for shell in ["bash", "zsh", "fish"] {
            let script = try ok(["--generate-completion-script", shell]).out
            XCTAssertTrue(script.contains("unlock") && script.contains("set-class"), shell)
            let committed = try String(contentsOfFile: "\(docs)/completions/dpctl.\(shell)", encoding: .utf8)
            XCTAssertEqual(committed, script, "docs/completions/dpctl.\(shell) is stale; regenerate it (Sources/dpctl/README.md)")
        }
        let manual = try String(contentsOfFile: "\(docs)/man/dpctl.1", encoding: .utf8)
        for command in ["init", "unlock", "lock", "status", "rotate", "set-class"] { XCTAssertTrue(manual.contains(command), "man page lacks \(command)") }
    }
}
