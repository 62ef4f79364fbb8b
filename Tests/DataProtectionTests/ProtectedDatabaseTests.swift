import CSQLite
import DataProtection
import DataProtectionSQLite
import Foundation
import Locking
import XCTest

/// Protected SQLite databases (issue 21): real SQLite through the `dataprotection` VFS, real protected files, the real
/// kernel keyring (a session keyring per test) and real locks.
final class ProtectedDatabaseTests: DomainTestCase {
    private let passphrase = "correct horse"

    private func unlockedDomain() throws -> ProtectionDomain {
        let (d, _) = try makeDomain(passphrase: passphrase)
        try d.unlock(passphrase: try secret(passphrase))
        return d
    }

    private static func count(_ db: ProtectedDatabase) throws -> Int64 {
        guard case .integer(let n)? = try db.rows("SELECT count(*) FROM t").first?.first else { return -1 }
        return n
    }

    private func assertIntegrity(_ path: String, _ files: ProtectedFiles, rows expected: Int64, file: StaticString = #filePath, line: UInt = #line) throws {
        let db = try ProtectedDatabase.open(path: path, protection: .none, files: files)
        defer { db.close() }
        XCTAssertEqual(try db.rows("PRAGMA integrity_check"), [[.text("ok")]], file: file, line: line)
        XCTAssertEqual(try Self.count(db), expected, file: file, line: line)
    }

    /// Every file SQLite leaves beside the database holds no plaintext row; the database, its journal and its WAL are
    /// protected files of the database's class with 4 KiB chunks, and the page size is 4 KiB.
    func testTheDatabaseItsJournalAndItsWALAreProtectedFilesOfItsClass() throws {
        let domain = try unlockedDomain()
        let marker = "row-plaintext-marker-0123456789"
        for mode in ["DELETE", "WAL"] {
            let path = root + "/\(mode).db"
            let db = try ProtectedDatabase.open(path: path, protection: .completeUnlessOpen, files: domain.files)
            try db.execute("PRAGMA journal_mode = \(mode); CREATE TABLE t(x TEXT)")
            try db.execute("BEGIN; " + (0..<200).map { "INSERT INTO t VALUES ('\(marker)-\($0)');" }.joined() + " COMMIT")
            // A write transaction in progress: its journal (rollback) or its WAL is on disk now.
            try db.execute("BEGIN IMMEDIATE; UPDATE t SET x = x || '-changed'")
            let side = mode == "WAL" ? path + "-wal" : path + "-journal"
            XCTAssertTrue(FileManager.default.fileExists(atPath: side), side)
            if mode == "WAL" { XCTAssertTrue(FileManager.default.fileExists(atPath: path + "-shm"), "the wal-index is searched below too") }
            for p in [path, side] {
                let info = try domain.files.info(p)
                XCTAssertEqual(info.protectionClass, .completeUnlessOpen, p)
                XCTAssertEqual(info.chunkSize, 4096, p)
            }
            XCTAssertEqual(try db.rows("PRAGMA page_size"), [[.integer(4096)]])
            for (p, bytes) in try filesBelow(root) where p.hasPrefix(path) {
                XCTAssertFalse(contains(bytes, Array(marker.utf8)), "plaintext in \(p)")
            }
            try db.execute("COMMIT")
            db.close()
            try assertIntegrity(path, domain.files, rows: 200)
        }
    }

    /// The URI form works for raw SQLite callers, with the class as a parameter; a database created through it has that
    /// class, and the default VFS is untouched (it cannot read the protected file).
    func testARawSQLiteCallerOpensThroughTheURI() throws {
        let domain = try unlockedDomain()
        let vfs = try ProtectedVFS.register(files: domain.files, name: "dataprotection-uri-test")
        let path = root + "/raw.db"
        var db: OpaquePointer?
        let uri = "file:\(path)?vfs=\(vfs.name)&protection=complete"
        XCTAssertEqual(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, nil), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES ('secret')", nil, nil, nil), SQLITE_OK, String(cString: sqlite3_errmsg(db)))
        sqlite3_close_v2(db)
        XCTAssertEqual(try domain.files.info(path).protectionClass, .complete)
        XCTAssertNotEqual(String(cString: sqlite3_vfs_find(nil)!.pointee.zName), vfs.name, "registered as the default VFS")
        var plain: OpaquePointer?
        _ = sqlite3_open_v2(path, &plain, SQLITE_OPEN_READONLY, nil)
        XCTAssertEqual(sqlite3_exec(plain, "SELECT * FROM t", nil, nil, nil), SQLITE_NOTADB)
        sqlite3_close_v2(plain)
    }

    /// Class A after `lock`: the next statement of an open connection fails "locked" (raw SQLite: SQLITE_AUTH, not an
    /// I/O error), in both journal modes, whether SQLite could answer from its cache or not; the files are intact, and
    /// after unlock a new connection reads every committed transaction and integrity_check is ok.
    func testACompleteDatabaseFailsLockedAfterLockAndIsIntactAfterUnlock() throws {
        let domain = try unlockedDomain()
        for mode in ["DELETE", "WAL"] {
            let path = root + "/a-\(mode).db"
            let db = try ProtectedDatabase.open(path: path, protection: .complete, files: domain.files)
            try db.execute("PRAGMA journal_mode = \(mode); CREATE TABLE t(x)")
            for i in 0..<50 { try db.rows("INSERT INTO t VALUES (?)", [.integer(Int64(i))]) }
            XCTAssertEqual(try Self.count(db), 50)  // the pages are in SQLite's cache now
            try domain.lock(grace: .zero)
            for sql in ["SELECT count(*) FROM t", "INSERT INTO t VALUES (99)"] {
                XCTAssertThrowsError(try db.rows(sql), "\(mode): \(sql)") { e in
                    let e = e as! DatabaseError
                    XCTAssertTrue(e.isLocked, e.message)
                    XCTAssertEqual(e.resultCode & 0xff, SQLITE_AUTH, e.message)
                    XCTAssertTrue(e.message.contains("dpctl unlock"), e.message)
                }
            }
            XCTAssertThrowsError(try ProtectedDatabase.open(path: path, protection: .complete, files: domain.files)) { e in
                XCTAssertTrue((e as! DatabaseError).isLocked, "\(e)")
            }
            try domain.unlock(passphrase: try secret(passphrase))
            XCTAssertEqual(try Self.count(db), 50, "the same connection works again after unlock")
            db.close()
            try assertIntegrity(path, domain.files, rows: 50)
        }
    }

    /// Class B: a connection opened before `lock` keeps reading and writing until closed (its journal or WAL files are
    /// created while locked, sealed to the class public key); a new open fails "locked"; after unlock everything is there.
    func testACompleteUnlessOpenConnectionKeepsWorkingWhileANewOpenFails() throws {
        let domain = try unlockedDomain()
        for mode in ["DELETE", "WAL"] {
            let path = root + "/b-\(mode).db"
            let db = try ProtectedDatabase.open(path: path, protection: .completeUnlessOpen, files: domain.files)
            try db.execute("PRAGMA journal_mode = \(mode); CREATE TABLE t(x)")
            try db.rows("INSERT INTO t VALUES (1)")
            try domain.lock(grace: .zero)
            for i in 0..<20 { try db.rows("INSERT INTO t VALUES (?)", [.integer(Int64(i))]) }
            XCTAssertEqual(try Self.count(db), 21)
            XCTAssertThrowsError(try ProtectedDatabase.open(path: path, protection: .completeUnlessOpen, files: domain.files)) { e in
                XCTAssertTrue((e as! DatabaseError).isLocked, "\(e)")
            }
            db.close()
            try domain.unlock(passphrase: try secret(passphrase))
            try assertIntegrity(path, domain.files, rows: 21)
        }
    }

    /// SQLite's locks hold between connections of one process on other threads (OFD locks on each connection's own
    /// descriptor): two writers and a reader, in WAL and rollback modes, lose no transaction and never read a torn page.
    func testConnectionsOnSeveralThreadsShareTheDatabase() throws {
        let domain = try unlockedDomain()
        for mode in ["DELETE", "WAL"] {
            let path = root + "/threads-\(mode).db"
            let setup = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: domain.files)
            try setup.execute("PRAGMA journal_mode = \(mode); CREATE TABLE t(x, pad)")
            setup.close()
            let perWriter = 100
            let failures = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 3) { k in
                do {
                    let db = try ProtectedDatabase.open(path: path, protection: .none, files: domain.files)
                    defer { db.close() }
                    // SQLite's busy wait is not fair: in rollback mode a waiting writer can lose every retry while the
                    // other writer commits back to back, so it may wait for the other's whole run (100 fsynced commits,
                    // tens of seconds on a loaded 2-core machine). The bound is on that run, not on one commit.
                    try db.execute("PRAGMA busy_timeout = 120000")
                    if k < 2 {
                        for i in 0..<perWriter { try db.rows("INSERT INTO t VALUES (?, randomblob(3000))", [.integer(Int64(k * 1000 + i))]) }
                    } else {
                        var last: Int64 = 0
                        for _ in 0..<200 {
                            let n = try Self.count(db)
                            if n < last { failures.withLock { $0.append("the reader saw \(n) rows after \(last)") } }
                            last = n
                        }
                    }
                } catch { failures.withLock { $0.append("\(mode) thread \(k): \(error)") } }
            }
            XCTAssertEqual(failures.withLock { $0 }, [])
            try assertIntegrity(path, domain.files, rows: Int64(2 * perWriter))
        }
    }

    /// SQLite's persistent-WAL file control works through the VFS (GRDB 7's DatabasePool sets it at every open and
    /// failed "unknown operation", SQLITE_NOTFOUND, against the VFS that answered no file control; GRDB's own suite,
    /// docs/TESTING.md): set, read back, and the WAL stays beside the database after the last connection closes.
    func testThePersistentWALFileControlIsHonoured() throws {
        let domain = try unlockedDomain()
        let path = root + "/persist.db"
        let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: domain.files)
        try db.execute("PRAGMA journal_mode = WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        var flag: Int32 = 1
        XCTAssertEqual(sqlite3_file_control(db.connection, "main", SQLITE_FCNTL_PERSIST_WAL, &flag), SQLITE_OK)
        flag = -1
        XCTAssertEqual(sqlite3_file_control(db.connection, "main", SQLITE_FCNTL_PERSIST_WAL, &flag), SQLITE_OK)
        XCTAssertEqual(flag, 1)
        db.close()
        XCTAssertTrue(FileManager.default.fileExists(atPath: path + "-wal"), "the WAL was deleted at the last close")
        try assertIntegrity(path, domain.files, rows: 1)
    }

    /// When SQLite starts its WAL over (every frame checkpointed, the header written again at offset 0), the protected
    /// WAL starts over too, cut to nothing first: the new frames are appends, not re-seals of the old log's committed
    /// chunks, each of which cost the chunk journal an fsync (FORMAT.md §6.7.5). SQLite itself keeps the old file's
    /// length (no `journal_size_limit`), so without the cut the WAL stays as long as the old log. A reader on its own
    /// connection, open across the restart, and a new connection afterwards both see every row.
    func testAWALStartedOverIsCutToItsNewFrames() throws {
        let domain = try unlockedDomain()
        let path = root + "/restart.db"
        let db = try ProtectedDatabase.open(path: path, protection: .complete, files: domain.files)
        try db.execute("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x)")
        try db.execute("BEGIN; " + String(repeating: "INSERT INTO t VALUES (randomblob(3000));", count: 100) + " COMMIT")
        let reader = try ProtectedDatabase.open(path: path, protection: .complete, files: domain.files)
        defer { reader.close() }
        XCTAssertEqual(try Self.count(reader), 100)
        let long = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as! Int
        XCTAssertGreaterThan(long, 100 * 4096, "the first log holds a frame per page")
        // busy, frames in the log, frames checkpointed: every frame is in the database now.
        let checkpoint = try db.rows("PRAGMA wal_checkpoint(PASSIVE)")
        XCTAssertEqual(checkpoint.first?.first, .integer(0))
        XCTAssertEqual(checkpoint.first?[1], checkpoint.first?[2], "\(checkpoint)")
        try db.execute("INSERT INTO t VALUES (1)")  // the next writer starts the log over
        let short = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as! Int
        XCTAssertLessThan(short, 8 * 4136, "the WAL was started over in place (\(short) bytes, \(long) before)")
        XCTAssertEqual(try Self.count(reader), 101)
        db.close()
        try assertIntegrity(path, domain.files, rows: 101)
    }

    /// A rollback journal beside the database that does not open as a protected file (what a power loss leaves when
    /// the journal's first page never reached the disk; here bytes written over it) fails the database's open with an
    /// error that names the journal, its database and the fix, not the file layer's advice for a lone file.
    func testADamagedJournalNamesItsDatabaseAndTheFix() throws {
        let domain = try unlockedDomain()
        let path = root + "/damaged.db"
        let db = try ProtectedDatabase.open(path: path, protection: .none, files: domain.files)
        try db.execute("PRAGMA journal_mode = DELETE; CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        db.close()
        try writeBytes([UInt8](repeating: 0x5a, count: 5000), path + "-journal")
        XCTAssertThrowsError(try ProtectedDatabase.open(path: path, protection: .none, files: domain.files).rows("SELECT count(*) FROM t")) { e in
            let message = (e as! DatabaseError).message
            XCTAssertTrue(message.contains("'\(path)-journal', the rollback journal of the database '\(path)'"), message)
            XCTAssertTrue(message.contains("restore the database with its companion files from a backup"), message)
            XCTAssertFalse(message.contains("dpctl protect"), message)
        }
    }

    /// A flipped byte in a page of the database gives a clear "tampered" error (raw SQLite: SQLITE_CORRUPT), never rows.
    func testATamperedPageFailsAuthenticationNotWrongRows() throws {
        let domain = try unlockedDomain()
        let path = root + "/tamper.db"
        let db = try ProtectedDatabase.open(path: path, protection: .none, files: domain.files)
        try db.execute("CREATE TABLE t(x); BEGIN; " + String(repeating: "INSERT INTO t VALUES (randomblob(200));", count: 300) + " COMMIT")
        guard case .integer(let pages)? = try db.rows("PRAGMA page_count").first?.first else { return XCTFail("no page count") }
        db.close()
        var bytes = try readBytes(path)
        bytes[176 + Int(pages / 2) * 4136 + 2000] ^= 0x01  // inside a page of t (not the spare room past the last page)
        try writeBytes(bytes, path)
        let again = try ProtectedDatabase.open(path: path, protection: .none, files: domain.files)
        defer { again.close() }
        XCTAssertThrowsError(try again.rows("SELECT count(*), sum(length(x)) FROM t")) { e in
            let e = e as! DatabaseError
            XCTAssertEqual(e.resultCode & 0xff, SQLITE_CORRUPT, e.message)
            XCTAssertEqual(e.protection?.code, .authenticationFailed, e.message)
            XCTAssertTrue(e.message.contains("restore it from a backup"), e.message)
        }
    }
}
