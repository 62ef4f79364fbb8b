internal import CSQLite
import DataProtection
import SystemLayer
import Locking
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
///
/// This is one connection's view of it. The connections of one process to one database share one open file, its
/// mappings and its locks (`WALIndex.Shared`), as in SQLite's unix VFS: a lock that another connection of this process
/// holds shared is taken without a system call, and the process holds a lock at the file only while one of its
/// connections does (a read lock a moment longer, below). The file's OFD locks keep other processes' connections out,
/// the counts this process's.
///
/// Why shared: every read transaction takes and drops a read lock. With one descriptor per connection, each of those
/// was an `fcntl` on a lock list that every connection's descriptor made longer; with four connections reading and
/// writing, they were about 30 % of the VFS's system calls (`strace -f -c`, BENCHMARKS.md "issue 21, step 7").
///
/// A read lock that the last connection of this process lets go stays held shared at the file for a moment
/// (`lingerPeriod`, `LingeringReadLocks`): the next read transaction of any connection here takes it back with no system
/// call. Another process sees a reader that stayed that much longer, which SQLite allows for: a checkpoint there copies
/// up to that reader's mark and waits in its busy handler to restart the WAL, and a reader there picks another slot.
/// Why: two `fcntl`s per read transaction were a quarter of a point select, and the file's lock list, which every
/// connection of the process shares, slowed the writer beside them (BENCHMARKS.md, "Read locks kept for a moment").
final class WALIndex {
    static let lockBase: Int64 = 120
    static let deadManSwitch: Int64 = 128
    static let lockCount = 8

    let shared: Shared
    /// The locks this connection holds, one bit per lock.
    private var sharedMask: UInt8 = 0, exclusiveMask: UInt8 = 0

    /// Whether this connection holds lock `i` exclusive.
    func holdsExclusive(_ i: Int) -> Bool { exclusiveMask & (UInt8(1) << i) != 0 }

    /// Whether this connection holds SQLite's checkpoint lock (`WAL_CKPT_LOCK`, lock 1): it is checkpointing, and no
    /// other connection writes the database meanwhile.
    var holdsCheckpointLock: Bool { holdsExclusive(1) }

    /// Maps the index of the database at `databasePath` (opening it, for the first connection of this process).
    init(databasePath: String) throws(ProtectionError) {
        shared = try Shared.attach(databasePath + "-shm")
    }

    /// Region `i` of `size` bytes, grown when `extend`; nil when it does not exist and `extend` is false.
    func region(_ i: Int, size: Int, extend: Bool) throws(SystemError) -> UnsafeMutableRawPointer? {
        try shared.region(i, size: size, extend: extend)
    }

    /// SQLite's read locks, `WAL_READ_LOCK(0...4)`: the only locks that linger at the file after their last holder.
    static let readLocks: UInt8 = 0b1111_1000

    /// How long a read lock lingers at the file after the last connection of this process let it go: between one and
    /// two periods (`LingeringReadLocks`). Short beside what SQLite's busy handler waits first (1 ms, then 2 and 5), long
    /// beside the gap between two read transactions of a busy process (microseconds).
    static let lingerPeriod: Duration = .milliseconds(2)

    /// SQLite's `xShmLock` for locks `offset ..< offset + count`; `kind` nil unlocks.
    ///
    /// A shared lock that another connection of this process holds shared is counted; one that a connection of this
    /// process holds exclusive is busy; otherwise the process takes it at the file, or takes back a read lock that
    /// lingers there. An exclusive lock is busy while any other connection of this process holds one of its locks, and
    /// is then taken at the file (over a lingering read lock: OFD locks of one description convert). The file's lock goes
    /// when the last connection of this process that holds it lets it go, a read lock held shared a moment later.
    func lock(_ kind: OFDLock.Kind?, offset: Int, count: Int) -> OFDLock.Result {
        let range = offset..<(offset + count)
        let mask = range.reduce(UInt8(0)) { $0 | UInt8(1) << $1 }
        let file = shared.file
        return shared.locks.holding(range) { (slot) -> OFDLock.Result in
            switch kind {
            case nil:
                for i in range where (sharedMask | exclusiveMask) & (UInt8(1) << i) != 0 {
                    let bit = UInt8(1) << i
                    slot[i].holders = slot[i].holders < 0 ? 0 : slot[i].holders - 1
                    guard slot[i].holders == 0 else { continue }
                    if sharedMask & bit != 0, Self.readLocks & bit != 0, shared.sweptLater() {
                        slot[i].lingering = true
                        slot[i].used = true
                    } else {
                        _ = file.lock(nil, start: Self.lockBase + Int64(i), length: 1)
                    }
                }
                sharedMask &= ~mask
                exclusiveMask &= ~mask
                return .done
            case .shared?:
                if sharedMask & mask == mask { return .done }
                if range.contains(where: { slot[$0].holders < 0 }) { return .wouldBlock }
                for i in range where slot[i].holders == 0 && !slot[i].lingering {
                    let r = file.lock(.shared, start: Self.lockBase + Int64(i), length: 1)
                    guard r == .done else {
                        for j in offset..<i where slot[j].holders == 0 && !slot[j].lingering {
                            _ = file.lock(nil, start: Self.lockBase + Int64(j), length: 1)
                        }
                        return r
                    }
                }
                for i in range {
                    if slot[i].lingering { slot[i].used = true }
                    slot[i].lingering = false
                    slot[i].holders += 1
                }
                sharedMask |= mask
                return .done
            case .exclusive?:
                if range.contains(where: { slot[$0].holders != 0 }) { return .wouldBlock }
                let r = file.lock(.exclusive, start: Self.lockBase + Int64(offset), length: Int64(count))
                guard r == .done else { return r }  // a lingering read lock stays as it was (shared)
                for i in range {
                    slot[i].lingering = false
                    slot[i].holders = -1
                }
                exclusiveMask |= mask
                return .done
            }
        }
    }

    /// Lets every lock of this connection go and leaves the index. The last connection of this process closes the
    /// file, and calls `remove` first when given (SQLite asks for the index's deletion at the last close of the
    /// database), holding the table of open indexes, so that no connection of this process opens the file in between.
    func close(remove: (() -> Void)? = nil) {
        if sharedMask | exclusiveMask != 0 { _ = lock(nil, offset: 0, count: Self.lockCount) }
        shared.detach(remove: remove)
    }

    /// The open index of one database in this process, shared by its connections.
    final class Shared: @unchecked Sendable {
        struct State {
            var regions: [UnsafeMutableRawPointer?] = []
            var connections = 0
        }

        let path: String
        let file: SharedMemoryFile
        /// The regions and the connections.
        let state = Locked(State())
        /// The eight locks' holders, each behind its own mutex, held across that lock's calls at the file (as SQLite's
        /// unix VFS holds one mutex per lock when it may block): a writer taking the write lock does not hold up a
        /// reader taking a read lock (BENCHMARKS.md, "Read locks kept for a moment").
        let locks = WALLockSlots()
        /// Whether `LingeringReadLocks` sweeps this index.
        let swept = Atomic<Bool>(false)

        /// Whether a read lock let go now may linger: the sweeper sweeps this index (handed over here the first time);
        /// false when it cannot run, and the lock then goes at once.
        func sweptLater() -> Bool {
            if swept.exchange(true, ordering: .acquiringAndReleasing) { return true }
            if LingeringReadLocks.process.sweepLater(self) { return true }
            swept.store(false, ordering: .releasing)
            return false
        }

        /// The indexes open in this process, by path. A database named by two paths gets two, whose OFD locks exclude
        /// each other as two processes' do.
        private static let table = Locked<[String: Shared]>([:])

        /// The index at `path` for one more connection: the one this process has open, or a new one.
        static func attach(_ path: String) throws(ProtectionError) -> Shared {
            try table.withLock { (open) throws(ProtectionError) -> Shared in
                let index: Shared
                if let known = open[path] { index = known } else { index = try Shared(path: path) }
                open[path] = index
                index.state.withLock { $0.connections += 1 }
                return index
            }
        }

        /// Opens the index, emptying a stale one if no other process has it open.
        private init(path: String) throws(ProtectionError) {
            self.path = path
            do throws(SharedPage.Failure) { file = try SharedMemoryFile(path: path, mode: 0o600) } catch {
                switch error {
                case .system(_, let e): throw ProtectionError(.io(e.rawValue), "unable to open the wal-index '\(path)': \(e)", path: path)
                case .foreign(let what):
                    throw ProtectionError(.untrustedFile, "unable to open the wal-index '\(path)': \(what) is at its name; remove it (no connection has the database open)", path: path)
                case .refused: throw ProtectionError(.untrustedFile, "unable to open the wal-index '\(path)'", path: path)
                }
            }
            // The first process (nobody holds the switch) empties what a crashed one left; the others wait for it.
            do throws(SystemError) {
                switch file.lock(.exclusive, start: WALIndex.deadManSwitch, length: 1) {
                case .done:
                    try file.resize(to: 0)
                    guard file.lock(.shared, start: WALIndex.deadManSwitch, length: 1) == .done else { throw SystemError(EIO) }
                case .wouldBlock:
                    guard file.waitLock(.shared, start: WALIndex.deadManSwitch, length: 1) == .done else { throw SystemError(EIO) }
                case .failed(let e): throw SystemError(e)
                }
            } catch {
                file.close()
                throw ProtectionError(.io(error.errno), "unable to lock the wal-index '\(path)': \(error)", path: path)
            }
        }

        func region(_ i: Int, size: Int, extend: Bool) throws(SystemError) -> UnsafeMutableRawPointer? {
            try state.withLock { (st) throws(SystemError) -> UnsafeMutableRawPointer? in
                if i < st.regions.count, let p = st.regions[i] { return p }
                let end = Int64(i + 1) * Int64(size)
                if try file.size() < end {
                    guard extend else { return nil }
                    try file.resize(to: end)
                }
                let p = try file.map(offset: Int64(i) * Int64(size), length: size)
                while st.regions.count <= i { st.regions.append(nil) }
                st.regions[i] = p
                return p
            }
        }

        /// Lets go, at the file, of the read locks that lingered through a whole period unused; returns whether any
        /// lingers still (the sweeper then sweeps this index again). Called by `LingeringReadLocks` only.
        ///
        /// `swept` is cleared first, so that a lock let go while this sweep runs hands the index over again, and set
        /// again only by whoever finds it clear: the index is never in the sweeper's list twice, nor left out of it
        /// while a lock lingers.
        func sweep() -> Bool {
            swept.store(false, ordering: .sequentiallyConsistent)
            var lingers = false
            for i in 0..<WALIndex.lockCount where WALIndex.readLocks & (UInt8(1) << i) != 0 {
                locks.holding(i..<(i + 1)) { slot in
                    if slot[i].lingering, !slot[i].used {
                        _ = file.lock(nil, start: WALIndex.lockBase + Int64(i), length: 1)
                        slot[i].lingering = false
                    }
                    slot[i].used = false
                    lingers = lingers || slot[i].lingering
                }
            }
            return lingers && !swept.exchange(true, ordering: .acquiringAndReleasing)
        }

        /// One connection fewer; the last closes the file (unmapping every region, its locks going with it), after
        /// `remove`.
        fileprivate func detach(remove: (() -> Void)?) {
            Self.table.withLock { open in
                let left = state.withLock { (st) -> Int in
                    st.connections -= 1
                    if st.connections == 0 {  // the close lets them go; a sweep then finds none
                        locks.holding(0..<WALIndex.lockCount) { slot in
                            for i in 0..<WALIndex.lockCount { slot[i].lingering = false }
                        }
                    }
                    return st.connections
                }
                guard left == 0 else { return }
                if open[path] === self { open[path] = nil }
                remove?()
                file.close()
                state.withLock { $0.regions = [] }
            }
        }
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

    /// `xShmLock`: SQLite's WAL locks, as OFD locks on the index that this process's connections share (`WALIndex`).
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
        if flags & SQLITE_SHM_UNLOCK != 0 {
            var rc = SQLITE_OK
            if offset == 0, flags & SQLITE_SHM_EXCLUSIVE != 0, let wal {  // WAL_WRITE_LOCK
                rc = wal.writeHeld()  // none after a whole frame; a failed transaction may leave one
                if wal.handle.holdsHotJournal {
                    do throws(ProtectionError) { try wal.handle.markCommit() } catch { rc = VFSFailure.record(error, io: DP_IOERR_FSYNC) }
                }
            }
            _ = index.lock(nil, offset: offset, count: count)
            return rc
        }
        do throws(ProtectionError) { try handle.checkAvailable() } catch { return VFSFailure.record(error, io: DP_IOERR_SHMLOCK) }
        switch index.lock(flags & SQLITE_SHM_SHARED != 0 ? .shared : .exclusive, offset: offset, count: count) {
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

    /// `xShmUnmap`: leaves the index (the last connection of this process unmaps and closes it); SQLite asks for its
    /// deletion when the last connection closes.
    func unmapWALIndex(delete: Bool) -> Int32 {
        guard let index = walIndex else { return SQLITE_OK }
        let io = io, path = handle.path + "-shm"
        index.close(remove: delete ? { try? io.unlink(path) } : nil)
        walIndex = nil
        return SQLITE_OK
    }
}

/// `xShmBarrier`: a full memory fence between the connections that share the index.
func walIndexBarrier() { atomicMemoryFence(ordering: .sequentiallyConsistent) }

/// The holders of a wal-index's eight locks in this process, one mutex per lock (`WALIndex.Shared.locks`).
final class WALLockSlots: @unchecked Sendable {  // slot i is read and written only holding mutex i
    struct Slot {
        /// How many connections of this process hold the lock shared, or -1 when one holds it exclusive.
        var holders = 0
        /// Held shared at the file while no connection of this process holds it (a read lock, `WALIndex.lingerPeriod`).
        var lingering = false
        /// Let go or taken back since the last sweep: it lingers on through the next one.
        var used = false
    }

    private let mutexes: UnsafeMutablePointer<pthread_mutex_t>
    private let slots: UnsafeMutablePointer<Slot>

    init() {
        mutexes = .allocate(capacity: WALIndex.lockCount)
        slots = .allocate(capacity: WALIndex.lockCount)
        for i in 0..<WALIndex.lockCount {
            pthread_mutex_init(mutexes + i, nil)
            (slots + i).initialize(to: Slot())
        }
    }

    deinit {
        for i in 0..<WALIndex.lockCount { pthread_mutex_destroy(mutexes + i) }
        slots.deinitialize(count: WALIndex.lockCount)
        slots.deallocate()
        mutexes.deallocate()
    }

    /// Runs `body` holding the mutexes of locks `range`, taken in increasing order (so two ranges never deadlock),
    /// with the slots in hand: `body` reads and writes only the slots of `range`.
    func holding<R>(_ range: Range<Int>, _ body: (UnsafeMutablePointer<Slot>) -> R) -> R {
        for i in range { pthread_mutex_lock(mutexes + i) }
        defer { for i in range.reversed() { pthread_mutex_unlock(mutexes + i) } }
        return body(slots)
    }
}
