internal import CSQLite
import DataProtection
import SystemLayer
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A WAL database's wal-index (`<database>-shm`): shared memory that every connection maps, with the unix VFS's layout
/// of its locks (os_unix.c): SQLite's eight WAL locks at bytes 120–127, the "dead man switch" at byte 128.
///
/// The one file of a database that stays plain. SQLite's documentation of the WAL format (walformat.html §2, "The
/// WAL-Index File Format") and of the file format (fileformat2.html §4, its wal-index subsection) give its whole content: a header (version, change counter,
/// page size, the last valid frame `mxFrame`, the database size in pages `nPage`, the WAL's salts and checksums), the
/// checkpoint information (frames backfilled, five read marks, which are frame numbers) and hash tables that map page
/// numbers to frame numbers. No page content and no row is stored in it; it is rebuilt from the WAL after a crash. What it
/// reveals to someone who can read it — which page numbers were written since the last checkpoint, and how many frames —
/// is in SECURITY.md.
final class WALIndex {
    static let lockBase: Int64 = 120
    static let deadManSwitch: Int64 = 128

    let file: SharedMemoryFile
    private var regions: [UnsafeMutableRawPointer?] = []

    /// Maps the index of the database at `databasePath`, emptying a stale one if no other connection has it open.
    init(databasePath: String) throws(ProtectionError) {
        let path = databasePath + "-shm"
        do throws(SharedPage.Failure) { file = try SharedMemoryFile(path: path, mode: 0o600) } catch {
            switch error {
            case .system(_, let e): throw ProtectionError(.io(e.rawValue), "unable to open the wal-index '\(path)': \(e)", path: path)
            case .foreign(let what):
                throw ProtectionError(.untrustedFile, "unable to open the wal-index '\(path)': \(what) is at its name; remove it (no connection has the database open)", path: path)
            case .refused: throw ProtectionError(.untrustedFile, "unable to open the wal-index '\(path)'", path: path)
            }
        }
        // The first connection (nobody holds the switch) empties what a crashed one left; the others wait for it.
        do throws(SystemError) {
            switch file.lock(.exclusive, start: Self.deadManSwitch, length: 1) {
            case .done:
                try file.resize(to: 0)
                guard file.lock(.shared, start: Self.deadManSwitch, length: 1) == .done else { throw SystemError(EIO) }
            case .wouldBlock:
                guard file.waitLock(.shared, start: Self.deadManSwitch, length: 1) == .done else { throw SystemError(EIO) }
            case .failed(let e): throw SystemError(e)
            }
        } catch {
            file.close()
            throw ProtectionError(.io(error.errno), "unable to lock the wal-index '\(path)': \(error)", path: path)
        }
    }

    /// Region `i` of `size` bytes, grown when `extend`; nil when it does not exist and `extend` is false.
    func region(_ i: Int, size: Int, extend: Bool) throws(SystemError) -> UnsafeMutableRawPointer? {
        if i < regions.count, let p = regions[i] { return p }
        let end = Int64(i + 1) * Int64(size)
        if try file.size() < end {
            guard extend else { return nil }
            try file.resize(to: end)
        }
        let p = try file.map(offset: Int64(i) * Int64(size), length: size)
        while regions.count <= i { regions.append(nil) }
        regions[i] = p
        return p
    }

    func close() {
        file.close()
        regions = []
    }
}

extension ProtectedDatabaseFile {
    /// `xShmMap`.
    func mapWALIndex(_ region: Int, size: Int, extend: Bool, _ out: inout UnsafeMutableRawPointer?) -> Int32 {
        do throws(ProtectionError) {
            if walIndex == nil { walIndex = try WALIndex(databasePath: handle.path) }
            do throws(SystemError) { out = try walIndex!.region(region, size: size, extend: extend) } catch {
                throw ProtectionError(.io(error.errno), "unable to map the wal-index of '\(handle.path)': \(error)", path: handle.path)
            }
            return SQLITE_OK
        } catch { return VFSFailure.record(error, io: DP_IOERR_SHMMAP) }
    }

    /// `xShmLock`: SQLite's WAL locks as OFD locks on the index (each connection's own descriptor).
    ///
    /// Taking any of them first checks the class, so a read or write transaction of a locked `complete` database fails
    /// with `SQLITE_AUTH` even when SQLite would answer from its cache; taking a read lock (the start of a read
    /// transaction) makes the handles forget the last chunks they kept of the database file, which a checkpoint may have
    /// changed, and of the WAL, whose last chunk another connection's commit re-sealed: a WAL handle that kept that chunk
    /// from an earlier transaction would otherwise return its old plaintext for frames committed since (SQLite then sees
    /// a torn frame: "database disk image is malformed"). Taking the write or checkpoint lock does the same, and each
    /// file's first write then takes its size from the file again (`sealedForWriting`). Neither makes a system call.
    func lockWALIndex(offset: Int, count: Int, flags: Int32) -> Int32 {
        guard let index = walIndex else { return DP_IOERR_SHMLOCK }
        let start = WALIndex.lockBase + Int64(offset)
        if flags & SQLITE_SHM_UNLOCK != 0 {
            var rc = SQLITE_OK
            if offset == 0, flags & SQLITE_SHM_EXCLUSIVE != 0, let wal {  // WAL_WRITE_LOCK
                rc = wal.writeHeld()  // none after a whole frame; a failed transaction may leave one
                if wal.handle.holdsHotJournal {
                    do throws(ProtectionError) { try wal.handle.markCommit() } catch { rc = VFSFailure.record(error, io: DP_IOERR_FSYNC) }
                }
            }
            _ = index.file.lock(nil, start: start, length: Int64(count))
            return rc
        }
        do throws(ProtectionError) { try handle.checkAvailable() } catch { return VFSFailure.record(error, io: DP_IOERR_SHMLOCK) }
        switch index.file.lock(flags & SQLITE_SHM_SHARED != 0 ? .shared : .exclusive, start: start, length: Int64(count)) {
        case .done: break
        case .wouldBlock: return SQLITE_BUSY
        case .failed: return DP_IOERR_SHMLOCK
        }
        // WAL_READ_LOCK(0...4) are locks 3...7 (shared: a read transaction starts); WAL_WRITE_LOCK is 0 and
        // WAL_CKPT_LOCK 1 (exclusive: a write transaction or a checkpoint starts). A checkpoint runs after its
        // connection's commit let the write lock go, so another connection's checkpoint may have grown the database
        // and re-sealed its last chunk since this connection's read transaction began.
        if flags & SQLITE_SHM_SHARED != 0 ? offset >= 3 : offset <= 1 {
            // A read transaction, a write transaction or a checkpoint: nothing of the handles' sizes is needed before a
            // read, and a write takes them again first.
            forgetAfterOtherWriters()
            wal?.forgetAfterOtherWriters()
        }
        return SQLITE_OK
    }

    /// `xShmUnmap`: unmaps and closes the index; SQLite asks for its deletion when the last connection closes.
    func unmapWALIndex(delete: Bool) -> Int32 {
        guard let index = walIndex else { return SQLITE_OK }
        index.close()
        walIndex = nil
        if delete { try? io.unlink(handle.path + "-shm") }
        return SQLITE_OK
    }
}

/// `xShmBarrier`: a full memory fence between the connections that share the index.
func walIndexBarrier() { atomicMemoryFence(ordering: .sequentiallyConsistent) }
