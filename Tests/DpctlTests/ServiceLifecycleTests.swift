import Foundation
import DataProtection
// @testable: derives per-file content and header keys (FileKeys) to scan the worker's memory for them.
@testable import DataProtectionFiles
import ProtectionCrypto
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM to a ServiceGroup running DataProtectionService while its writer writes: nothing lost, nothing torn, no
/// key left in the process's memory after the shutdown (the worker pauses after it, so its memory can be read).
final class ServiceLifecycleTests: DpctlTestCase {
    /// The worker's standard output, line by line as it comes.
    final class Lines: @unchecked Sendable {  // every access holds `lock`
        private let lock = NSCondition()
        private var lines: [String] = []
        private var partial = ""

        func feed(_ data: Data) {
            lock.lock()
            partial += String(decoding: data, as: UTF8.self)
            while let nl = partial.firstIndex(of: "\n") {
                lines.append(String(partial[..<nl]))
                partial = String(partial[partial.index(after: nl)...])
            }
            lock.broadcast()
            lock.unlock()
        }

        /// Waits (up to `seconds`) until `done` holds for the lines so far; returns them.
        func wait(seconds: Double, until done: ([String]) -> Bool) -> [String] {
            let deadline = Date(timeIntervalSinceNow: seconds)
            lock.lock()
            defer { lock.unlock() }
            while !done(lines), lock.wait(until: deadline) {}
            return lines
        }
    }

    func testSIGTERMDuringWritesLosesNothingTearsNothingAndLeavesNoKey() throws {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let work = dir + "/work"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try builtProduct("service-worker"))
        p.arguments = [home, devices, work]
        p.environment = environment
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        let lines = Lines()
        output.fileHandleForReading.readabilityHandler = { lines.feed($0.availableData) }
        try p.run()
        defer {
            try? input.fileHandleForWriting.close()
            p.waitUntilExit()
            output.fileHandleForReading.readabilityHandler = nil
        }
        // Running: at least 20 acknowledged whole-file writes and journaled appends.
        let running = lines.wait(seconds: 60) { $0.filter { $0.hasPrefix("J ") }.count >= 20 || $0.contains { $0.hasPrefix("FAILED") } }
        XCTAssertFalse(running.contains { $0.hasPrefix("FAILED") }, running.joined(separator: "\n"))

        // Control: while it writes, the scan finds the open log's keys in its memory.
        let domain = try ProtectionDomain.open(at: DomainLocation(home: home, deviceDirectory: devices), keyStore: .kernel(.session))
        let logNeedles = try keyNeedles(domain, ["\(work)/log"])
        let before = find(logNeedles, in: try memory(of: p.processIdentifier))
        XCTAssertFalse(before.isEmpty, "the memory scan cannot see the open log's keys that are there")

        kill(p.processIdentifier, SIGTERM)
        let said = lines.wait(seconds: 60) { $0.contains("shutdown-complete") || $0.contains { $0.hasPrefix("FAILED") } }
        XCTAssertTrue(said.contains("shutdown-complete"), said.suffix(5).joined(separator: "\n"))

        // No key left: the class key, and every file's per-file, content and header keys (and AES schedules).
        let names = try FileManager.default.contentsOfDirectory(atPath: work)
        var needles = try keyNeedles(domain, names.map { "\(work)/\($0)" })
        guard let classKey = try domain.store.secret(.complete, 1) else { return XCTFail("class complete is not in the keyring") }
        needles.append(("class key complete", classKey.exposedForTest()))
        let after = find(needles, in: try memory(of: p.processIdentifier))
        XCTAssertEqual(after, [], "key material left in the worker's memory after shutdown: \(after.sorted())")
        try input.fileHandleForWriting.close()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)

        // Nothing lost: every acknowledged write is there and reads back; nothing torn: every file verifies.
        let acked = said.compactMap { $0.hasPrefix("W ") ? Int($0.dropFirst(2)) : nil }
        let records = said.compactMap { $0.hasPrefix("J ") ? Int($0.dropFirst(2)) : nil }.max() ?? 0
        for i in acked { XCTAssertEqual(try domain.files.read("\(work)/w-\(i)"), contents(i), "w-\(i) was acknowledged") }
        for name in names where name != "log" {
            XCTAssertTrue(name.hasPrefix("w-") && Int(name.dropFirst(2)) != nil, "a leftover file: \(name)")
            XCTAssertNoThrow(try domain.files.read("\(work)/\(name)"), "\(name) does not verify")
        }
        let log = try domain.files.read("\(work)/log")
        XCTAssertGreaterThanOrEqual(log.count, records * 64, "the log lost committed records")
        XCTAssertEqual(log.count % 64, 0, "the log holds a partial record")
        for k in 0..<(log.count / 64) { XCTAssertEqual(Array(log[k * 64..<(k + 1) * 64]), record(k), "log record \(k)") }
        let refusals = said.filter { $0.hasPrefix("R ") }
        XCTAssertEqual(refusals, ["R shuttingDown"], "the writer's next write after shutdown is refused with .shuttingDown")
        print("service shutdown under SIGTERM: \(acked.count) whole-file writes and \(records) journaled appends acknowledged, "
            + "\(names.count) files verified, \(log.count / 64) log records; \(needles.count) keys sought, \(before.count) found before, \(after.count) after")
    }

    /// The per-file key of each protected file among `paths`, and the keys derived from it (other files, such as a
    /// journal left beside an unclosed handle, have none; the test reports them as leftovers).
    func keyNeedles(_ domain: ProtectionDomain, _ paths: [String]) throws -> [(String, [UInt8])] {
        var needles: [(String, [UInt8])] = []
        for path in paths {
            let name = (path as NSString).lastPathComponent
            guard let fk = try? domain.files.perFileKey(path) else { continue }
            needles.append(("per-file key of \(name)", fk.exposedForTest()))
            let content = try KeyDerivation.subkey(of: fk, context: FileKeys.contentContext, id: 1)
            let mac = try KeyDerivation.subkey(of: fk, context: FileKeys.headerContext, id: 1)
            needles.append(("content key of \(name)", content.exposedForTest()))
            needles.append(("header key of \(name)", mac.exposedForTest()))
            for aes in try aesKeys(of: path, content: content) { needles.append(("AES round keys 2–3 of \(name)", AESKeySchedule.roundKeys2And3(of: aes))) }
        }
        return needles
    }

    /// The worker's `w-<i>` contents and log records (service-worker/main.swift).
    func contents(_ i: Int) -> [UInt8] { Array(String(repeating: "write \(i);", count: 20_480 / 8).utf8.prefix(20_480)) }
    func record(_ k: Int) -> [UInt8] { Array("record \(k)".padding(toLength: 63, withPad: ".", startingAt: 0).utf8) + [10] }
}
