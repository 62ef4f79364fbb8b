import DataProtectionFormat
import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// A log (FORMAT.md §6.7.6): the journal of a file whose writers commit without fsyncs (a WAL with
/// `synchronous = NORMAL`), kept from one of the file's syncs to the next.
///
/// The first change after a sync begins it as any journal (a header and the undo records of the synced chunks it
/// changes, fsynced). Each commit then appends a mark (the file's size and this boot's ID) and lets the lock go, and
/// the next writer, this handle or another, continues the log after the mark: its undo records are written but not
/// fsynced. A sync of the file by any handle empties the log. Recovery puts the file back as of the last mark when the
/// mark was made in this boot, else as of the sync.
extension WriteJournal {
    /// Takes the lock (waiting for it) and continues the log of the data file if one is there, ending in a mark of
    /// the data file's size; otherwise begins one (`begin`, kind `.log`, the caller flushes its first records).
    ///
    /// - Parameters:
    ///   - fileSize: the data file's size as the caller knows it.
    ///   - fresh: for a caller whose size may be stale (another handle may have written the file since), reads the data
    ///     file's size now; used unless the log ends in this journal's own last mark of `fileSize` bytes. Nil: the
    ///     caller took `fileSize` under a lock that keeps the file's writers out.
    ///   - dataHeader: reads the data file's header as on disk now; a log this handle knows (`KnownLog`) needs no read.
    /// - Returns: the data file's size the change starts from, and whether the log ended in this journal's own last
    ///   mark: no writer has changed the file since, as every change of a log's file appends an undo record before it
    ///   touches the file.
    /// - Throws: `.coordinationFailed` when the log does not end in a mark of the file as it is (a writer died in the
    ///   middle of a change: opening the file again recovers it), and as `begin`.
    mutating func continueLog(
        _ io: any FileIO, fileSize: Int64, fresh: (() throws(ProtectionError) -> Int64)? = nil, dataHeader: () throws(ProtectionError) -> [UInt8]
    ) throws(ProtectionError) -> (fileSize: Int64, own: Bool) {
        precondition(!hot)
        // An emptied journal's header fails to parse before its binding is checked: a log begun after a sync reads
        // the data header once, here.
        let found = try acquire(io, dataHeader: dataHeader, log: true)
        do throws(ProtectionError) {
            guard let (header, chain) = found else {
                let size = try fresh?() ?? fileSize
                try writeHeader(io, kind: .log, committedSize: size, dataHeader: try dataHeader())
                return (size, false)
            }
            // After a mark of this process the records are read up to the end of the file, where a read comes back
            // short, and the length known is the one the mark recorded (`LogPositions.Position.written`).
            let left = LogPositions.position(of: dataPath, chain: chain)
            let size: Int64
            if let left { size = left.written } else {
                do throws(SystemError) { size = try io.size(fd) } catch { throw ioError(error) }
            }
            let ended = try lastMark(
                io, chain: chain, from: left?.end ?? Int64(header.size), size: left == nil ? size : JournalRecords.toTheEnd, before: left?.mark)
            let own = if let (last, at) = ended, let left { left.owner == owner && at == left.end && last.fileSize == fileSize } else { false }
            let dataSize = own ? fileSize : try fresh?() ?? fileSize
            guard let (last, at) = ended, last.fileSize == dataSize else {
                throw busy("another writer of it stopped in the middle of a change; close this handle and open the file again to roll that change back")
            }
            self.chain = chain
            end = at
            baseSize = header.committedSize
            written = max(written, at, size)
            hot = true
            continuedLog = true
            unsynced = false
            journaled = []
            return (dataSize, own)
        } catch {
            io.unlock(fd)
            throw error
        }
    }

    /// Appends a commit mark of `fileSize` bytes made in this boot, not fsynced, and lets the lock go: the log stays for
    /// the file's next writer (`continueLog`) until a sync empties it (`emptyLog`).
    mutating func mark(_ io: any FileIO, fileSize: Int64) throws(ProtectionError) {
        precondition(hot)
        let mark = JournalFormat.Mark(fileSize: fileSize, boot: BootIdentity.current)
        try mark.encoded.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) in try append(io, .mark, offset: 0, b) }
        LogPositions.marked(dataPath, .init(end: end, chain: chain, mark: mark, written: written, owner: owner))
        journaled = []
        hot = false
        continuedLog = false
        io.unlock(fd)
    }

    /// Takes the lock, so that no writer of the data file starts a change while the caller makes it durable; then
    /// `emptyLog` or `releaseLock`.
    ///
    /// It waits at most `syncPatience` milliseconds: the lock's holder may be a writer in the middle of a change, which
    /// may last (a WAL transaction that spilled its cache holds it from the first frame to its commit), and a sync by
    /// another handle that waited for it without a bound could wait for a thread that waits for this one.
    /// - Throws: `.coordinationFailed` when the lock stays taken (a checkpoint then reports itself busy).
    mutating func lockLog(_ io: any FileIO, dataHeader: [UInt8]) throws(ProtectionError) {
        precondition(!hot)
        try acquire(io, dataHeader: { dataHeader }, durableName: false, log: true, patience: Self.syncPatience)
    }

    /// Milliseconds a sync of a log's file waits for the log's lock (`lockLog`).
    static let syncPatience = 250

    /// Flushes a continued log's records when one of `chunks` (offsets in the data file) existed at the log's begin: a
    /// chunk holding synced bytes (a WAL's frames overwritten after a transaction rolled back) must be restorable
    /// after a power loss, before it changes.
    mutating func flushSynced(_ io: any FileIO, chunks: [Int64]) throws(ProtectionError) {
        guard continuedLog, unsynced, chunks.contains(where: { $0 < baseSize }) else { return }
        do throws(SystemError) { try io.fsync(fd) } catch { throw ioError(error) }
        unsynced = false
    }

    /// Lets the lock taken by `lockLog` go.
    func releaseLock(_ io: any FileIO) { io.unlock(fd) }

    /// Empties a log of the data file (the data file is synced: every mark is) and lets the lock go, then makes the
    /// emptying durable before it returns, as the caller relies on it (a checkpoint then writes the database).
    ///
    /// The fsync comes after the lock, so that the file's next writer does not wait for it. A writer that begins a new
    /// log meanwhile writes over the emptied header; this fsync then makes some of its bytes durable early, which
    /// changes nothing (it flushes them itself before it re-seals a chunk).
    mutating func emptyLog(_ io: any FileIO, dataHeader: [UInt8]) throws(ProtectionError) {
        LogPositions.forget(dataPath)
        defer { knownLog = nil }
        let journal = fd, zeros = Self.zeroHeader
        do throws(ProtectionError) {
            guard try readLogHeader(io, dataHeader: dataHeader) != nil else { return io.unlock(journal) }
            do throws(SystemError) {
                try zeros.span.bytes.withUnsafeBytes { (b) throws(SystemError) in try io.writeFully(journal, from: b, at: 0) }
            } catch { throw ioError(error) }
        } catch {
            io.unlock(journal)
            throw error
        }
        io.unlock(journal)
        do throws(SystemError) { try io.fsync(journal) } catch { throw ioError(error) }
    }

    /// The log's header and checksum when the journal holds a valid log of this data file, else nil.
    private mutating func readLogHeader(_ io: any FileIO, dataHeader: [UInt8]) throws(ProtectionError) -> (JournalFormat.Header, [UInt8])? {
        let found = try validHeader(io, of: { dataHeader })
        return found?.header.kind == .log ? found : nil
    }

    /// Reads the valid records from `from` on, and returns the mark that ends them with where the next record goes;
    /// nil when they end in a record that is no mark. `before`: the mark just before `from`, if `from` follows one.
    private func lastMark(
        _ io: any FileIO, chain: [UInt8], from: Int64, size: Int64, before: JournalFormat.Mark?
    ) throws(ProtectionError) -> (JournalFormat.Mark, Int64)? {
        let (records, end): ([JournalRecords.Record], Int64)
        do throws(SystemError) { (records, end) = try JournalRecords.read(io, fd, chain: chain, from: from, size: size) } catch { throw ioError(error) }
        guard let last = records.last else { return before.map { ($0, end) } }
        return last.mark.map { ($0, end) }
    }
}
