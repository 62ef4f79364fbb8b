// The guarantee matrix's database drivers: a protected database of the cell's class holding the cell's plaintext as
// one row, opened through ProtectedDatabase (read-write in WAL mode, read-only in rollback-journal mode).
import DataProtection
import DataProtectionSQLite

/// What a handle entry point returned: a protected file handle or a database connection.
public enum MatrixHandle {
    case file(ProtectedFileHandle)
    case database(ProtectedDatabase)

    public var file: ProtectedFileHandle {
        guard case .file(let h) = self else { preconditionFailure("a database cell used as a file") }
        return h
    }

    public var database: ProtectedDatabase {
        guard case .database(let d) = self else { preconditionFailure("a file cell used as a database") }
        return d
    }
}

public enum MatrixDatabase {
    /// Creates the cell's database: table `t(x BLOB)` holding `plaintext`.
    static func prepare(_ path: String, protection: ProtectionClass, plaintext: [UInt8], files: ProtectedFiles, wal: Bool) throws {
        let db = try ProtectedDatabase.open(path: path, protection: protection, files: files)
        defer { db.close() }
        if wal { try db.execute("PRAGMA journal_mode = WAL") }
        try db.execute("CREATE TABLE t(x BLOB)")
        try db.rows("INSERT INTO t VALUES (?)", [.blob(plaintext)])
    }

    /// Opens the cell's database; a `DatabaseError` caused by a protected file is thrown as that `ProtectionError`.
    static func open(_ path: String, protection: ProtectionClass, files: ProtectedFiles, readOnly: Bool) throws -> ProtectedDatabase {
        try unwrapping { try ProtectedDatabase.open(path: path, protection: protection, files: files, readOnly: readOnly) }
    }

    /// Inserts `bytes` as a row, then closes the connection.
    static func insert(_ bytes: [UInt8], into db: ProtectedDatabase) throws {
        defer { db.close() }
        try unwrapping { try db.rows("INSERT INTO t VALUES (?)", [.blob(bytes)]) }
    }

    /// The first row's bytes, then closes the connection.
    static func firstRow(of db: ProtectedDatabase) throws -> [UInt8]? {
        defer { db.close() }
        let rows = try unwrapping { try db.rows("SELECT x FROM t ORDER BY rowid") }
        guard case .blob(let b)? = rows.first?.first else { return nil }
        return b
    }

    /// Nil when a fresh connection reads exactly `rows` and `PRAGMA integrity_check` says ok; else what is wrong.
    static func check(_ path: String, files: ProtectedFiles, holds rows: [[UInt8]]) throws -> String? {
        let db = try ProtectedDatabase.open(path: path, protection: .none, files: files)
        defer { db.close() }
        let got = try db.rows("SELECT x FROM t ORDER BY rowid").map { row -> [UInt8] in
            if case .blob(let b)? = row.first { return b }
            return []
        }
        if got != rows { return "the database holds \(got.count) rows (\(got.map(\.count)) bytes), not \(rows.count)" }
        let integrity = try db.rows("PRAGMA integrity_check")
        return integrity == [[.text("ok")]] ? nil : "integrity_check says \(integrity)"
    }

    private static func unwrapping<R>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch let e as DatabaseError { throw e.protection ?? e }
    }
}
