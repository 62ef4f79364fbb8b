@_spi(Testing) import DataProtection
// @testable: drives the wal-index's locks (WALIndex) directly, as SQLite's xShmLock calls reach them.
@testable import DataProtectionSQLite
import Foundation
import SystemLayer
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// What the VFS asks of the kernel for a database: the connections of one process share one wal-index (one open file,
/// its mappings and its locks, as SQLite's unix VFS does), and reads leave the files' access times alone. Real files,
/// real SQLite; another process's view of the index is played by a second open file description (`probe`), whose OFD
/// locks conflict with this process's as another process's do.
final class DatabaseSystemCallTests: XCTestCase {
    /// Whether another process would find wal-index lock `i` held in a way that conflicts with `kind`.
    private func held(_ probe: Int32, _ i: Int, against kind: OFDLock.Kind) -> Bool {
        OFDLock.isLocked(fd: probe, kind, start: WALIndex.lockBase + Int64(i), length: 1) == .wouldBlock
    }

    /// Whether read lock `i`, just let go by the last connection of this process that held it, is still held at the file
    /// (unless the sweeper ran twice meanwhile, which a preempted test thread may see) and then goes within 10 s.
    private func lingersThenGoes(_ probe: Int32, _ i: Int, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let before = LingeringReadLocks.process.sweeps
        let heldAtOnce = held(probe, i, against: .exclusive)
        if LingeringReadLocks.process.sweeps - before < 2 {
            XCTAssertTrue(heldAtOnce, "lock \(i) went at once instead of lingering", file: file, line: line)
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while held(probe, i, against: .exclusive) {
            guard ContinuousClock.now < deadline else { return false }
            usleep(1_000)
        }
        return true
    }

    /// A read lock lingers at the file for a moment after this process's last holder lets it go: taken back by any
    /// connection here without a system call, converted by an exclusive request here, and let go by the sweeper within
    /// two periods, after which another process (the probe, a second open file description) takes it exclusive.
    func testAReadLockLingersAMomentAfterItsLastHolderThenGoes() throws {
        let dir = try temporaryDirectory(self)
        let database = dir + "/linger.db"
        let a = try WALIndex(databasePath: database), b = try WALIndex(databasePath: database)
        defer { a.close(); b.close(remove: { unlink(database + "-shm") }) }
        let probe = open(database + "-shm", O_RDWR)
        XCTAssertGreaterThanOrEqual(probe, 0)
        defer { close(probe) }

        // Lingering: another process's reader shares it, its exclusive request waits; another connection here takes it
        // back, and it lingers again after that one.
        XCTAssertEqual(a.lock(.shared, offset: 4, count: 1), .done)
        XCTAssertEqual(a.lock(nil, offset: 4, count: 1), .done)
        XCTAssertFalse(held(probe, 4, against: .shared), "a lingering read lock is shared with other processes' readers")
        XCTAssertEqual(b.lock(.shared, offset: 4, count: 1), .done)
        XCTAssertTrue(held(probe, 4, against: .exclusive))
        XCTAssertEqual(b.lock(nil, offset: 4, count: 1), .done)
        XCTAssertTrue(lingersThenGoes(probe, 4), "the sweeper never let the lingering lock go")
        XCTAssertEqual(OFDLock.trySet(fd: probe, .exclusive, start: WALIndex.lockBase + 4, length: 1), .done)
        XCTAssertEqual(b.lock(.shared, offset: 4, count: 1), .wouldBlock, "another process holds it exclusive")
        XCTAssertEqual(OFDLock.trySet(fd: probe, nil, start: WALIndex.lockBase + 4, length: 1), .done)

        // An exclusive request here over a lingering lock converts it; an exclusive lock goes at once when let go.
        XCTAssertEqual(a.lock(.shared, offset: 5, count: 1), .done)
        XCTAssertEqual(a.lock(nil, offset: 5, count: 1), .done)
        XCTAssertEqual(b.lock(.exclusive, offset: 5, count: 1), .done)
        XCTAssertTrue(held(probe, 5, against: .shared), "held exclusive")
        XCTAssertEqual(a.lock(.shared, offset: 5, count: 1), .wouldBlock)
        XCTAssertEqual(b.lock(nil, offset: 5, count: 1), .done)
        XCTAssertFalse(held(probe, 5, against: .exclusive), "an exclusive lock does not linger")

        // Another process's reader keeps an exclusive request here out, lingering or not.
        XCTAssertEqual(a.lock(.shared, offset: 6, count: 1), .done)
        XCTAssertEqual(a.lock(nil, offset: 6, count: 1), .done)
        XCTAssertEqual(OFDLock.trySet(fd: probe, .shared, start: WALIndex.lockBase + 6, length: 1), .done)
        XCTAssertEqual(b.lock(.exclusive, offset: 6, count: 1), .wouldBlock)
        XCTAssertEqual(b.lock(.shared, offset: 6, count: 1), .done, "the lingering lock, still held shared, is taken back")
        XCTAssertEqual(b.lock(nil, offset: 6, count: 1), .done)
        XCTAssertEqual(OFDLock.trySet(fd: probe, nil, start: WALIndex.lockBase + 6, length: 1), .done)
        XCTAssertTrue(lingersThenGoes(probe, 6))

        // The last connection's close lets a lingering lock go with the file, without waiting for the sweeper.
        let c = try WALIndex(databasePath: dir + "/closing.db")
        let closingProbe = open(dir + "/closing.db-shm", O_RDWR)
        XCTAssertGreaterThanOrEqual(closingProbe, 0)
        defer { close(closingProbe) }
        XCTAssertEqual(c.lock(.shared, offset: 3, count: 1), .done)
        c.close()
        XCTAssertFalse(held(closingProbe, 3, against: .exclusive), "closed with the file")
    }

    func testTheConnectionsOfAProcessShareTheWALIndexLocks() throws {
        let dir = try temporaryDirectory(self)
        let database = dir + "/shared.db"
        let a = try WALIndex(databasePath: database), b = try WALIndex(databasePath: database)
        XCTAssertTrue(a.shared === b.shared, "one open index per database and process")
        let probe = open(database + "-shm", O_RDWR)
        XCTAssertGreaterThanOrEqual(probe, 0)
        defer { close(probe) }

        // A read lock: counted in the process, held at the file while any connection holds it.
        XCTAssertEqual(a.lock(.shared, offset: 3, count: 1), .done)
        XCTAssertTrue(held(probe, 3, against: .exclusive))
        XCTAssertFalse(held(probe, 3, against: .shared))
        XCTAssertEqual(b.lock(.shared, offset: 3, count: 1), .done)
        XCTAssertEqual(a.lock(nil, offset: 3, count: 1), .done)
        XCTAssertTrue(held(probe, 3, against: .exclusive), "b still holds it")
        XCTAssertEqual(b.lock(nil, offset: 3, count: 1), .done)
        XCTAssertTrue(lingersThenGoes(probe, 3), "the last holder in the process let the file's lock go, a moment later")

        // The write lock: one connection; the other is busy whatever it asks for, as another process is.
        XCTAssertEqual(a.lock(.exclusive, offset: 0, count: 1), .done)
        XCTAssertEqual(b.lock(.exclusive, offset: 0, count: 1), .wouldBlock)
        XCTAssertEqual(b.lock(.shared, offset: 0, count: 1), .wouldBlock)
        XCTAssertTrue(held(probe, 0, against: .shared))
        XCTAssertEqual(b.lock(nil, offset: 0, count: 1), .done, "unlocking what it does not hold changes nothing")
        XCTAssertTrue(held(probe, 0, against: .shared), "a still holds the write lock")
        XCTAssertEqual(a.lock(nil, offset: 0, count: 1), .done)
        XCTAssertEqual(b.lock(.exclusive, offset: 0, count: 1), .done)
        XCTAssertEqual(b.lock(nil, offset: 0, count: 1), .done)

        // A range taken exclusive (SQLite's recovery takes locks 2 to 7) is busy while any of them is held shared,
        // in this process or in another.
        XCTAssertEqual(b.lock(.shared, offset: 5, count: 1), .done)
        XCTAssertEqual(a.lock(.exclusive, offset: 2, count: 6), .wouldBlock)
        XCTAssertEqual(b.lock(nil, offset: 5, count: 1), .done)
        XCTAssertEqual(OFDLock.trySet(fd: probe, .shared, start: WALIndex.lockBase + 6, length: 1), .done)
        XCTAssertEqual(a.lock(.exclusive, offset: 2, count: 6), .wouldBlock, "another process holds lock 6")
        XCTAssertEqual(b.lock(.shared, offset: 6, count: 1), .done, "shared with the other process")
        XCTAssertEqual(OFDLock.trySet(fd: probe, nil, start: WALIndex.lockBase + 6, length: 1), .done)
        XCTAssertEqual(b.lock(nil, offset: 6, count: 1), .done)
        XCTAssertEqual(a.lock(.exclusive, offset: 2, count: 6), .done)
        XCTAssertTrue((2..<8).allSatisfy { held(probe, $0, against: .shared) })

        // A connection that closes holding locks lets them go; the last one closes the file, removing it when asked.
        a.close()
        XCTAssertFalse((2..<8).contains { held(probe, $0, against: .shared) })
        XCTAssertTrue(FileManager.default.fileExists(atPath: database + "-shm"))
        b.close(remove: { unlink(database + "-shm") })
        XCTAssertFalse(FileManager.default.fileExists(atPath: database + "-shm"))
        let c = try WALIndex(databasePath: database)
        XCTAssertFalse(c.shared === a.shared, "a new index after the last connection closed the old one")
        c.close(remove: { unlink(database + "-shm") })
    }

    /// Two SQLite connections to one WAL database in this process hold one descriptor of its wal-index between them,
    /// and exclude each other's writes through it.
    func testTwoConnectionsInOneProcessOpenTheWALIndexOnce() throws {
        let (path, files, first) = try walDatabase("two.db")
        defer { first.close() }
        try first.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
        let second = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { second.close() }
        try second.execute("PRAGMA busy_timeout = 0")
        XCTAssertEqual(try second.rows("SELECT count(*) FROM t").first?.first, .integer(1))
        XCTAssertEqual(try descriptors(naming: path + "-shm"), 1)
        try first.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (2)")
        XCTAssertThrowsError(try second.execute("INSERT INTO t VALUES (3)"), "the first connection holds the write lock")
        try first.execute("COMMIT")
        try second.execute("INSERT INTO t VALUES (3)")
        XCTAssertEqual(try first.rows("SELECT count(*) FROM t").first?.first, .integer(3))
    }

    /// Reads of a database, which SQLite makes between its writes, leave the files' access times as they were: under
    /// `relatime` the first read after each write would update them, dirtying the inode (`AccessTime.skipUpdates`).
    func testReadingADatabaseLeavesItsAccessTimeAlone() throws {
        let (path, _, db) = try walDatabase("atime.db")
        defer { db.close() }
        try db.execute("PRAGMA cache_size = 1; CREATE TABLE t(x BLOB)")
        try db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) INSERT INTO t SELECT randomblob(500) FROM n")
        let old = timespec(tv_sec: 1_000_000_000, tv_nsec: 0)  // 2001: older than any write, so relatime would update it
        for name in [path, path + "-wal"] {
            var times = [old, timespec(tv_sec: time(nil), tv_nsec: 0)]  // modified now, read in 2001
            XCTAssertEqual(utimensat(AT_FDCWD, name, &times, 0), 0)
        }
        XCTAssertEqual(try db.rows("SELECT sum(length(x)) FROM t").first?.first, .integer(100_000))
        for name in [path, path + "-wal"] {
            var st = stat()
            XCTAssertEqual(stat(name, &st), 0)
            XCTAssertEqual(st.st_atim.tv_sec, old.tv_sec, "\(name): its access time changed")
        }
    }

    /// Records the reads of files and the opens of paths that a database's connection makes through its files' I/O
    /// (the real system calls do the work).
    private final class RecordingIO: ForwardingIO, @unchecked Sendable {
        private let lock = NSLock()
        private var reads: [(path: String, offset: Int64, count: Int)] = []
        private var opens: [String] = []
        private var writes: [(path: String, count: Int)] = []
        private var sizes: [String] = []

        func open(_ path: String, flags: Int32, mode: mode_t) throws(SystemError) -> Int32 {
            lock.withLock { opens.append(path) }
            return try SystemFileIO().open(path, flags: flags, mode: mode)
        }

        func pread(_ fd: Int32, into b: UnsafeMutableRawBufferPointer, at o: Int64) throws(SystemError) -> Int {
            let path = directoryPath(fd)
            lock.withLock { reads.append((path, o, b.count)) }
            return try SystemFileIO().pread(fd, into: b, at: o)
        }

        func pwrite(_ fd: Int32, from b: UnsafeRawBufferPointer, at o: Int64) throws(SystemError) -> Int {
            let path = directoryPath(fd)
            lock.withLock { writes.append((path, b.count)) }
            return try SystemFileIO().pwrite(fd, from: b, at: o)
        }

        func size(_ fd: Int32) throws(SystemError) -> Int64 {
            let path = directoryPath(fd)
            lock.withLock { sizes.append(path) }
            return try SystemFileIO().size(fd)
        }

        /// Forgets what was recorded.
        func reset() { lock.withLock { reads = []; opens = []; writes = []; sizes = [] } }
        /// The reads of `path` and the times its size was asked for, since the last `reset`.
        func reads(of path: String) -> Int { lock.withLock { reads.filter { $0.path == path }.count } }
        func sizes(of path: String) -> Int { lock.withLock { sizes.filter { $0 == path }.count } }
        /// The bytes written into `path` since the last `reset`.
        func bytesWritten(to path: String) -> Int { lock.withLock { writes.filter { $0.path == path }.reduce(0) { $0 + $1.count } } }
        /// The reads of `path` recorded since the last `reset` that repeat an earlier one (same offset and length).
        func repeatedReads(of path: String) -> Int {
            lock.withLock {
                let mine = reads.filter { $0.path == path }.map { "\($0.offset)+\($0.count)" }
                return mine.count - Set(mine).count
            }
        }
        func opens(of path: String) -> Int { lock.withLock { opens.filter { $0 == path }.count } }
    }

    /// A commit reads each chunk it re-seals once: the chunk journal records the bytes the write read (under the seal
    /// lock, which keeps other writers out) instead of reading them again. And a rollback journal takes its class from
    /// the database file the connection has open, without opening the database's path again.
    func testACommitReadsWhatItReSealsOnceAndAJournalOpensNoDatabaseAgain() throws {
        let dir = try temporaryDirectory(self)
        let io = RecordingIO()
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096), io: io)
        for mode in ["WAL", "DELETE"] {
            let path = dir + "/\(mode).db"
            let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
            defer { db.close() }
            try db.execute("PRAGMA journal_mode = \(mode); PRAGMA synchronous = NORMAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
            try db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO t SELECT i, randomblob(100) FROM n")
            var repeated = 0, opens = 0
            for i in 1...20 {
                io.reset()
                try db.execute("UPDATE t SET v = randomblob(100) WHERE id = \(i * 13)")
                repeated += io.repeatedReads(of: mode == "WAL" ? path + "-wal" : path + "-journal")
                repeated += io.repeatedReads(of: path)
                opens += io.opens(of: path)
            }
            XCTAssertEqual(repeated, 0, "\(mode): 20 one-row commits read some bytes twice")
            XCTAssertEqual(opens, 0, "\(mode): the journal's class was read from the database's path")
            XCTAssertEqual(try db.rows("PRAGMA integrity_check"), [[.text("ok")]])
        }
    }

    /// A WAL's only writer connection (GRDB's `DatabasePool`) takes neither the WAL's size nor its last chunk from the
    /// file again at each commit: its handle keeps them while the WAL's log ends in its own last mark
    /// (`prepareChangeAfterOtherWriters`). Once another connection commits, the next commit of the first takes both
    /// from the file again, and every row both wrote is there.
    func testAWALWriterThatCommittedLastReadsNothingOfTheWALAgain() throws {
        let dir = try temporaryDirectory(self)
        let io = RecordingIO()
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096), io: io)
        let path = dir + "/writer.db", wal = path + "-wal"
        let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { db.close() }
        try db.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
        try db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO t SELECT i, randomblob(100) FROM n")
        try db.execute("UPDATE t SET v = randomblob(100) WHERE id = 1")
        io.reset()
        for i in 1...20 { try db.execute("UPDATE t SET v = randomblob(100) WHERE id = \(i * 13)") }
        XCTAssertEqual(io.sizes(of: wal), 0, "20 one-row commits of the only writer took the WAL's size")
        XCTAssertEqual(io.reads(of: wal), 0, "20 one-row commits of the only writer read the WAL")

        let other = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { other.close() }
        for i in 1...5 {
            try other.execute("UPDATE t SET v = x'0\(i)' WHERE id = \(i)")
            io.reset()
            try db.execute("UPDATE t SET v = x'1\(i)' WHERE id = \(i + 100)")
            XCTAssertEqual(io.sizes(of: wal), 1, "commit \(i) after another connection's did not take the WAL's size again")
        }
        for i in 1...5 {
            XCTAssertEqual(try db.rows("SELECT hex(v) FROM t WHERE id = \(i)"), [[.text("0\(i)")]])
            XCTAssertEqual(try other.rows("SELECT hex(v) FROM t WHERE id = \(i + 100)"), [[.text("1\(i)")]])
        }
        XCTAssertEqual(try other.rows("PRAGMA integrity_check"), [[.text("ok")]])
    }

    /// A WAL commit of many frames is one write into the WAL: the VFS holds a transaction's frames and writes them with
    /// its commit frame (`HeldWrites.swift`). Written one by one, each frame (4,120 bytes) re-seals the chunk the frame
    /// before it ends in, so a commit wrote about 1.3 times its frames' bytes here; as one write, about 1.04 (its
    /// chunks' nonces and tags, and the one chunk before it re-sealed). Measured in bytes written into the WAL, which do
    /// not depend on how the cores split a write into `pwrite`s. A transaction larger than what is held
    /// (`heldFramesLimit`) writes in pieces, each re-sealing one chunk more.
    func testAWALCommitOfManyFramesIsOneWrite() throws {
        let dir = try temporaryDirectory(self)
        let io = RecordingIO()
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096), io: io)
        let path = dir + "/frames.db"
        let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { db.close() }
        try db.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
        func insert(_ n: Int, from first: Int) throws -> Double {
            let wal = try DatabaseHeldFramesTests.walFile(db), before = try wal.handle.size  // no checkpoint: the WAL only grows
            io.reset()
            try db.execute("INSERT INTO t SELECT \(first) + i, randomblob(3000) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(n)) SELECT i FROM n)")
            return Double(io.bytesWritten(to: path + "-wal")) / Double(try wal.handle.size - before)
        }
        for round in 0..<10 {
            // 30 rows of 3,000 bytes: 30 leaf pages and the table's root, about 31 frames.
            let ratio = try insert(30, from: round * 100)
            XCTAssertLessThan(ratio, 1.15, "round \(round): a commit of about 31 frames wrote \(ratio)× its frames' bytes into the WAL")
        }
        let ratio = try insert(200, from: 5000)
        XCTAssertLessThan(ratio, 1.15, "a commit of about 200 frames wrote \(ratio)× its frames' bytes into the WAL")
        XCTAssertEqual(try db.rows("SELECT count(*) FROM t"), [[.integer(500)]])
        XCTAssertEqual(try db.rows("PRAGMA integrity_check"), [[.text("ok")]])
        try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        XCTAssertEqual(try db.rows("PRAGMA integrity_check"), [[.text("ok")]])
    }

    /// A rollback-mode transaction writes the database's interior pages without the seal lock, which SQLite's EXCLUSIVE
    /// lock makes needless (`writesOnlyUnreadPages`): while another open file description (playing another process that
    /// re-reads under the seal lock) holds it shared, a one-row UPDATE and its commit still finish. Writes that touch
    /// the last chunk or grow the file keep taking it: a transaction that grows past the spare room waits.
    func testRollbackModeWritesOfInteriorPagesTakeNoSealLock() throws {
        let path = try temporaryDirectory(self) + "/interior.db"
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096))
        let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        defer { db.close() }
        try db.execute("PRAGMA journal_mode = DELETE; PRAGMA synchronous = NORMAL; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
        try db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) INSERT INTO t SELECT i, randomblob(100) FROM n")
        let probe = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(probe, 0)
        defer { close(probe) }
        XCTAssertEqual(OFDLock.trySet(fd: probe, .shared, start: ProtectedDatabaseFile.sealByte, length: 1), .done)

        nonisolated(unsafe) let connection = db  // used by one thread at a time: the test waits for it
        func finishes(_ sql: String) -> Bool {
            let done = DispatchSemaphore(value: 0)
            let thread = Thread { try? connection.execute(sql); done.signal() }
            thread.start()
            let inTime = done.wait(timeout: .now() + 3) == .success
            if !inTime {  // let it finish before the connection closes
                XCTAssertEqual(OFDLock.trySet(fd: probe, nil, start: ProtectedDatabaseFile.sealByte, length: 1), .done)
                done.wait()
            }
            return inTime
        }
        XCTAssertTrue(finishes("UPDATE t SET v = randomblob(100) WHERE id = 150"), "an interior page's write waited for the seal lock")
        XCTAssertFalse(finishes("INSERT INTO t SELECT i + 1000, randomblob(3000) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) SELECT i FROM n)"),
                       "growing past the spare room re-seals the last chunk: it must wait for the seal lock")
        XCTAssertEqual(try db.rows("SELECT count(*) FROM t").first?.first, .integer(400))
        XCTAssertEqual(try db.rows("PRAGMA integrity_check"), [[.text("ok")]])
    }

    /// A new WAL database `name` in a new directory: its path, its files and a connection to it.
    private func walDatabase(_ name: String, _ test: String = #function) throws -> (String, ProtectedFiles, ProtectedDatabase) {
        let path = try temporaryDirectory(self, test) + "/" + name
        let files = ProtectedFiles(keys: try InMemoryClassKeys.random(), options: .init(chunkSize: 4096))
        let db = try ProtectedDatabase.open(path: path, protection: .completeUntilFirstUserAuthentication, files: files)
        try db.execute("PRAGMA journal_mode = WAL")
        return (path, files, db)
    }

    /// How many of this process's descriptors name `path`.
    private func descriptors(naming path: String) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == path
        }.count
    }
}
