import DataProtection
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

/// A protected database on disk as one unit: its main file and the protected files SQLite keeps beside it, which
/// `dpctl ls`, `set-class` and the other whole-file commands handle together.
///
/// The unit is the main file plus `<main>-journal` and `<main>-wal` when they exist (each a protected file of the
/// database's class); the wal-index `<main>-shm` is plain and belongs to no command (SECURITY.md). A file is taken for a
/// database's main file when one of those three exists beside it: a database in use always has one (a rollback
/// transaction its journal, a WAL-mode connection its `-wal` and `-shm`), and one at rest is a single file, which the
/// commands already handle whole.
public enum DatabaseUnit {
    /// The names SQLite gives a database's protected companions, after the main file's name.
    public static let companionSuffixes = ["-journal", "-wal"]

    /// The protected companions of the database `path` that exist now (journal, WAL), in that order.
    public static func companions(of path: String, files: ProtectedFiles) -> [String] {
        companionSuffixes.map { path + $0 }.filter { files.fileIO.exists($0) }
    }

    /// Whether `path` is a database's main file: a companion or the wal-index exists beside it, or a connection through
    /// the protected VFS holds it open (its connection lock, `ProtectedDatabaseFile.connectionByte`), as one idle in
    /// rollback-journal mode does with no companion on disk.
    public static func isDatabase(_ path: String, files: ProtectedFiles) -> Bool {
        (companionSuffixes + ["-shm"]).contains { files.fileIO.exists(path + $0) } || isOpenByAConnection(path, io: files.fileIO)
    }

    /// Whether a connection (this process or another) holds the connection lock of `path`; false when it cannot be read.
    static func isOpenByAConnection(_ path: String, io: any FileIO) -> Bool {
        guard let fd = try? io.open(path, flags: O_RDONLY | O_NOFOLLOW | O_CLOEXEC, mode: 0) else { return false }
        defer { io.close(fd) }
        return OFDLock.isLocked(fd: fd, .exclusive, start: ProtectedDatabaseFile.connectionByte, length: 1) == .wouldBlock
    }

    /// The main file of which `path` is a companion (`app.db` for `app.db-wal`), if that file exists.
    public static func mainFile(ofCompanion path: String, files: ProtectedFiles) -> String? {
        mainFile(of: path, suffixes: companionSuffixes, files: files)
    }

    /// The main file of which `path` is a companion or the wal-index (`app.db` for `app.db-shm`), if that file exists:
    /// the files `protect` and `unprotect` handle with their database, never on their own.
    public static func mainFile(ofSideFile path: String, files: ProtectedFiles) -> String? {
        mainFile(of: path, suffixes: companionSuffixes + ["-shm"], files: files)
    }

    private static func mainFile(of path: String, suffixes: [String], files: ProtectedFiles) -> String? {
        for s in suffixes where path.hasSuffix(s) && path.count > s.count {
            let main = String(path.dropLast(s.count))
            if files.fileIO.exists(main) { return main }
        }
        return nil
    }

    /// Runs `body` while holding SQLite's EXCLUSIVE lock and the connection lock on the database `path`, or fails if
    /// any connection (in this process or another) holds it open through the protected VFS, or holds a SQLite lock on
    /// it through SQLite's unix VFS.
    ///
    /// Two locks, both OFD write locks taken without waiting (`DatabaseLocks.swift`). The connection byte is held
    /// shared by every protected connection from its open to its close, idle or not: an idle rollback-journal
    /// connection holds no SQLite lock, yet its handle would keep the old file (or the old key) across a change, so
    /// it is refused here, and a new open fails busy while `body` runs. SQLite's own lock (the pending, reserved and
    /// shared bytes at 1 GiB) conflicts with the unix VFS's POSIX locks as well: a plain database in use by a `sqlite3`
    /// process is refused while it holds a transaction or runs in WAL mode.
    /// - Parameters:
    ///   - path: the database's main file.
    ///   - action: what `body` does, for the message ("change the class of").
    /// - Throws: `.coordinationFailed` naming the database and the fix when it is in use; `.notFound`, `.io`; what
    ///   `body` throws.
    public static func withExclusiveAccess<T>(
        _ path: String, files: ProtectedFiles, action: String, _ body: () throws(ProtectionError) -> T
    ) throws(ProtectionError) -> T {
        let io = files.fileIO
        let fd: Int32
        do throws(OwnedFileFailure) { fd = try io.openOwned(path, flags: O_RDWR | O_CLOEXEC, owner: .anyone) } catch {
            switch error {
            case .system(let e): throw ProtectionError(e.errno == ENOENT ? .notFound : .io(e.errno), "unable to \(action) '\(path)': \(e)", path: path)
            case .foreign(let what): throw ProtectionError(.invalidArgument, "unable to \(action) '\(path)': it is \(what), not a database file; remove it", path: path)
            }
        }
        defer { io.close(fd) }  // closing the descriptor drops its OFD lock
        let ranges = [
            (ProtectedDatabaseFile.connectionByte, Int64(1), "holds it open"),
            (ProtectedDatabaseFile.pendingByte, 2 + ProtectedDatabaseFile.sharedSize, "holds its SQLite lock"),
        ]
        for (first, length, what) in ranges {
            switch OFDLock.trySet(fd: fd, .exclusive, start: first, length: length) {
            case .done: continue
            case .wouldBlock:
                throw ProtectionError(
                    .coordinationFailed,
                    "unable to \(action) '\(path)': the database is in use (another connection \(what)); close its connections (stop the service) and try again; nothing was changed",
                    path: path)
            case .failed(let e): throw ProtectionError(.io(e), "unable to \(action) '\(path)': cannot lock it: \(String(cString: strerror(e)))", path: path)
            }
        }
        return try body()
    }

    /// Moves the database `path` and its journal and WAL to class `c` together, while no connection holds it.
    ///
    /// - Returns: the files rewrapped (those already of class `c` are left as they are).
    /// - Throws: `.coordinationFailed` when the database is in use (nothing changed); what `ProtectedFiles.rewrap`
    ///   throws. A failure part way (a companion locked) leaves the main file of the new class and the companion of
    ///   the old: run the command again, which finishes it.
    public static func setClass(_ path: String, to c: ProtectionClass, files: ProtectedFiles) throws(ProtectionError) -> Int {
        try withExclusiveAccess(path, files: files, action: "change the class of") { () throws(ProtectionError) in
            var changed = 0
            for f in [path] + companions(of: path, files: files) {
                if case .rewrapped = try files.rewrap(f, to: c) { changed += 1 }
            }
            return changed
        }
    }
}
