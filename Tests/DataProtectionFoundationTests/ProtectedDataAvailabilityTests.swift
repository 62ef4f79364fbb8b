// `isProtectedDataAvailable` before the first unlock since boot: false, in this process and in the real dpctl in
// another one, because every reader takes its answer from the live lock's one state page.
import DataProtectionFoundation
import DataProtection
import ProtectionCrypto
import XCTest

final class ProtectedDataAvailabilityTests: FoundationTestCase {
    /// The domain is created in a fresh session keyring and never unlocked in setUp.
    override var unlocksAtSetUp: Bool { false }

    /// Whether `dpctl status` in another process (environment `overrides`) says class `complete` is unlocked.
    func dpctlSaysCompleteUnlocked(_ overrides: [String: String] = [:], file: StaticString = #filePath, line: UInt = #line) throws -> Bool {
        let r = try dpctl(["status", "--json"], overrides: overrides, file: file, line: line)
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], file: file, line: line)
        let classes = try XCTUnwrap(json["classes"] as? [[String: Any]], file: file, line: line)
        let complete = try XCTUnwrap(classes.first { $0["class"] as? String == ProtectionClass.complete.name }, file: file, line: line)
        return try XCTUnwrap(complete["unlocked"] as? Bool, file: file, line: line)
    }

    /// A new domain, no unlock yet (the state after a reboot): unavailable here and in `dpctl status`, and a
    /// `complete` write is refused as iOS refuses it. After `dpctl unlock` in another process: available here at
    /// once (the page is shared); after `dpctl lock`: unavailable; the same through this process's own unlock and
    /// lock. Against the old page, which a zeroed page meant "never locked", the first assertion failed.
    func testUnavailableBeforeTheFirstUnlockThenFollowsUnlockAndLockInEveryProcess() throws {
        let app = ProtectedApplication(context: context)
        var seen: [String] = []
        func check(_ expected: Bool, _ when: String, line: UInt = #line) throws {
            XCTAssertEqual(app.isProtectedDataAvailable, expected, "in this process, \(when)", line: line)
            XCTAssertEqual(try dpctlSaysCompleteUnlocked(line: line), expected, "dpctl status, \(when)", line: line)
            seen.append("\(when): \(app.isProtectedDataAvailable)")
        }
        try check(false, "before any unlock")
        assertCocoa(.fileWriteNoPermission, .locked) {
            try AppContext.withCurrent(context) { try Data("early".utf8).write(protectedTo: url("Documents/early.txt"), options: .completeFileProtection) }
        }
        try dpctlUnlock()
        try check(true, "after dpctl unlock")
        try dpctl(["lock", "--now"])
        try check(false, "after dpctl lock")
        try domain.unlock(passphrase: try SecretBytes(utf8: "pass"))
        try check(true, "after unlock here")
        try domain.lock(grace: .zero)
        try check(false, "after lock here")
        print("isProtectedDataAvailable: \(seen.joined(separator: "; "))")
    }

    /// A fresh runtime directory is the state after a reboot even where the keyring still holds the keys (a runtime
    /// directory wiped under a running session): the real dpctl there reports `complete` locked and refuses to read a
    /// `complete` file (exit 75, `.locked`), the same answer from the page for status and for reads; its `unlock` makes
    /// both say unlocked and its `lock` locked again.
    func testAFreshRuntimeDirectoryIsLockedUntilUnlockedThere() throws {
        try domain.unlock(passphrase: try SecretBytes(utf8: "pass"))
        let file = directory + "/doc"
        try domain.files.write(Array("kept".utf8), to: file, protection: .complete)
        let fresh = directory + "/run-after-reboot"
        XCTAssertEqual(mkdir(fresh, 0o700), 0)
        let after = ["XDG_RUNTIME_DIR": fresh]
        XCTAssertTrue(try dpctlSaysCompleteUnlocked(), "the runtime directory this process uses says unlocked")

        XCTAssertFalse(try dpctlSaysCompleteUnlocked(after), "a fresh runtime directory read as unlocked")
        let refused = try runProduct("dpctl", ["cat", file], overrides: after)
        XCTAssertEqual(refused.status, 75, refused.stderr)
        XCTAssertTrue(refused.stdout.isEmpty, "plaintext was written before the refusal")
        XCTAssertTrue(refused.stderr.contains("dpctl unlock"), refused.stderr)

        try dpctlUnlock(overrides: after)
        XCTAssertTrue(try dpctlSaysCompleteUnlocked(after))
        XCTAssertEqual(try dpctl(["cat", file], overrides: after).stdout, "kept")
        try dpctl(["lock", "--now"], overrides: after)
        XCTAssertFalse(try dpctlSaysCompleteUnlocked(after))
        print("fresh runtime directory: status locked and cat exit \(refused.status) before its first unlock; unlocked after; locked after lock")
    }
}
