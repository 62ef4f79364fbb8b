@_spi(Testing) import DataProtection
import DataProtectionSQLite
import ProtectionCrypto
#if canImport(Glibc)
import Glibc
#endif

// The protected-database operations of the crash harness (issue 21): a stream of transactions on a protected SQLite
// database, in rollback-journal and WAL modes, killed at every I/O call. Each transaction k inserts six rows of seeded
// bytes (several pages) and bumps a counter row, so a fresh process can tell whether it is there whole, partly or not.
extension Scenario {
    public static let databaseTransactions = 8
    public static let rowsPerTransaction = 6

    var database: String { file }

    /// The database's rows of transaction `k` (k ≥ 1): seeded bytes, about 3 KB each, so a transaction spans pages.
    static func databaseRows(_ k: Int) -> [[UInt8]] {
        var rng = SeededBytes(seed: 100 + UInt64(k))
        return (0..<rowsPerTransaction).map { _ in rng.bytes(2000 + rng.int(2000)) }
    }

    /// Creates the database (class `complete`) in the operation's journal mode, with the counter row and 20 rows
    /// of transaction 0, so later transactions overwrite pages as well as append them.
    func prepareDatabase(_ d: ProtectionDomain) throws {
        let db = try ProtectedDatabase.open(path: database, protection: .complete, files: d.files)
        defer { db.close() }
        try db.execute("""
            PRAGMA journal_mode = \([.databaseWAL, .databaseWALNormal, .databaseWALLog].contains(op) ? "WAL" : op == .databaseRollback || op == .databaseRollbackNormal ? "DELETE" : "PERSIST");
            CREATE TABLE counter(n INTEGER); INSERT INTO counter VALUES (0);
            CREATE TABLE t(txn INTEGER, i INTEGER, pad BLOB); CREATE INDEX t_txn ON t(txn)
            """)
        var rng = SeededBytes(seed: 99)
        for i in 0..<20 { try db.rows("INSERT INTO t VALUES (0, ?, ?)", [.integer(Int64(i)), .blob(rng.bytes(1500))]) }
    }

    /// Runs the transactions, acknowledging k once its COMMIT returned (synchronous = FULL: durable then; NORMAL for
    /// `databaseWALNormal`, where another connection checkpoints after every commit, for `databaseWALLog`, which
    /// checkpoints once, after transaction 4, and for `databaseRollbackNormal`).
    func runDatabase(_ d: ProtectionDomain, ack: (Int) -> Void) throws {
        let db = try ProtectedDatabase.open(path: database, protection: .complete, files: d.files)
        defer { db.close() }
        let normal = Self.normalOps.contains(op)
        let checkpointer = op == .databaseWALNormal ? try ProtectedDatabase.open(path: database, protection: .complete, files: d.files) : nil
        defer { checkpointer?.close() }
        try db.execute(normal ? "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0" : "PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = 10")
        for k in 1...Self.databaseTransactions {
            defer { if let checkpointer { _ = try? checkpointer.rows("PRAGMA wal_checkpoint(PASSIVE)") } }
            try db.execute("BEGIN")
            for (i, pad) in Self.databaseRows(k).enumerated() {
                try db.rows("INSERT INTO t VALUES (?, ?, ?)", [.integer(Int64(k)), .integer(Int64(i)), .blob(pad)])
            }
            try db.execute("UPDATE counter SET n = n + 1; DELETE FROM t WHERE txn = 0 AND i = \(k)")
            try db.execute("COMMIT")
            ack(k)
            if op == .databaseWALLog, k == 4 { _ = try db.rows("PRAGMA wal_checkpoint(PASSIVE)") }
        }
    }

    /// The operations at `synchronous = NORMAL`, where a power loss may lose acknowledged transactions.
    static let normalOps: [CrashOp] = [.databaseWALNormal, .databaseWALLog, .databaseRollbackNormal]

    /// The database opens (SQLite rolls back or replays what the kill left), `integrity_check` is ok, transactions
    /// 1…m are all there whole for some m with acked ≤ m ≤ acked + 1 (the last may have committed before its
    /// acknowledgement was printed), and nothing of any later one.
    func verifyDatabase(_ d: ProtectionDomain, acked: Int, _ v: inout Verdict) {
        do {
            let db = try ProtectedDatabase.open(path: database, protection: .complete, files: d.files)
            defer { db.close() }
            let integrity = try db.rows("PRAGMA integrity_check")
            if integrity != [[.text("ok")]] { v.torn.append("\(database): integrity_check says \(integrity)") }
            guard case .integer(let n)? = try db.rows("SELECT n FROM counter").first?.first else {
                v.torn.append("\(database): no counter row")
                return
            }
            let m = Int(n)
            for k in 1...Self.databaseTransactions {
                let rows = try db.rows("SELECT pad FROM t WHERE txn = ? ORDER BY i", [.integer(Int64(k))])
                let want = k <= m ? Self.databaseRows(k).map { DatabaseValue.blob($0) } : []
                if rows.map(\.first) != want.map(Optional.some) { v.torn.append("\(database): transaction \(k) is partly there (\(rows.count) rows; counter \(m))") }
            }
            let zero = try db.rows("SELECT count(*) FROM t WHERE txn = 0")
            if zero != [[.integer(Int64(20 - m))]] { v.torn.append("\(database): \(zero) rows of transaction 0 left, counter \(m)") }
            // NORMAL: a power loss may lose what was acknowledged (SQLite's own promise), never a part of it; a killed
            // process (the same boot: the page cache kept every write) loses nothing.
            if m < acked, !(Self.normalOps.contains(op) && SimulatedReboot.happened) { v.lostAcked.append("\(database): \(m) transactions, but \(acked) were acknowledged") }
            if m > acked + 1 { v.torn.append("\(database): \(m) transactions, but only \(acked) were acknowledged and one more was running") }
        } catch {
            v.torn.append("\(database): \(error)")
        }
    }

    // MARK: The database unit under dpctl's commands

    /// The database of `prepareDatabase` in PERSIST mode, so its protected journal stays beside it: as it is for
    /// `database-rotate`, unprotected (a plain SQLite database) for `database-protect`.
    func prepareDatabaseUnit(_ d: ProtectionDomain) throws {
        try prepareDatabase(d)
        if op == .databaseProtect { try DatabaseUnit.unprotect(database, files: d.files) }
    }

    /// `DatabaseUnit.protect` (class complete) or `DatabaseUnit.rotate` (class complete, the data directory): one step.
    func runDatabaseUnit(_ d: ProtectionDomain, ack: (Int) -> Void) throws {
        if op == .databaseProtect {
            try DatabaseUnit.protect(database, as: .complete, files: d.files)
        } else {
            _ = try DatabaseUnit.rotate(.complete, paths: [data], domain: d, passphrase: try SecretBytes(utf8: Self.oldPassphrase))
        }
        ack(1)
    }

    /// After the kill the unit is the old one or the new one: running the command again finishes it (a protect of the
    /// plain database, a resumed rotation), and then every row of `prepareDatabase` is there with integrity ok; an
    /// acknowledged step needs no re-run.
    func verifyDatabaseUnit(_ d: ProtectionDomain, acked: Int, _ v: inout Verdict) {
        do {
            let done: Bool
            if op == .databaseProtect {
                done = DatabaseUnit.looksProtected(database)
                if !done { try DatabaseUnit.protect(database, as: .complete, files: d.files) }
            } else {
                verifyDatabase(d, acked: 0, &v)  // readable before resuming, with either generation
                let c = try d.status().classes.first { $0.protectionClass == .complete }!
                let gens = try DatabaseUnit.companions(of: database, files: d.files).map { try d.files.info($0).classKeyGeneration }
                let mainGeneration = try d.files.info(database).classKeyGeneration
                done = c.generations == [2] && gens.allSatisfy { $0 == 2 } && mainGeneration == 2 && access(location.journalPath, F_OK) != 0
                if !done { _ = try DatabaseUnit.rotate(.complete, paths: [data], domain: d, passphrase: try SecretBytes(utf8: Self.oldPassphrase)) }
                for f in [database] + DatabaseUnit.companions(of: database, files: d.files) {
                    let g = try d.files.info(f).classKeyGeneration
                    if g != 2 { v.torn.append("\(f): at generation \(g), not 2, after the rotation finished") }
                }
            }
            if acked >= 1 && !done { v.lostAcked.append("\(database): \(op.rawValue) returned, but it was not done") }
            verifyDatabase(d, acked: 0, &v)
        } catch {
            v.torn.append("\(database): finishing \(op.rawValue): \(error)")
        }
    }
}
