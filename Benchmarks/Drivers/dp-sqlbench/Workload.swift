// The SQLite workload of dp-sqlbench and dp-sqlbench-cipher: one source, compiled into both executables (the cipher
// driver's copy is a symbolic link to this file), each against its own SQLite (BENCHMARKS.md, "Protected SQLite
// databases"). Only the way a connection opens differs: `Opener`.
#if SQLCIPHER
import BaselineSQLCipher
#else
import BaselineSQLite
#endif
import Foundation

/// How a contender opens a connection: the filename SQLite gets, the VFS, and the statements run first (a key).
struct Opener: Sendable {
    let filename: @Sendable (String) -> String
    let flags: Int32
    let vfs: String?
    let first: [String]
}

/// What one run measures (the same for every contender).
struct WorkloadSize {
    var rows = 100_000, batch = 1_000, points = 100_000, scans = 5_000, scanLength = 100, mixedOps = 5_000, threads = 4
    var mode = "wal"
    /// Diagnostics of the mixed phases (BENCHMARKS.md, "Read locks kept for a moment"): the `mixed-pool` phase's
    /// readers (default `threads`), whether they read a copy of the database (`VACUUM INTO`) instead of the writer's,
    /// and whether each thread prints its wall-clock and CPU time to standard error.
    var poolReaders: Int? = nil, readersOnCopy = false, roleTimes = false

    init(_ args: [String]) {
        func option(_ name: String) -> String? {
            guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
            return args[i + 1]
        }
        rows = option("--rows").flatMap(Int.init) ?? rows
        batch = option("--batch").flatMap(Int.init) ?? batch
        points = option("--points").flatMap(Int.init) ?? points
        scans = option("--scans").flatMap(Int.init) ?? scans
        mixedOps = option("--mixed-ops").flatMap(Int.init) ?? mixedOps
        threads = option("--threads").flatMap(Int.init) ?? threads
        mode = option("--mode") ?? mode
        poolReaders = option("--pool-readers").flatMap(Int.init)
        readersOnCopy = args.contains("--readers-on-copy")
        roleTimes = args.contains("--role-times")
    }
}

struct WorkloadFailure: Error, CustomStringConvertible { let description: String }

/// One connection, used from one thread.
final class Connection {
    let db: OpaquePointer

    init(_ path: String, _ opener: Opener) throws {
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(opener.filename(path), &db, opener.flags, opener.vfs)
        guard rc == SQLITE_OK, let db else {
            throw WorkloadFailure(description: "open '\(path)': \(db.map { String(cString: sqlite3_errmsg($0)) } ?? "rc \(rc)")")
        }
        self.db = db
        sqlite3_busy_timeout(db, 60_000)
        for s in opener.first { try exec(s) }
    }

    deinit { sqlite3_close_v2(db) }

    func exec(_ sql: String) throws {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw WorkloadFailure(description: "\(sql): \(String(cString: sqlite3_errmsg(db))) (\(rc))") }
    }

    func prepare(_ sql: String) throws -> OpaquePointer {
        var s: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &s, nil) == SQLITE_OK, let s else {
            throw WorkloadFailure(description: "prepare \(sql): \(String(cString: sqlite3_errmsg(db)))")
        }
        return s
    }

    /// The first column of the first row of `sql`, as text.
    func text(_ sql: String) throws -> String {
        let s = try prepare(sql)
        defer { sqlite3_finalize(s) }
        guard sqlite3_step(s) == SQLITE_ROW, let t = sqlite3_column_text(s, 0) else { return "" }
        return String(cString: t)
    }

    /// Steps `s` to its end (reading every column of every row); returns the number of rows.
    @discardableResult
    func run(_ s: OpaquePointer) throws -> Int {
        var n = 0
        while true {
            let rc = sqlite3_step(s)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else {
                sqlite3_reset(s)
                throw WorkloadFailure(description: "step: \(String(cString: sqlite3_errmsg(db))) (\(rc))")
            }
            _ = sqlite3_column_int64(s, 0)
            _ = sqlite3_column_blob(s, 1)
            n += 1
        }
        sqlite3_reset(s)
        return n
    }
}

/// A fixed pseudo-random sequence (the same keys for every contender).
struct Keys {
    var state: UInt64
    mutating func next(below n: Int) -> Int {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Int((state >> 33) % UInt64(n))
    }
}

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

func timed(_ body: () throws -> Void) rethrows -> Double {
    let c = ContinuousClock(), t = c.now
    try body()
    return seconds(c.now - t)
}

/// Runs the workload on a new database at `path` and prints one line per figure: `contender mode figure value`.
///
/// Journal mode `size.mode` (`wal` or `delete`), synchronous NORMAL, 4 KiB pages, SQLite's default page cache (2 MB,
/// smaller than the database, so reads reach the VFS). Figures: `insert` (rows/s, in transactions of `batch`), `point` (selects by key/s), `range`
/// (scans of `scanLength` rows/s), `mixed` (operations/s over `threads` threads, each its own connection: 90 % point
/// selects, 10 % one-row updates in their own transaction), `mixed-pool` (the same operations, the updates made by one
/// writer connection of their own beside `threads` readers, as GRDB's DatabasePool does), `open-ms` (a new connection to the existing database and
/// its first read: SQLCipher's key derivation, which every connection pays once, outside the timed loops).
func runWorkload(contender: String, path: String, opener: Opener, size: WorkloadSize) throws {
    func report(_ figure: String, _ value: Double) { print("\(contender) \(size.mode) \(figure) \(String(format: "%.1f", value))") }
    let setup = ["PRAGMA journal_mode = \(size.mode == "wal" ? "WAL" : "DELETE")", "PRAGMA synchronous = NORMAL"]
    let db = try Connection(path, opener)
    for s in setup { try db.exec(s) }
    try db.exec("CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER NOT NULL, v BLOB NOT NULL)")
    guard try db.text("PRAGMA page_size") == "4096" else { throw WorkloadFailure(description: "page size is not 4096") }

    // Bulk inserts in transactions.
    var payload = [UInt8](repeating: 0, count: 100)
    let insert = try db.prepare("INSERT INTO t(id, k, v) VALUES (?, ?, ?)")
    let insertTime = try timed {
        var id = 0
        while id < size.rows {
            try db.exec("BEGIN")
            for _ in 0..<min(size.batch, size.rows - id) {
                for j in 0..<8 { payload[j] = UInt8(truncatingIfNeeded: id >> (j * 8)) }
                sqlite3_bind_int64(insert, 1, Int64(id))
                sqlite3_bind_int64(insert, 2, Int64(id &* 7919 % 1_000_003))
                _ = payload.withUnsafeBytes { sqlite3_bind_blob(insert, 3, $0.baseAddress, Int32($0.count), nil) }
                try db.run(insert)
                id += 1
            }
            try db.exec("COMMIT")
        }
    }
    sqlite3_finalize(insert)
    report("insert", Double(size.rows) / insertTime)

    // Point selects by key.
    let point = try db.prepare("SELECT k, v FROM t WHERE id = ?")
    var keys = Keys(state: 42)
    let pointTime = try timed {
        for _ in 0..<size.points {
            sqlite3_bind_int64(point, 1, Int64(keys.next(below: size.rows)))
            guard try db.run(point) == 1 else { throw WorkloadFailure(description: "point select found no row") }
        }
    }
    sqlite3_finalize(point)
    report("point", Double(size.points) / pointTime)

    // Range scans.
    let range = try db.prepare("SELECT k, v FROM t WHERE id >= ? AND id < ?")
    let rangeTime = try timed {
        for _ in 0..<size.scans {
            let start = keys.next(below: size.rows - size.scanLength)
            sqlite3_bind_int64(range, 1, Int64(start))
            sqlite3_bind_int64(range, 2, Int64(start + size.scanLength))
            guard try db.run(range) == size.scanLength else { throw WorkloadFailure(description: "range scan is short") }
        }
    }
    sqlite3_finalize(range)
    report("range", Double(size.scans) / rangeTime)

    // Mixed 90/10 over `threads` threads, each its own connection doing both, then the same mix with the writes on
    // one writer connection of their own beside `threads` readers (the shape of GRDB's DatabasePool).
    let everyOneMixed = (0..<size.threads).map { MixedRole(reads: size.mixedOps - size.mixedOps / 10, writes: size.mixedOps / 10, seed: UInt64(1000 + $0)) }
    report("mixed", try mixedPhase(path, opener, setup, rows: size.rows, everyOneMixed, size))
    let writes = size.threads * size.mixedOps / 10
    let readers = (0..<(size.poolReaders ?? size.threads)).map { MixedRole(reads: size.mixedOps - size.mixedOps / 10, writes: 0, seed: UInt64(2000 + $0)) }
    if size.readersOnCopy { try db.exec("VACUUM INTO '\(path).copy'") }
    report("mixed-pool", try mixedPhase(path, opener, setup, rows: size.rows, readers + [MixedRole(reads: 0, writes: writes, seed: 3000)], size))
    if size.readersOnCopy { for suffix in ["", "-wal", "-shm"] { unlink(path + ".copy" + suffix) } }
    guard try db.text("PRAGMA integrity_check") == "ok" else { throw WorkloadFailure(description: "integrity_check failed") }

    // Opening the existing database: a new connection and its first read (SQLCipher derives its key here).
    var opened: Connection?
    let openTime = try timed {
        opened = try Connection(path, opener)
        _ = try opened!.text("SELECT count(*) FROM sqlite_master")
    }
    opened = nil
    report("open-ms", openTime * 1000)
}

/// What one thread of a mixed phase does: `reads` point selects and `writes` one-row UPDATEs (each its own
/// transaction), a write after every ninth read while both last, on keys drawn from `seed`.
struct MixedRole {
    let reads: Int, writes: Int, seed: UInt64
}

/// Runs one thread per role, each on its own connection opened before the clock starts, on keys below `n`; returns operations/s.
func mixedPhase(_ path: String, _ opener: Opener, _ setup: [String], rows n: Int, _ roles: [MixedRole], _ size: WorkloadSize) throws -> Double {
    let ready = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
    let failures = FailureList()
    for role in roles {
        Thread {
            do {
                let c = try Connection(role.writes == 0 && size.readersOnCopy ? path + ".copy" : path, opener)
                for s in setup { try c.exec(s) }
                let read = try c.prepare("SELECT k, v FROM t WHERE id = ?")
                let write = try c.prepare("UPDATE t SET k = k + 1 WHERE id = ?")
                defer { sqlite3_finalize(read); sqlite3_finalize(write) }
                var keys = Keys(state: role.seed)
                ready.signal()
                go.wait()
                var reads = 0, writes = 0
                let started = ContinuousClock.now, cpu = threadCPUSeconds()
                defer {
                    if size.roleTimes {
                        let wall = seconds(ContinuousClock.now - started), used = threadCPUSeconds() - cpu
                        FileHandle.standardError.write(Data("role reads \(role.reads) writes \(role.writes): \(String(format: "%.4f", wall)) s, CPU \(String(format: "%.4f", used)) s\n".utf8))
                    }
                }
                while reads < role.reads || writes < role.writes {
                    let id = Int64(keys.next(below: n))
                    if writes < role.writes && (reads >= role.reads || (reads + writes) % 10 == 9) {
                        sqlite3_bind_int64(write, 1, id)
                        try c.run(write)
                        writes += 1
                    } else {
                        sqlite3_bind_int64(read, 1, id)
                        try c.run(read)
                        reads += 1
                    }
                }
            } catch {
                failures.add("\(error)")
                ready.signal()
            }
            done.signal()
        }.start()
    }
    for _ in roles { ready.wait() }
    let time = timed {
        for _ in roles { go.signal() }
        for _ in roles { done.wait() }
    }
    if let f = failures.first { throw WorkloadFailure(description: "mixed: \(f)") }
    return Double(roles.reduce(0) { $0 + $1.reads + $1.writes }) / time
}

/// The first error any mixed-workload thread hit.
final class FailureList: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func add(_ s: String) { lock.lock(); list.append(s); lock.unlock() }
    var first: String? { lock.lock(); defer { lock.unlock() }; return list.first }
}

/// The calling thread's CPU time so far.
func threadCPUSeconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}
