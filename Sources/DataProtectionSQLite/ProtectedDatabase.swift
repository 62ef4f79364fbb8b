internal import CSQLite
import DataProtection

/// A connection to a protected SQLite database: its main file, journal and WAL are protected files of one class.
///
/// The class semantics hold per connection, as for a file handle: after `lock`, a `complete` database's next
/// statement fails with `DatabaseError.isLocked` (raw SQLite: `SQLITE_AUTH`) and its files stay as they were; a
/// `completeUnlessOpen` connection opened before the lock keeps working until closed, while a new open fails; classes
/// C and D keep working. A connection is used from one thread at a time (SQLite's serialized mode is not assumed).
public final class ProtectedDatabase {
    /// The database file's path.
    public let path: String
    /// The VFS the connection goes through.
    public let vfs: ProtectedVFS
    /// The `sqlite3 *` handle, for GRDB and raw SQLite calls (`sqlite3_prepare_v2`, …); nil once closed.
    public private(set) var connection: OpaquePointer?

    private init(path: String, vfs: ProtectedVFS, connection: OpaquePointer) {
        self.path = path
        self.vfs = vfs
        self.connection = connection
    }

    deinit { close() }

    /// Opens (creating if absent) the protected database at `path`.
    ///
    /// A new database takes `protection`; an existing one keeps the class in its header (`protection` is then
    /// ignored, as for `ProtectedFiles.open`). Pages are 4 KiB, the chunk size of its files.
    /// - Parameters:
    ///   - path: the database file.
    ///   - protection: the class of a new database (and of its journal and WAL).
    ///   - files: the domain's files (`domain.files`): their keys and their lock govern the connection.
    ///   - readOnly: open read-only (the file must exist).
    ///   - busyTimeout: how long a statement waits for another connection's lock before failing `SQLITE_BUSY`
    ///     (`sqlite3_busy_timeout`; the open itself reads the schema, so it waits too).
    /// - Throws: `DatabaseError`; `isLocked` when the class is locked (`protection` holds the `ProtectionError`).
    public static func open(
        path: String, protection: ProtectionClass, files: ProtectedFiles, readOnly: Bool = false, busyTimeout: Duration = .seconds(5)
    ) throws(DatabaseError) -> ProtectedDatabase {
        let vfs = try ProtectedVFS.of(files)
        let uri = vfs.uri(path, protection: protection)
        var db: OpaquePointer?
        _ = VFSFailure.take()
        // Extended result codes from the open on: a tampered header or first page fails the open itself, and a raw
        // caller tells `DatabaseError.tampered` from SQLite's own SQLITE_CORRUPT only by the extended code.
        let flags = SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        let rc = sqlite3_open_v2(uri, &db, flags, vfs.name)
        guard rc == SQLITE_OK, let db else {
            let e = DatabaseError.from(rc, db, "open", path)
            sqlite3_close_v2(db)
            throw e
        }
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, Int32(clamping: busyTimeout.components.seconds * 1000 + busyTimeout.components.attoseconds / 1_000_000_000_000_000))
        let d = ProtectedDatabase(path: path, vfs: vfs, connection: db)
        // SQLite opens the file lazily: read its header now, so a locked class fails the open, as a file's would.
        try d.execute(readOnly ? "SELECT count(*) FROM sqlite_schema" : "PRAGMA page_size = \(ProtectedVFS.pageSize); SELECT count(*) FROM sqlite_schema")
        return d
    }

    /// Runs one or more SQL statements that return no rows of interest.
    ///
    /// - Throws: `DatabaseError` (`isLocked` once a `complete` database's class is locked).
    public func execute(_ sql: String) throws(DatabaseError) {
        guard let db = connection else { throw closed() }
        _ = VFSFailure.take()
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw DatabaseError.from(rc, db, "query", path) }
    }

    /// Runs one statement with `arguments` bound to its `?` parameters; returns its rows.
    ///
    /// - Throws: `DatabaseError`.
    @discardableResult
    public func rows(_ sql: String, _ arguments: [DatabaseValue] = []) throws(DatabaseError) -> [[DatabaseValue]] {
        guard let db = connection else { throw closed() }
        _ = VFSFailure.take()
        var statement: OpaquePointer?
        var rc = sqlite3_prepare_v2(db, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw DatabaseError.from(rc, db, "query", path) }
        defer { sqlite3_finalize(statement) }
        for (i, a) in arguments.enumerated() {
            let k = Int32(i + 1)
            rc = switch a {
            case .null: sqlite3_bind_null(statement, k)
            case .integer(let v): sqlite3_bind_int64(statement, k, v)
            case .real(let v): sqlite3_bind_double(statement, k, v)
            case .text(let v): sqlite3_bind_text(statement, k, v, -1, dp_sqlite3_transient())
            case .blob(let v): v.withUnsafeBytes { sqlite3_bind_blob(statement, k, $0.baseAddress, Int32($0.count), dp_sqlite3_transient()) }
            }
            guard rc == SQLITE_OK else { throw DatabaseError.from(rc, db, "query", path) }
        }
        var out: [[DatabaseValue]] = []
        while true {
            rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return out }
            guard rc == SQLITE_ROW else { throw DatabaseError.from(rc, db, "query", path) }
            out.append((0..<sqlite3_column_count(statement)).map { DatabaseValue(statement, $0) })
        }
    }

    /// Closes the connection (SQLite finishes with its files: a WAL database's last connection checkpoints).
    public func close() {
        guard let db = connection else { return }
        connection = nil
        sqlite3_close_v2(db)
    }

    private func closed() -> DatabaseError {
        DatabaseError(SQLITE_MISUSE, "unable to query '\(path)': the connection is closed; open the database again")
    }
}

/// A value in a row, or bound to a parameter.
public enum DatabaseValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    init(_ statement: OpaquePointer, _ i: Int32) {
        switch sqlite3_column_type(statement, i) {
        case SQLITE_INTEGER: self = .integer(sqlite3_column_int64(statement, i))
        case SQLITE_FLOAT: self = .real(sqlite3_column_double(statement, i))
        case SQLITE_TEXT: self = .text(String(cString: sqlite3_column_text(statement, i)))
        case SQLITE_BLOB:
            let n = Int(sqlite3_column_bytes(statement, i))
            self = .blob(n == 0 ? [] : Array(UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, i), count: n)))
        default: self = .null
        }
    }
}
