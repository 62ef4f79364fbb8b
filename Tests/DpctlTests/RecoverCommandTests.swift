import Foundation
import XCTest

/// `dpctl repair`: a writer killed mid-write leaves a temporary file; repair removes it, never a live writer's.
final class RecoverCommandTests: DpctlTestCase {
    var files = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        try initDomain()
        files = dir + "/files"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
    }

    func exists(_ p: String) -> Bool { FileManager.default.fileExists(atPath: p) }
    func listing() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: files).sorted() }

    /// `dpctl put` of `path` that has read part of its input and waits for the rest (standard input left open).
    func startPut(_ path: String) throws -> (Process, FileHandle) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: dpctlPath)
        p.arguments = ["put", "--class", "none", path]
        p.environment = environment
        let input = Pipe()
        p.standardInput = input
        p.standardError = FileHandle.nullDevice
        try p.run()
        // More than one batch (4 MiB), so the writer has written part of the file when it blocks for more.
        input.fileHandleForWriting.write(Data(repeating: 0x41, count: 6 << 20))
        let tmp = "\(files)/.\(URL(fileURLWithPath: path).lastPathComponent).dp.tmp"
        let written = eventually(within: .seconds(60)) {
            ((try? FileManager.default.attributesOfItem(atPath: tmp)[.size] as? Int) ?? 0) > 1 << 20
        }
        XCTAssertTrue(written, "the writer never wrote its temporary file")
        return (p, input.fileHandleForWriting)
    }

    func testPutKilledMidWriteLeavesATemporaryFileThatRepairRemoves() throws {
        let path = files + "/f"
        try ok(["put", "--class", "none", path], input: Data("old".utf8))
        let (p, input) = try startPut(path)
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        try? input.close()
        XCTAssertEqual(p.terminationReason, .uncaughtSignal)
        XCTAssertEqual(try listing(), [".f.dp.tmp", "f"], "the killed writer's litter")
        XCTAssertEqual(try ok(["cat", path]).out, "old")

        let r = try dpctl(["repair", files])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.out, "removed\t\(files)/.f.dp.tmp\n")
        XCTAssertTrue(r.stderr.contains("1 temporary files removed, 0 in use"), r.stderr)
        XCTAssertEqual(try listing(), ["f"])
        let again = try dpctl(["repair", files, path])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(again.out, "")
    }

    func testTheNextPutRemovesADeadWritersTemporaryFile() throws {
        let path = files + "/f"
        let (p, input) = try startPut(path)
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        try? input.close()
        XCTAssertEqual(try listing(), [".f.dp.tmp"])
        try ok(["put", "--class", "none", path], input: Data("new".utf8))
        XCTAssertEqual(try listing(), ["f"])
        XCTAssertEqual(try ok(["cat", path]).out, "new")
    }

    func testALiveWriterIsLeftAloneAndReportedBusy() throws {
        let path = files + "/f"
        let (p, input) = try startPut(path)
        let r = try dpctl(["repair", path])
        XCTAssertEqual(r.status, 79, r.stderr)
        XCTAssertEqual(r.out, "in use\t\(files)/.f.dp.tmp\n")
        XCTAssertTrue(exists("\(files)/.f.dp.tmp"))
        try input.close()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        XCTAssertEqual(try listing(), ["f"])
        XCTAssertEqual(try dpctl(["repair", files]).status, 0)
        XCTAssertEqual(try ok(["cat", path]).stdout.count, 6 << 20)
    }

    func testJournalsAndExitCodes() throws {
        try ok(["put", "--class", "none", files + "/a"], input: Data("a".utf8))
        _ = FileManager.default.createFile(atPath: files + "/.a.dpjournal", contents: Data())  // an empty journal: discarded
        _ = FileManager.default.createFile(atPath: files + "/.b.dp-c0ffee.tmp", contents: Data("x".utf8))  // an old version's litter
        let ls = try ok(["ls", files])
        XCTAssertEqual(ls.out.split(separator: "\n").count, 1, "ls lists protected files, not journals or temporary files: \(ls.out)")
        let r = try dpctl(["repair", files])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.out, "discarded journal\t\(files)/a\nremoved\t\(files)/.b.dp-c0ffee.tmp\n")
        XCTAssertEqual(try listing(), ["a"])

        let none = try dpctl(["repair"])
        XCTAssertEqual(none.status, 64)
        XCTAssertTrue(none.stderr.hasPrefix("dpctl: error: "), none.stderr)
        let missing = try dpctl(["repair", files + "/missing", files])
        XCTAssertEqual(missing.status, 66, missing.stderr)
        XCTAssertTrue(missing.stderr.contains("dpctl: error: unable to recover '\(files)/missing'"), missing.stderr)
    }
}
