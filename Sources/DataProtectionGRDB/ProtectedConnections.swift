import DataProtection
import DataProtectionSQLite
import GRDB

extension DatabaseQueue {
    /// Opens (creating if absent) the protected database at `path` as a GRDB queue.
    ///
    /// The same entry point as `ProtectedDatabase.open` (`ProtectedDataEntryPoint.databaseOpen`, or
    /// `databaseOpenReadOnly` with `configuration.readonly`): GRDB's connections open the URI filename of the files' VFS,
    /// so every page goes through the protected-file layer and its class semantics hold per connection.
    /// - Parameters:
    ///   - path: the database file.
    ///   - protection: the class of a new database (and of its journal and WAL); an existing one keeps its own.
    ///   - files: the domain's files (`domain.files`): their keys and their lock govern the queue.
    ///   - configuration: GRDB's configuration; the library adds its own `prepareDatabase` step (4 KiB pages, the schema read at open).
    /// - Throws: GRDB's `DatabaseError`; `isProtectedDataLocked` (`SQLITE_AUTH`, with the library's message naming the
    ///   file and `dpctl unlock`) when the class is locked.
    public convenience init(protectedPath path: String, protection: ProtectionClass, files: ProtectedFiles, configuration: Configuration = Configuration()) throws {
        let (uri, configuration) = try ProtectedConnections.prepare(path, protection, files, configuration)
        do { try self.init(path: uri, configuration: configuration) } catch { throw ProtectedConnections.explained(error) }
    }
}

extension DatabasePool {
    /// Opens (creating if absent) the protected database at `path` as a GRDB pool: a writer and concurrent readers in
    /// WAL mode, whose WAL is a protected file of the database's class (the wal-index `-shm` stays plain; SECURITY.md).
    ///
    /// The same entry point as `DatabaseQueue(protectedPath:protection:files:configuration:)`. Readers open lazily: after
    /// `lock`, a `complete` pool's next statement fails locked; a `completeUnlessOpen` pool's open connections keep
    /// working, while a reader it opens after the lock fails.
    /// - Parameters: as for `DatabaseQueue(protectedPath:protection:files:configuration:)`.
    /// - Throws: GRDB's `DatabaseError`; `isProtectedDataLocked` when the class is locked.
    public convenience init(protectedPath path: String, protection: ProtectionClass, files: ProtectedFiles, configuration: Configuration = Configuration()) throws {
        let (uri, configuration) = try ProtectedConnections.prepare(path, protection, files, configuration)
        do { try self.init(path: uri, configuration: configuration) } catch { throw ProtectedConnections.explained(error) }
    }
}

extension GRDB.DatabaseError {
    /// Whether the statement failed because `lock` withdrew the database's class key (SQLite's `SQLITE_AUTH`, which the
    /// protected VFS returns for a locked class, and GRDB's own authorizer never does).
    ///
    /// An open's error carries the library's message ("class complete is locked; run `dpctl unlock`"); a statement's
    /// later in the connection's life carries SQLite's ("authorization denied"): SQLite gives a VFS no way to set a
    /// connection's message.
    public var isProtectedDataLocked: Bool { resultCode == .SQLITE_AUTH }

    /// Whether the statement failed because a page of the database, its journal or its WAL failed authentication: the
    /// file was tampered with (or damaged), no byte of that page was returned, and the database should be restored
    /// from a backup.
    ///
    /// The extended result code is the VFS's own corruption code (`DataProtectionSQLite.DatabaseError.tampered`,
    /// 17419), which SQLite's own corruption findings never use; its primary code is `SQLITE_CORRUPT`, so code that
    /// checks only that sees corruption. An open's error carries the library's message (naming the file, the chunk
    /// and "restore it from a backup"); a statement's later in the connection's life carries SQLite's.
    public var isProtectedDataTampered: Bool { extendedResultCode.rawValue == DataProtectionSQLite.DatabaseError.tampered }
}

/// The configuration every protected GRDB connection opens with.
enum ProtectedConnections {
    /// `error` from GRDB's open with the library's message when the VFS recorded why (a locked class when
    /// SQLite opened the main file): `sqlite3_open_v2` runs on the initialiser's thread, where the VFS records it.
    static func explained(_ error: any Error) -> any Error {
        guard let e = error as? GRDB.DatabaseError, let recorded = VFSFailure.take() else { return error }
        return GRDB.DatabaseError(resultCode: e.extendedResultCode, message: recorded.message, sql: e.sql)
    }

    /// The URI filename of `path` through the VFS of `files`, and `configuration` with the library's connection setup
    /// first: 4 KiB pages (one page is one chunk), and the schema read at open so that a locked class fails the open,
    /// with the library's message (the VFS records it on the thread that runs the statement, which is this one).
    static func prepare(
        _ path: String, _ protection: ProtectionClass, _ files: ProtectedFiles, _ configuration: Configuration
    ) throws -> (String, Configuration) {
        let vfs: ProtectedVFS
        do { vfs = try ProtectedVFS.of(files) } catch { throw GRDB.DatabaseError(resultCode: ResultCode(rawValue: error.resultCode), message: error.message) }
        guard ProtectedVFS.readsURIFilenames else {
            throw GRDB.DatabaseError(resultCode: .SQLITE_MISUSE, message: "unable to open '\(path)': this SQLite was built without SQLITE_USE_URI, so GRDB's open cannot name the protected VFS; use ProtectedDatabase.open")
        }
        var configuration = configuration
        configuration.prepareDatabase { db in
            // Every connection GRDB opens (a pool's readers too) must have reached the protected VFS, never the default.
            guard vfs.isVFS(of: db.sqliteConnection!) else {
                throw GRDB.DatabaseError(resultCode: .SQLITE_MISUSE, message: "unable to open '\(path)': the connection did not open through the protected VFS '\(vfs.name)'")
            }
            _ = VFSFailure.take()
            do {
                if !db.configuration.readonly { try db.execute(sql: "PRAGMA page_size = \(ProtectedVFS.pageSize)") }
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_schema")
            } catch let error as GRDB.DatabaseError {
                guard let recorded = VFSFailure.take() else { throw error }
                throw GRDB.DatabaseError(resultCode: error.extendedResultCode, message: recorded.message, sql: error.sql)
            }
        }
        _ = VFSFailure.take()
        return (vfs.uri(path, protection: protection), configuration)
    }
}
