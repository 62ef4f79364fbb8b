@_spi(Testing) import CrashScenarios  // Scenario.open(io:), the domain the crash worker prepared
import DataProtection
import DataProtectionSQLite
import Foundation
import TestSupport
import XCTest

/// A protected database shared between processes: `crash-worker run database-*` commits its 8 transactions in another
/// process while a connection here reads in a loop. SQLite's locks (OFD locks on each side's own descriptors, and on
/// the `-shm` in WAL mode) must keep every snapshot read here whole: transactions 1…n all there, nothing of n+1.
final class DatabaseProcessTests: XCTestCase {
    func testAWriterInAnotherProcessAndAReaderHereShareTheDatabase() throws {
        let worker = try builtProduct("crash-worker")
        let base = NSTemporaryDirectory() + "dp-dbproc-\(UUID().uuidString.prefix(8))"
        addTeardownBlock { try? FileManager.default.removeItem(atPath: base) }
        try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        for op in [CrashOp.databaseWAL, .databaseRollback] {
            let scenario = Scenario(op, root: base + "/" + op.rawValue)
            XCTAssertEqual(try run(worker, ["prepare", op.rawValue, scenario.root], wait: true).terminationStatus, 0)
            let domain = try scenario.open()
            let db = try ProtectedDatabase.open(path: scenario.data + "/f", protection: .complete, files: domain.files)
            defer { db.close() }
            let writer = try run(worker, ["run", op.rawValue, scenario.root], wait: false)
            var snapshots: [Int64] = [], torn: [String] = []
            repeat {
                try db.execute("BEGIN")
                let n = try db.rows("SELECT n FROM counter").first?.first
                let whole = try db.rows("SELECT (SELECT count(*) FROM t WHERE txn >= 1 AND txn <= (SELECT n FROM counter)), (SELECT count(*) FROM t WHERE txn > (SELECT n FROM counter))")
                try db.execute("COMMIT")
                guard case .integer(let k)? = n else { torn.append("no counter"); break }
                if whole != [[.integer(k * Int64(Scenario.rowsPerTransaction)), .integer(0)]] { torn.append("counter \(k), rows \(whole)") }
                if let last = snapshots.last, k < last { torn.append("counter went back from \(last) to \(k)") }
                snapshots.append(k)
            } while writer.isRunning
            writer.waitUntilExit()
            XCTAssertEqual(writer.terminationStatus, 0, "\(op.rawValue): the writer failed")
            XCTAssertEqual(try db.rows("SELECT n FROM counter"), [[.integer(Int64(Scenario.databaseTransactions))]])
            XCTAssertEqual(try db.rows("PRAGMA integrity_check"), [[.text("ok")]])
            XCTAssertEqual(torn, [], op.rawValue)
            print("database across processes, \(op.rawValue): \(snapshots.count) snapshots read during the writer's \(Scenario.databaseTransactions) transactions, counters seen \(Array(Set(snapshots)).sorted()), \(torn.count) torn")
        }
    }

    private func run(_ path: String, _ arguments: [String], wait: Bool) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        if wait { p.waitUntilExit() }
        return p
    }
}
