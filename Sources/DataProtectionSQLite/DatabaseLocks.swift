internal import CSQLite
import DataProtection
import SystemLayer

#if canImport(Glibc)
import Glibc
#endif

/// SQLite's five lock levels as OFD byte-range locks on the protected file's own descriptor, at the bytes the unix VFS
/// uses (os_unix.c): the pending byte at 1 GiB, the reserved byte after it, then 510 shared bytes.
///
/// Why OFD locks on the handle's descriptor rather than the unix VFS's methods: those keep classic POSIX locks, which
/// belong to the process and vanish when *any* descriptor of the file closes — and the protected file layer opens and
/// closes descriptors of its own (the handle's, a recovery's). OFD locks belong to one open file description: each
/// connection's handle has its own, so they exclude other connections in this process (other threads) and in other
/// processes alike, need no per-inode bookkeeping, and die with the descriptor, including when the process is killed.
/// The locks are advisory and sit past any page SQLite reads through this file, as in the unix VFS.
extension ProtectedDatabaseFile {
    static let pendingByte: Int64 = 0x4000_0000
    static let reservedByte = pendingByte + 1
    static let sharedFirst = pendingByte + 2
    static let sharedSize: Int64 = 510

    /// The seal lock's byte, after SQLite's: held exclusive while this handle re-seals chunks (`xWrite`, `xTruncate`;
    /// not for pages no reader can be reading meanwhile, `writesOnlyUnreadPages`), shared while it reads again after a
    /// failed read or takes the size from the file (`xRead`, transaction starts).
    static let sealByte = sharedFirst + sharedSize

    /// The connection byte, after the seal lock's: held shared by every connection's main-database file from `xOpen`
    /// to `xClose`, so a connection open but idle (rollback-journal mode between transactions, holding no SQLite lock)
    /// still shows; `DatabaseUnit.withExclusiveAccess` takes it exclusive, and `DatabaseUnit.isDatabase` tests it.
    static let connectionByte = sealByte + 1

    /// Takes the connection lock (shared, without waiting) on this main-database file for the life of its descriptor
    /// (closing it drops the lock), and checks that the path still names the file the handle opened.
    ///
    /// Why both: `dpctl` changes a database as a unit (`protect`, `unprotect`, `set-class`, `rotate`) only while it holds
    /// this byte exclusive, so a connection that holds it shared is refused there, idle or not. An open that meets the
    /// exclusive lock fails at once with SQLite's busy rather than waiting on a change that may replace the file; an open
    /// that raced a replace (its descriptor names the old file, the lock taken after dpctl let go) sees another inode at
    /// the path and fails the same way, so no connection keeps a file that is no longer the database.
    /// - Throws: `.coordinationFailed` naming the database and the fix; `.io` when the lock or the identity check fails.
    func holdConnectionLock() throws(ProtectionError) {
        let path = handle.path, fd = handle.lockDescriptor
        let busy = ProtectionError(
            .coordinationFailed, "unable to open '\(path)': `dpctl` is changing the database (it holds the database exclusive); try again when it is done",
            path: path)
        switch OFDLock.trySet(fd: fd, .shared, start: Self.connectionByte, length: 1) {
        case .done: break
        case .wouldBlock: throw busy
        case .failed(let e): throw ProtectionError(.io(e), "unable to open '\(path)': cannot take its connection lock: \(String(cString: strerror(e)))", path: path)
        }
        let same: Bool
        do throws(SystemError) {
            let open = try io.identity(fd), named = try io.linkStatus(path)
            same = open.device == UInt64(named.st_dev) && open.inode == UInt64(named.st_ino)
        } catch where error.errno == ENOENT {
            same = false
        } catch {
            throw ProtectionError(.io(error.errno), "unable to open '\(path)': \(error)", path: path)
        }
        guard same else { throw busy }
    }

    /// Runs `body` holding the seal lock as `kind`, waiting for it: another connection's handle (this process or
    /// another) is then not half-way through re-sealing a chunk or growing the file, so a read sees whole chunks and
    /// the file's size is that of whole chunks. Writers are one at a time already (SQLite's own locks), and each holds
    /// it for one call, so the wait is that of one write.
    func sealed<R>(_ kind: OFDLock.Kind, _ body: () throws(ProtectionError) -> R) throws(ProtectionError) -> R {
        let fd = handle.lockDescriptor
        guard OFDLock.waitSet(fd: fd, kind, start: Self.sealByte, length: 1) == .done else {
            throw ProtectionError(.io(EIO), "unable to lock '\(handle.path)' against other connections' writes", path: handle.path)
        }
        defer { _ = OFDLock.trySet(fd: fd, nil, start: Self.sealByte, length: 1) }
        return try body()
    }

    /// Takes what the handle knew of the file (size, kept last chunk) from the file again, under the seal lock.
    func reloadAfterOtherWriters() throws(ProtectionError) {
        try sealed(.shared) { () throws(ProtectionError) in try handle.reloadAfterOtherWriters() }
        sizeMayBeStale = false
    }

    /// Runs `body`, a write, holding the seal lock exclusive; a handle whose size may be stale takes it from the file
    /// first (`forgetAfterOtherWriters`), so that the change rolls back to the file as it is now, not as this handle
    /// last saw it (a crash in it would otherwise cut away other connections' committed writes). A WAL's handle takes
    /// it from the WAL's log instead when the log shows that no other connection wrote since this one's last commit
    /// (`prepareChangeAfterOtherWriters`).
    ///
    /// This is how a WAL write transaction or a checkpoint starts: taking the WAL's write or checkpoint lock forgets,
    /// without a system call, and the first write of each file reloads under the lock it takes anyway. Until then no
    /// other connection writes that file (SQLite's WAL write lock is held for the WAL, its checkpoint lock for the
    /// database), and reads and `xFileSize` take a stale size into account themselves.
    func sealedForWriting<R>(_ body: () throws(ProtectionError) -> R) throws(ProtectionError) -> R {
        try sealed(.exclusive) { () throws(ProtectionError) -> R in
            if sizeMayBeStale {
                try handle.prepareChangeAfterOtherWriters()
                sizeMayBeStale = false
            }
            return try body()
        }
    }

    /// Whether a write of `count` bytes at `offset` re-seals only chunks that no reader can be reading meanwhile, so that
    /// it needs no seal lock: whole pages of a main database, none of them its last chunk (the one an open reads
    /// without SQLite's locks) and none past its end, written while SQLite's own locks keep every reader off them.
    ///
    /// Who reads a database file's pages, and why none reads these: SQLite reads pages only holding SHARED, and a
    /// rollback-mode writer holding EXCLUSIVE has no SHARED holder beside it; in WAL mode the database is written
    /// only by a checkpoint, holding the checkpoint lock, and it copies only frames that every reader's snapshot
    /// holds (`mxSafeFrame`, at most every reader's mark; readers of the database alone, read mark 0, are kept out
    /// while it copies), so each reader reads those pages from the WAL. A page is one chunk, so writing one changes
    /// no other page's bytes. An open of the file reads its header and last chunk, which these writes leave alone.
    /// The size must be current (not `sizeMayBeStale`): the first write after the lock is taken reloads it under
    /// the seal lock.
    func writesOnlyUnreadPages(_ count: Int, at offset: Int64) -> Bool {
        guard isMainDatabase, !sizeMayBeStale, count > 0 else { return false }
        let page = Int64(ProtectedVFS.pageSize)
        guard offset % page == 0, Int64(count) % page == 0, let size = try? handle.size, size > 0 else { return false }
        let lastChunk = (size - 1) / page * page
        guard offset + Int64(count) <= lastChunk else { return false }
        if let walIndex { return walIndex.holdsCheckpointLock }
        return level == SQLITE_LOCK_EXCLUSIVE && wal == nil
    }

    /// Takes the size from the file again without the seal lock, holding SQLite's SHARED lock: the start of a
    /// rollback-mode transaction.
    ///
    /// SHARED keeps out every writer of the main file in rollback mode (they need EXCLUSIVE), so the size is whole
    /// chunks. In WAL mode, where a checkpoint writes the file under SHARED, a size taken half-way through its growth
    /// that fits no layout is taken again under the seal lock; one that fits is safe to read with (`read(_:at:)`), and a
    /// checkpoint takes it again under the lock before it writes.
    func reloadHoldingSharedLock() throws(ProtectionError) {
        do throws(ProtectionError) { try handle.reloadAfterOtherWriters() } catch where error.code == .authenticationFailed {
            try reloadAfterOtherWriters()
        }
        sizeMayBeStale = false
    }

    /// The start of a WAL read transaction, without a system call: the handle forgets its kept last chunk (another
    /// connection's commit may have re-sealed it), and the next `xFileSize` takes the size from the file.
    ///
    /// Reads made meanwhile with the size as it was return only authenticated bytes, or fail and are made again under
    /// the seal lock with the size taken anew (`read(_:at:)`). SQLite reads a WAL reader's snapshot size from the
    /// wal-index, and the database's from its header, so the file's size is needed only where `xFileSize` asks for it.
    func forgetAfterOtherWriters() {
        handle.forgetKeptLastChunk()
        sizeMayBeStale = true
    }

    /// `xLock`: raises the lock to `want` (SHARED, RESERVED or EXCLUSIVE; SQLite never asks for PENDING itself).
    ///
    /// Every raise first checks the class: a `complete` database whose class was locked fails here, before SQLite
    /// looks at its page cache, with `SQLITE_AUTH`. On taking SHARED the handle forgets what it knew of the file, which
    /// another connection may have changed since this one last held a lock (as SQLite itself re-checks its cache).
    func lockUp(to want: Int32) -> Int32 {
        guard want > level else { return SQLITE_OK }
        do throws(ProtectionError) { try handle.checkAvailable() } catch { return VFSFailure.record(error, io: DP_IOERR_LOCK) }
        let fd = handle.lockDescriptor
        func take(_ kind: OFDLock.Kind?, _ start: Int64, _ length: Int64) -> Int32 {
            switch OFDLock.trySet(fd: fd, kind, start: start, length: length) {
            case .done: SQLITE_OK
            case .wouldBlock: SQLITE_BUSY
            case .failed: DP_IOERR_LOCK
            }
        }
        switch want {
        case SQLITE_LOCK_SHARED:
            // A writer waiting for EXCLUSIVE holds the pending byte: new readers stay out until it is done.
            var rc = take(.shared, Self.pendingByte, 1)
            guard rc == SQLITE_OK else { return rc }
            rc = take(.shared, Self.sharedFirst, Self.sharedSize)
            _ = take(nil, Self.pendingByte, 1)
            guard rc == SQLITE_OK else { return rc }
            level = SQLITE_LOCK_SHARED
            do throws(ProtectionError) { try reloadHoldingSharedLock() } catch {
                _ = take(nil, Self.pendingByte, 2 + Self.sharedSize)
                level = SQLITE_LOCK_NONE
                return VFSFailure.record(error, io: DP_IOERR_LOCK)
            }
            return SQLITE_OK
        case SQLITE_LOCK_RESERVED:
            let rc = take(.exclusive, Self.reservedByte, 1)
            if rc == SQLITE_OK { level = SQLITE_LOCK_RESERVED }
            return rc
        default:  // EXCLUSIVE, through PENDING: no new reader gets in while the present ones finish
            if level < SQLITE_LOCK_PENDING {
                let rc = take(.exclusive, Self.pendingByte, 1)
                guard rc == SQLITE_OK else { return rc }
                level = SQLITE_LOCK_PENDING
            }
            let rc = take(.exclusive, Self.sharedFirst, Self.sharedSize)
            if rc == SQLITE_OK { level = SQLITE_LOCK_EXCLUSIVE }
            return rc
        }
    }

    /// `xUnlock`: lowers the lock to SHARED or NONE.
    ///
    /// A writer first commits its chunk journal if still hot (SQLite synced already unless `synchronous=OFF`): the
    /// next writer, another handle, starts a journal of its own, which a hot one would refuse.
    func unlockDown(to want: Int32) -> Int32 {
        guard want < level else { return SQLITE_OK }
        let fd = handle.lockDescriptor
        var rc = SQLITE_OK
        if level >= SQLITE_LOCK_RESERVED, handle.holdsHotJournal {
            do throws(ProtectionError) { try handle.sync() } catch { rc = VFSFailure.record(error, io: DP_IOERR_FSYNC) }
        }
        if want == SQLITE_LOCK_SHARED {
            if level == SQLITE_LOCK_EXCLUSIVE, OFDLock.trySet(fd: fd, .shared, start: Self.sharedFirst, length: Self.sharedSize) != .done {
                rc = DP_IOERR_RDLOCK
            }
            _ = OFDLock.trySet(fd: fd, nil, start: Self.pendingByte, length: 2)
            level = SQLITE_LOCK_SHARED
        } else {
            _ = OFDLock.trySet(fd: fd, nil, start: Self.pendingByte, length: 2 + Self.sharedSize)
            level = SQLITE_LOCK_NONE
        }
        return rc
    }

    /// `xCheckReservedLock`: whether any connection holds RESERVED or more.
    func reservedLockHeld(_ out: inout Int32) -> Int32 {
        if level >= SQLITE_LOCK_RESERVED { out = 1; return SQLITE_OK }
        switch OFDLock.isLocked(fd: handle.lockDescriptor, .exclusive, start: Self.reservedByte, length: 1) {
        case .done: out = 0
        case .wouldBlock: out = 1
        case .failed: return DP_IOERR_CHECKRESERVEDLOCK
        }
        return SQLITE_OK
    }
}
