import DataProtection
import DataProtectionSQLite
import Foundation
import TestSupport
import XCTest

/// `dpctl protect`, `unprotect`, `rotate` and `repair` on SQLite databases as units (issue 21): the built dpctl, the
/// system `sqlite3` shell for plain databases (and to read what `unprotect` gives back), real protected files.
///
/// A unit a crash left behind is made by copying a database's files while a connection holds them mid-way (the
/// `sqlite3` shell's `.shell cp`, or a raw copy beside an open `ProtectedDatabase`): committed frames only in the WAL,
/// or a hot journal whose transaction must be rolled back.
final class DatabaseConversionCommandTests: DpctlTestCase {
    private func unlockedDomain() throws -> ProtectionDomain {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        return try ProtectionDomain.open(at: DomainLocation(home: home, deviceDirectory: devices), keyStore: .kernel(.session))
    }

    /// Runs `sql` in the system `sqlite3` shell on `path`; fails the test unless it exits 0.
    @discardableResult
    private func sqlite(_ path: String, _ sql: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let r = try run("/usr/bin/sqlite3", [path], input: Data(sql.utf8))
        XCTAssertEqual(r.status, 0, "sqlite3 \(path): \(r.stderr)", file: file, line: line)
        return r.out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Integrity and the rows' count and checksum through the protected VFS.
    private func protectedState(_ path: String, _ files: ProtectedFiles) throws -> [[DatabaseValue]] {
        let db = try ProtectedDatabase.open(path: path, protection: .none, files: files)
        defer { db.close() }
        return try db.rows("PRAGMA integrity_check") + db.rows("SELECT count(*), total(x) FROM t")
    }

    /// Runs `statements` on a new protected database `live`, copies its main file and its companion `suffix` to `path`
    /// while the connection still holds them (what a crash at that point leaves), then closes it (any open transaction
    /// rolls back in `live`, not in the copy).
    private func crashedCopy(
        of live: String, to path: String, _ c: ProtectionClass, _ files: ProtectedFiles, copying suffix: String, _ statements: [String]
    ) throws {
        let db = try ProtectedDatabase.open(path: live, protection: c, files: files)
        defer { db.close() }
        for s in statements { try db.execute(s) }
        for s in ["", suffix] { try FileManager.default.copyItem(atPath: live + s, toPath: path + s) }
    }

    private func exists(_ p: String) -> Bool { FileManager.default.fileExists(atPath: p) }

    /// A plain WAL database whose last 300 committed rows are only in its `-wal` (copied while the writer held it):
    /// `protect` of the database file makes a protected database with all 500 rows and integrity ok, and no plain
    /// companion is left. On the old dpctl (each file converted alone) the VFS could not open the unit's plain WAL.
    func testProtectCarriesAPlainDatabasesWALFrames() throws {
        let domain = try unlockedDomain()
        let src = dir + "/src.db", path = dir + "/app.db"
        try sqlite(src, """
            PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
            CREATE TABLE t(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) INSERT INTO t SELECT i FROM n;
            PRAGMA wal_checkpoint(TRUNCATE);
            WITH RECURSIVE n(i) AS (SELECT 201 UNION ALL SELECT i + 1 FROM n WHERE i < 500) INSERT INTO t SELECT i FROM n;
            .shell cp \(src) \(path); cp \(src)-wal \(path)-wal
            """)
        XCTAssertGreaterThan(try bytes(path + "-wal").count, 4096, "the copied WAL holds the last rows")

        let r = try ok(["protect", "--class", "completeUntilFirstUserAuthentication", path])
        XCTAssertTrue(r.stderr.contains("protected 1 files"), r.stderr)
        XCTAssertEqual(try domain.files.info(path).protectionClass, .completeUntilFirstUserAuthentication)
        XCTAssertFalse(exists(path + "-wal") && (try? domain.files.info(path + "-wal")) == nil, "a plain WAL was left beside the protected database")
        XCTAssertFalse(exists(path + "-shm"))
        XCTAssertEqual(try protectedState(path, domain.files), [[.text("ok")], [.integer(500), .real(125_250)]])
        print("protect carried a plain WAL: 500 committed rows (300 only in the WAL) readable through the VFS, integrity ok")
    }

    /// A plain rollback-journal database copied in the middle of a transaction (its pages already spilled into the
    /// main file, the journal hot): `protect` rolls the transaction back, so the protected database holds exactly the
    /// committed rows.
    func testProtectRollsBackAPlainHotJournal() throws {
        let domain = try unlockedDomain()
        let src = dir + "/src.db", path = dir + "/hot.db"
        try sqlite(src, """
            PRAGMA journal_mode = PERSIST; PRAGMA cache_size = 2;
            CREATE TABLE t(x, pad); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) INSERT INTO t SELECT i, randomblob(500) FROM n;
            BEGIN; UPDATE t SET x = x + 1000000; INSERT INTO t SELECT x, pad FROM t;
            .shell cp \(src) \(path); cp \(src)-journal \(path)-journal
            ROLLBACK;
            """)
        XCTAssertEqual(Array(try bytes(path + "-journal").prefix(8)), [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7], "the copied journal is hot")
        try ok(["protect", "--class", "none", dir + "/hot.db"])
        XCTAssertFalse(exists(path + "-journal"))
        XCTAssertEqual(try protectedState(path, domain.files), [[.text("ok")], [.integer(400), .real(80_200)]])
    }

    /// A protected WAL database whose last rows are only in its protected `-wal` (copied while the connection was
    /// open): `unprotect` of the database file gives back a plain database that the system `sqlite3` reads whole, with
    /// nothing protected left beside it. On the old dpctl the protected WAL stayed, and `sqlite3` silently read only
    /// the rows checkpointed before (100 of 350).
    func testUnprotectCheckpointsTheProtectedWALForTheSystemSQLite() throws {
        let domain = try unlockedDomain()
        let live = dir + "/live.db", path = dir + "/back.db"
        try crashedCopy(of: live, to: path, .completeUnlessOpen, domain.files, copying: "-wal", [
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x)",
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) INSERT INTO t SELECT i FROM n; PRAGMA wal_checkpoint(TRUNCATE)",
            "WITH RECURSIVE n(i) AS (SELECT 101 UNION ALL SELECT i + 1 FROM n WHERE i < 350) INSERT INTO t SELECT i FROM n",
        ])

        let r = try ok(["unprotect", path])
        XCTAssertTrue(r.stderr.contains("unprotected 1 files"), r.stderr)
        for s in ["-wal", "-shm", "-journal"] { XCTAssertFalse(exists(path + s), s) }
        XCTAssertEqual(try sqlite(path, "PRAGMA integrity_check; SELECT count(*), sum(x) FROM t;"), "ok\n350|61425")
        print("unprotect carried a protected WAL: 350 committed rows (250 only in the WAL) read by the system sqlite3, integrity ok")
    }

    /// `protect` refuses a plain database that a `sqlite3` process holds open (WAL: SHARED for the connection's life),
    /// and `unprotect` and `rotate` refuse a protected one held by a connection here; each names the file and the fix
    /// and changes nothing. Once closed, `rotate` moves the database with its journal to the new generation.
    func testProtectUnprotectAndRotateRefuseADatabaseInUse() throws {
        let domain = try unlockedDomain()
        let plain = dir + "/plain.db"
        try sqlite(plain, "PRAGMA journal_mode = WAL; CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        holder.arguments = [plain]
        let input = Pipe(), output = Pipe()
        holder.standardInput = input
        holder.standardOutput = output
        try holder.run()
        input.fileHandleForWriting.write(Data("SELECT 'held', count(*) FROM t;\n".utf8))
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("held") { seen += output.fileHandleForReading.availableData }
        let before = try bytes(plain)
        let refused = try dpctl(["protect", "--class", "none", plain])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("in use") && refused.stderr.contains(plain) && refused.stderr.contains("close its connections"), refused.stderr)
        XCTAssertEqual(try bytes(plain), before, "protect changed a database in use")
        try input.fileHandleForWriting.close()
        holder.waitUntilExit()
        try ok(["protect", "--class", "completeUntilFirstUserAuthentication", plain])

        let path = dir + "/held.db"
        let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: domain.files)
        try db.execute("PRAGMA journal_mode = PERSIST; CREATE TABLE t(x); INSERT INTO t VALUES (randomblob(9000))")
        try db.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (2)")
        let files = [path, path + "-journal"]
        let held = try files.map(bytes)
        for args in [["unprotect", path], ["rotate", "--class", "completeUntilFirstUserAuthentication", "--passphrase-file", passphraseFile, dir]] {
            let r = try dpctl(args)
            XCTAssertNotEqual(r.status, 0, args.joined(separator: " "))
            XCTAssertTrue(r.stderr.contains("in use") && r.stderr.contains(path), r.stderr)
            XCTAssertEqual(try files.map(bytes), held, "\(args[0]) changed a database in use")
        }
        XCTAssertEqual(try domain.files.info(path).classKeyGeneration, 1, "the refused rotation started nothing")
        try db.execute("COMMIT")
        db.close()

        XCTAssertTrue(try ok(["rotate", "--class", "completeUntilFirstUserAuthentication", "--passphrase-file", passphraseFile, dir]).stderr.contains("→ 2"))
        for f in files + [plain] { XCTAssertEqual(try domain.files.info(f).classKeyGeneration, 2, f) }
        XCTAssertEqual(try protectedState(path, domain.files).first, [.text("ok")])
    }

    /// A protected database that a connection in another process (the `database-hold` rig) holds open but idle, in
    /// rollback-journal mode between transactions (no SQLite lock held, no journal on disk), is in use: `unprotect`,
    /// `set-class` and `rotate` refuse it naming the file and the fix, `protect` leaves it as it is, no byte changes, and
    /// the connection reads on. Once that process closes it, `unprotect` succeeds with every row. On the old code (which
    /// tested only SQLite's lock, and took such a file for a plain file) `unprotect` converted it under the connection.
    func testCommandsRefuseADatabaseHeldOpenIdleInAnotherProcess() throws {
        let domain = try unlockedDomain()
        let path = dir + "/idle.db"
        let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: domain.files)
        try db.execute("CREATE TABLE t(x); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO t SELECT i FROM n")
        db.close()

        let rig = try startProduct("database-hold", [home, devices, path, "idle"], environment: environment)
        var pending = Data()
        func line() -> String {
            while !pending.contains(UInt8(ascii: "\n")) {
                let d = rig.output.fileHandleForReading.availableData
                if d.isEmpty { break }
                pending += d
            }
            guard let end = pending.firstIndex(of: UInt8(ascii: "\n")) else { defer { pending = Data() }; return String(decoding: pending, as: UTF8.self) }
            defer { pending = Data(pending[(end + 1)...]) }
            return String(decoding: pending[..<end], as: UTF8.self)
        }
        XCTAssertEqual(line(), "READY 300 delete", "the rig's idle connection")
        XCTAssertFalse(exists(path + "-journal"), "an idle rollback-journal connection leaves no companion")

        let held = try bytes(path)
        let c = "completeUntilFirstUserAuthentication"
        for args in [["unprotect", path], ["set-class", "--class", "none", path], ["rotate", "--class", c, "--passphrase-file", passphraseFile, dir]] {
            let r = try dpctl(args)
            XCTAssertNotEqual(r.status, 0, args.joined(separator: " "))
            XCTAssertTrue(r.stderr.contains("in use") && r.stderr.contains(path) && r.stderr.contains("close its connections"), "\(args[0]): \(r.stderr)")
            XCTAssertEqual(try bytes(path), held, "\(args[0]) changed a database held open")
        }
        try ok(["protect", "--class", "none", path])
        XCTAssertEqual(try bytes(path), held, "protect changed a protected database held open")
        XCTAssertEqual(try domain.files.info(path).classKeyGeneration, 1, "the refused rotation started nothing")
        rig.input.fileHandleForWriting.write(Data("check\n".utf8))
        XCTAssertEqual(line(), "300", "the held connection reads on")

        try rig.input.fileHandleForWriting.close()
        XCTAssertEqual(line(), "CLOSED")
        rig.process.waitUntilExit()
        XCTAssertTrue(try ok(["unprotect", path]).stderr.contains("unprotected 1 files"))
        XCTAssertEqual(try sqlite(path, "PRAGMA integrity_check; SELECT count(*), sum(x) FROM t;"), "ok\n300|45150")
        print("an idle connection in another process kept unprotect, set-class and rotate off its database; after it closed, unprotect gave back 300 rows, integrity ok")
    }

    /// A protected database copied mid-transaction (hot protected journal): `repair` rolls it back through SQLite,
    /// says so, and integrity_check is ok with exactly the committed rows.
    func testRepairRollsBackAProtectedHotJournalAndSaysSo() throws {
        let domain = try unlockedDomain()
        let live = dir + "/live.db", path = dir + "/crashed.db"
        try crashedCopy(of: live, to: path, .completeUntilFirstUserAuthentication, domain.files, copying: "-journal", [
            "PRAGMA journal_mode = PERSIST; PRAGMA cache_size = 2; CREATE TABLE t(x, pad)",
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) INSERT INTO t SELECT i, randomblob(500) FROM n",
            "BEGIN; UPDATE t SET x = x + 1000000; INSERT INTO t SELECT x, pad FROM t",
        ])

        let r = try ok(["repair", path])
        XCTAssertTrue(r.out.contains("database journal rolled back, 0 WAL frames checkpointed, integrity ok\t\(path)"), r.out)
        XCTAssertTrue(r.stderr.contains("1 databases recovered"), r.stderr)
        XCTAssertEqual(try protectedState(path, domain.files), [[.text("ok")], [.integer(400), .real(80_200)]])
    }

    /// `repair` stays keyless for what is not a protected database: a plain WAL database with its `-wal` and `-shm`
    /// (and no domain at the home) is left to SQLite, and the run succeeds.
    func testRepairLeavesAPlainDatabaseAloneWithoutADomain() throws {
        let path = dir + "/plain.db"
        try sqlite(path, """
            PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x); INSERT INTO t VALUES (1);
            .shell cp \(path) \(path).keep; cp \(path)-wal \(path).keep-wal
            """)
        let unit = dir + "/plain.db.keep"
        let before = try [unit, unit + "-wal"].map(bytes)
        let r = try dpctl(["repair", dir])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("0 databases recovered"), r.stderr)
        XCTAssertEqual(try [unit, unit + "-wal"].map(bytes), before)
    }
}
