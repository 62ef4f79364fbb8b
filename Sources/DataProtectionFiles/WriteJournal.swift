import DataProtectionKeys
import DataProtectionFormat
import SystemLayer
import ProtectionCrypto
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The writer's side of a protected file's rollback journal (FORMAT.md §6.7).
///
/// Before a handle first overwrites a chunk that existed at the last commit,
/// the chunk's sealed bytes go to the journal and the journal is fsynced; a
/// commit (`sync()`) fsyncs the data, then empties the journal durably. While
/// the journal is hot its writer holds an exclusive OFD lock on it, so
/// recovery never rolls back a live writer, and a second writer is refused
/// instead of interleaving its changes. All I/O goes through the `FileIO` seam.
struct WriteJournal {
    /// The journal's path, `.<name>.dpjournal` beside the data file (`journalPath(for:)`).
    ///
    /// Built when a journal is first opened, closed or named in a message, not per handle: most writable handles (every
    /// newly created file's) never journal, and building the path cost about 3,400 instructions of a 4 KiB file's create.
    var path: String { journalPath(for: dataPath) }
    /// The protected file it protects.
    let dataPath: String
    /// The open journal, or -1.
    var fd: Int32 = -1
    /// Whether the journal holds a valid header: recovery would act on it.
    var hot = false
    /// Bytes the next record starts at.
    var end: Int64 = 0
    /// Bytes of the journal file known to be written (its length when opened, then what `append` zero-filled): records
    /// written inside them change no length, so their flush waits for no metadata commit of the file system.
    var written: Int64 = 0
    /// The header checksum records chain to.
    var chain: [UInt8] = []
    /// Records written since the last fsync of the journal.
    var unsynced = false
    /// Whether the directory was fsynced since `fd` was opened, so the journal's name outlives a power failure.
    private var named = false
    /// Chunks journaled since the last commit (in a log: since its last mark).
    var journaled: Set<Int64> = []
    /// A log (kind 3) this handle continued from a mark (`continueLog`), not begun: its records are not flushed.
    var continuedLog = false
    /// The data file's size on disk at the journal's begin: a log's synced size, whose chunks' undo records must be
    /// durable before those chunks change (`flushSynced`).
    var baseSize: Int64 = 0
    /// The log (kind 3) this handle last began or found valid, as its header's bytes on disk (`validHeader`).
    var knownLog: KnownLog?

    /// A log's header as this handle wrote or validated it. A journal whose header bytes are these holds that same log,
    /// still valid and bound to the same data header: a header holds a random generation, so a log emptied and begun
    /// again has other bytes, and a data file's header changes only while its journal's lock is held over no valid log
    /// (`lockForHeaderChange`, which refuses one). So the writers of a log, who find it at nearly every commit, neither
    /// read the data file's header nor check the log's checksum and binding again.
    struct KnownLog {
        var bytes: [UInt8]
        var header: JournalFormat.Header
        var chain: [UInt8]
    }

    /// This journal among the journals of the process, for the marks it makes (`LogPositions.Position.owner`).
    let owner = Self.owners.add(1, ordering: .relaxed).newValue

    private static let owners = Atomic<UInt64>(0)

    init(dataPath: String) {
        self.dataPath = dataPath
    }

    /// Starts a journal: takes the lock, writes a fresh header. The caller appends records, then calls `flush`.
    ///
    /// - Parameter dataHeader: the data file's 176 header bytes as on disk now (a rewrap may have
    ///   changed them since the handle opened): the journal is bound to their hash.
    /// - Throws: `.coordinationFailed` when another live handle holds the journal, or left one
    ///   this handle must not overwrite; `.untrustedFile` when something not ours is at its name;
    ///   `.io` for file-system failures.
    mutating func begin(_ io: any FileIO, kind: JournalFormat.Kind, committedSize: Int64, targetSize: Int64 = 0, dataHeader: [UInt8]) throws(ProtectionError) {
        precondition(!hot)
        try acquire(io, dataHeader: { dataHeader })
        try writeHeader(io, kind: kind, committedSize: committedSize, targetSize: targetSize, dataHeader: dataHeader)
    }

    /// `begin` once the lock is held: writes a fresh header (the lock is let go if that fails).
    mutating func writeHeader(_ io: any FileIO, kind: JournalFormat.Kind, committedSize: Int64, targetSize: Int64 = 0, dataHeader: [UInt8]) throws(ProtectionError) {
        do throws(ProtectionError) {
            let generation = try crypto { () throws(CryptoError) in try SecureRandom.bytes(8) }
            let fields = try crypto { () throws(CryptoError) in
                JournalFormat.Header(kind: kind, binding: try .of(dataHeader), committedSize: committedSize, targetSize: targetSize, generation: generation)
            }
            let header = try crypto { () throws(CryptoError) in try JournalFormat.encode(fields) }
            knownLog = nil
            // Written over what an earlier change left (`commit` keeps the file's length): records of that change that
            // follow this header do not chain to its checksum, so they count for nothing (FORMAT.md §6.7.2).
            do throws(SystemError) {
                try header.span.bytes.withUnsafeBytes { (b) throws(SystemError) in try io.writeFully(fd, from: b, at: 0) }
            } catch { throw ioError(error) }
            chain = Array(header[(JournalFormat.headerSize - JournalFormat.checksumSize)...])
            if kind == .log { knownLog = KnownLog(bytes: header, header: fields, chain: chain) }
            end = Int64(JournalFormat.headerSize)
            baseSize = committedSize
            written = max(written, end)
            hot = true
            unsynced = true
            continuedLog = false
            journaled = []
        } catch {
            io.unlock(fd)
            throw error
        }
    }

    /// Appends a record holding `bytes`, to be put at `offset` of the data file by recovery.
    mutating func append(_ io: any FileIO, _ type: JournalFormat.RecordType, offset: Int64, _ bytes: UnsafeRawBufferPointer) throws(ProtectionError) {
        precondition(hot)
        let head = JournalFormat.encodeHead(.init(type: type, length: bytes.count, offset: offset))
        try zeroFill(io, through: end + Int64(head.count + bytes.count + JournalFormat.checksumSize))
        let sum = try crypto { () throws(CryptoError) in try JournalFormat.recordChecksum(chain: chain, head: head, payload: bytes) }
        // One write per record (a torn one fails its checksum as three would).
        var record = head
        record.reserveCapacity(head.count + bytes.count + sum.count)
        record.append(contentsOf: bytes)
        record += sum
        let journal = fd, at = end
        do throws(SystemError) {
            try record.span.bytes.withUnsafeBytes { (r) throws(SystemError) in try io.writeFully(journal, from: r, at: at) }
        } catch { throw ioError(error) }
        end += Int64(record.count)
        unsynced = true
    }

    /// Makes every record written so far durable: after this the data file may be overwritten.
    ///
    /// A log continued from an earlier commit (`continueLog`) is not flushed: its records count only in the boot that
    /// wrote them, when the page cache holds them (FORMAT.md §6.7.6).
    mutating func flush(_ io: any FileIO) throws(ProtectionError) {
        guard unsynced, !continuedLog else { return }
        do throws(SystemError) { try io.fsync(fd) } catch { throw ioError(error) }
        unsynced = false
    }

    /// Empties the journal durably and releases its lock; the data file must already be durable.
    ///
    /// The emptying is fsynced before this returns: an invalidation lost to a power failure would roll back data
    /// that `sync()` acknowledged.
    ///
    /// The journal is emptied by zeroing its header, not by cutting it to zero bytes: a header that is not valid holds
    /// nothing to recover (FORMAT.md §6.7.4, step 4), and a file whose length does not change is fsynced without a
    /// metadata commit of the file system. Measured on ext4 here: a 4 KiB overwrite and fsync 105 µs, a truncate, the
    /// same write and fsync 270 µs; the journal's next change writes over the same bytes (`begin`).
    mutating func commit(_ io: any FileIO) throws(ProtectionError) {
        guard hot else { return }
        do throws(SystemError) {
            try Self.zeroHeader.span.bytes.withUnsafeBytes { (b) throws(SystemError) in try io.writeFully(fd, from: b, at: 0) }
            try io.fsync(fd)
        } catch { throw ioError(error) }
        hot = false
        continuedLog = false
        journaled = []
        knownLog = nil
        io.unlock(fd)
    }

    /// Makes the journal at least `needed` bytes long before a record is written there, writing zeros ahead in steps (as
    /// much again as is written, 64 KiB to 1 MiB at a time; FORMAT.md §6.7.3): a record written over zeros already on
    /// disk is an overwrite, and its flush costs about half that of a flush that grows the file (an append and fsync of
    /// 4 KiB 270 µs here, an overwrite of written zeros 135 µs). Zeros after the last record are no valid record.
    private mutating func zeroFill(_ io: any FileIO, through needed: Int64) throws(ProtectionError) {
        guard needed > written else { return }
        let target = max(needed, written + min(max(written, 64 << 10), 1 << 20))
        do throws(SystemError) {
            while written < target {
                let n = Int(min(Int64(Self.zeros.count), target - written))
                try Self.zeros.span.bytes.withUnsafeBytes { (z) throws(SystemError) in
                    try io.writeFully(fd, from: UnsafeRawBufferPointer(rebasing: z[..<n]), at: written)
                }
                written += Int64(n)
            }
        } catch { throw ioError(error) }
    }

    private static let zeros = [UInt8](repeating: 0, count: 64 << 10)

    /// Bytes that overwrite a journal's header to empty it.
    static let zeroHeader = [UInt8](repeating: 0, count: JournalFormat.headerSize)

    /// Whether the journal holds nothing to recover: no bytes, or a header that is not valid (emptied by `commit`).
    func isEmpty(_ io: any FileIO) throws(SystemError) -> Bool {
        guard try io.size(fd) > 0 else { return true }
        return JournalFormat.parseHeader(try io.readBytes(fd, count: JournalFormat.headerSize, at: 0)) == nil
    }

    /// Closes the journal: a cold one is removed, a hot one stays for recovery (the kernel drops the lock).
    mutating func close(_ io: any FileIO) {
        guard fd >= 0 else { return }
        if !hot, (try? io.tryLockExclusive(fd)) == true, (try? io.names(path, fd)) == true, (try? isEmpty(io)) == true {
            try? io.unlink(path)  // an empty journal that outlives a power failure is removed by the next open
        }
        io.close(fd)
        fd = -1
        hot = false
    }

    /// Closes the journal as it is, hot or not (a killed writer; the kernel drops the lock).
    mutating func abandon(_ io: any FileIO) {
        if fd >= 0 { io.close(fd) }
        fd = -1
        hot = false
    }

    // MARK: - Internals

    /// Takes the journal's lock for a change of the data file's header (a rewrap) that no writer may interleave with.
    ///
    /// A writer binds its journal to the header as on disk when it starts a change; holding the
    /// lock while the header changes means no journal is ever bound to a header that is gone.
    /// `close` releases it (and removes the empty journal).
    mutating func lockForHeaderChange(_ io: any FileIO, dataHeader: [UInt8]) throws(ProtectionError) {
        try acquire(io, dataHeader: { dataHeader }, durableName: false)
    }

    /// Opens the journal (once per handle) and takes its lock.
    ///
    /// The journal is created with `O_EXCL`, or opened only if it is a regular file of ours with one link
    /// (`openOwned`): a link planted at its name is never followed, so the truncate that starts a journal
    /// never reaches another file. The descriptor stays open between commits; each `begin` re-checks that
    /// it still names the file at `path` (another handle may have removed it on close).
    ///
    /// A journal that holds a valid log of this file needs no such check: a journal is removed only once it is empty
    /// (`close`, and recovery, which empties it first), and every header is written after the check, under the lock.
    /// So the writers of a log, who find one at every commit but the first after a sync, skip three system calls.
    /// - Parameters:
    ///   - dataHeader: the data file's header bytes as on disk now, read only when the journal's header is not a log
    ///     this handle knows (`KnownLog`).
    ///   - durableName: fsync the directory once per descriptor, so the journal's name outlives a power failure.
    ///   - log: the caller continues or empties a log (kind 3) of this file: wait for the lock whatever the journal holds
    ///     (a log's writers take turns under their own lock, and its other holders are short: a sync emptying it, a
    ///     recovery), and let a valid log of this file through instead of refusing it.
    ///   - patience: with `log`, wait at most this many milliseconds, then fail with `.coordinationFailed` (nil: as
    ///     long as it takes).
    /// - Returns: with `log`, the header and checksum of the valid log of this file the journal holds, if any.
    @discardableResult
    mutating func acquire(
        _ io: any FileIO, dataHeader: () throws(ProtectionError) -> [UInt8], durableName: Bool = true, log: Bool = false,
        patience: Int? = nil
    ) throws(ProtectionError) -> (header: JournalFormat.Header, chain: [UInt8])? {
        for _ in 0..<3 {
            if fd < 0 {
                do throws(OwnedFileFailure) {
                    do throws(OwnedFileFailure) { fd = try io.createOwned(path, flags: O_RDWR, mode: 0o600) } catch .system(let e) where e.errno == EEXIST {
                        fd = try io.openOwned(path, flags: O_RDWR)
                    }
                } catch .system(let e) where e.errno == ENOENT {
                    continue  // removed between the two opens: create it again
                } catch {
                    throw error.error("journal a change to", dataPath, at: path)
                }
                io.unlock(fd)  // a confined open marks writable descriptors with a shared lock; the journal uses its own
                named = false
                written = (try? io.size(fd)) ?? 0
            }
            var locked: Bool
            do throws(SystemError) {
                locked = try io.tryLockExclusive(fd)
                // An empty journal's lock is held by a probe: another handle's `close` checking whether it may remove
                // it (three calls), or a writer in the instant between its lock and its header. Waiting for it is
                // short; failing would make a live writer of the file whose writers take turns under their own locks
                // (a database's connections, under SQLite's) fail to start its change. A hot journal's holder is a
                // writer in the middle of a change: that still fails at once.
                if !locked, log, let patience {
                    for _ in 0..<patience where !locked {
                        usleep(1000)
                        locked = try io.tryLockExclusive(fd)
                    }
                } else if !locked, try (log ? true : isEmpty(io)) {
                    locked = OFDLock.waitSet(fd: fd, .exclusive, start: 0, length: 0) == .done
                }
            } catch { throw ioError(error) }
            guard locked else { throw busy("another handle is writing it") }
            // A log's writers find one nearly every time: its header is read at once. Other journals are mostly empty.
            let found: (header: JournalFormat.Header, chain: [UInt8])?
            do throws(ProtectionError) {
                var nonEmpty = log
                if !nonEmpty { do throws(SystemError) { nonEmpty = try io.size(fd) > 0 } catch { throw ioError(error) } }
                found = nonEmpty ? try validHeader(io, of: dataHeader) : nil
            } catch {
                io.unlock(fd)
                throw error
            }
            let isLog = found?.header.kind == .log
            let same: Bool
            if log && isLog {
                same = true  // a valid log is never removed (above)
            } else {
                do throws(SystemError) { same = try io.names(path, fd) } catch { throw ioError(error) }
            }
            if !same {
                io.close(fd)
                fd = -1
                continue
            }
            do throws(SystemError) {
                if found != nil && !(log && isLog) {  // another writer's unfinished change
                    io.unlock(fd)
                    throw SystemError(EBUSY)
                }
                if durableName && !named {
                    try io.syncDirectory(of: path)
                    named = true
                }
            } catch where error.errno == EBUSY {
                throw busy("another writer of it stopped in the middle of a change; close this handle and open the file again to roll that change back")
            } catch {
                io.unlock(fd)
                throw ioError(error)
            }
            return log && isLog ? found : nil
        }
        throw busy("its journal keeps being replaced by other writers")
    }

    /// The (locked) journal's header and checksum when it is a valid header bound to this file's header `dataHeader`:
    /// another writer's unfinished change, or a log. A log's header whose bytes are those of `knownLog` is taken as it
    /// is, without `dataHeader` (`KnownLog`).
    mutating func validHeader(
        _ io: any FileIO, of dataHeader: () throws(ProtectionError) -> [UInt8]
    ) throws(ProtectionError) -> (header: JournalFormat.Header, chain: [UInt8])? {
        let b: [UInt8]
        do throws(SystemError) { b = try io.readBytes(fd, count: JournalFormat.headerSize, at: 0) } catch { throw ioError(error) }
        if let known = knownLog, known.bytes == b { return (known.header, known.chain) }
        knownLog = nil
        guard let (header, chain) = JournalFormat.parseHeader(b), header.binding.matches(try dataHeader()) else { return nil }
        if header.kind == .log { knownLog = KnownLog(bytes: b, header: header, chain: chain) }
        return (header, chain)
    }

    func ioError(_ e: SystemError) -> ProtectionError { .errno(e.errno, "journal a change to", dataPath) }

    func busy(_ why: String) -> ProtectionError {
        ProtectionError(
            .coordinationFailed,
            "unable to write '\(dataPath)': \(why) (its journal '\(path)' is in use); coordinate writers with a FileCoordinator, or sync or close the other handle first",
            path: dataPath)
    }
}
