internal import CSQLite
import DataProtection
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

/// A file SQLite opened through the VFS: the calls of `sqlite3_io_methods`, each returning SQLite's result code.
///
/// Two kinds: `ProtectedDatabaseFile` (the main database, its journal, WAL and super-journal) and `MemoryDatabaseFile`
/// (SQLite's temporary files, which never touch the disk).
class DatabaseFile {
    func close() -> Int32 { SQLITE_OK }
    func read(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 { DP_IOERR_READ }
    func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 { DP_IOERR_WRITE }
    func truncate(to size: Int64) -> Int32 { DP_IOERR_TRUNCATE }
    func sync() -> Int32 { SQLITE_OK }
    func size(_ out: inout Int64) -> Int32 { DP_IOERR_FSTAT }
    func lock(_ level: Int32) -> Int32 { SQLITE_OK }
    func unlock(_ level: Int32) -> Int32 { SQLITE_OK }
    func checkReservedLock(_ out: inout Int32) -> Int32 { out = 0; return SQLITE_OK }
    func shmMap(_ region: Int, size: Int, extend: Bool, _ out: inout UnsafeMutableRawPointer?) -> Int32 { DP_IOERR_SHMMAP }
    func shmLock(offset: Int, count: Int, flags: Int32) -> Int32 { DP_IOERR_SHMLOCK }
    func shmUnmap(delete: Bool) -> Int32 { SQLITE_OK }

    /// Whether SQLite keeps the WAL file when the last connection closes (`SQLITE_FCNTL_PERSIST_WAL`).
    var persistWAL: Int32 = 0

    /// `xFileControl`: the one operation the VFS answers itself, as the unix VFS does (GRDB sets it on every
    /// `DatabasePool`, and fails the open on `SQLITE_NOTFOUND`); SQLite's defaults for the rest.
    ///
    /// `SQLITE_FCNTL_PERSIST_WAL`: an argument below zero asks for the flag, zero or more sets it. A kept WAL is a
    /// protected file like any other (SQLite empties it at the last close), so the flag changes no guarantee.
    func fileControl(_ op: Int32, _ arg: UnsafeMutableRawPointer?) -> Int32 {
        guard op == SQLITE_FCNTL_PERSIST_WAL, let p = arg?.assumingMemoryBound(to: Int32.self) else { return SQLITE_NOTFOUND }
        if p.pointee < 0 { p.pointee = persistWAL } else { persistWAL = p.pointee == 0 ? 0 : 1 }
        return SQLITE_OK
    }
}

/// A database file that is a protected file: every page read is authenticated, every page write re-sealed.
///
/// Pages and chunks are both 4 KiB, so a page write is one chunk write. The handle's rollback journal stays on (FORMAT.md
/// §6.7.5): it is what keeps the chunk layout's last-chunk flag and size consistent across a crash in the middle of an
/// append, and the committed bytes of partial chunks (WAL frames, journal records), which SQLite's own journal does not
/// cover. Only a main database's whole, interior page overwrites leave it out: SQLite's journal or WAL holds those pages
/// first and its recovery rewrites them whole (`leaveWholeChunksToTheCallersJournal`).
final class ProtectedDatabaseFile: DatabaseFile {
    let handle: ProtectedFileHandle
    let io: any FileIO
    let deleteOnClose: Bool
    /// SQLite's lock level on this file (`SQLITE_LOCK_*`), held as OFD locks on the handle's descriptor.
    var level = SQLITE_LOCK_NONE
    /// The wal-index, mapped at the first `xShmMap`.
    var walIndex: WALIndex?
    /// For a main database in WAL mode: its connection's WAL, whose commit is marked in its log when the connection
    /// gives up the WAL write lock with the log still hot (a transaction rolled back after writing frames), so that
    /// the next writer, another handle, can continue the log.
    weak var wal: ProtectedDatabaseFile?
    /// Removes this file from the VFS's table of main-database files (set for a main database).
    var forget: (() -> Void)?
    /// Unregisters the holder through which a lock wipes this main database's page cache (`PageWipe`).
    var pageCacheRelease: (() -> Void)?
    /// Unregisters the holder through which a lock wipes this WAL's held frames (`HeldBytes`).
    var heldRelease: (() -> Void)?
    /// Whether this is a WAL (SQLite's `SQLITE_OPEN_WAL`).
    var isWAL = false
    /// Whether this is a main database (SQLite's `SQLITE_OPEN_MAIN_DB`).
    var isMainDatabase = false
    /// For a WAL: the offset of the commit frame whose 24-byte header was the last write, until its page follows.
    var commitFrameHeaderAt: Int64 = -1
    /// For a journal or WAL (`holdsSmallWrites`): the writes held until the next write (`HeldWrites.swift`).
    var holdsSmallWrites = false
    let held: HeldBytes
    /// Set for a journal, super-journal or WAL that SQLite opened with `SQLITE_OPEN_CREATE`: its first sync also syncs
    /// its directory, so that its name is durable before SQLite relies on the file, as SQLite's unix VFS does. A
    /// rollback journal is created anew by every transaction in DELETE mode: without this a power loss can take away
    /// the hot journal of a half-written transaction, or bring back an older one that SQLite then plays back.
    var syncsDirectoryAtFirstSync = false
    /// The step a main database grows by, as the application set it (`SQLITE_FCNTL_CHUNK_SIZE`); nil: the default rule.
    var growthStep: Int64?
    /// Set at the start of a WAL read transaction, which leaves the handle's size as it was (`forgetAfterOtherWriters`):
    /// the next `xFileSize` takes the size from the file first.
    var sizeMayBeStale = false

    init(handle: ProtectedFileHandle, io: any FileIO, deleteOnClose: Bool) {
        self.handle = handle
        self.io = io
        self.deleteOnClose = deleteOnClose
        held = HeldBytes(protection: handle.protectionClass)
    }

    /// `SQLITE_FCNTL_SIZE_HINT` and `SQLITE_FCNTL_CHUNK_SIZE`: a main database grows in steps in rollback-journal mode,
    /// to a checkpoint's hint in WAL mode (`DatabaseGrowth.swift`); the other operations as `DatabaseFile`.
    override func fileControl(_ op: Int32, _ arg: UnsafeMutableRawPointer?) -> Int32 {
        switch op {
        case SQLITE_FCNTL_SIZE_HINT: arg.map { grow(toHold: $0.assumingMemoryBound(to: Int64.self).pointee) } ?? SQLITE_OK
        case SQLITE_FCNTL_CHUNK_SIZE: arg.map { setGrowthStep($0.assumingMemoryBound(to: Int32.self).pointee) } ?? SQLITE_OK
        default: super.fileControl(op, arg)
        }
    }

    override func close() -> Int32 {
        _ = writeHeld()  // SQLite closes a journal or WAL after a sync or a whole frame: nothing is held then
        held.state.withLock { $0.release() }
        heldRelease?()
        heldRelease = nil
        forget?()
        pageCacheRelease?()
        pageCacheRelease = nil
        walIndex?.close()
        walIndex = nil
        handle.close()  // commits outstanding changes; the OFD locks go with the descriptor
        if deleteOnClose { try? io.unlink(handle.path) }
        return SQLITE_OK
    }

    /// Reads; a short read (past the end) is zero-filled as SQLite requires.
    ///
    /// The handle's size may be older than the file's (a WAL read transaction starts without taking it again:
    /// `forgetAfterOtherWriters`); a read that meets another size is one of the failed first reads below.
    /// Another connection's handle may be re-sealing a chunk this read needs while it reads: in WAL mode a writer
    /// appends frames while readers read earlier frames, and frames (4120 bytes) share chunks, so the chunk that holds
    /// the end of a reader's snapshot is re-sealed by the next commit; a checkpoint grows the database under readers and
    /// re-seals its old last chunk. A read that meets such a chunk sees it torn, or sealed for another size, and fails
    /// authentication, or meets the end this handle knew. It is then made again under the seal lock (`sealed`), where
    /// no writer is half-way: with the size taken from the file anew, it either succeeds or the chunk is tampered with:
    /// `DatabaseError.tampered` (an extended `SQLITE_CORRUPT`), no byte of it. A successful first read is always right:
    /// every byte it returns authenticated, and no writer changes bytes inside a reader's snapshot.
    override func read(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 {
        let held = writeHeld()
        guard held == SQLITE_OK else { return held }
        do throws(ProtectionError) {
            var n = -1
            do throws(ProtectionError) { n = try handle.read(into: buffer, at: offset) } catch where error.code == .authenticationFailed {}
            if n < buffer.count {
                n = try sealed(.shared) { () throws(ProtectionError) -> Int in
                    try handle.reloadAfterOtherWriters()
                    sizeMayBeStale = false
                    return try handle.read(into: buffer, at: offset)
                }
            }
            guard n < buffer.count else { return SQLITE_OK }
            UnsafeMutableRawBufferPointer(rebasing: buffer[n...]).initializeMemory(as: UInt8.self, repeating: 0)
            return DP_IOERR_SHORT_READ
        } catch where error.code == .authenticationFailed && isHeaderReadBeforeRecovery(at: offset, count: buffer.count) {
            wipe(buffer)
            return DP_IOERR_SHORT_READ
        } catch {
            wipe(buffer)
            return VFSFailure.record(error, io: DP_IOERR_READ)
        }
    }

    /// The bytes of the database header SQLite reads when it opens a connection (`sqlite3BtreeOpen`).
    static let databaseHeaderSize = 100

    /// Whether a read whose chunk failed authentication is SQLite's read of the database header at a connection's open,
    /// made before any lock and before SQLite's recovery, while a rollback journal or a WAL beside the database holds
    /// bytes for that recovery.
    ///
    /// Chunk 0 (page 1) is one of the whole pages SQLite restores itself (FORMAT.md §6.7.5): it journals or logs page 1
    /// before it overwrites it, so a power loss can tear chunk 0 only while that journal or WAL is there, and SQLite's
    /// recovery rewrites page 1 whole (playing the hot journal back) or reads it from the WAL before it reads it from
    /// this file under a lock. SQLite takes a short read of the header as a database not yet written and learns the page
    /// size again from page 1 after its recovery; no byte of the chunk is returned, and every later read of it, under a
    /// lock, authenticates as any other (a chunk 0 still failing then is tampered with).
    private func isHeaderReadBeforeRecovery(at offset: Int64, count: Int) -> Bool {
        guard isMainDatabase, offset == 0, count <= Self.databaseHeaderSize, level == SQLITE_LOCK_NONE else { return false }
        return ["-journal", "-wal"].contains { side in
            guard let st = try? io.linkStatus(handle.path + side) else { return false }
            return st.st_mode & S_IFMT == S_IFREG && st.st_size > 0
        }
    }

    /// The size of a WAL's header (walformat.html). SQLite writes it, at offset 0, only when its wal-index says the log
    /// holds no frame: when it creates the log, and when it starts it over after a checkpoint of every frame.
    static let walHeaderSize = 32

    /// Writes under the seal lock. A WAL header written into a WAL that is not empty starts the log over: the WAL is cut
    /// to nothing first, so that the new log's frames are appends rather than re-seals of the old log's committed
    /// chunks, each of which would cost the chunk journal an fsync (FORMAT.md §6.7.5, "A WAL started over is cut first").
    override func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        if holdsSmallWrites, let rc = holdingSmallWrites(buffer, at: offset) { return rc }
        let rc = writeSealed(buffer, at: offset)
        guard rc == SQLITE_OK else { return rc }
        if isWAL { return committingAfterACommitFrame(buffer, at: offset) }
        return SQLITE_OK
    }

    /// `buffer` written at `offset` under the seal lock (the WAL cut first when a WAL header starts the log over), or
    /// without it where no reader can be reading the pages it re-seals (`writesOnlyUnreadPages`).
    func writeSealed(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        do throws(ProtectionError) {
            if writesOnlyUnreadPages(buffer.count, at: offset) {
                try handle.write(buffer, at: offset)
                return SQLITE_OK
            }
            try sealedForWriting { () throws(ProtectionError) in
                if isWAL, offset == 0, buffer.count == Self.walHeaderSize, try handle.size > 0 { try handle.truncate(to: 0) }
                try handle.write(buffer, at: offset)
            }
        } catch {
            return VFSFailure.record(error, io: DP_IOERR_WRITE)
        }
        return SQLITE_OK
    }

    /// For a WAL: once the page of a commit frame is written, marks the commit in the WAL's log (`markCommit`, no
    /// fsync; FORMAT.md §6.7.6), before SQLite publishes the commit in the wal-index.
    ///
    /// Why then: from the moment the wal-index shows a commit, another connection may read it, or checkpoint it —
    /// sync the WAL, copy its frames into the database and sync that. A log without the commit's mark would roll the
    /// WAL back to before the commit after a crash, cutting frames out whose pages a reader saw or the database already
    /// holds. Marking when the commit frame is whole, the last write before SQLite publishes it, leaves no such moment;
    /// `lockWALIndex` marks what is left hot when the write lock goes (a transaction rolled back).
    ///
    /// A frame is a 24-byte header, then the page, each one `xWrite` (walformat.html, "The WAL File Format"): frame
    /// `k` at `32 + k · (24 + page size)`; header bytes 4–7 hold the database size in pages after a commit, zero in
    /// every other frame.
    func committingAfterACommitFrame(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        let header = 24, walHeader = Int64(Self.walHeaderSize)
        if buffer.count == header, offset >= walHeader {
            commitFrameHeaderAt = buffer[4] | buffer[5] | buffer[6] | buffer[7] != 0 ? offset : -1
            return SQLITE_OK
        }
        defer { commitFrameHeaderAt = -1 }
        guard commitFrameHeaderAt >= 0, offset == commitFrameHeaderAt + Int64(header),
              (commitFrameHeaderAt - walHeader) % Int64(header + buffer.count) == 0
        else { return SQLITE_OK }
        do throws(ProtectionError) { try handle.markCommit() } catch { return VFSFailure.record(error, io: DP_IOERR_WRITE) }
        return SQLITE_OK
    }

    override func truncate(to size: Int64) -> Int32 {
        let held = writeHeld()
        guard held == SQLITE_OK else { return held }
        do throws(ProtectionError) { try sealedForWriting { () throws(ProtectionError) in try handle.truncate(to: size) } } catch {
            return VFSFailure.record(error, io: DP_IOERR_TRUNCATE)
        }
        return SQLITE_OK
    }

    override func sync() -> Int32 {
        let held = writeHeld()
        guard held == SQLITE_OK else { return held }
        do throws(ProtectionError) { try handle.sync() } catch {
            // A WAL synced by a checkpoint while another connection is in the middle of a transaction that holds its
            // log (FORMAT.md §6.7.6): the checkpoint stops before it copies anything, as when readers hold it back
            // (SQLite's walCheckpoint takes SQLITE_BUSY for that, not for a failure).
            if isWAL, error.code == .coordinationFailed { _ = VFSFailure.record(error, io: SQLITE_BUSY); return SQLITE_BUSY }
            return VFSFailure.record(error, io: DP_IOERR_FSYNC)
        }
        if syncsDirectoryAtFirstSync {
            do throws(SystemError) { try io.syncDirectory(of: handle.path) } catch {
                return VFSFailure.record(.errno(error.errno, "sync the directory of", handle.path), io: DP_IOERR_DIR_FSYNC)
            }
            syncsDirectoryAtFirstSync = false
        }
        return SQLITE_OK
    }

    override func size(_ out: inout Int64) -> Int32 {
        let held = writeHeld()
        guard held == SQLITE_OK else { return held }
        do throws(ProtectionError) {
            if sizeMayBeStale { try reloadAfterOtherWriters() }
            out = try handle.size
        } catch { return VFSFailure.record(error, io: DP_IOERR_FSTAT) }
        return SQLITE_OK
    }

    // SQLite's locks (DatabaseLocks.swift) and the wal-index (WALIndex.swift).
    override func lock(_ level: Int32) -> Int32 { lockUp(to: level) }
    override func unlock(_ level: Int32) -> Int32 { unlockDown(to: level) }
    override func checkReservedLock(_ out: inout Int32) -> Int32 { reservedLockHeld(&out) }
    override func shmMap(_ region: Int, size: Int, extend: Bool, _ out: inout UnsafeMutableRawPointer?) -> Int32 {
        mapWALIndex(region, size: size, extend: extend, &out)
    }
    override func shmLock(offset: Int, count: Int, flags: Int32) -> Int32 { lockWALIndex(offset: offset, count: count, flags: flags) }
    override func shmUnmap(delete: Bool) -> Int32 { unmapWALIndex(delete: delete) }

    private func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
    }
}

/// One of SQLite's temporary files (sorts, temporary tables, statement journals): kept in memory, never on disk, since
/// it holds rows in plaintext; wiped when SQLite closes it. Private to one connection, so its locks are no-ops.
final class MemoryDatabaseFile: DatabaseFile {
    private var bytes: UnsafeMutableRawBufferPointer = .init(start: nil, count: 0)
    private var count = 0

    override func close() -> Int32 {
        if let base = bytes.baseAddress {
            base.initializeMemory(as: UInt8.self, repeating: 0, count: bytes.count)
            bytes.deallocate()
        }
        bytes = .init(start: nil, count: 0)
        count = 0
        return SQLITE_OK
    }

    override func read(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Int32 {
        let start = Int(min(offset, Int64(count))), n = min(buffer.count, count - start)
        if n > 0 { buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + start, byteCount: n) }
        guard n < buffer.count else { return SQLITE_OK }
        UnsafeMutableRawBufferPointer(rebasing: buffer[max(n, 0)...]).initializeMemory(as: UInt8.self, repeating: 0)
        return DP_IOERR_SHORT_READ
    }

    override func write(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        let end = Int(offset) + buffer.count
        guard reserve(end) else { return DP_IOERR_NOMEM }
        if Int(offset) > count { (bytes.baseAddress! + count).initializeMemory(as: UInt8.self, repeating: 0, count: Int(offset) - count) }
        (bytes.baseAddress! + Int(offset)).copyMemory(from: buffer.baseAddress!, byteCount: buffer.count)
        count = max(count, end)
        return SQLITE_OK
    }

    override func truncate(to size: Int64) -> Int32 {
        let n = Int(size)
        if n < count { (bytes.baseAddress! + n).initializeMemory(as: UInt8.self, repeating: 0, count: count - n) }
        else if n > count {
            guard reserve(n) else { return DP_IOERR_NOMEM }
            (bytes.baseAddress! + count).initializeMemory(as: UInt8.self, repeating: 0, count: n - count)
        }
        count = n
        return SQLITE_OK
    }

    override func size(_ out: inout Int64) -> Int32 {
        out = Int64(count)
        return SQLITE_OK
    }

    /// Grows the buffer to hold `n` bytes (doubling), wiping the old one; false past 1 GiB.
    private func reserve(_ n: Int) -> Bool {
        guard n > bytes.count else { return true }
        guard n <= 1 << 30 else { return false }
        let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(n, bytes.count * 2, 64 * 1024), alignment: 16)
        if let old = bytes.baseAddress {
            grown.baseAddress!.copyMemory(from: old, byteCount: count)
            old.initializeMemory(as: UInt8.self, repeating: 0, count: bytes.count)
            bytes.deallocate()
        }
        bytes = grown
        return true
    }
}
