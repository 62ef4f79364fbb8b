import DataProtection
import Foundation
import Locking
import Logging
import ProtectionCrypto
import XCTest

/// Counts the kernel keyring calls a domain makes: `Keyring` logs every call it makes at `trace`, as C source
/// (`keyctl_read(…) = 48`), through the logger the domain was opened with.
final class KeyringCalls: Sendable {
    private let lines = Locked<[String]>([])

    /// Keyring calls so far.
    var count: Int { lines.withLock { $0.count } }

    /// A `trace` logger that keeps the keyring calls it is given and drops every other line.
    var logger: Logger {
        var l = Logger(label: "dataprotection.test.keyring") { _ in Handler(calls: self) }
        l.logLevel = .trace
        return l
    }

    private struct Handler: LogHandler {
        let calls: KeyringCalls
        var metadata: Logger.Metadata = [:], logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? { get { metadata[key] } set { metadata[key] = newValue } }

        /// Keeps the keyring calls' lines (`Keyring+Call.swift` logs each as its C call).
        func log(event: LogEvent) {
            let m = "\(event.message)"
            if m.hasPrefix("keyctl_") || m.hasPrefix("add_key(") || m.hasPrefix("request_key(") { calls.lines.withLock { $0.append(m) } }
        }
    }
}

/// The per-process class-key cache (`ClassKeyCache`): a second open of a class A, B or C file does not go to the kernel
/// keyring while the live lock's epoch stands, and a `dpctl lock` in another process makes the next open fail.
final class ClassKeyCacheTests: DpctlTestCase {
    let classes: [ProtectionClass] = [.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication]

    func path(_ c: ProtectionClass) -> String { "\(dir)/\(c.name)" }

    /// Opens, reads and closes the file of class `c`; returns what it holds.
    func read(_ files: ProtectedFiles, _ c: ProtectionClass) throws -> [UInt8] {
        let h = try files.open(path(c))
        defer { h.close() }
        return try h.read(at: 0, count: 100)
    }

    /// Fails on the code before the cache: every open read the class key from the keyring (a `keyctl_read` each).
    func testSecondOpenDoesNotAskTheKeyringAndALockByAnotherProcessRefusesTheNextOpen() throws {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let calls = KeyringCalls()
        let domain = try ProtectionDomain.open(at: DomainLocation(home: home, deviceDirectory: devices), keyStore: .kernel(.session), logger: calls.logger)
        for c in classes {
            let h = try domain.files.create(path(c), protection: c)
            try h.write(Array(c.name.utf8), at: 0)
            h.close()
        }
        // Control: the counter sees the keyring. B's private key was never needed to create (B seals to its public
        // key), so its first open reads it.
        let beforeFirst = calls.count
        for c in classes { XCTAssertEqual(try read(domain.files, c), Array(c.name.utf8)) }
        let afterFirst = calls.count
        XCTAssertGreaterThan(afterFirst, beforeFirst, "the first open of a class B file did not reach the keyring: the counter sees nothing")

        // Second and later opens of every class: no keyring call at all.
        for _ in 0..<5 { for c in classes { XCTAssertEqual(try read(domain.files, c), Array(c.name.utf8)) } }
        XCTAssertEqual(calls.count, afterFirst, "later opens asked the keyring again (\(calls.count - afterFirst) calls)")

        // Another process locks: A and B are refused at the next open, although their keys were cached here.
        try ok(["lock", "--now"])
        for c in [ProtectionClass.complete, .completeUnlessOpen] {
            XCTAssertThrowsError(try read(domain.files, c), "\(c) opened after another process locked") { e in
                XCTAssertEqual((e as? ProtectionError)?.code, .locked, "\(c): \(e)")
            }
        }
        // C stays unlocked, and the lock's new epoch sent this process back to the keyring for its key.
        let beforeC = calls.count
        XCTAssertEqual(try read(domain.files, .completeUntilFirstUserAuthentication), Array("completeUntilFirstUserAuthentication".utf8))
        XCTAssertGreaterThan(calls.count, beforeC, "class C's key was used from before the lock without asking the keyring")

        // Another process unlocks: the keys come back from the keyring, and are kept again.
        try ok(["unlock", "--passphrase-file", passphraseFile])
        for c in classes { XCTAssertEqual(try read(domain.files, c), Array(c.name.utf8)) }
        let afterUnlock = calls.count
        for c in classes { XCTAssertEqual(try read(domain.files, c), Array(c.name.utf8)) }
        XCTAssertEqual(calls.count, afterUnlock)
    }

    /// A lock in this process wipes the cache before it returns, with the handles (the same revocation): the next open of
    /// a class A file is refused, and after unlock the key is read from the keyring again.
    func testALockInThisProcessEndsTheCachedKeys() throws {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let calls = KeyringCalls()
        let domain = try ProtectionDomain.open(at: DomainLocation(home: home, deviceDirectory: devices), keyStore: .kernel(.session), logger: calls.logger)
        let h = try domain.files.create(path(.complete), protection: .complete)
        try h.write(Array("complete".utf8), at: 0)
        h.close()
        XCTAssertEqual(try read(domain.files, .complete), Array("complete".utf8))
        _ = try domain.lock(grace: .zero)
        XCTAssertThrowsError(try read(domain.files, .complete)) { XCTAssertEqual(($0 as? ProtectionError)?.code, .locked, "\($0)") }
        try domain.unlock(passphrase: try SecretBytes(utf8: "correct horse battery"))
        let before = calls.count
        XCTAssertEqual(try read(domain.files, .complete), Array("complete".utf8))
        XCTAssertGreaterThan(calls.count, before, "the key cached before the lock was used after it")
    }
}
