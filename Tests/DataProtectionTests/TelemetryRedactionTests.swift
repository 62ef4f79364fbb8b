// No key byte, passphrase or plaintext reaches a log: every line of a full workload, captured at trace, is searched.
import DataProtectionFormat
import DataProtectionTelemetry
import FileCoordination
import Foundation
import DataProtection
// @testable: reads the raw class keys (class D's from the keybag cache) and the recovery key's bytes to search the logs for them.
@testable import DataProtectionKeys
// @testable: unwraps per-file keys through the file layer's internal header unwrapping, to search the logs for them.
@testable import DataProtectionFiles
import Logging
import MetricsTestKit
import ProtectionCrypto
import XCTest

final class TelemetryRedactionTests: DomainTestCase {
    static let passphrase = "telemetry passphrase 7f3a9c"

    /// The full workload (create, unlock, files of every class, a container with a purge, a coordination wait and a
    /// time-out, a tamper detection, a lock, a refusal, a recovery) logs its events, and no line or metadata value holds
    /// a class key, a per-file key, the passphrase, the recovery key or any plaintext marker.
    func testNoKeyPassphraseOrPlaintextReachesTheLogAtTrace() throws {
        let capture = LogCapture()
        let run = try workload(capture)
        let lines = capture.all
        print("telemetry workload: \(lines.count) log lines, \(run.needles.count) needles")

        // The log holds the events (so the search below searches something).
        for message in [
            "created domain", "unlock refused", "unlocked domain", "created protected file", "opened protected file", "closed protected file",
            "purged item", "purged container", "coordination granted", "coordination timed out waiting for other holders",
            "tamper detected: authentication failed", "lock sequence done", "revoked this process's key holders", "locked domain",
            "refused: class locked", "recovered tree", "recovered domain: new passphrase, device secret rotated",
        ] {
            XCTAssertFalse(capture.lines(message).isEmpty, "no log line '\(message)'")
        }
        let unlock = try XCTUnwrap(capture.lines("unlocked domain").first)
        XCTAssertEqual(unlock.metadata["domain"], "\(run.domainID)")
        XCTAssertNotNil(unlock.metadata["duration_ms"])
        let tamper = try XCTUnwrap(capture.lines("tamper detected: authentication failed").first)
        XCTAssertEqual(tamper.level, .error)
        XCTAssertEqual(tamper.metadata["class"], "complete")
        XCTAssertEqual(tamper.metadata["path"], run.tamperedPath)
        let timeout = try XCTUnwrap(capture.lines("coordination timed out waiting for other holders").first)
        XCTAssertEqual(timeout.level, .warning)
        XCTAssertEqual(timeout.metadata["error"], "timedOut")
        XCTAssertTrue(capture.lines("created protected file").contains { $0.metadata["class"] == "completeUnlessOpen" && $0.metadata["generation"] == "1" })

        let found = Self.search(lines, for: run.needles)
        XCTAssertEqual(found, [], "secrets or plaintext in the log")
        print("telemetry workload: \(found.count) secrets found in \(lines.count) lines")

        // The search can fail: a line carrying a key in any of the renderings searched for is found.
        let key = run.needles.first { $0.0.hasPrefix("class key") }!
        for leak in Self.renderings(of: key.1) {
            let line = LogCapture.Line(level: .trace, message: "x", metadata: ["leak": leak])
            XCTAssertEqual(Self.search([line], for: [key]), [key.0], "a leak rendered as \(leak) was not found")
        }
    }

    struct Run {
        var needles: [(String, [UInt8])] = []
        var domainID = ""
        var tamperedPath = ""
    }

    /// Runs the whole workload with `capture`'s logger at trace; returns the secrets and plaintext to search for.
    func workload(_ capture: LogCapture) throws -> Run {
        var run = Run()
        let logger = capture.logger(level: .trace)
        var recoveryText = ""
        let domain = try ProtectionDomain.create(
            at: location, passphrase: try secret(Self.passphrase), kdf: .minimumForTests, keyStore: store, logger: logger, metrics: TestMetrics()
        ) { (key) throws(ProtectionError) in
            recoveryText = (try? key.withText { String(decoding: $0, as: UTF8.self) }) ?? ""
        }
        run.domainID = "\(domain.id)"
        assertProtectionError([.wrongPassphrase]) { try domain.unlock(passphrase: try self.secret("wrong \(Self.passphrase)")) }
        run.needles.append(("wrong passphrase", Array("wrong \(Self.passphrase)".utf8)))
        try domain.unlock(passphrase: try secret(Self.passphrase))
        let files = root + "/files"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)

        // Files in every class: whole-file writes and reads, and a handle's writes, reads and close.
        var paths: [String] = []
        for c in ProtectionClass.allCases {
            let marker = "PLAINTEXT-MARKER-\(c)-\(UUID().uuidString)"
            run.needles.append(("plaintext marker of \(c)", Array(marker.utf8)))
            let whole = "\(files)/\(c)-whole"
            try domain.files.write(Array((marker + " whole").utf8), to: whole, protection: c)
            XCTAssertEqual(try domain.files.read(whole), Array((marker + " whole").utf8))
            let h = try domain.files.create("\(files)/\(c)-handle", protection: c)
            try h.write(Array(marker.utf8), at: 0)
            try h.append(Array(repeating: 0x41, count: 9000))
            XCTAssertEqual(try h.read(at: 0, count: marker.utf8.count), Array(marker.utf8))
            h.close()
            paths += [whole, "\(files)/\(c)-handle"]
        }

        // A container with purgeable caches, purged.
        let appRoot = root + "/app"
        let app = try Container.create(at: appRoot, keys: domain.keys)
        let cacheMarker = "PLAINTEXT-MARKER-cache-\(UUID().uuidString)"
        run.needles.append(("plaintext marker of the cache", Array(cacheMarker.utf8)))
        try app.write(Array(cacheMarker.utf8), to: "Library/Caches/blob")
        try app.write(Array(cacheMarker.utf8), to: "Documents/note")
        paths += [appRoot + "/Library/Caches/blob", appRoot + "/Documents/note"]
        for p in paths { run.needles.append(("per-file key of \(p)", try perFileKey(domain.files, p).exposedForTest())) }
        app.close()
        let purge = try Purge.run(containerAt: appRoot, options: PurgeOptions(telemetry: domain.telemetry))
        XCTAssertEqual(purge.removed.map(\.path), ["Library/Caches/blob"])

        // A coordination that waits and is granted, and one that times out behind a writer.
        try coordinationWaitAndTimeOut(domain, in: files)

        // A repair pass over the files (nothing to repair; the totals are logged).
        _ = try domain.files.recoverTree(files)

        // A tamper detection: one byte of a chunk flipped.
        run.tamperedPath = "\(files)/complete-whole"
        var bytes = try readBytes(run.tamperedPath)
        bytes[FileHeader.size + 30] ^= 0x01
        try writeBytes(bytes, run.tamperedPath)
        assertProtectionError([.authenticationFailed]) { _ = try domain.files.read(run.tamperedPath) }

        // The class keys, read while unlocked; then the lock, a refusal, and a recovery.
        for c in [ProtectionClass.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication] {
            guard let s = try domain.store.secret(c, 1) else { throw ProtectionError(.locked, "class \(c) is not in the key store after unlock") }
            run.needles.append(("class key \(c)", s.exposedForTest()))
        }
        let none = try XCTUnwrap(try domain.cache.noneKey(1)?.secret)
        run.needles.append(("class key none", none.secret.exposedForTest()))
        try domain.lock(grace: .zero)
        assertProtectionError([.locked]) { _ = try domain.files.read("\(files)/complete-handle") }
        let recovery = try RecoveryKey(text: try secret(recoveryText))
        run.needles.append(("recovery key", recovery.key.exposedForTest()))
        run.needles.append(("recovery key text", Array(recoveryText.utf8)))
        run.needles.append(("passphrase", Array(Self.passphrase.utf8)))
        _ = try ProtectionDomain.recover(
            at: location, recoveryKey: recovery, newPassphrase: try secret("new \(Self.passphrase)"), kdf: .minimumForTests, keyStore: store, logger: logger)
        run.needles.append(("new passphrase", Array("new \(Self.passphrase)".utf8)))
        XCTAssertEqual(Set(run.needles.map(\.1)).count, run.needles.count, "needles must be distinct")
        return run
    }

    /// A reader that waits for a writer and is granted, then one that times out behind a writer holding on.
    private func coordinationWaitAndTimeOut(_ domain: ProtectionDomain, in directory: String) throws {
        let coordination = try CoordinationDomain(root: URL(fileURLWithPath: directory))
        let item = URL(fileURLWithPath: directory + "/coordinated")
        let reader = FileCoordinator(domain: coordination, timeout: .milliseconds(300), telemetry: domain.telemetry)
        let holder = FileCoordinator(domain: coordination)
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? holder.coordinate(writingItemAt: item) { _ in
                held.signal()
                release.wait()
            }
            done.signal()
        }
        held.wait()
        XCTAssertThrowsError(try reader.coordinate(readingItemAt: item) { _ in }) { error in
            XCTAssertEqual((error as? CoordinationError)?.code, .timedOut)
        }
        release.signal()
        done.wait()
        try reader.coordinate(readingItemAt: item) { _ in }
    }

    /// The per-file key of `path`, unwrapped with its class key inside `ClassKeys.admit` (as KeyResidueTests do).
    private func perFileKey(_ files: ProtectedFiles, _ path: String) throws -> SecretBytes {
        let raw = Array(try readBytes(path)[0..<FileHeader.size])
        let header = try FileHeader.parse(raw)
        return try files.keys.admit(header.protectionClass, via: .filesOpen) { (access, _) throws(ProtectionError) in
            try files.unwrapFileKey(header, raw: raw, access)
        }
    }

    /// Ways a secret could be printed: hex (both cases), base64, a Swift array, and the first 8 bytes as hex or array (a
    /// truncated dump); text needles (passphrases, markers) are searched as text too, key needles also as raw bytes.
    static func renderings(of secret: [UInt8]) -> [String] {
        let head = Array(secret.prefix(8))
        let hex = secret.map { String(format: "%02x", $0) }.joined()
        return [
            hex, hex.uppercased(), Data(secret).base64EncodedString(), "\(secret)",
            head.map { String(format: "%02x", $0) }.joined(), "\(head)".dropLast().description,
        ]
    }

    /// The names of the `needles` found in any line's message or metadata key or value, in any rendering.
    static func search(_ lines: [LogCapture.Line], for needles: [(String, [UInt8])]) -> [String] {
        var found: [String] = []
        for (what, secret) in needles {
            let isText = what.contains("marker") || what.contains("passphrase") || what.contains("text")
            let forms = renderings(of: secret) + (isText ? [String(decoding: secret, as: UTF8.self)] : [])
            let raw = Array(secret.prefix(8))
            let hit = lines.contains { line in
                let texts = [line.message] + line.metadata.flatMap { [$0.key, $0.value] }
                return texts.contains { t in forms.contains { t.contains($0) } || (!isText && contains(Array(t.utf8), raw)) }
            }
            if hit { found.append(what) }
        }
        return found
    }
}
