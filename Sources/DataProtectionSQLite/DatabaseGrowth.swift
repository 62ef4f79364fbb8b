internal import CSQLite
import DataProtection

/// A main database in rollback-journal mode grows with spare room, as SQLite's unix VFS does when an application sets
/// `SQLITE_FCNTL_CHUNK_SIZE` (FORMAT.md §6.7.5, "A database grows in steps"); here it is the default.
///
/// Why: every write past a protected file's end re-seals its committed last chunk (its "last" flag changes), and the
/// chunk journal must hold that chunk's old bytes durably first, then be emptied durably at the commit: two fsyncs that
/// SQLite's own journal does not need. A database that grows by a few pages per commit (inserts) paid them at every
/// commit. With spare room the file's end moves once in several commits. The spare pages are sealed zeros past the
/// last page the database header counts: SQLite counts them in the file's size and writes a page it adds there without
/// reading it (its old content does not matter, so SQLite does not journal it either); a transaction rolled back cuts
/// the file to its size at the transaction's start (`pager_truncate`). A page a crash tore there is therefore never
/// read: the database's next page there overwrites it whole, and `DatabaseUnit.unprotect`, which decrypts the whole
/// file, cuts the unused end first (`cutUnusedEnd`). A file longer than its header's page count is one SQLite reads as
/// it reads the unix VFS's chunked files.
///
/// In WAL mode SQLite writes the database only in checkpoints. A checkpoint that may grow the file hints the database's
/// size as of the last commit (`mxPage` pages, `walCheckpoint`), copies the frames in page order, and cuts the file to
/// that size once every frame is copied; spare room would only be cut away again. The file grows to exactly the hint
/// instead: without it each page the checkpoint adds was a write past the end (the seal lock, and a re-seal of the last
/// chunk); with it they are whole interior pages, written without the seal lock (`writesOnlyUnreadPages`). The pages
/// past what this checkpoint copies stay sealed zeros until a later one copies them: no reader reads them from the
/// file, as each reader whose snapshot counts them finds them in the WAL, past the frames checkpointed.
extension ProtectedDatabaseFile {
    /// The least and the most spare room the default rule leaves: 64 KiB (16 pages), 4 MiB (1,024 pages).
    static let spareRoom: ClosedRange<Int64> = 64 << 10...4 << 20

    /// The size a database file of `size` bytes grows to when a transaction needs `bytes`.
    ///
    /// With a step the application set (`SQLITE_FCNTL_CHUNK_SIZE`): `bytes` rounded up to a whole step, as the unix VFS
    /// does (0: to a whole page, so exactly what SQLite writes). Otherwise `bytes` plus spare room for the transactions
    /// to come: a quarter of `bytes`, or three times this transaction's growth if that is more, within `spareRoom`; so
    /// a file that grows by about the same amount per commit moves its end once in every three commits or fewer, and at
    /// most a quarter of it (4 MiB at most) stays unused.
    static func grownSize(toHold bytes: Int64, from size: Int64, step fixed: Int64? = nil) -> Int64 {
        let page = Int64(ProtectedVFS.pageSize)
        if let fixed {
            let step = max(page, fixed / page * page)
            return (bytes + step - 1) / step * step
        }
        let spare = min(max(bytes / 4, 3 * (bytes - size), spareRoom.lowerBound), spareRoom.upperBound)
        return (bytes + spare + page - 1) / page * page
    }

    /// `SQLITE_FCNTL_SIZE_HINT`: SQLite is about to write a transaction, or a checkpoint, that leaves the file `bytes`
    /// long. A main database that is shorter grows now, with sealed zeros, under the seal lock: in rollback-journal mode
    /// to `grownSize(toHold:from:step:)`, in WAL mode to `bytes` exactly. Any other file ignores the hint (SQLite
    /// treats it as advice).
    func grow(toHold bytes: Int64) -> Int32 {
        guard isMainDatabase else { return SQLITE_OK }
        let inWAL = walIndex != nil || wal != nil
        // In WAL mode only a checkpoint's hint, holding the checkpoint lock, which keeps every other writer of the file
        // out (a hint from elsewhere could grow the file under a checkpoint of another connection that knows it shorter).
        if inWAL, walIndex?.holdsCheckpointLock != true { return SQLITE_OK }
        // A file that holds `bytes` already (its spare room) needs no lock: SQLite hints while it holds RESERVED, or the
        // checkpoint lock. A checkpoint has just taken the size from the file (`xFileSize`); `sealedForWriting` takes
        // it again if it may be stale.
        if !sizeMayBeStale, let size = try? handle.size, bytes <= size { return SQLITE_OK }
        do throws(ProtectionError) {
            try sealedForWriting { () throws(ProtectionError) in
                let size = try handle.size
                if bytes > size { try handle.truncate(to: inWAL ? bytes : Self.grownSize(toHold: bytes, from: size, step: growthStep)) }
            }
        } catch {
            return VFSFailure.record(error, io: DP_IOERR_TRUNCATE)
        }
        return SQLITE_OK
    }

    /// `SQLITE_FCNTL_CHUNK_SIZE`: the application's step, in bytes (0 or less: the file grows to exactly what SQLite
    /// writes, as without the VFS's steps).
    func setGrowthStep(_ bytes: Int32) -> Int32 {
        growthStep = Int64(max(0, bytes))
        return SQLITE_OK
    }
}

extension DatabaseUnit {
    /// Cuts the protected database `path` to the pages its header counts: the unused end it grew by (sealed zeros, or
    /// pages a transaction wrote there before a crash rolled it back, which no journal restores because no page of the
    /// database is there) goes before the whole file is decrypted. Run under the unit's exclusive lock, after SQLite
    /// settled the unit; a header whose page count SQLite does not vouch for (bytes 24–27 and 92–95 differ) leaves the
    /// file as it is.
    static func cutUnusedEnd(_ path: String, files: ProtectedFiles) throws(ProtectionError) {
        let h = try files.open(path, forWriting: true, on: .databaseOpen)
        defer { h.close() }
        let header = try h.read(at: 0, count: ProtectedDatabaseFile.databaseHeaderSize)
        guard header.count == ProtectedDatabaseFile.databaseHeaderSize, header[24..<28] == header[92..<96] else { return }
        func number(_ at: Int, _ n: Int) -> Int64 { header[at..<(at + n)].reduce(0) { $0 << 8 | Int64($1) } }
        let pageSize = number(16, 2) == 1 ? 65_536 : number(16, 2), pages = number(28, 4)
        guard pageSize >= 512, pages > 0, pages * pageSize < (try h.size) else { return }
        try h.truncate(to: pages * pageSize)
        try h.sync()
    }
}
