import DataProtectionKeys
import DataProtectionFormat
import SystemLayer
import ProtectionCrypto

#if canImport(Glibc)
import Glibc
#endif

/// What `ProtectedFiles.recover(_:)` found and did.
public enum JournalRecovery: Sendable, Equatable {
    /// No journal: the file was not in the middle of a change.
    case nothingToDo
    /// An interrupted change was undone: `chunks` chunks were put back and the file cut to its committed size.
    case rolledBack(chunks: Int)
    /// An interrupted truncate had already cut the file: its new last chunk was written, completing it.
    case rolledForward
    /// An empty, torn or stale journal (the file was not yet touched, or was replaced since) was removed.
    case discarded
    /// A live handle (in this or another process) owns the journal: nothing was done.
    case inUse
}

extension ProtectedFiles {
    /// The path of the rollback journal that in-place writes to `path` use: `.<name>.dpjournal` beside it.
    public static func journalPath(for path: String) -> String { DataProtectionFiles.journalPath(for: path) }

    /// Finishes an in-place change of `path` that a crash or an I/O failure interrupted (FORMAT.md §6.7).
    ///
    /// A writable `open` does this itself, and a reader that meets a chunk failing
    /// authentication does it before giving up; call it directly from a
    /// crash-recovery pass, or where no one will open the file for writing. It
    /// needs no key (the journal holds ciphertext), so it works while the domain
    /// is locked, but it needs write access to the file and its directory.
    ///
    /// A hot journal is rolled back (or, for a truncate that had already cut the
    /// file, forward); the file is fsynced, then the journal emptied and removed.
    /// Afterwards the file holds exactly its contents as of its last `sync()`
    /// (or the completed truncate). Running it again, or after a crash during
    /// recovery, is safe.
    ///
    /// It also removes the temporary file `.<name>.dp.tmp` that a whole-file writer
    /// of `path` died with (FORMAT.md §6.6), never one a live writer holds; the
    /// outcome is about the journal only. `recoverTree(_:)` reports both, and finds
    /// temporary files under other names too.
    /// - Throws: `.io` for file-system failures (the journal then stays for the next attempt).
    @discardableResult
    public func recover(_ path: String) throws(ProtectionError) -> JournalRecovery {
        do throws(ProtectionError) {
            let outcome = try JournalRecoverer(io: io, dataPath: path).run()
            reportRepair(outcome, path: path, operation: "recover")
            try sweepTemporary(of: path)
            return outcome
        } catch { throw error.about(path, "recover") }
    }

    /// The recovery a writable open runs first: one failed `open` when there is no journal, and one
    /// more when no whole-file writer died with its temporary file (FORMAT.md §6.6).
    ///
    /// A log that ends in a mark of this boot at the file's size (a WAL's between two commits, §6.7.6) is left as it
    /// is: there is nothing to roll back, and the file's next writer continues it. Emptying it would cost the open two
    /// fsyncs and an unlink (6 ms against 0.6 ms for a new WAL connection, measured).
    func recoverBeforeWriting(_ path: String) throws(ProtectionError) {
        do throws(ProtectionError) {
            reportRepair(try JournalRecoverer(io: io, dataPath: path, leavesCleanLogs: true).run(), path: path, operation: "open for writing")
        } catch {
            throw error.about(path, "open")
        }
        // Housekeeping only: a temporary file that cannot be removed does not stop the open.
        try? sweepTemporary(of: path)
    }

    /// Runs `body` (a read); if it fails authentication and an interrupted change left a journal,
    /// recovers and runs it once more.
    ///
    /// Readers pay nothing for this on the hot path: the journal is looked for only after a failure.
    /// A failure that stays an authentication failure is a tamper detection: counted and logged once, here.
    /// - Parameter c: the file's class when known (a handle's), for the metric's `class` dimension.
    func retryingAfterRecovery<R>(_ path: String, class c: ProtectionClass? = nil, _ body: () throws(ProtectionError) -> R) throws(ProtectionError) -> R {
        do throws(ProtectionError) { return try recoveringOnce(path, body) } catch where error.code == .authenticationFailed {
            reportTampered(error, path: path, class: c, operation: "read")
            throw error
        }
    }

    private func recoveringOnce<R>(_ path: String, _ body: () throws(ProtectionError) -> R) throws(ProtectionError) -> R {
        do throws(ProtectionError) { return try body() } catch where error.code == .authenticationFailed {
            let outcome: JournalRecovery
            do throws(ProtectionError) { outcome = try JournalRecoverer(io: io, dataPath: path).run() } catch let failure {
                throw ProtectionError(
                    error.code,
                    "\(error.message) — an interrupted write left the journal '\(Self.journalPath(for: path))', which could not be applied (\(failure.message)); open the file for writing, or call ProtectedFiles.recover, as a user allowed to write it",
                    path: error.path, underlying: error.underlying)
            }
            reportRepair(outcome, path: path, operation: "read")
            switch outcome {
            case .rolledBack, .rolledForward: return try body()
            case .inUse:
                throw ProtectionError(
                    error.code,
                    "\(error.message) — another handle is changing it right now; coordinate readers and writers with a FileCoordinator",
                    path: error.path, underlying: error.underlying)
            case .nothingToDo, .discarded: throw error
            }
        }
    }
}

/// Applies (or discards) the journal of one protected file. Keyless; all I/O through the seam.
struct JournalRecoverer {
    let io: any FileIO
    let dataPath: String
    /// Leave a log that needs nothing (it ends in a mark of this boot at the data file's size) as it is: `.nothingToDo`.
    var leavesCleanLogs = false
    var journal: String { journalPath(for: dataPath) }

    private typealias Record = JournalRecords.Record

    func run() throws(ProtectionError) -> JournalRecovery {
        for _ in 0..<3 {
            let jfd: Int32
            // Security: a journal is opened only if it is a regular file with one link (never through a planted link).
            do throws(OwnedFileFailure) { jfd = try io.openOwned(journal, flags: O_RDWR, owner: .anyone) } catch .system(let e) where e.errno == ENOENT {
                return .nothingToDo
            } catch { throw error.error("open the journal of", dataPath, at: journal) }
            defer { io.close(jfd) }
            io.unlock(jfd)
            do throws(SystemError) {
                guard try io.tryLockExclusive(jfd) else { return .inUse }
                // Another process may have removed the journal between our open and our lock.
                guard try io.names(journal, jfd) else { continue }
            } catch { throw .errno(error.errno, "lock the journal of", dataPath) }
            return try recover(jfd)
        }
        return .inUse
    }

    /// Recovery proper, with the journal open and locked.
    ///
    /// Security: whoever can write the directory can plant a journal, so nothing in it is trusted until checked.
    /// The data file is opened without following links and must be a regular file with one link (no write can
    /// land in another file through it); the journal must be ours or the data file's owner's; the journal must be
    /// bound to the data file's whole header (its hash); and every record must be one chunk of that file's layout
    /// within the sizes the journal restores. A journal failing the last two checks is refused whole, before any write.
    private func recover(_ jfd: Int32) throws(ProtectionError) -> JournalRecovery {
        var dfd: Int32 = -1
        var dataFailure: OwnedFileFailure?
        do throws(OwnedFileFailure) { dfd = try io.openOwned(dataPath, flags: O_RDWR, owner: .anyone) } catch { dataFailure = error }
        defer { if dfd >= 0 { io.close(dfd) } }
        let (_, journalOwner, dataOwner, hb) = try system { () throws(SystemError) in
            (try io.size(jfd), try io.status(jfd).owner, dfd >= 0 ? try io.status(dfd).owner : nil,
             try io.readBytes(jfd, count: JournalFormat.headerSize, at: 0))
        }
        guard journalOwner == geteuid() || journalOwner == dataOwner else {
            throw OwnedFileFailure.foreign("a file owned by uid \(journalOwner), neither yours (uid \(geteuid())) nor the owner's of the file it names")
                .error("recover", dataPath, at: journal)
        }
        guard let (header, chain) = JournalFormat.parseHeader(hb) else {
            // Empty or torn header: the writer fsyncs the header before touching the file, so the file is as committed.
            try system { () throws(SystemError) in try discard(jfd) }
            return .discarded
        }
        if let dataFailure {
            if case .system(let e) = dataFailure, e.errno == ENOENT {
                try system { () throws(SystemError) in try discard(jfd) }
                return .discarded
            }
            throw dataFailure.error(
                "recover", dataPath, at: dataPath,
                fix: "recovery writes only into a regular file with one link, so the change held in '\(journal)' was not applied; remove that journal (`rm '\(journal)'`) and check the file (a torn chunk fails authentication; restore it from a backup)")
        }
        let db = try system { () throws(SystemError) in try io.readBytes(dfd, count: FileHeader.size, at: 0) }
        guard header.binding.matches(db), let dataHeader = try? FileHeader.parse(db) else {
            // The path now holds another file (a whole-file replace since): the journal is not about it.
            try system { () throws(SystemError) in try discard(jfd) }
            return .discarded
        }
        let layout = ChunkLayout(headerSize: FileHeader.size, chunkSize: dataHeader.chunkSize, overhead: dataHeader.cipher.overhead)
        if let why = JournalFormat.problem(with: header, layout: layout) { throw forged(why) }
        let records = try system { () throws(SystemError) in try JournalRecords.read(io, jfd, chain: chain, from: Int64(header.size)).records }
        // Each undo record restores a chunk as of the last commit before it: the header's committed size, or in a log
        // (kind 3) the last mark before it.
        var committed = header.committedSize
        for r in records {
            if let why = JournalFormat.problem(with: r.head, in: header, layout: layout, committed: committed) { throw forged(why) }
            if r.head.type == .mark {
                guard let m = r.mark else { throw forged("a commit mark that holds no size and boot") }
                if let why = JournalFormat.problem(withSize: m.fileSize, layout: layout) { throw forged(why) }
                committed = m.fileSize
            }
        }
        // What the file goes back to: a log's last mark when it was made in this boot (the page cache still holds every
        // byte it marks: a process died, not the machine), else the committed size, which was fsynced (FORMAT.md §6.7.4).
        var from = 0, restoreSize = header.committedSize
        if header.kind == .log, let i = records.lastIndex(where: { $0.head.type == .mark }), let m = records[i].mark, m.boot == BootIdentity.current {
            from = i + 1
            restoreSize = m.fileSize
        }
        let dataSize = try system { () throws(SystemError) in try io.size(dfd) }
        if leavesCleanLogs, from > 0, from == records.count, dataSize == restoreSize { return .nothingToDo }
        let forward = header.kind == .truncate && dataSize == header.targetSize
        // A writer's file never shrinks below its committed size but by a journaled truncate: a rollback cuts, never grows.
        guard forward || dataSize >= restoreSize else {
            throw forged("a committed size of \(restoreSize) bytes, more than the file's \(dataSize)")
        }
        // The first undo record of each chunk after the restore point holds it as of that point.
        var seen = Set<Int64>()
        let apply = records[from...].filter { r in
            r.head.type == (forward ? .redo : .undo) && (forward || seen.insert(r.head.offset).inserted)
        }
        return try system { () throws(SystemError) in
            var applied = 0
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: records.map(\.head.length).max() ?? 1, alignment: 64)
            defer { buffer.deallocate() }
            for r in apply {
                let part = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<r.head.length])
                guard try io.readFully(jfd, into: part, at: r.payloadAt) == part.count else { throw SystemError(EIO) }
                try io.writeFully(dfd, from: UnsafeRawBufferPointer(part), at: r.head.offset)
                applied += 1
            }
            try io.ftruncate(dfd, to: forward ? header.targetSize : restoreSize)
            try io.fsync(dfd)
            try discard(jfd)
            return forward ? .rolledForward : .rolledBack(chunks: applied)
        }
    }

    /// Runs `body`, attributing its system error to the data file.
    private func system<R>(_ body: () throws(SystemError) -> R) throws(ProtectionError) -> R {
        do throws(SystemError) { return try body() } catch { throw .errno(error.errno, "recover", dataPath) }
    }

    /// The error for a journal whose checksums hold but whose contents no writer makes.
    private func forged(_ why: String) -> ProtectionError {
        ProtectionError(
            .untrustedFile,
            "unable to recover '\(dataPath)': its journal '\(journal)' holds \(why), which no writer makes (a forged or damaged journal); nothing was written; remove the journal (`rm '\(journal)'`), and restore the file from a backup if it then fails authentication",
            path: dataPath)
    }

    /// Empties the journal durably, then removes it (while still holding its lock).
    private func discard(_ jfd: Int32) throws(SystemError) {
        try io.ftruncate(jfd, to: 0)
        try io.fsync(jfd)
        try io.unlink(journal)
    }
}
