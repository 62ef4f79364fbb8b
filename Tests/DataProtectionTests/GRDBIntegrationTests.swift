import DataProtection
import DataProtectionGRDB
import Foundation
import GRDB
import Locking
import XCTest

/// GRDB on protected databases (issue 21): real GRDB 7 queues and pools through the protected VFS, real protected
/// files, the real kernel keyring (a session keyring per test) and real locks.
final class GRDBIntegrationTests: DomainTestCase {
    private let passphrase = "correct horse"

    private func unlockedDomain() throws -> ProtectionDomain {
        let (d, _) = try makeDomain(passphrase: passphrase)
        try d.unlock(passphrase: try secret(passphrase))
        return d
    }

    private static func count(_ db: Database) throws -> Int { try Int.fetchOne(db, sql: "SELECT count(*) FROM t") ?? -1 }

    /// A new queue on `path` reads `rows` rows and `PRAGMA integrity_check` says ok.
    private func assertIntact(_ path: String, _ files: ProtectedFiles, rows: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let q = try DatabaseQueue(protectedPath: path, protection: .none, files: files)
        try q.read { db in
            XCTAssertEqual(try String.fetchAll(db, sql: "PRAGMA integrity_check"), ["ok"], file: file, line: line)
            XCTAssertEqual(try Self.count(db), rows, file: file, line: line)
        }
        try q.close()
    }

    /// Asserts that `body` fails with GRDB's error for a locked class (SQLITE_AUTH); returns its message.
    @discardableResult
    private func assertLocked(_ what: String, file: StaticString = #filePath, line: UInt = #line, _ body: () throws -> Void) -> String {
        do {
            try body()
            XCTFail("\(what) worked while locked", file: file, line: line)
        } catch let e as DatabaseError {
            XCTAssertTrue(e.isProtectedDataLocked, "\(what): \(e)", file: file, line: line)
            XCTAssertEqual(e.resultCode, .SQLITE_AUTH, "\(what): \(e)", file: file, line: line)
            return "\(e.message ?? "") [\(e)]"
        } catch {
            XCTFail("\(what): \(error)", file: file, line: line)
        }
        return ""
    }

    /// A `complete` DatabaseQueue: rows round-trip, the file is a protected file of the class with no plaintext row;
    /// after `lock` the next read and write fail locked (SQLITE_AUTH) and a new queue fails with the library's message;
    /// after unlock a new queue reads every committed row and integrity_check is ok.
    func testADatabaseQueueRoundTripsAndFailsLockedAfterLock() throws {
        let domain = try unlockedDomain()
        let marker = "grdb-plaintext-marker-0123456789"
        for mode in ["DELETE", "WAL"] {
            let path = root + "/queue-\(mode).db"
            let q = try DatabaseQueue(protectedPath: path, protection: .complete, files: domain.files)
            try q.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = \(mode)") }
            try q.write { db in
                try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, x TEXT)")
                for i in 0..<50 { try db.execute(sql: "INSERT INTO t(x) VALUES (?)", arguments: ["\(marker)-\(i)"]) }
            }
            XCTAssertEqual(try q.read { try String.fetchOne($0, sql: "SELECT x FROM t WHERE id = 7") }, "\(marker)-6")
            XCTAssertEqual(try domain.files.info(path).protectionClass, .complete)
            XCTAssertEqual(try q.read { try Int.fetchOne($0, sql: "PRAGMA page_size") }, 4096)
            for (p, bytes) in try filesBelow(root) where p.hasPrefix(path) {
                XCTAssertFalse(contains(bytes, Array(marker.utf8)), "plaintext in \(p)")
            }
            let before = try readBytes(path)

            try domain.lock(grace: .zero)
            assertLocked("\(mode) read") { _ = try q.read(Self.count) }
            assertLocked("\(mode) write") { try q.write { try $0.execute(sql: "INSERT INTO t(x) VALUES ('after lock')") } }
            let message = assertLocked("\(mode) new queue") { _ = try DatabaseQueue(protectedPath: path, protection: .complete, files: domain.files) }
            XCTAssertTrue(message.contains(path) && message.contains("dpctl unlock"), message)
            print("GRDB new queue while locked: \(message)")
            XCTAssertEqual(try readBytes(path), before, "\(mode): the database changed while locked")

            try domain.unlock(passphrase: try secret(passphrase))
            try q.close()
            try assertIntact(path, domain.files, rows: 50)
        }
    }

    /// A DatabasePool: a writer and three readers on threads at once, over a WAL that is a protected file; every reader
    /// sees whole transactions (the count only grows, in steps of the transaction size) and nothing is lost.
    func testADatabasePoolHasConcurrentWALReadersAndAWriter() throws {
        let domain = try unlockedDomain()
        let path = root + "/pool.db"
        let pool = try DatabasePool(protectedPath: path, protection: .completeUntilFirstUserAuthentication, files: domain.files)
        try pool.write { db in try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, pad BLOB)") }
        XCTAssertEqual(try pool.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") }, "wal")
        XCTAssertEqual(try domain.files.info(path + "-wal").protectionClass, .completeUntilFirstUserAuthentication)
        let transactions = 60, perTransaction = 5
        let failures = Locked<[String]>([])
        let reads = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 4) { k in
            do {
                if k == 0 {
                    for i in 0..<transactions {
                        try pool.write { db in
                            for j in 0..<perTransaction { try db.execute(sql: "INSERT INTO t(k, pad) VALUES (?, randomblob(2000))", arguments: [i * 10 + j]) }
                        }
                    }
                } else {
                    var last = 0
                    while last < transactions * perTransaction {
                        let n = try pool.read(Self.count)
                        if n < last || n % perTransaction != 0 { failures.withLock { $0.append("reader \(k) saw \(n) rows after \(last)") } }
                        last = n
                        reads.withLock { $0 += 1 }
                    }
                }
            } catch { failures.withLock { $0.append("thread \(k): \(error)") } }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        print("GRDB pool: \(transactions) write transactions, \(reads.withLock { $0 }) concurrent snapshot reads")
        try pool.close()
        try assertIntact(path, domain.files, rows: transactions * perTransaction)
    }

    /// A `completeUnlessOpen` pool opened before `lock` keeps reading and writing; a new pool or queue fails locked with
    /// the library's message; after unlock every row is there.
    func testACompleteUnlessOpenPoolKeepsWorkingAfterLockWhileANewOpenFails() throws {
        let domain = try unlockedDomain()
        let path = root + "/b-pool.db"
        let pool = try DatabasePool(protectedPath: path, protection: .completeUnlessOpen, files: domain.files)
        try pool.write { db in try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, x INTEGER); INSERT INTO t(x) VALUES (0)") }
        XCTAssertEqual(try pool.read(Self.count), 1)  // a reader connection is open now
        try domain.lock(grace: .zero)
        for i in 1...20 { try pool.write { try $0.execute(sql: "INSERT INTO t(x) VALUES (?)", arguments: [i]) } }
        XCTAssertEqual(try pool.read(Self.count), 21)
        let message = assertLocked("new pool") { _ = try DatabasePool(protectedPath: path, protection: .completeUnlessOpen, files: domain.files) }
        XCTAssertTrue(message.contains("dpctl unlock"), message)
        assertLocked("new queue") { _ = try DatabaseQueue(protectedPath: path, protection: .completeUnlessOpen, files: domain.files) }
        try pool.close()
        try domain.unlock(passphrase: try secret(passphrase))
        try assertIntact(path, domain.files, rows: 21)
    }

    /// A tampered page reaches a GRDB caller as `isProtectedDataTampered` (the VFS's extended code 17419 under
    /// `SQLITE_CORRUPT`), never as rows: a page flipped inside the table fails the statement that reads it; a flipped
    /// chunk 0 fails the open itself, with the library's message naming the file and the fix.
    func testATamperedPageReachesGRDBAsTamperedNotAsRows() throws {
        let domain = try unlockedDomain()
        let path = root + "/tampered.db"
        let q = try DatabaseQueue(protectedPath: path, protection: .completeUntilFirstUserAuthentication, files: domain.files)
        try q.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB)")
            for i in 0..<200 { try db.execute(sql: "INSERT INTO t(pad) VALUES (randomblob(?))", arguments: [500 + i]) }
        }
        let pages = try q.read { try Int.fetchOne($0, sql: "PRAGMA page_count") } ?? 0
        try q.close()
        let original = try readBytes(path)
        let stride = 4096 + 40, chunks = (original.count - 176) / stride
        XCTAssertGreaterThan(pages, 10)
        XCTAssertGreaterThanOrEqual(chunks, pages, "the database's pages, then its spare room (FORMAT.md §6.7.5)")

        func flipped(chunk: Int) throws {
            var bytes = original
            bytes[176 + chunk * stride + 24 + 1000] ^= 0x40
            try writeBytes(bytes, path)
        }
        func assertTampered(_ what: String, _ body: () throws -> Void) -> String {
            do {
                try body()
                XCTFail("\(what) worked on a tampered database")
            } catch let e as DatabaseError {
                XCTAssertTrue(e.isProtectedDataTampered, "\(what): \(e)")
                XCTAssertEqual(e.resultCode, .SQLITE_CORRUPT, "\(what): \(e)")
                XCTAssertFalse(e.isProtectedDataLocked)
                return e.message ?? ""
            } catch { XCTFail("\(what): \(error)") }
            return ""
        }

        try flipped(chunk: pages / 2)  // a leaf page of t
        let reader = try DatabaseQueue(protectedPath: path, protection: .none, files: domain.files)
        _ = assertTampered("a statement reading the flipped page") { _ = try reader.read { try Data.fetchAll($0, sql: "SELECT pad FROM t") } }
        try reader.close()

        try flipped(chunk: 0)  // page 1: the schema, which the open reads
        let message = assertTampered("the open") { _ = try DatabaseQueue(protectedPath: path, protection: .none, files: domain.files) }
        XCTAssertTrue(message.contains(path) && message.contains("restore"), message)

        try writeBytes(original, path)
        try assertIntact(path, domain.files, rows: 200)
    }
}
