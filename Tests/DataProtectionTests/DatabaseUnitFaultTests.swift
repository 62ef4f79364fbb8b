import CSQLite
@_spi(Testing) import DataProtection  // ProtectionDomain.open(…, io:): the file-system seam
import DataProtectionSQLite
import Foundation
import XCTest

/// `DatabaseUnit.protect`, `unprotect` and `rotate` with an I/O error injected at every file-system call through the
/// `FileIO` seam (`FaultyIO`: EIO from the Nth call on, a device that went away), until a run finishes without a fault.
///
/// After each failed run the unit is the old one or the new one, with every committed row and `integrity_check` ok:
/// a plain database read by SQLite's own unix VFS, or a protected one read through the protected VFS.
final class DatabaseUnitFaultTests: DomainTestCase {
    private static let rows: Int64 = 300, sum: Double = 45_150  // 1…300; 200 of them only in the WAL

    /// Integrity and (count, total) of the unit at `path`: through the protected VFS when its main file is protected,
    /// else through SQLite's unix VFS.
    private func state(_ path: String, _ files: ProtectedFiles) throws -> (protected: Bool, integrity: String, count: Int64, total: Double) {
        if (try? files.info(path)) != nil {
            let db = try ProtectedDatabase.open(path: path, protection: .none, files: files)
            defer { db.close() }
            guard case .text(let ok)? = try db.rows("PRAGMA integrity_check").first?.first,
                  let row = try db.rows("SELECT count(*), total(x) FROM t").first, case .integer(let n) = row[0], case .real(let s) = row[1] else {
                return (true, "?", -1, -1)
            }
            return (true, ok, n, s)
        }
        var db: OpaquePointer?
        defer { sqlite3_close_v2(db) }
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, "unix") == SQLITE_OK else { return (false, "cannot open", -1, -1) }
        func one(_ sql: String) -> [String] {
            var st: OpaquePointer?
            defer { sqlite3_finalize(st) }
            guard sqlite3_prepare_v2(db, sql, -1, &st, nil) == SQLITE_OK, sqlite3_step(st) == SQLITE_ROW else { return [String(cString: sqlite3_errmsg(db))] }
            return (0..<sqlite3_column_count(st)).map { String(cString: sqlite3_column_text(st, $0)) }
        }
        let r = one("SELECT count(*), total(x) FROM t")
        return (false, one("PRAGMA integrity_check")[0], Int64(r[0]) ?? -1, Double(r.count > 1 ? r[1] : "") ?? -1)
    }

    /// A plain WAL database at `path` whose last 200 committed rows are only in its `-wal` (copied while the writer
    /// held it, as a crash leaves it); returns the unit's files' bytes to restore it from.
    private func plainWALUnit(_ path: String) throws -> [String: [UInt8]] {
        let live = path + ".live"
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open_v2(live, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "unix"), SQLITE_OK)
        defer { sqlite3_close_v2(db) }
        let sql = """
            PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x, pad);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) INSERT INTO t SELECT i, randomblob(100) FROM n;
            PRAGMA wal_checkpoint(TRUNCATE);
            WITH RECURSIVE n(i) AS (SELECT 101 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO t SELECT i, randomblob(100) FROM n;
            """
        XCTAssertEqual(sqlite3_exec(db, sql, nil, nil, nil), SQLITE_OK)
        return [path: try readBytes(live), path + "-wal": try readBytes(live + "-wal")]
    }

    /// The error `body` threw, nil when it returned.
    private static func failure(_ body: () throws(ProtectionError) -> Void) -> ProtectionError? {
        do throws(ProtectionError) { try body() } catch { return error }
        return nil
    }

    private func restore(_ unit: [String: [UInt8]]) throws {
        for (p, b) in unit { try writeBytes(b, p) }
    }

    /// Protect of a plain WAL unit, and unprotect of the protected one, failing at every I/O call in turn.
    func testProtectAndUnprotectLoseNoRowAtAnyFailedIOCall() throws {
        let dir = try temporaryDirectory(self)
        let keys = try InMemoryClassKeys.random()
        let real = ProtectedFiles(keys: keys, options: .init(chunkSize: 4096))
        let path = dir + "/app.db"
        let unit = try plainWALUnit(path)
        var protectPoints = 0, unprotectPoints = 0, old = 0, new = 0
        for (direction, c) in [("protect", ProtectionClass.completeUntilFirstUserAuthentication), ("unprotect", .none)] {
            for n in 1...400 {
                for f in [path, path + "-wal", path + "-shm", path + "-journal"] { try? FileManager.default.removeItem(atPath: f) }
                try restore(unit)
                if direction == "unprotect" { XCTAssertTrue(try DatabaseUnit.protect(path, as: c, files: real)) }
                let io = FaultyIO(failAt: n, mode: .eio, forever: true)
                let faulty = ProtectedFiles(keys: keys, options: .init(chunkSize: 4096), io: io)
                let failure = direction == "protect"
                    ? Self.failure { () throws(ProtectionError) in _ = try DatabaseUnit.protect(path, as: c, files: faulty) }
                    : Self.failure { () throws(ProtectionError) in _ = try DatabaseUnit.unprotect(path, files: faulty) }
                let failed = failure != nil
                if let failure { XCTAssertTrue(failure.message.contains(path), "\(direction) at call \(n): \(failure.message)") }
                let s = try state(path, real)
                XCTAssertEqual(s.integrity, "ok", "\(direction), EIO from call \(n)")
                XCTAssertEqual(s.count, Self.rows, "\(direction), EIO from call \(n): rows lost")
                XCTAssertEqual(s.total, Self.sum, "\(direction), EIO from call \(n)")
                if !failed && io.fired.load(ordering: .relaxed) == false {
                    XCTAssertEqual(s.protected, direction == "protect", "\(direction) finished but the unit is not converted")
                    break
                }
                if direction == "protect" { protectPoints += 1 } else { unprotectPoints += 1 }
                if s.protected == (direction == "protect") { new += 1 } else { old += 1 }
            }
        }
        XCTAssertGreaterThan(protectPoints, 5)
        XCTAssertGreaterThan(unprotectPoints, 5)
        print("database unit faults: protect failed at \(protectPoints) I/O calls, unprotect at \(unprotectPoints); after each the unit was the old one (\(old)) or the new one (\(new)) with all \(Self.rows) rows and integrity ok")
    }

    /// `DatabaseUnit.rotate` of a protected WAL database with a persistent journal beside it, failing at every I/O call
    /// in turn: afterwards every row reads, and the next rotation (the real one, resuming) finishes with the unit at
    /// the new generation.
    func testRotateLosesNoRowAtAnyFailedIOCall() throws {
        let (domain, _) = try makeDomain(passphrase: "correct horse")
        try domain.unlock(passphrase: try secret("correct horse"))
        let dir = root + "/data"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/app.db"
        let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: domain.files)
        try db.execute("CREATE TABLE t(x, pad); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO t SELECT i, randomblob(100) FROM n")
        try db.execute("PRAGMA journal_mode = PERSIST; INSERT INTO t SELECT 0, 0")
        try db.execute("DELETE FROM t WHERE x = 0")
        db.close()
        XCTAssertNotNil(try? domain.files.info(path + "-journal"), "a protected journal stays beside it")
        var points = 0, resumed = 0
        let pass = try secret("correct horse")
        for n in 1...600 {
            let failed = Self.failure { [location, store] () throws(ProtectionError) in
                let faultyDomain = try ProtectionDomain.open(at: location, keyStore: store, io: FaultyIO(failAt: n, mode: .eio, forever: true))
                _ = try DatabaseUnit.rotate(.completeUntilFirstUserAuthentication, paths: [dir], domain: faultyDomain, passphrase: pass)
            } != nil
            let s = try state(path, domain.files)
            XCTAssertEqual(s.integrity, "ok", "rotate, EIO from call \(n)")
            XCTAssertEqual(s.count, Self.rows, "rotate, EIO from call \(n): rows lost")
            XCTAssertEqual(s.total, Self.sum, "rotate, EIO from call \(n)")
            if !failed { break }
            points += 1
            // Finish (or redo) it for real: a resumed rotation takes no paths; a rotation that never started needs them.
            let r = try DatabaseUnit.rotate(.completeUntilFirstUserAuthentication, paths: [dir], domain: domain, passphrase: pass)
            if r.resumed { resumed += 1 }
            let g = try domain.files.info(path).classKeyGeneration
            XCTAssertEqual(try domain.files.info(path + "-journal").classKeyGeneration, g, "the unit's files are at one generation")
            XCTAssertEqual(try state(path, domain.files).count, Self.rows)
        }
        XCTAssertGreaterThan(points, 5)
        print("database unit faults: rotate failed at \(points) I/O calls (\(resumed) left a rotation the next run resumed); after each every one of \(Self.rows) rows read, integrity ok, and the next rotation finished the unit at one generation")
    }
}
