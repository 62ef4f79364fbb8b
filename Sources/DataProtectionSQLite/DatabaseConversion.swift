internal import CSQLite
import DataProtection
import DataProtectionFormat
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

// `protect` and `unprotect` of a whole database: SQLite first settles the unit into its main file (a hot journal rolled
// back, the WAL checkpointed into the main file), then, under the unit's exclusive lock, the settled companions go and
// the main file is converted with the file layer's one atomic replace. A crash or error at any point leaves the old unit
// or the new one, each with every committed transaction.
extension DatabaseUnit {
    /// The first 16 bytes of a plain SQLite database file.
    static let plainMagic = Array("SQLite format 3\0".utf8)
    /// The first 8 bytes of a rollback journal that holds a transaction (SQLite's `aJournalMagic`).
    static let journalMagic: [UInt8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]

    /// Whether `path` is a plain (unprotected) SQLite database: its first 16 bytes are SQLite's header string.
    public static func isPlainDatabase(_ path: String, files: ProtectedFiles) -> Bool {
        prefix(path, 16, io: files.fileIO) == plainMagic
    }

    /// Whether `path` starts as a protected file does (its magic), read without a key or a domain: what `dpctl repair`
    /// checks before it opens the domain for a database's SQLite recovery.
    public static func looksProtected(_ path: String) -> Bool {
        prefix(path, FileHeader.magic.count, io: SystemFileIO()) == FileHeader.magic
    }

    /// Converts the plain SQLite database `path`, with its rollback journal or WAL, into a protected database of class
    /// `c` that the protected VFS opens, losing no committed transaction.
    ///
    /// SQLite (its own unix VFS) first rolls back a hot journal and checkpoints the WAL into the main file, so nothing
    /// committed stays behind in a companion; then, holding the unit's exclusive lock, the settled companions (an empty
    /// WAL, a finished journal, the wal-index) are removed and the main file is rewritten as a protected file of 4 KiB
    /// chunks with one atomic replace. A crash before that replace leaves the plain database with every committed row, a
    /// crash after it the protected one.
    /// - Returns: false (and changes nothing) when `path` is already protected.
    /// - Throws: `.coordinationFailed` naming the database and the fix when a connection holds it (nothing changed);
    ///   `.invalidArgument` when it is not a SQLite database; what `protectInPlace` throws.
    @discardableResult
    public static func protect(_ path: String, as c: ProtectionClass, files: ProtectedFiles) throws(ProtectionError) -> Bool {
        do throws(ProtectionError) { _ = try files.info(path); return false } catch where error.code == .notProtected {}
        try withExclusiveAccess(path, files: files, action: "protect") { () throws(ProtectionError) in }  // in use: refuse before SQLite runs
        try PlainConnection.settle(path, action: "protect")
        return try withExclusiveAccess(path, files: files, action: "protect") { () throws(ProtectionError) in
            try removeSettledCompanions(of: path, files: files, action: "protect") { j throws(ProtectionError) in prefix(j, 8, io: files.fileIO) }
            return try files.withChunkSize(ProtectedVFS.pageSize).protectInPlace(path, as: c)
        }
    }

    /// Converts the protected database `path`, with its journal and WAL, back into a plain SQLite database that any
    /// SQLite (the `sqlite3` shell) reads, losing no committed transaction.
    ///
    /// A connection through the protected VFS first rolls back a hot journal and checkpoints the WAL into the main
    /// file; then, holding the unit's exclusive lock, the settled companions are removed and the main file is decrypted
    /// with one atomic replace. A crash before that replace leaves the protected database, after it the plain one.
    /// - Returns: false (and changes nothing) when `path` is not protected.
    /// - Throws: `.coordinationFailed` when a connection holds it (nothing changed); `.locked` when its class is locked;
    ///   `.authenticationFailed` when a page was tampered with (nothing changed); what `unprotectInPlace` throws.
    @discardableResult
    public static func unprotect(_ path: String, files: ProtectedFiles) throws(ProtectionError) -> Bool {
        do throws(ProtectionError) { _ = try files.info(path) } catch where error.code == .notProtected { return false }
        try withExclusiveAccess(path, files: files, action: "unprotect") { () throws(ProtectionError) in }
        try settleProtected(path, files: files, action: "unprotect")
        try withExclusiveAccess(path, files: files, action: "unprotect") { () throws(ProtectionError) in
            try removeSettledCompanions(of: path, files: files, action: "unprotect") { j throws(ProtectionError) in
                let h = try files.open(j, forWriting: false, on: .databaseOpenReadOnly)
                defer { h.close() }
                return try h.read(at: 0, count: 8)
            }
            try cutUnusedEnd(path, files: files)
            try files.unprotectInPlace(path)
        }
        return true
    }

    /// Rolls back a hot journal and checkpoints the WAL of the protected database `path` through the protected VFS, so
    /// that its main file holds every committed transaction; returns what SQLite found.
    ///
    /// - Throws: `.coordinationFailed` when another connection holds it; the protection error behind a failed statement.
    @discardableResult
    static func settleProtected(_ path: String, files: ProtectedFiles, action: String) throws(ProtectionError) -> Settled {
        let hot = hasHotJournal(path, files: files)
        let db: ProtectedDatabase
        do throws(DatabaseError) {
            db = try ProtectedDatabase.open(path: path, protection: .none, files: files, busyTimeout: .zero)
        } catch { throw error.protectionError(action, path) }
        defer { db.close() }
        do throws(DatabaseError) {
            var settled = Settled(journalRolledBack: hot)
            if case .text(let mode)? = try db.rows("PRAGMA journal_mode").first?.first, mode.lowercased() == "wal" {
                let row = try db.rows("PRAGMA wal_checkpoint(TRUNCATE)").first ?? []
                guard row.first == .integer(0) else { throw DatabaseError(SQLITE_BUSY, "the WAL could not be checkpointed") }
                if case .integer(let n)? = row.dropFirst(2).first { settled.framesCheckpointed = Int(n) }
            } else {
                try db.execute("BEGIN EXCLUSIVE; COMMIT")
            }
            return settled
        } catch { throw error.protectionError(action, path) }
    }

    /// What settling a database found: a hot journal rolled back, WAL frames copied into the main file.
    struct Settled {
        var journalRolledBack = false
        var framesCheckpointed = 0
    }

    /// Whether the protected database `path` has a rollback journal that holds a transaction (SQLite rolls it back at
    /// the next open); false when it has none, or it cannot be read (the open that follows reports why).
    static func hasHotJournal(_ path: String, files: ProtectedFiles) -> Bool {
        guard let h = try? files.open(path + "-journal", forWriting: false, on: .databaseOpenReadOnly) else { return false }
        defer { h.close() }
        return (try? h.read(at: 0, count: 8)) == journalMagic
    }

    /// Removes the settled companions of `path` (a WAL that holds no frame, a journal that holds no transaction, the
    /// wal-index), syncing the directory; run under the exclusive lock, before the main file is converted.
    ///
    /// - Parameter journalPrefix: the first 8 bytes of the journal's content (plain or protected).
    /// - Throws: `.coordinationFailed` when a companion still holds a transaction (a connection wrote between the
    ///   settling and the lock): nothing is removed.
    private static func removeSettledCompanions(
        of path: String, files: ProtectedFiles, action: String, journalPrefix: (String) throws(ProtectionError) -> [UInt8]
    ) throws(ProtectionError) {
        let io = files.fileIO
        let wal = path + "-wal", journal = path + "-journal"
        let walBytes = (try? io.linkStatus(wal)).map { Int64($0.st_size) } ?? 0
        let walEmpty = walBytes == 0 || (try? files.info(wal).plaintextSize) == 0
        var journalHot = false
        if io.exists(journal), (try? io.linkStatus(journal).st_size) != 0 { journalHot = try journalPrefix(journal) == journalMagic }
        guard walEmpty, !journalHot else {
            throw ProtectionError(
                .coordinationFailed,
                "unable to \(action) '\(path)': its \(journalHot ? "journal" : "WAL") holds a transaction written after it was settled (a connection is using it); close its connections and try again; nothing was changed",
                path: path)
        }
        for f in [wal, journal, path + "-shm"] where io.exists(f) {
            do throws(SystemError) { try io.unlink(f) } catch { throw ProtectionError.errno(error.errno, action, f) }
        }
        do throws(SystemError) { try io.syncDirectory(of: path) } catch { throw ProtectionError.errno(error.errno, action, path) }
    }

    /// Up to `n` bytes from the start of the regular file `path` (not following a link); empty when it cannot be read.
    static func prefix(_ path: String, _ n: Int, io: any FileIO) -> [UInt8] {
        guard let fd = try? io.open(path, flags: O_RDONLY | O_NOFOLLOW | O_CLOEXEC, mode: 0) else { return [] }
        defer { io.close(fd) }
        var out = [UInt8](repeating: 0, count: n)
        let got = out.withUnsafeMutableBytes { (try? io.readFully(fd, into: $0, at: 0)) ?? 0 }
        return Array(out[0..<got])
    }
}

extension DatabaseError {
    /// This failure as a protection error about `path`: the one behind it, or `.coordinationFailed` for SQLite's busy
    /// (another connection holds the database), else `.io`.
    func protectionError(_ action: String, _ path: String) -> ProtectionError {
        if let protection { return protection.about(path, action) }
        if resultCode & 0xff == SQLITE_BUSY || resultCode & 0xff == SQLITE_LOCKED {
            return ProtectionError(
                .coordinationFailed,
                "unable to \(action) '\(path)': the database is in use (another connection holds its SQLite lock); close its connections (stop the service) and try again; nothing was changed",
                path: path)
        }
        if resultCode & 0xff == SQLITE_NOTADB {
            return ProtectionError(.invalidArgument, "unable to \(action) '\(path)': it is not a SQLite database; `dpctl \(action)` it as a plain file", path: path)
        }
        return ProtectionError(.io(EIO), "unable to \(action) '\(path)': \(message)", path: path)
    }
}

/// A connection through SQLite's own unix VFS to a plain database, only to settle it before `protect`.
enum PlainConnection {
    /// Rolls back a hot journal and checkpoints the WAL of the plain database `path` into its main file; SQLite's
    /// close removes the emptied WAL.
    ///
    /// - Throws: `.coordinationFailed` when another connection holds it (busy at once: no waiting); `.invalidArgument`
    ///   when it is not a SQLite database; `.io`.
    static func settle(_ path: String, action: String) throws(ProtectionError) {
        // The first SQLite call of a process initializes SQLite; the page wipe must be installed before it, or this
        // process could open no `complete` database afterwards (PageWipe).
        PageWipe.install()
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, "unix")
        defer { sqlite3_close_v2(db) }
        guard rc == SQLITE_OK, let db else { throw DatabaseError.from(rc, db, "open", path).protectionError(action, path) }
        sqlite3_extended_result_codes(db, 1)
        func run(_ sql: String) throws(ProtectionError) -> [String] {
            var statement: OpaquePointer?
            var rc = sqlite3_prepare_v2(db, sql, -1, &statement, nil)
            defer { sqlite3_finalize(statement) }
            var out: [String] = []
            while rc == SQLITE_OK || rc == SQLITE_ROW {
                rc = sqlite3_step(statement)
                if rc == SQLITE_ROW { out += (0..<sqlite3_column_count(statement)).map { sqlite3_column_text(statement, $0).map { String(cString: $0) } ?? "" } }
            }
            guard rc == SQLITE_DONE else { throw DatabaseError.from(rc, db, "settle", path).protectionError(action, path) }
            return out
        }
        if try run("PRAGMA journal_mode").first?.lowercased() == "wal" {
            guard try run("PRAGMA wal_checkpoint(TRUNCATE)").first == "0" else {
                throw DatabaseError(SQLITE_BUSY, "busy").protectionError(action, path)
            }
        } else {
            _ = try run("BEGIN EXCLUSIVE")
            _ = try run("COMMIT")
        }
    }
}
