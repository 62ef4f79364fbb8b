// Permissions set explicitly and enforced by the kernel, in this process and across uids.
import Foundation
import KernelKeyring
import XCTest

final class PermissionTests: KeyringTestCase {
    private let keyctl = "/usr/bin/keyctl"

    func testPrivateToOwnerIsPossessorAllPlusOwnerViewReadSearch() {
        XCTAssertEqual(KeyPermissions.privateToOwner.rawValue, 0x3f0b_0000)
        XCTAssertEqual(KeyPermissions.privateToOwner.description, "3f0b0000")
        XCTAssertTrue(KeyPermissions.privateToOwner.isDisjoint(with: [.groupAll, .otherAll]))
        XCTAssertTrue(KeyPermissions.privateToOwner.isDisjoint(with: [.userWrite, .userLink, .userSetAttribute]))
    }

    func testPermissionsSetExplicitlyAreEnforcedOnThePossessor() throws {
        let key = try addKey(randomPayload(), named: uniqueName())
        var buffer = [UInt8](repeating: 0, count: 32)
        XCTAssertEqual(try buffer.withUnsafeMutableBytes { try keyring.read(key, into: $0) }, 32)

        // The kernel lets a possessor read any key it may search, and possession itself needs
        // possessorSearch; so read is refused only once neither possessor search nor owner read is set.
        let withoutRead: KeyPermissions = [.possessorView, .possessorSetAttribute, .userView, .userSetAttribute]
        try keyring.setPermissions(withoutRead, of: key)
        XCTAssertEqual(try keyring.describe(key).permissions, withoutRead)
        let denied = error {
            try buffer.withUnsafeMutableBytes { try keyring.read(key, into: $0) }
        }
        XCTAssertEqual(denied?.code, .permissionDenied)
        XCTAssertEqual(denied?.errno, EACCES)

        try keyring.setPermissions(.privateToOwner, of: key)
        XCTAssertEqual(try buffer.withUnsafeMutableBytes { try keyring.read(key, into: $0) }, 32)
    }

    /// A same-uid process that does not possess the key reads it only because of the owner bits.
    func testSameUidNonPossessorReadsOnlyWithOwnerReadBit() throws {
        let payload = Array("same-uid-payload-\(UUID().uuidString)".utf8)
        let key = try addKey(payload, named: uniqueName())
        // `keyctl session -` runs the reader in a new session keyring, so it does not possess the key.
        let reader = try runChild(keyctl, ["session", "-", keyctl, "pipe", String(key.rawValue)])
        XCTAssertEqual(reader.status, 0, reader.stderr)
        XCTAssertEqual(Array(reader.stdout), payload)

        try keyring.setPermissions([.possessorAll, .userView], of: key)  // the kernel's default for a user key
        let refused = try runChild(keyctl, ["session", "-", keyctl, "pipe", String(key.rawValue)])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("Permission denied"), refused.stderr)
    }

    func testAnotherUidCannotReadAPrivateToOwnerKey() throws {
        let (key, payload) = try addKeyForCrossUidTest()
        let id = String(key.rawValue)

        let sameUid = try runChild(keyctl, ["session", "-", keyctl, "pipe", id])
        XCTAssertEqual(sameUid.status, 0, sameUid.stderr)
        XCTAssertEqual(Array(sameUid.stdout), payload)

        // Another uid in a session of its own (as any process not started by us is).
        let otherUid = ["-u", "dpkeytest", "--", keyctl, "session", "-", keyctl, "pipe", id]
        let viaRunuser = try runChild("/usr/sbin/runuser", otherUid)
        XCTAssertNotEqual(viaRunuser.status, 0)
        XCTAssertTrue(viaRunuser.stderr.contains("Permission denied"), viaRunuser.stderr)
        XCTAssertTrue(viaRunuser.stdout.isEmpty)

        let uid = try runChild("/usr/bin/id", ["-u", "dpkeytest"]).stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        let viaSetpriv = try runChild(
            "/usr/bin/setpriv",
            ["--reuid", uid, "--regid", uid, "--clear-groups", keyctl, "session", "-", keyctl, "pipe", id])
        XCTAssertNotEqual(viaSetpriv.status, 0)
        XCTAssertTrue(viaSetpriv.stderr.contains("Permission denied"), viaSetpriv.stderr)
        XCTAssertTrue(viaSetpriv.stdout.isEmpty)

        // Control: the same child succeeds once `other` may read, so the refusal above came from the mask.
        try keyring.setPermissions(KeyPermissions.privateToOwner.union([.otherView, .otherRead]), of: key)
        let allowed = try runChild("/usr/sbin/runuser", otherUid)
        XCTAssertEqual(allowed.status, 0, allowed.stderr)
        XCTAssertEqual(Array(allowed.stdout), payload)
    }

    /// The trap README.md warns about: possession follows the keyring, not the uid.
    func testChildThatDropsToAnotherUidKeepsPossessionThroughTheInheritedSession() throws {
        let (key, payload) = try addKeyForCrossUidTest()
        let inherited = try runChild("/usr/sbin/runuser", ["-u", "dpkeytest", "--", keyctl, "pipe", String(key.rawValue)])
        XCTAssertEqual(inherited.status, 0, "expected the kernel to grant possessor rights via the inherited session keyring: \(inherited.stderr)")
        XCTAssertEqual(Array(inherited.stdout), payload)
    }

    /// Skips unless root, makes sure the user dpkeytest exists, and adds a privateToOwner key.
    private func addKeyForCrossUidTest(
        _ function: String = #function
    ) throws -> (key: KeySerial, payload: [UInt8]) {
        guard getuid() == 0 else {
            throw XCTSkip("needs root: creating the throwaway user dpkeytest and switching to it; run `sudo swift test`")
        }
        try ensureThrowawayUser("dpkeytest")
        let payload = Array("payload-\(UUID().uuidString)".utf8)
        return (try addKey(payload, named: uniqueName(function)), payload)
    }

    private func ensureThrowawayUser(_ name: String) throws {
        if try runChild("/usr/bin/id", ["-u", name]).status == 0 { return }
        var created = try runChild("/usr/sbin/useradd", ["--system", "--no-create-home", name])
        // Exit 9 means the user or its group already exists: another test run created the user
        // meanwhile, or a deleted user left its group behind; then join that group.
        if created.status == 9, try runChild("/usr/bin/id", ["-u", name]).status != 0 {
            created = try runChild("/usr/sbin/useradd", ["--system", "--no-create-home", "-g", name, name])
        }
        XCTAssertTrue(created.status == 0 || created.status == 9, "useradd \(name) failed: \(created.stderr)")
    }
}
