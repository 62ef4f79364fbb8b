import DataProtection
import DataProtectionSQLite
import Foundation
import XCTest

/// `dpctl ls` and `set-class` on protected SQLite databases (issue 21): the built dpctl against databases that a real
/// connection in this process holds open (through the protected VFS), in a private session keyring.
final class DatabaseCommandTests: DpctlTestCase {
    /// The domain dpctl made, unlocked, as this process sees it (the session keyring the children share).
    private func unlockedDomain() throws -> ProtectionDomain {
        _ = try initDomain()
        try ok(["unlock", "--passphrase-file", passphraseFile])
        return try ProtectionDomain.open(at: DomainLocation(home: home, deviceDirectory: devices), keyStore: .kernel(.session))
    }

    private func count(_ db: ProtectedDatabase) throws -> DatabaseValue? { try db.rows("SELECT count(*) FROM t").first?.first }

    /// A WAL database with an open connection is one item in `ls` (its WAL folded into its row; the plain -shm nowhere),
    /// and `set-class` refuses it while that connection is open (a WAL connection holds SQLite's SHARED lock for life),
    /// changing nothing; after the connection closes it moves.
    func testLsShowsADatabaseAsOneItemAndSetClassRefusesItWhileOpen() throws {
        let domain = try unlockedDomain()
        let path = dir + "/app.db"
        let db = try ProtectedDatabase.open(path: path, protection: .completeUnlessOpen, files: domain.files)
        try db.execute("PRAGMA journal_mode = WAL; CREATE TABLE t(x); INSERT INTO t VALUES (randomblob(5000))")
        XCTAssertTrue(FileManager.default.fileExists(atPath: path + "-wal") && FileManager.default.fileExists(atPath: path + "-shm"))

        let items = try XCTUnwrap(try JSONSerialization.jsonObject(with: ok(["ls", "--json", dir]).stdout) as? [[String: Any]])
        let paths = items.compactMap { $0["path"] as? String }
        XCTAssertEqual(paths.filter { $0.hasPrefix(path) }, [path], "\(paths)")
        let item = try XCTUnwrap(items.first { $0["path"] as? String == path })
        XCTAssertEqual(item["database"] as? Bool, true)
        XCTAssertEqual(item["class"] as? String, "completeUnlessOpen")
        let side = try XCTUnwrap(item["companions"] as? [[String: Any]])
        XCTAssertEqual(side.compactMap { $0["path"] as? String }, [path + "-wal"])
        XCTAssertEqual(side.first?["class"] as? String, "completeUnlessOpen")
        XCTAssertGreaterThan(side.first?["size"] as? Int ?? 0, 4096, "the WAL holds the committed frames")
        let text = try ok(["ls", dir]).out.split(separator: "\n").filter { $0.contains(path) }
        XCTAssertEqual(text.count, 1, "\(text)")
        XCTAssertTrue(text.first?.contains("database + wal") == true, "\(text)")

        let before = try [path, path + "-wal"].map(bytes)
        let refused = try dpctl(["set-class", "--class", "none", path])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("in use") && refused.stderr.contains(path), refused.stderr)
        XCTAssertEqual(try [path, path + "-wal"].map(bytes), before, "set-class changed a database in use")
        XCTAssertEqual(try count(db), .integer(1), "the connection works on")

        db.close()
        XCTAssertTrue(try ok(["set-class", "--class", "none", path]).stderr.contains("1 files moved"))
        XCTAssertEqual(try domain.files.info(path).protectionClass, .none)
    }

    /// A rollback-journal database moves with its journal as one unit (a persistent journal stays beside it); while a
    /// connection holds a write transaction, `set-class` refuses and changes nothing; afterwards every row is there and
    /// `integrity_check` says ok.
    func testSetClassMovesADatabaseWithItsJournalAndRefusesOneInUse() throws {
        let domain = try unlockedDomain()
        let path = dir + "/rollback.db"
        let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: domain.files)
        try db.execute("PRAGMA journal_mode = PERSIST; CREATE TABLE t(x); BEGIN; " + String(repeating: "INSERT INTO t VALUES (randomblob(300));", count: 20) + " COMMIT")
        try db.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (1)")
        let refused = try dpctl(["set-class", "--class", "none", dir])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("in use"), refused.stderr)
        for f in [path, path + "-journal"] { XCTAssertEqual(try domain.files.info(f).protectionClass, .completeUntilFirstUserAuthentication, f) }
        try db.execute("ROLLBACK")
        db.close()

        XCTAssertTrue(try ok(["set-class", "--class", "none", dir]).stderr.contains("2 files moved"))
        for f in [path, path + "-journal"] { XCTAssertEqual(try domain.files.info(f).protectionClass, .none, f) }
        let again = try ProtectedDatabase.open(path: path, protection: .none, files: domain.files)
        defer { again.close() }
        XCTAssertEqual(try again.rows("PRAGMA integrity_check"), [[.text("ok")]])
        XCTAssertEqual(try count(again), .integer(20))
    }
}
