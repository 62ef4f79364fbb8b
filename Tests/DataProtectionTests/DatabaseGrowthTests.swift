import CSQLite
@_spi(Testing) import DataProtection
// @testable: checks the growth rule (ProtectedDatabaseFile.grownSize) at sizes no test database reaches.
@testable import DataProtectionSQLite
import DataProtectionFormat
import Foundation
import SystemLayer
import XCTest

/// A main database in rollback-journal mode grows in steps (DatabaseGrowth.swift, FORMAT.md §6.7.5): commits inside a
/// step leave the chunk journal alone, a rolled-back transaction gives its growth back, and `unprotect` cuts the unused
/// end off before it decrypts the file. In WAL mode a checkpoint grows it to the size it hints. Real SQLite, real
/// protected files, in-memory class keys.
final class DatabaseGrowthTests: XCTestCase {
    /// Counts the fsyncs of each file by its path (the real system calls do the work).
    private final class CountingIO: ForwardingIO, @unchecked Sendable {
        private let lock = NSLock()
        private var counts: [String: Int] = [:]

        func fsync(_ fd: Int32) throws(SystemError) {
            let path = directoryPath(fd)
            lock.withLock { counts[path, default: 0] += 1 }
            try SystemFileIO().fsync(fd)
        }

        func fsyncs(ofNamesEndingIn suffix: String) -> Int { lock.withLock { counts.filter { $0.key.hasSuffix(suffix) }.values.reduce(0, +) } }
    }

    private let keys = try! InMemoryClassKeys.random()

    private func files(_ io: any FileIO = SystemFileIO()) -> ProtectedFiles {
        ProtectedFiles(keys: keys, options: .init(chunkSize: ProtectedVFS.pageSize), io: io)
    }

    private static func integer(_ db: ProtectedDatabase, _ sql: String) throws -> Int64 {
        guard case .integer(let n)? = try db.rows(sql).first?.first else { return -1 }
        return n
    }

    /// 36 one-page commits: without steps each one grows the file, so each re-seals the old last chunk and pays
    /// the chunk journal's two fsyncs (about 70 here); with spare room the file's end moves about twice.
    func testCommitsInsideAStepLeaveTheChunkJournalAlone() throws {
        let dir = try temporaryDirectory(self)
        let io = CountingIO()
        let files = files(io)
        let path = dir + "/grow.db"
        let db = try ProtectedDatabase.open(path: path, protection: .none, files: files)
        defer { db.close() }
        try db.execute("PRAGMA journal_mode = DELETE; PRAGMA synchronous = NORMAL; CREATE TABLE t(x)")
        let before = io.fsyncs(ofNamesEndingIn: ".grow.db.dpjournal")
        for _ in 0..<36 { try db.execute("INSERT INTO t VALUES (randomblob(3000))") }
        let journalFsyncs = io.fsyncs(ofNamesEndingIn: ".grow.db.dpjournal") - before
        let pages = try Self.integer(db, "PRAGMA page_count")
        let size = try files.info(path).plaintextSize
        print("database growth: 36 one-page commits, \(pages) pages used, file of \(size) bytes, \(journalFsyncs) chunk-journal fsyncs")
        XCTAssertGreaterThanOrEqual(pages, 36)
        XCTAssertGreaterThan(size, pages * 4096, "the file holds an unused end")
        XCTAssertLessThanOrEqual(journalFsyncs, 8, "the chunk journal is used once per step, not once per commit")
        XCTAssertEqual(try db.rows("PRAGMA integrity_check"), [[.text("ok")]])
    }

    /// A transaction that grows the file and rolls back gives the growth back (SQLite cuts the file to its size at the
    /// transaction's start), and the grown sizes follow the rule: spare room of a quarter of the file or three times
    /// the transaction's growth, between 64 KiB and 4 MiB.
    func testARolledBackTransactionGivesItsGrowthBack() throws {
        let dir = try temporaryDirectory(self)
        let files = files()
        let path = dir + "/back.db"
        let db = try ProtectedDatabase.open(path: path, protection: .none, files: files)
        defer { db.close() }
        try db.execute("PRAGMA journal_mode = DELETE; CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        let size = try files.info(path).plaintextSize
        XCTAssertEqual(size, try Self.integer(db, "PRAGMA page_count") * 4096 + (64 << 10), "64 KiB of spare room")
        try db.execute("BEGIN; " + String(repeating: "INSERT INTO t VALUES (randomblob(3000));", count: 100) + " ROLLBACK")
        XCTAssertEqual(try files.info(path).plaintextSize, size, "the rolled-back growth is cut away")
        XCTAssertEqual(try Self.integer(db, "SELECT count(*) FROM t"), 1)
        XCTAssertEqual(try db.rows("PRAGMA integrity_check"), [[.text("ok")]])
        try db.execute("BEGIN; " + String(repeating: "INSERT INTO t VALUES (randomblob(3000));", count: 3000) + " COMMIT")
        let grown = try files.info(path).plaintextSize, used = try Self.integer(db, "PRAGMA page_count") * 4096
        XCTAssertGreaterThan(grown, 8 << 20)
        XCTAssertLessThanOrEqual(grown - used, 4 << 20, "at most 4 MiB unused")
        XCTAssertEqual(ProtectedDatabaseFile.grownSize(toHold: 100 << 20, from: (100 << 20) - 4096), 104 << 20, "at most 4 MiB spare")
        XCTAssertEqual(ProtectedDatabaseFile.grownSize(toHold: 8 << 20, from: (8 << 20) - 4096), 10 << 20, "a quarter")
        XCTAssertEqual(ProtectedDatabaseFile.grownSize(toHold: 1 << 20, from: 512 << 10), (1 << 20) + (1536 << 10), "three transactions")
        XCTAssertEqual(ProtectedDatabaseFile.grownSize(toHold: 8192, from: 4096), 8192 + (64 << 10), "at least 64 KiB")
        XCTAssertEqual(ProtectedDatabaseFile.grownSize(toHold: 8192, from: 4096, step: 0), 8192, "no steps")
        XCTAssertEqual(ProtectedDatabaseFile.grownSize(toHold: 8192, from: 4096, step: 1 << 20), 1 << 20, "the application's step")
    }

    /// In WAL mode a checkpoint that may grow the database hints the database's size as of the last commit, and the file
    /// grows to exactly that before the first page is copied (so the pages it adds are interior overwrites, written
    /// without the seal lock). A checkpoint that a reader's snapshot holds back to the first of two transactions copies
    /// that one's pages only and leaves the file as long as the second one needs: without the growth it would end at the
    /// last page copied. The pages past it stay sealed zeros that no reader reads (each finds them in the WAL): every row
    /// reads back and `integrity_check` is ok before and after a full checkpoint, which leaves the file exactly as long as
    /// the database.
    func testACheckpointGrowsTheFileToTheSizeItHints() throws {
        let dir = try temporaryDirectory(self)
        let files = files()
        let path = dir + "/wal.db"
        let insert50 = "BEGIN; " + String(repeating: "INSERT INTO t VALUES (randomblob(3000));", count: 50) + " COMMIT"
        let writer = try ProtectedDatabase.open(path: path, protection: .none, files: files)
        defer { writer.close() }
        try writer.execute("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x); PRAGMA wal_checkpoint(TRUNCATE)")
        try writer.execute(insert50)
        let firstPages = try Self.integer(writer, "PRAGMA page_count")
        let reader = try ProtectedDatabase.open(path: path, protection: .none, files: files)
        defer { reader.close() }
        try reader.execute("BEGIN")
        XCTAssertEqual(try Self.integer(reader, "SELECT count(*) FROM t"), 50, "the reader's snapshot: the first transaction")
        try writer.execute(insert50)
        let pages = try Self.integer(writer, "PRAGMA page_count")
        XCTAssertGreaterThan(pages, firstPages + 40)
        try writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
        XCTAssertEqual(try files.info(path).plaintextSize, pages * 4096, "grown to the hint, not to the last page copied")
        XCTAssertEqual(try Self.integer(reader, "SELECT count(*) FROM t"), 50)
        try reader.execute("COMMIT")
        let late = try ProtectedDatabase.open(path: path, protection: .none, files: files)
        XCTAssertEqual(try Self.integer(late, "SELECT count(*) FROM t WHERE length(x) = 3000"), 100)
        XCTAssertEqual(try late.rows("PRAGMA integrity_check"), [[.text("ok")]])
        late.close()
        try writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        XCTAssertEqual(try files.info(path).plaintextSize, pages * 4096)
        XCTAssertEqual(try Self.integer(writer, "SELECT count(*) FROM t"), 100)
        XCTAssertEqual(try writer.rows("PRAGMA integrity_check"), [[.text("ok")]])
    }

    /// `SQLITE_FCNTL_CHUNK_SIZE` sets the step, as with SQLite's unix VFS; 0 turns the steps off.
    func testTheApplicationSetsTheStepWithTheChunkSizeFileControl() throws {
        let dir = try temporaryDirectory(self)
        let files = files()
        for (step, path) in [(Int32(0), dir + "/exact.db"), (Int32(1 << 20), dir + "/mib.db")] {
            let db = try ProtectedDatabase.open(path: path, protection: .none, files: files)
            defer { db.close() }
            var n = step
            XCTAssertEqual(sqlite3_file_control(db.connection, "main", SQLITE_FCNTL_CHUNK_SIZE, &n), SQLITE_OK)
            try db.execute("PRAGMA journal_mode = DELETE; CREATE TABLE t(x); BEGIN; " + String(repeating: "INSERT INTO t VALUES (randomblob(3000));", count: 10) + " COMMIT")
            let size = try files.info(path).plaintextSize, used = try Self.integer(db, "PRAGMA page_count") * 4096
            XCTAssertEqual(size, step == 0 ? used : 1 << 20, "step \(step)")
        }
    }

    /// `unprotect` decrypts the whole main file: a chunk of the unused end that a crash left unreadable (simulated by
    /// flipping a byte of it: a page a rolled-back transaction wrote there and no journal restores) must not stop it.
    func testUnprotectCutsTheUnusedEndFirst() throws {
        let dir = try temporaryDirectory(self)
        let files = files()
        let path = dir + "/plain-again.db"
        let pages: Int
        do {
            let db = try ProtectedDatabase.open(path: path, protection: .none, files: files)
            defer { db.close() }
            try db.execute("PRAGMA journal_mode = DELETE; CREATE TABLE t(x); BEGIN; " + String(repeating: "INSERT INTO t VALUES (randomblob(1000));", count: 20) + " COMMIT")
            pages = Int(try Self.integer(db, "PRAGMA page_count"))
        }
        let stride = ProtectedVFS.pageSize + ChunkCipher.forNewFiles(files.options.cipher).overhead
        var bytes = try readBytes(path)
        let chunks = (bytes.count - FileHeader.size) / stride
        XCTAssertGreaterThan(chunks, pages + 2, "an unused end of more than two chunks")
        bytes[FileHeader.size + (chunks - 2) * stride + 100] ^= 0x01  // an interior chunk of the unused end
        try writeBytes(bytes, path)
        XCTAssertTrue(try DatabaseUnit.unprotect(path, files: files))
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, "unix"), SQLITE_OK)
        defer { sqlite3_close_v2(db) }
        var s: OpaquePointer?
        XCTAssertEqual(sqlite3_prepare_v2(db, "SELECT count(*), (SELECT integrity_check FROM pragma_integrity_check) FROM t", -1, &s, nil), SQLITE_OK)
        defer { sqlite3_finalize(s) }
        XCTAssertEqual(sqlite3_step(s), SQLITE_ROW)
        XCTAssertEqual(sqlite3_column_int64(s, 0), 20)
        XCTAssertEqual(sqlite3_column_text(s, 1).map { String(cString: $0) }, "ok")
    }
}
