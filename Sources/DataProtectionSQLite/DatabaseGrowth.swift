internal import CSQLite
import DataProtection

/// A main database in rollback-journal mode grows in steps, as SQLite's unix VFS does when an application sets
/// `SQLITE_FCNTL_CHUNK_SIZE` (FORMAT.md §6.7.5, "A database grows in steps"); here it is the default.
///
/// Why: every write past a protected file's end re-seals its committed last chunk (its "last" flag changes), and the
/// chunk journal must hold that chunk's old bytes durably first, then be emptied durably at the commit: two fsyncs that
/// SQLite's own journal does not need. A transaction that grows the database by a page or two per commit (inserts)
/// paid them every time. Grown in steps, the file's end moves once per step; the pages between the last one SQLite
/// uses and the end are sealed zeros, which SQLite counts in the file's size, journals before it first writes them
/// (they are inside the size a transaction started with) and cuts away when it rolls a transaction back
/// (`pager_truncate` to the size in the journal's header). A file longer than its database header's page count is one
/// SQLite reads as it reads the unix VFS's chunked files.
///
/// In WAL mode SQLite writes the database only in checkpoints, which hint the size and then cut the file to it when
/// every frame is copied: growing in steps there would only add work, so a connection with a WAL does not.
extension ProtectedDatabaseFile {
    /// The smallest and the largest step of the default rule: 64 KiB (16 pages), 4 MiB (1,024 pages).
    static let growthSteps: ClosedRange<Int64> = 64 << 10...4 << 20

    /// The size a database file of at least `bytes` bytes grows to: `bytes` rounded up to a whole step. The step is
    /// `growthStep` when the application set one (`SQLITE_FCNTL_CHUNK_SIZE`; 0: no steps), else a quarter of `bytes`
    /// between the bounds above; always a whole number of pages. So by default at most a fifth of the file (4 MiB at
    /// most) stays unused, and a file that grows by a constant amount per commit moves its end once in every few commits.
    static func grownSize(toHold bytes: Int64, step fixed: Int64? = nil) -> Int64 {
        let page = Int64(ProtectedVFS.pageSize)
        let step = max(page, (fixed ?? min(max(bytes / 4, growthSteps.lowerBound), growthSteps.upperBound)) / page * page)
        return (bytes + step - 1) / step * step
    }

    /// `SQLITE_FCNTL_SIZE_HINT`: SQLite is about to write a transaction that leaves the file `bytes` long. A main
    /// database in rollback-journal mode that is shorter grows to `grownSize(toHold:step:)` now, with sealed zeros,
    /// under the seal lock; anything else ignores the hint (SQLite treats it as advice).
    func grow(toHold bytes: Int64) -> Int32 {
        guard isMainDatabase, walIndex == nil, wal == nil else { return SQLITE_OK }
        do throws(ProtectionError) {
            try sealed(.exclusive) { () throws(ProtectionError) in
                if bytes > (try handle.size) { try handle.truncate(to: Self.grownSize(toHold: bytes, step: growthStep)) }
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
