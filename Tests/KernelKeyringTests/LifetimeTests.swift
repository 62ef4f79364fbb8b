// The end of a key's life: timeout expiry, invalidate, unlink, revoke.
import Foundation
import KernelKeyring
import XCTest

final class LifetimeTests: KeyringTestCase {
    func testTimeoutExpiresTheKey() throws {
        let name = uniqueName()
        let key = try addKey(randomPayload(), named: name)
        try keyring.setTimeout(key, seconds: 1)
        var buffer = [UInt8](repeating: 0, count: 32)
        XCTAssertEqual(try buffer.withUnsafeMutableBytes { try keyring.read(key, into: $0) }, 32, "the key expired early")

        // Poll the condition with a bounded deadline; the kernel's clock decides when it flips.
        let deadline = ContinuousClock.now + .seconds(10)
        var observed: KeyringError.Code?
        while observed == nil, ContinuousClock.now < deadline {
            do {
                _ = try buffer.withUnsafeMutableBytes { try keyring.read(key, into: $0) }
                usleep(20_000)
            } catch let error as KeyringError {
                observed = error.code
            }
        }
        XCTAssertTrue(observed == .expired || observed == .notFound, "key still readable after its 1 s timeout: \(String(describing: observed))")
        let searched = code { try keyring.search(session, type: .user, description: name) }
        XCTAssertTrue(searched == .expired || searched == .notFound, "\(String(describing: searched))")
    }

    func testTimeoutOfZeroClearsAnEarlierTimeout() throws {
        let key = try addKey(randomPayload(), named: uniqueName())
        try keyring.setTimeout(key, seconds: 1)
        try keyring.setTimeout(key, seconds: 0)
        // /proc/keys shows "perm" in the expiry column for a key without a timeout.
        let line = try String(contentsOfFile: "/proc/keys", encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix(String(format: "%08x ", key.rawValue)) }
        XCTAssertNotNil(line)
        XCTAssertTrue(line?.contains(" perm ") ?? false, String(line ?? ""))
    }

    func testInvalidateMakesTheKeyUnreachableAtOnce() throws {
        let name = uniqueName()
        let key = try addKey(randomPayload(), named: name)
        try keyring.invalidate(key)
        var buffer = [UInt8](repeating: 0, count: 32)
        XCTAssertEqual(code {
            try buffer.withUnsafeMutableBytes { try keyring.read(key, into: $0) }
        }, .notFound)
        XCTAssertEqual(code { try keyring.search(session, type: .user, description: name) }, .notFound)
        XCTAssertEqual(code { try keyring.invalidate(key) }, .notFound)
    }

    func testUnlinkRemovesOneLinkAndTheLastLinkDestroysTheKey() throws {
        let ring = try keyring.keyring(named: uniqueName(), in: session, permissions: .privateToOwner)
        track(ring)
        let key = try addKey(randomPayload(), named: uniqueName())
        try keyring.link(key, into: ring)
        XCTAssertEqual(try keyring.children(of: ring), [key])

        try keyring.unlink(key, from: session)
        XCTAssertFalse(try keyring.children(of: session).contains(key))
        XCTAssertEqual(try keyring.payloadLength(of: key), 32, "still linked from the other keyring")

        try keyring.unlink(key, from: ring)
        XCTAssertEqual(try keyring.children(of: ring), [])
        XCTAssertEqual(code { try keyring.unlink(key, from: ring) }, .notFound, "no link left to remove (ENOENT)")
        // The kernel drops the last reference after an RCU grace period: poll with a deadline.
        let deadline = ContinuousClock.now + .seconds(10)
        var gone = false
        while !gone, ContinuousClock.now < deadline {
            do {
                _ = try keyring.payloadLength(of: key)
                usleep(1_000)
            } catch let error as KeyringError {
                XCTAssertEqual(error.code, .notFound)
                gone = true
            }
        }
        XCTAssertTrue(gone, "the key outlived its last link")
    }

    func testRevokedKeyFailsEveryUseWithRevoked() throws {
        let key = try addKey(randomPayload(), named: uniqueName())
        try keyring.revoke(key)
        XCTAssertEqual(code { try keyring.payloadLength(of: key) }, .revoked)
        XCTAssertEqual(code { try keyring.setTimeout(key, seconds: 5) }, .revoked)
    }
}
