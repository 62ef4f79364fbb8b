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

        // The kernel's clock decides when the key flips; poll it with a bounded deadline.
        let observed = firstFailure(within: .seconds(10)) {
            _ = try buffer.withUnsafeMutableBytes { try keyring.read(key, into: $0) }
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
        // Read to the end: /proc/keys reports size 0 and lists every key this uid may view (other suites' too).
        let proc = try XCTUnwrap(FileHandle(forReadingAtPath: "/proc/keys"))
        defer { try? proc.close() }
        let line = String(decoding: proc.readDataToEndOfFile(), as: UTF8.self)
            .split(separator: "\n").first { $0.hasPrefix(String(format: "%08x ", key.rawValue)) }
        XCTAssertNotNil(line)
        XCTAssertTrue(line?.contains(" perm ") ?? false, String(line ?? ""))
    }

    func testInvalidateMakesTheKeyUnusableAtOnce() throws {
        let name = uniqueName()
        let key = try addKey(randomPayload(), named: name)
        try keyring.invalidate(key)
        // Until the kernel's garbage collector has run, an invalidated key answers EKEYREVOKED.
        let gone: Set<KeyringError.Code> = [.notFound, .revoked]
        var buffer = [UInt8](repeating: 0, count: 32)
        let read = code { try buffer.withUnsafeMutableBytes { try keyring.read(key, into: $0) } }
        XCTAssertTrue(read.map(gone.contains) ?? false, "\(String(describing: read))")
        XCTAssertEqual(buffer, [UInt8](repeating: 0, count: 32))
        let searched = code { try keyring.search(session, type: .user, description: name) }
        XCTAssertTrue(searched.map(gone.contains) ?? false, "\(String(describing: searched))")
        // The garbage collector then removes it from every keyring that linked it.
        XCTAssertTrue(try eventually(within: .seconds(10)) { try !keyring.children(of: session).contains(key) })
        XCTAssertEqual(code { try keyring.payloadLength(of: key) }, .notFound)
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
        let gone = firstFailure(within: .seconds(10)) { _ = try keyring.payloadLength(of: key) }
        XCTAssertEqual(gone, .notFound, "the key outlived its last link")

    }

    func testRevokedKeyFailsEveryUseWithRevoked() throws {
        let key = try addKey(randomPayload(), named: uniqueName())
        try keyring.revoke(key)
        XCTAssertEqual(code { try keyring.payloadLength(of: key) }, .revoked)
        XCTAssertEqual(code { try keyring.setTimeout(key, seconds: 5) }, .revoked)
    }
}
