import Foundation
import TestSupport
import XCTest

/// The crash harness (issue 8 item 1): each operation is SIGKILLed right after every one of its
/// disk-changing I/O calls, and at random times; a fresh process then opens everything and checks
/// the invariants (see `Scenario.verify` in Tests/Support/CrashScenarios).
///
/// Per operation: `crash-worker prepare` builds a template tree once; a dry `run` reports the
/// operation's I/O-call count C; then for every N in 1...C a copy of the template is run with
/// `CRASH_KILL_AFTER=N` (the worker raises SIGKILL on itself right after call N), and for K random
/// trials the test sends SIGKILL after a random delay within the dry run's duration. After each kill
/// `crash-worker verify` (a new process) gets the last step the killed process acknowledged ("ACK k"
/// on its standard output) and reports torn files, lost acknowledged data and litter.
/// `DP_CRASH_TRIALS` sets K (default 4). Litter is what is left after the verifier's writable opens
/// and its repair pass (`ProtectedFiles.recoverTree`, what `dpctl repair` runs). The worker uses the
/// in-process key store, so no keyring is touched.
final class CrashHarnessTests: XCTestCase {
    var worker = ""
    var dir = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        worker = try builtProduct("crash-worker")
        dir = NSTemporaryDirectory() + "dp-crash-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { [dir] in try? FileManager.default.removeItem(atPath: dir) }
    }

    func testAtomicWrite() throws { try crash("atomic-write") }
    func testInPlaceWrites() throws { try crash("in-place-writes") }
    func testAppend() throws { try crash("append") }
    func testTruncate() throws { try crash("truncate") }
    func testProtectTree() throws { try crash("protect-tree") }
    func testUnprotectTree() throws { try crash("unprotect-tree") }
    func testPassphraseChange() throws { try crash("passphrase-change") }
    func testRotation() throws { try crash("rotate") }
    func testDatabaseRollbackJournal() throws { try crash("database-rollback") }
    func testDatabaseWAL() throws { try crash("database-wal") }
    func testDatabaseWALLog() throws { try crash("database-wal-log") }
    func testDatabaseProtect() throws { try crash("database-protect") }
    func testDatabaseRotate() throws { try crash("database-rotate") }

    /// What one killed run printed.
    struct Killed {
        var acked = 0
        var lines: [String] = []
        var killed = false
    }

    private func crash(_ op: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let template = "\(dir)/template", trial = "\(dir)/trial"
        try runChecked([worker, "prepare", op, template])
        // The dry run: how many I/O calls, how long.
        try reset(trial, from: template)
        let dry = try runWorker(op, trial, killAfter: nil, killAtMicros: nil)
        XCTAssertFalse(dry.killed)
        let count = try XCTUnwrap(dry.lines.first { $0.hasPrefix("IOOPS ") }.flatMap { Int($0.dropFirst(6)) })
        let micros = try XCTUnwrap(dry.lines.first { $0.hasPrefix("ELAPSED_US ") }.flatMap { Int($0.dropFirst(11)) })
        XCTAssertGreaterThan(count, 0)
        if ["in-place-writes", "append", "truncate"].contains(op) {
            XCTAssertTrue(dry.lines.contains("JOURNALED true"), "\(op): the change of an existing file wrote no rollback journal", file: file, line: line)
        }

        let randomTrials = ProcessInfo.processInfo.environment["DP_CRASH_TRIALS"].flatMap(Int.init) ?? 4
        var rng = SystemRandomNumberGenerator()
        var trials = 0, torn = 0, lost = 0, litter = 0, notKilled = 0
        var failures: [String] = []
        let plan: [(Int?, Int?)] = (1...count).map { ($0, nil) } + (0..<randomTrials).map { _ in (nil, Int.random(in: 0...max(1, micros), using: &rng)) }
        for (n, delay) in plan {
            try reset(trial, from: template)
            let k = try runWorker(op, trial, killAfter: n, killAtMicros: delay)
            if !k.killed { notKilled += 1 }
            if n != nil { XCTAssertTrue(k.killed, "\(op): the worker was not killed after I/O call \(n!) of \(count)", file: file, line: line) }
            let v = try run([worker, "verify", op, trial, String(k.acked)])
            let verdict = v.out.split(separator: "\n").first { $0.hasPrefix("VERDICT ") } ?? "VERDICT (none)"
            func figure(_ name: String) -> Int { verdict.split(separator: " ").first { $0.hasPrefix(name + "=") }.flatMap { Int($0.split(separator: "=")[1]) } ?? 1 }
            torn += figure("torn"); lost += figure("lost-acked"); litter += figure("litter")
            if v.status != 0 {
                let at = n.map { "after I/O call \($0)" } ?? "at a random time (\(delay!) µs)"
                failures.append("killed \(at), acked \(k.acked): \(v.out.split(separator: "\n").prefix(4).joined(separator: "; ")) \(v.stderr)")
            }
            trials += 1
        }
        if let split = dry.lines.first(where: { $0.hasPrefix("IOSPLIT ") }) { print("crash \(op): dry run \(count) I/O calls, \(micros) µs, \(split.dropFirst(8))") }
        print("crash \(op): \(count) I/O calls; \(count) kill points × 1 + \(randomTrials) random-time kills (\(notKilled) finished first) = \(trials) trials, torn \(torn), lost-acked \(lost), litter \(litter)")
        XCTAssertEqual(failures, [], "\(op): \(failures.count) of \(trials) crashed trials break an invariant", file: file, line: line)
    }

    /// Runs the operation on `trial`, killed after I/O call `killAfter` or `killAtMicros` after it starts.
    private func runWorker(_ op: String, _ trial: String, killAfter: Int?, killAtMicros: Int?) throws -> Killed {
        let out = trial + ".out"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: worker)
        p.arguments = ["run", op, trial]
        p.environment = childEnvironment(["PATH": "/usr/bin:/bin", "HOME": dir].merging(killAfter.map { ["CRASH_KILL_AFTER": String($0)] } ?? [:]) { $1 })
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        p.standardError = FileHandle.nullDevice
        try p.run()
        if let killAtMicros {
            // Wait for the operation itself to start (the domain is open and unlocked), then kill it mid-way.
            let deadline = ContinuousClock.now + .seconds(30)
            while ContinuousClock.now < deadline, p.isRunning, !((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").contains("START") { usleep(500) }
            usleep(UInt32(killAtMicros))
            kill(p.processIdentifier, SIGKILL)
        }
        p.waitUntilExit()
        let lines = ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        let acked = lines.compactMap { $0.hasPrefix("ACK ") ? Int($0.dropFirst(4)) : nil }.max() ?? 0
        return Killed(acked: acked, lines: lines, killed: p.terminationReason == .uncaughtSignal && p.terminationStatus == SIGKILL)
    }

    /// Replaces `trial` with a copy of `template` (same path every time: the rotation journal records absolute paths).
    private func reset(_ trial: String, from template: String) throws {
        try? FileManager.default.removeItem(atPath: trial)
        try runChecked(["/bin/cp", "-a", template, trial])
    }

    private func runChecked(_ command: [String]) throws {
        let r = try run(command)
        XCTAssertEqual(r.status, 0, "\(command.joined(separator: " ")): \(r.stderr)")
    }

    private func run(_ command: [String]) throws -> Run {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: command[0])
        p.arguments = Array(command.dropFirst())
        p.environment = childEnvironment(["PATH": "/usr/bin:/bin", "HOME": dir])
        let o = Pipe(), e = Pipe()
        p.standardOutput = o
        p.standardError = e
        try p.run()
        let out = o.fileHandleForReading.readDataToEndOfFile(), err = e.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Run(status: p.terminationStatus, stdout: out, stderr: String(decoding: err, as: UTF8.self))
    }
}
