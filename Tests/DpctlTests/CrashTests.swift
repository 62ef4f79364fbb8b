import Foundation
import XCTest

/// A rotation killed with SIGKILL half way resumes, and no file is left without its key.
final class CrashTests: DpctlTestCase {
    func testRotationKilledHalfWayResumesWithEveryFileReadable() throws {
        try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        let files = dir + "/files"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
        let count = 2000
        for i in 0..<count { try Data("file \(i)".utf8).write(to: URL(fileURLWithPath: "\(files)/f\(i)")) }
        try ok(["protect", "--class", "complete", files])

        let p = Process()
        p.executableURL = URL(fileURLWithPath: dpctlPath)
        p.arguments = ["rotate", "--class", "complete", "--passphrase-file", passphraseFile, files]
        p.environment = environment
        p.standardError = FileHandle.nullDevice
        try p.run()
        // Kill it once the first batch (1,024 files) is recorded as done, well before the end.
        let journal = home + "/rotation.journal"
        let recorded = eventually(within: .seconds(60)) {
            ((try? String(contentsOfFile: journal, encoding: .utf8)) ?? "").contains("\ndone ")
        }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        XCTAssertTrue(recorded, "the journal never recorded a finished batch")
        XCTAssertEqual(p.terminationReason, .uncaughtSignal, "the rotation finished before it could be killed; the test did not test a crash")

        // After the crash: both generations kept, a mix of headers, every file readable.
        XCTAssertTrue(FileManager.default.fileExists(atPath: journal))
        let before = try XCTUnwrap(try status()["classes"] as? [[String: Any]])[0]
        XCTAssertEqual(before["generation"] as? Int, 2)
        XCTAssertEqual(before["generations"] as? [Int], [1, 2])
        let listing = try XCTUnwrap(try JSONSerialization.jsonObject(with: try ok(["ls", "--json", files]).stdout) as? [[String: Any]])
        let rewrapped = listing.filter { $0["generation"] as? Int == 2 }.count
        XCTAssertGreaterThanOrEqual(rewrapped, 1024)
        XCTAssertLessThan(rewrapped, count)
        for i in stride(from: 0, to: count, by: 97) { XCTAssertEqual(try ok(["cat", "\(files)/f\(i)"]).out, "file \(i)") }

        // Resume: no paths needed, the journal has them.
        let resumed = try ok(["rotate", "--class", "complete", "--passphrase-file", passphraseFile])
        XCTAssertTrue(resumed.stderr.contains("resumed"), resumed.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: journal))
        let after = try XCTUnwrap(try status()["classes"] as? [[String: Any]])[0]
        XCTAssertEqual(after["generations"] as? [Int], [2])
        let final = try XCTUnwrap(try JSONSerialization.jsonObject(with: try ok(["ls", "--json", files]).stdout) as? [[String: Any]])
        XCTAssertEqual(final.count, count)
        XCTAssertTrue(final.allSatisfy { $0["generation"] as? Int == 2 })
        for i in stride(from: 0, to: count, by: 97) { XCTAssertEqual(try ok(["cat", "\(files)/f\(i)"]).out, "file \(i)") }
    }
}
