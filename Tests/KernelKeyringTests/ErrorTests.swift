// Kernel errors reach callers as KeyringError codes with messages that name the key and the fix.
import Foundation
// @testable: feeds internal KeyringError.translating errnos the kernel cannot be made to return on demand (EDQUOT, an unrefused EACCES).
@testable import KernelKeyring
import XCTest

final class ErrorTests: KeyringTestCase {
    func testMissingKeyIsNotFoundAndNamesTheDescription() throws {
        let name = uniqueName()
        let failure = error { try keyring.search(session, type: .user, description: name) }
        XCTAssertEqual(failure?.code, .notFound)
        XCTAssertEqual(failure?.errno, ENOKEY)
        XCTAssertEqual(failure?.operation, "keyctl_search")
        XCTAssertEqual(failure?.keyDescription, name)
        XCTAssertTrue(failure?.message.contains("user key '\(name)'") ?? false, failure?.message ?? "")
        XCTAssertTrue(failure?.message.contains("add it again") ?? false, failure?.message ?? "")

        XCTAssertEqual(code {
            try keyring.payloadLength(of: KeySerial(rawValue: Int32.max))
        }, .notFound)
    }

    func testNulInANameIsRejectedBeforeTheKernelSeesIt() throws {
        let failure = error {
            try [UInt8](repeating: 1, count: 4).withUnsafeBytes { bytes in
                try keyring.add(.user, description: "dp:a\0b", payload: bytes, to: session, permissions: .privateToOwner)
            }
        }
        XCTAssertEqual(failure?.code, .invalidArgument)
        XCTAssertEqual(failure?.errno, 0)
        XCTAssertTrue(failure?.message.contains("NUL") ?? false)
    }

    func testKernelRejectionsAreInvalidArgument() throws {
        let payload = randomPayload()
        func add(_ type: KeyType, _ name: String, _ bytes: [UInt8]) -> KeyringError.Code? {
            code {
                try bytes.withUnsafeBytes { buffer in
                    try keyring.add(type, description: name, payload: buffer, to: session, permissions: .privateToOwner)
                }
            }
        }
        XCTAssertEqual(add(.user, "", payload), .invalidArgument, "empty description")
        XCTAssertEqual(add(.user, uniqueName(), [UInt8](repeating: 0, count: 32768)), .invalidArgument, "user payload over 32767 bytes")
        XCTAssertEqual(add(KeyType(rawValue: "no-such-type"), uniqueName(), payload), .invalidArgument, "unknown type (ENODEV)")
        XCTAssertEqual(add(.logon, "no-prefix", payload), .invalidArgument, "logon key without 'prefix:'")

        let key = try addKey(payload, named: uniqueName())
        let notAKeyring = error { try keyring.search(key, type: .user, description: "x") }
        XCTAssertEqual(notAKeyring?.code, .invalidArgument, "searching a user key as if it were a keyring")
        XCTAssertEqual(notAKeyring?.errno, ENOTDIR)
    }

    func testLogonKeyIsWriteOnly() throws {
        let key = try addKey(randomPayload(), named: "kernelkeyring-test:\(UUID().uuidString)", type: .logon)
        let failure = error { try keyring.payloadLength(of: key) }
        XCTAssertEqual(failure?.code, .io(EOPNOTSUPP))
        XCTAssertTrue(failure?.message.contains("logon key can never be read back") ?? false, failure?.message ?? "")
    }

    func testErrnoTable() {
        let table: [(Int32, KeyringError.Code)] = [
            (ENOKEY, .notFound), (ENOENT, .notFound), (EACCES, .permissionDenied), (EPERM, .permissionDenied),
            (EKEYEXPIRED, .expired), (EKEYREVOKED, .revoked), (EDQUOT, .quotaExceeded), (ENOSYS, .unavailable),
            (EINVAL, .invalidArgument), (ENOTDIR, .invalidArgument), (ENODEV, .invalidArgument), (ENOMEM, .io(ENOMEM)),
        ]
        for (errno, expected) in table {
            XCTAssertEqual(KeyringError.Code(errno: errno), expected, KeyringError.errnoName(errno))
        }
    }

    func testQuotaMessageNamesTheSysctlsToRaise() {
        let failure = KeyringError.translating(
            errno: EDQUOT, operation: "add_key", syscall: .addKey,
            subject: KeyringSubject(type: .user, description: "dp:classA"))
        XCTAssertEqual(failure.code, .quotaExceeded)
        XCTAssertTrue(failure.message.hasPrefix("add_key on user key 'dp:classA' failed (EDQUOT)"), failure.message)
        XCTAssertTrue(failure.message.contains("/proc/sys/kernel/keys/maxkeys"), failure.message)
    }

    func testGenuinePermissionDeniedIsNotMistakenForARefusedKeyring() {
        // Here the keyring works, so EACCES must stay permissionDenied after the refusal probe.
        let failure = KeyringError.translating(
            errno: EACCES, operation: "keyctl_read", syscall: .keyctl, subject: .serial(KeySerial(rawValue: 42)))
        XCTAssertEqual(failure.code, .permissionDenied)
        XCTAssertTrue(failure.message.contains("KeyPermissions.privateToOwner"), failure.message)
    }
}
