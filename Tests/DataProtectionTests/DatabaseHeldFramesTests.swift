import CSQLite
import DataProtection
// @testable: looks at the frames a WAL's file holds for its commit frame (`HeldBytes`).
@testable import DataProtectionSQLite
import Foundation
import Locking
import XCTest

/// The frames a WAL holds for its transaction's commit frame (`HeldWrites.swift`): a transaction whose cache spilled
/// frames reads them back and commits or rolls back whole, and a lock of the class zeroes held frames (pages of rows)
/// and fails the commit they were held for. Real SQLite, real protected files, the real kernel keyring and real locks.
final class DatabaseHeldFramesTests: DomainTestCase {
    private let passphrase = "correct horse"

    /// A new unlocked domain and, in it, a WAL database `name` of class `protection` with a table `t(id, pad)`.
    private func walDatabase(_ name: String, _ protection: ProtectionClass) throws -> (ProtectionDomain, String, ProtectedDatabase) {
        let (domain, _) = try makeDomain(passphrase: passphrase)
        try domain.unlock(passphrase: try secret(passphrase))
        let path = root + "/\(name).db"
        let db = try ProtectedDatabase.open(path: path, protection: protection, files: domain.files)
        try db.execute("PRAGMA journal_mode = WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, pad)")
        return (domain, path, db)
    }

    /// The WAL file of `db`'s main database (SQLite's `SQLITE_FCNTL_JOURNAL_POINTER`).
    static func walFile(_ db: ProtectedDatabase) throws -> ProtectedDatabaseFile {
        var p: UnsafeMutableRawPointer?
        XCTAssertEqual(sqlite3_file_control(db.connection, "main", SQLITE_FCNTL_JOURNAL_POINTER, &p), SQLITE_OK)
        let object = try XCTUnwrap(p?.assumingMemoryBound(to: dp_sqlite3_file.self).pointee.object)
        return try XCTUnwrap(Unmanaged<DatabaseFile>.fromOpaque(object).takeUnretainedValue() as? ProtectedDatabaseFile)
    }

    /// The held bytes of `wal`, and whether `marker` is among them.
    private func heldBytes(_ wal: ProtectedDatabaseFile, containing marker: String) -> (count: Int, found: Bool) {
        wal.held.state.withLock { st in
            guard let b = st.buffer else { return (st.count, false) }
            let bytes = Array(b), needle = Array(marker.utf8)
            let found = bytes.count >= needle.count && (0...(bytes.count - needle.count)).contains { i in bytes[i..<(i + needle.count)].elementsEqual(needle) }
            return (st.count, found)
        }
    }

    private static func rows(_ db: ProtectedDatabase, _ sql: String) throws -> Int64 {
        guard case .integer(let n)? = try db.rows(sql).first?.first else { return -1 }
        return n
    }

    /// A transaction whose cache spills frames (held, not yet written) reads its own rows back from them, and commits
    /// them all or, rolled back, leaves none: another connection sees every committed row, and the file is whole.
    func testASpilledTransactionReadsItsHeldFramesBackAndCommitsOrRollsBackWhole() throws {
        let (domain, path, db) = try walDatabase("spill", .completeUntilFirstUserAuthentication)
        defer { db.close() }
        let other = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: domain.files)
        defer { other.close() }
        try db.execute("PRAGMA cache_size = 2")
        for (end, rows) in [("COMMIT", Int64(30)), ("ROLLBACK", 30)] {
            try db.execute("BEGIN")
            for _ in 1...30 { try db.execute("INSERT INTO t(pad) VALUES (randomblob(3000))") }  // spills
            XCTAssertGreaterThan(heldBytes(try Self.walFile(db), containing: "").count, 0, "\(end): the spilled frames are held")
            XCTAssertEqual(try Self.rows(db, "SELECT count(*) FROM t WHERE length(pad) = 3000"), rows + (end == "COMMIT" ? 0 : 30),
                           "\(end): the transaction reads its spilled rows back")
            XCTAssertEqual(try Self.rows(other, "SELECT count(*) FROM t"), end == "COMMIT" ? 0 : 30, "\(end): no other connection sees them yet")
            try db.execute(end)
            XCTAssertEqual(try Self.rows(other, "SELECT count(*) FROM t"), 30, "\(end)")
            XCTAssertEqual(try other.rows("PRAGMA integrity_check"), [[.text("ok")]], "\(end)")
        }
    }

    /// A lock of a `complete` database's class zeroes the frames its WAL holds for an open transaction (pages of rows,
    /// like SQLite's own pages that `PageWipe` frees), and the commit they were held for fails "locked"; after unlock
    /// the database holds every committed row and none of that transaction's.
    func testALockZeroesHeldFramesAndFailsTheirCommit() throws {
        let (domain, _, db) = try walDatabase("held", .complete)
        defer { db.close() }
        try db.execute("INSERT INTO t(pad) VALUES ('committed before the lock')")
        try db.execute("PRAGMA cache_size = 2; BEGIN")
        let marker = "held-frame-row-5d1c"
        for _ in 1...20 { try db.rows("INSERT INTO t(pad) VALUES (? || hex(zeroblob(1450)))", [.text(marker)]) }  // spills
        let wal = try Self.walFile(db)
        let before = heldBytes(wal, containing: marker)
        XCTAssertGreaterThan(before.count, 0, "frames are held")
        XCTAssertTrue(before.found, "the held frames hold the rows")

        try domain.lock(grace: .zero)
        let after = heldBytes(wal, containing: marker)
        XCTAssertEqual(after.count, 0, "the lock left \(after.count) held bytes")
        XCTAssertFalse(after.found, "the lock left a row in the held frames")
        XCTAssertThrowsError(try db.execute("COMMIT")) { e in
            let e = e as! DatabaseError
            XCTAssertTrue(e.isLocked, e.message)
        }
        if sqlite3_get_autocommit(db.connection) == 0 { try? db.execute("ROLLBACK") }

        try domain.unlock(passphrase: try secret(passphrase))
        XCTAssertEqual(try Self.rows(db, "SELECT count(*) FROM t"), 1, "the transaction the lock failed left no row")
        XCTAssertEqual(try db.rows("PRAGMA integrity_check"), [[.text("ok")]])
        try db.execute("INSERT INTO t(pad) VALUES ('after unlock')")
        XCTAssertEqual(try Self.rows(db, "SELECT count(*) FROM t"), 2)
    }

    /// A lock applied on another thread while a writer's transactions spill and commit frames (the holder's lock keeps
    /// the zeroing off a write in progress; ThreadSanitizer runs this suite): the writer stops with "locked", and after
    /// unlock the database holds whole transactions only, of 20 rows each, and is whole.
    func testALockOnAnotherThreadWhileTransactionsSpillLeavesWholeTransactions() throws {
        let (domain, _, db) = try walDatabase("race", .complete)
        defer { db.close() }
        try db.execute("PRAGMA cache_size = 2")
        // The writer's outcome behind a pthread mutex, which ThreadSanitizer sees, so that the test thread's later use
        // of the connection is ordered after the writer's; the semaphores only time the steps.
        let outcome = Locked<(finished: Bool, error: DatabaseError?)>((false, nil))
        let committed = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let connection = db  // the writer thread's until `outcome` says it finished
        Thread {
            var failure: DatabaseError?
            do {
                for _ in 0..<10_000 {
                    try connection.execute("BEGIN")
                    for _ in 1...20 { try connection.execute("INSERT INTO t(pad) VALUES (randomblob(3000))") }
                    try connection.execute("COMMIT")
                    committed.signal()
                }
            } catch {
                failure = error as? DatabaseError
                if sqlite3_get_autocommit(connection.connection) == 0 { try? connection.execute("ROLLBACK") }
            }
            outcome.withLock { $0 = (true, failure) }
            done.signal()
        }.start()
        for _ in 0..<3 { committed.wait() }
        try domain.lock(grace: .zero)
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "the writer did not stop after the lock")
        let (finished, failure) = outcome.withLock { $0 }
        XCTAssertTrue(finished)
        XCTAssertTrue(failure?.isLocked == true, "the writer stopped with \(String(describing: failure))")
        try domain.unlock(passphrase: try secret(passphrase))
        let rows = try Self.rows(db, "SELECT count(*) FROM t")
        XCTAssertGreaterThanOrEqual(rows, 60)
        XCTAssertEqual(rows % 20, 0, "a transaction is partly there: \(rows) rows")
        XCTAssertEqual(try db.rows("PRAGMA integrity_check"), [[.text("ok")]])
    }
}
