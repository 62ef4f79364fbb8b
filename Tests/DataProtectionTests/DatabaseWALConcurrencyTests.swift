@_spi(Testing) import DataProtection  // ProtectedFiles(…, io:): the file-system seam, counted
import DataProtectionGRDB
import DataProtectionSQLite
import Foundation
import GRDB
import Locking
import SystemLayer
#if canImport(Glibc)
import Glibc
#endif
import XCTest

/// One writer and several readers in ONE process on a protected WAL database, each its own connection (its own handles
/// on the database and the WAL): in WAL mode a writer appends frames while readers read earlier frames of the same
/// chunks, and a checkpoint writes the database while readers read it. Every read must succeed and see at least every
/// transaction committed before it began (GRDB's own suite found "disk I/O error", "database disk image is malformed"
/// and a missed row here: docs/TESTING.md, "GRDB's own suite").
final class DatabaseWALConcurrencyTests: DomainTestCase {
    private let passphrase = "correct horse"

    private func unlockedDomain() throws -> ProtectionDomain {
        let (d, _) = try makeDomain(passphrase: passphrase)
        try d.unlock(passphrase: try secret(passphrase))
        return d
    }

    private static func count(_ db: ProtectedDatabase) throws -> Int {
        guard case .integer(let n)? = try db.rows("SELECT count(*) FROM t").first?.first else { return -1 }
        return Int(n)
    }

    /// Raw connections through `ProtectedDatabase`: a writer commits small rows one per transaction (frames end
    /// anywhere inside a 4 KiB chunk, so every commit re-seals the chunk that holds the end of the readers' snapshot),
    /// with a checkpoint every few frames (the database grows under readers, the WAL restarts from frame 0), while
    /// readers count the rows, every other time on a connection opened for that read.
    func testReadersOnTheirOwnConnectionsSeeEveryCommitWhileTheWriterAppends() throws {
        let domain = try unlockedDomain()
        let path = root + "/wal-readers.db"
        let setup = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: domain.files)
        try setup.execute("PRAGMA journal_mode = WAL; CREATE TABLE t(x, pad)")
        setup.close()
        let commits = 400
        let committed = Locked(0)
        let failures = Locked<[String]>([])
        let reads = Locked(0)
        let start = Date()
        DispatchQueue.concurrentPerform(iterations: 3) { k in
            do {
                let db = try ProtectedDatabase.open(path: path, protection: .none, files: domain.files)
                defer { db.close() }
                try db.execute("PRAGMA busy_timeout = 10000; PRAGMA wal_autocheckpoint = 16")
                if k == 0 {
                    for i in 0..<commits {
                        try db.rows("INSERT INTO t VALUES (?, randomblob(?))", [.integer(Int64(i)), .integer(Int64(100 + i % 7 * 300))])
                        committed.withLock { $0 = i + 1 }
                    }
                } else {
                    while failures.withLock({ $0.isEmpty }) {
                        let before = committed.withLock { $0 }
                        do {
                            // Every other read on a new connection: its open reads the WAL's size and last chunk, and
                            // looks for an interrupted change of the WAL while the writer writes it (GRDB opens
                            // connections at any time: ValueObservation, pool readers).
                            let reader = reads.withLock { $0 } % 2 == 0 ? try ProtectedDatabase.open(path: path, protection: .none, files: domain.files) : db
                            defer { if reader !== db { reader.close() } }
                            let n = try Self.count(reader)
                            if n < before { failures.withLock { $0.append("reader \(k) saw \(n) rows after \(before) were committed") } }
                        } catch { failures.withLock { $0.append("reader \(k) after \(before) commits: \(error)") } }
                        reads.withLock { $0 += 1 }
                        if before == commits { break }
                    }
                }
            } catch { failures.withLock { $0.append("connection \(k): \(error)") } }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        print("WAL readers: \(commits) commits, \(reads.withLock { $0 }) concurrent reads, \(failures.withLock { $0.count }) failed, \(String(format: "%.1f", Date().timeIntervalSince(start))) s")
        let check = try ProtectedDatabase.open(path: path, protection: .none, files: domain.files)
        defer { check.close() }
        XCTAssertEqual(try check.rows("PRAGMA integrity_check"), [[.text("ok")]])
        XCTAssertEqual(try Self.count(check), commits)
    }

    /// GRDB's `DatabasePool`: a writer and two readers as above (the pool opens its readers while the writer writes),
    /// then the pattern of GRDB's `testReadBlockIsolationStartingWithWrite` (DatabasePoolConcurrencyTests) in a loop: a
    /// read that began after the writer's first insert sees exactly that row, all through, while the writer inserts
    /// another.
    func testADatabasePoolReaderSeesEveryCommitAndKeepsItsSnapshot() throws {
        let domain = try unlockedDomain()
        let path = root + "/wal-pool.db"
        var config = Configuration()
        config.busyMode = .timeout(10)
        let pool = try DatabasePool(protectedPath: path, protection: .completeUntilFirstUserAuthentication, files: domain.files, configuration: config)
        try pool.write { db in try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB)") }
        let commits = 300
        let committed = Locked(0)
        let failures = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 3) { k in
            if k == 0 {
                do {
                    for i in 0..<commits {
                        try pool.write { db in try db.execute(sql: "INSERT INTO t(pad) VALUES (randomblob(?))", arguments: [100 + i % 7 * 300]) }
                        committed.withLock { $0 = i + 1 }
                    }
                } catch { failures.withLock { $0.append("writer: \(error)") } }
            } else {
                while failures.withLock({ $0.isEmpty }) {
                    let before = committed.withLock { $0 }
                    do {
                        let n = try pool.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t")! }
                        if n < before { failures.withLock { $0.append("reader \(k) saw \(n) rows after \(before) were committed") } }
                    } catch { failures.withLock { $0.append("reader \(k) after \(before) commits: \(error)") } }
                    if before == commits { break }
                }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        for round in 0..<40 where failures.withLock({ $0.isEmpty }) {
            try pool.write { db in try db.execute(sql: "DELETE FROM t") }
            let s1 = DispatchSemaphore(value: 0), s2 = DispatchSemaphore(value: 0), s3 = DispatchSemaphore(value: 0), s4 = DispatchSemaphore(value: 0)
            DispatchQueue.concurrentPerform(iterations: 2) { k in
                do {
                    if k == 0 {
                        try pool.writeWithoutTransaction { db in
                            try db.execute(sql: "INSERT INTO t(pad) VALUES (randomblob(3000))")
                            s1.signal()
                            s2.wait()
                            try db.execute(sql: "INSERT INTO t(pad) VALUES (randomblob(3000))")
                            s3.signal()
                            s4.wait()
                        }
                    } else {
                        // GRDB's `read` starts its snapshot on entry (PRAGMA schema_version), so it starts after the
                        // first insert here. GRDB's own test enters `read` concurrently with that insert and expects
                        // to see it: it passes only when the insert wins that race (see docs/TESTING.md).
                        s1.wait()
                        try pool.read { db in
                            let first = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")!
                            s2.signal()
                            s3.wait()
                            let second = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")!
                            s4.signal()
                            if first != 1 || second != 1 { failures.withLock { $0.append("round \(round): the read saw \(first) then \(second) rows, not 1 and 1") } }
                        }
                    }
                } catch {
                    failures.withLock { $0.append("round \(round) \(k == 0 ? "writer" : "reader"): \(error)") }
                    for s in [s1, s2, s3, s4] { s.signal() }
                }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, [])
        print("GRDB pool: \(commits) commits under two readers, 40 isolation rounds, \(failures.withLock { $0.count }) failures")
        try pool.close()
    }

    /// A WAL read transaction makes no file-system call through the seam when SQLite answers it from its page cache:
    /// it used to take the size of the database and of the WAL (two `fstat`s, each under the seal lock's two `fcntl`s)
    /// every time. A reader on its own connection still sees every commit another connection makes between its reads,
    /// including the frames that re-seal the chunk holding the end of its last snapshot (the size it kept is then
    /// older than the file, and the read that meets it is made again under the seal lock).
    /// The seam is `FaultyIO` set never to fire: it only counts the calls.
    func testAWALReadTransactionMakesNoFileSystemCallAndStillSeesNewCommits() throws {
        let io = FaultyIO(failAt: Int.max, mode: .eio, forever: false)
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096), io: io)
        let path = root + "/quiet-reads.db"
        let writer = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { writer.close() }
        try writer.execute("PRAGMA journal_mode = WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB)")
        try writer.execute("INSERT INTO t(pad) VALUES (randomblob(300))")
        let reader = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { reader.close() }
        XCTAssertEqual(try Self.count(reader), 1)

        let before = io.calls.load(ordering: .relaxed)
        for _ in 0..<200 { XCTAssertEqual(try Self.count(reader), 1) }
        let quiet = io.calls.load(ordering: .relaxed) - before
        XCTAssertEqual(quiet, 0, "200 read transactions answered from SQLite's cache made \(quiet) file-system calls")

        // Commits between reads: frames of 24 + 4,096 bytes end anywhere in a chunk, so each re-seals the chunk that
        // ended the reader's last snapshot, and some grow the WAL by a chunk the reader has not seen.
        for i in 2...120 {
            try writer.execute("INSERT INTO t(pad) VALUES (randomblob(\(100 + i % 5 * 700)))")
            XCTAssertEqual(try Self.count(reader), i, "the reader missed commit \(i)")
        }
        try writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")  // the WAL shrinks to nothing under the reader's kept size
        try writer.execute("INSERT INTO t(pad) VALUES (randomblob(50))")
        XCTAssertEqual(try Self.count(reader), 121)
        guard case .text(let ok)? = try reader.rows("PRAGMA integrity_check").first?.first else { return XCTFail("no integrity_check result") }
        XCTAssertEqual(ok, "ok")
    }
    /// A checkpoint by one connection while another's transaction holds the WAL's log (its cache spilled frames into the
    /// WAL before its commit) stops after a bounded wait, copying nothing, instead of waiting for that transaction to
    /// end (which could wait for a thread that waits for the checkpoint). The VFS answers the WAL's sync `SQLITE_BUSY`;
    /// SQLite treats that as it treats readers holding a checkpoint back (walCheckpoint: no error, fewer frames
    /// checkpointed than logged). Once the transaction commits, the next checkpoint copies every frame. Real SQLite
    /// connections, real files.
    func testACheckpointDuringASpilledTransactionCopiesNothingAndDoesNotWait() throws {
        let path = root + "/spill.db"
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096))
        let writer = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { writer.close() }
        try writer.execute("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x, pad)")
        try writer.execute("INSERT INTO t VALUES (0, randomblob(3000))")  // a commit for the checkpoint to copy
        let other = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { other.close() }
        try writer.execute("PRAGMA cache_size = 2; BEGIN")
        // Spills more frames than the VFS holds for a commit frame (`heldFramesLimit`, 64), so that frames are written
        // and the log is hot; fewer would still be held, with nothing in the log to hold a checkpoint back.
        for i in 1...100 { try writer.rows("INSERT INTO t VALUES (?, randomblob(3000))", [.integer(Int64(i))]) }
        let started = Date()
        let held = try other.rows("PRAGMA wal_checkpoint(PASSIVE)")  // busy, frames in the log, frames checkpointed
        let waited = Date().timeIntervalSince(started)
        XCTAssertEqual(held.first?.count, 3)
        XCTAssertEqual(held.first?.last, .integer(0), "the checkpoint copied nothing: \(held)")
        XCTAssertNotEqual(held.first?[1], .integer(0), "the log holds frames to copy: \(held)")
        XCTAssertLessThan(waited, 5, "the checkpoint waited \(waited) s for the other connection's transaction")
        try writer.execute("COMMIT")
        let done = try other.rows("PRAGMA wal_checkpoint(PASSIVE)")
        XCTAssertEqual(done.first?.first, .integer(0), "after the commit the checkpoint copies every frame: \(done)")
        XCTAssertEqual(done.first?[1], done.first?[2], "every frame checkpointed: \(done)")
        XCTAssertEqual(try other.rows("SELECT count(*) FROM t"), [[.integer(101)]])
        XCTAssertEqual(try other.rows("PRAGMA integrity_check"), [[.text("ok")]])
    }

    /// A WAL commit's mark is in its log (FORMAT.md §6.7.6) before SQLite publishes the commit in the wal-index, never
    /// after: from the moment the wal-index shows a commit another connection may read it or checkpoint it into the
    /// database, and a log without its mark would cut those frames out of the WAL at the next open after a crash.
    /// The seam (`PublishProbeIO`, real system calls) reads the wal-index header's `mxFrame` each time a mark is written
    /// to the WAL's log: it must be below the `mxFrame` the commit publishes. One mark per commit, and no fsync of the
    /// WAL or its log between the checkpoint and the end (`synchronous = NORMAL`).
    func testTheWALCommitMarkIsLoggedBeforeTheCommitIsPublished() throws {
        let path = root + "/publish-order.db"
        let probe = PublishProbeIO(walIndex: path + "-shm")
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096), io: probe)
        let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { db.close() }
        try db.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x, pad)")
        try db.execute("INSERT INTO t VALUES (0, randomblob(100)); PRAGMA wal_checkpoint(PASSIVE)")  // the WAL is synced once: its writes are journaled from now on
        var fsyncs = 0
        var checked = 0
        for i in 1...30 {
            probe.seen.withLock { $0 = [] }
            try db.rows("INSERT INTO t VALUES (?, randomblob(?))", [.integer(Int64(i)), .integer(Int64(100 + i * 150))])
            let published = probe.mxFrame()
            // The first commit starts the WAL over (a journaled cut, then a log begun: its fsyncs); the rest fsync nothing.
            if i == 1 { fsyncs = probe.walFsyncs.withLock { $0 } }
            for during in probe.seen.withLock({ $0 }) {
                XCTAssertLessThan(during, published, "commit \(i): the mark was logged after the wal-index showed mxFrame \(during)")
                checked += 1
            }
        }
        XCTAssertEqual(checked, 30, "the WAL's log got \(checked) marks in 30 commits")
        XCTAssertEqual(probe.walFsyncs.withLock { $0 } - fsyncs, 0, "29 commits at synchronous = NORMAL fsynced the WAL or its log")
    }
}

/// Real system calls, and a look at the wal-index header whenever a commit mark is written to the WAL's log.
final class PublishProbeIO: FileIO, @unchecked Sendable {
    let real = SystemFileIO()
    let walIndex: String
    let names = Locked<[Int32: String]>([:])
    /// `mxFrame` of the wal-index at each mark written to the WAL's log.
    let seen = Locked<[UInt32]>([])
    /// fsyncs of the WAL and of its log.
    let walFsyncs = Locked(0)

    init(walIndex: String) { self.walIndex = walIndex }

    /// The wal-index header's `mxFrame` (bytes 16–19 of the first copy, native order; walformat.html §2.1).
    func mxFrame() -> UInt32 {
        let fd = Glibc.open(walIndex, O_RDONLY)
        guard fd >= 0 else { return 0 }
        defer { Glibc.close(fd) }
        var v: UInt32 = 0
        return Glibc.pread(fd, &v, 4, 16) == 4 ? v : 0
    }

    private func named(_ fd: Int32, _ name: String) -> Int32 {
        names.withLock { $0[fd] = name }
        return fd
    }

    func open(_ path: String, flags: Int32, mode m: mode_t) throws(SystemError) -> Int32 { named(try real.open(path, flags: flags, mode: m), path) }
    func openAt(_ d: Int32, _ n: String, flags: Int32, mode m: mode_t) throws(SystemError) -> Int32 { named(try real.openAt(d, n, flags: flags, mode: m), n) }
    func close(_ fd: Int32) {
        names.withLock { $0[fd] = nil }
        real.close(fd)
    }
    func ftruncate(_ fd: Int32, to s: Int64) throws(SystemError) { try real.ftruncate(fd, to: s) }
    func pread(_ fd: Int32, into b: UnsafeMutableRawBufferPointer, at o: Int64) throws(SystemError) -> Int { try real.pread(fd, into: b, at: o) }
    /// A mark (type 3, FORMAT.md §6.7.2: a 16-byte head, 24 bytes, a 32-byte checksum, one write) to the WAL's log.
    func pwrite(_ fd: Int32, from b: UnsafeRawBufferPointer, at o: Int64) throws(SystemError) -> Int {
        if b.count == 72, b[0] == 3, let n = names.withLock({ $0[fd] }), n.hasSuffix("-wal.dpjournal") {
            seen.withLock { $0.append(mxFrame()) }
        }
        return try real.pwrite(fd, from: b, at: o)
    }
    func read(_ fd: Int32, into b: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int { try real.read(fd, into: b) }
    func write(_ fd: Int32, from b: UnsafeRawBufferPointer) throws(SystemError) -> Int { try real.write(fd, from: b) }
    func seek(_ fd: Int32, to o: Int64, from w: Int32) throws(SystemError) -> Int64 { try real.seek(fd, to: o, from: w) }
    func fsync(_ fd: Int32) throws(SystemError) {
        if let n = names.withLock({ $0[fd] }), n.hasSuffix("-wal") || n.hasSuffix("-wal.dpjournal") { walFsyncs.withLock { $0 += 1 } }
        try real.fsync(fd)
    }
    func size(_ fd: Int32) throws(SystemError) -> Int64 { try real.size(fd) }
    func rename(_ a: String, to b: String) throws(SystemError) { try real.rename(a, to: b) }
    func unlink(_ p: String) throws(SystemError) { try real.unlink(p) }
    func renameAt(_ d: Int32, _ a: String, to b: String) throws(SystemError) { try real.renameAt(d, a, to: b) }
    func unlinkAt(_ d: Int32, _ n: String) throws(SystemError) { try real.unlinkAt(d, n) }
    func identityAt(_ d: Int32, _ n: String) throws(SystemError) -> (device: UInt64, inode: UInt64) { try real.identityAt(d, n) }
    func copyUserAttributes(at d: Int32, from n: String, to fd: Int32) throws(SystemError) { try real.copyUserAttributes(at: d, from: n, to: fd) }
}

