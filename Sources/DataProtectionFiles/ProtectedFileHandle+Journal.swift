#if canImport(Glibc)
import DataProtectionKeys
import DataProtectionFormat
import SystemLayer
import Glibc
#endif

/// The handle's use of its rollback journal (FORMAT.md §6.7). Every function runs with the state lock held.
extension ProtectedFileHandle {
    /// Runs a change; if it fails after the journal went hot, the file may hold part of it, so the handle stops writing.
    func guardingChange(_ st: inout State, _ action: String, _ body: (inout State) throws(ProtectionError) -> Void) throws(ProtectionError) {
        if let failed = st.failed { throw failedChange(failed, action) }
        // A log's change whose kept size and last chunk may be stale starts by continuing the log, which says whether
        // they may be used.
        if st.keptMayBeStale, st.logsCommits, st.journal?.hot == false { try continueLog(&st, sizeMayBeStale: true) }
        do throws(ProtectionError) { try body(&st) } catch {
            if st.journal?.hot == true { st.failed = error }
            throw error
        }
    }

    /// The error for any change after `failed`.
    func failedChange(_ failed: ProtectionError, _ action: String) -> ProtectionError {
        ProtectionError(
            .badHandle,
            "unable to \(action) '\(path)': an earlier change failed half-way (\(failed.message)); close this handle and open the file again, which rolls it back to its last sync",
            path: path, underlying: failed)
    }

    /// fsyncs the file, then empties the journal durably: the current contents become the committed state.
    ///
    /// A log's handle whose log is not hot empties the log of the file's other handles the same way (`commitLog`).
    func commit(_ st: inout State) throws(ProtectionError) {
        if st.logsCommits, st.journal != nil, st.journal!.hot == false, st.committedSize != nil {
            try commitLog(&st)
            return
        }
        do throws(SystemError) { try io.fsync(st.fd) } catch {
            // After a failed fsync the kernel may have dropped dirty pages: never commit what follows.
            let e = ioError(error, "sync")
            if st.journal?.hot == true { st.failed = e }
            throw e
        }
        if st.journal != nil {
            do throws(ProtectionError) { try st.journal!.commit(io) } catch {
                st.failed = error
                throw error
            }
        }
        st.committedSize = st.size
    }

    /// Journals the chunks of `range` that existed at the last commit and are not journaled yet, then fsyncs the journal.
    ///
    /// Chunks past the committed size need no record: rollback cuts them away.
    /// So a sequential write costs one journal header and fsync per commit.
    /// - Parameter whole: the chunks the write replaces whole. When the caller journals those itself
    ///   (`callerJournalsWholeChunks`), the ones before the committed last chunk get no record, and a
    ///   write made only of them leaves the journal as it is (no header, no fsync): the caller's own recovery rewrites
    ///   them whole (FORMAT.md §6.7.5). The committed last chunk is always journaled: opening the file authenticates it
    ///   before the caller's recovery runs.
    /// - Parameter read: chunks the caller has just read, sealed as on disk (under the same seal lock): recorded as
    ///   they are, not read again.
    func journalChunks(_ st: inout State, _ range: Range<Int64>, whole: Range<Int64>, read: [(chunk: Int64, sealed: [UInt8])] = []) throws(ProtectionError) {
        guard st.journal != nil, let committed = st.committedSize else { return }
        let count = layout.chunkCount(forPlaintextSize: committed)
        let upper = min(range.upperBound, count)
        // Whole chunks before the committed last one, the caller's to restore (its journal holds them first).
        let left = st.callerJournalsWholeChunks ? whole.clamped(to: 0..<max(0, count - 1)) : 0..<0
        if left == range { return }  // only such chunks: nothing of the handle's to roll back
        var need: [Int64] = []
        if range.lowerBound < upper {
            for j in range.lowerBound..<upper where !left.contains(j) && !st.journal!.journaled.contains(j) { need.append(j) }
        }
        if st.journal!.hot && need.isEmpty { return }
        if !st.journal!.hot && st.logsCommits {
            try continueLog(&st, sizeMayBeStale: false)
        } else if !st.journal!.hot {
            // A database's commit that starts a journal here usually grows the file further on, which re-seals the
            // committed last chunk: journaling that chunk now, while the record shares this flush, saves a second fsync
            // of the journal in the same commit (FORMAT.md §6.7.5).
            if st.callerJournalsWholeChunks, count > 1, !need.contains(count - 1) { need.append(count - 1) }
            try st.journal!.begin(io, kind: .rollback, committedSize: layout.fileSize(forPlaintextSize: committed), dataHeader: try diskHeader(&st))
        }
        for j in need {
            let length = layout.plaintextLength(ofChunk: j, plaintextSize: committed) + layout.overhead
            let kept = read.first(where: { $0.chunk == j && $0.sealed.count == length })?.sealed
            let old = if let kept { kept } else { try rawChunk(&st, j, size: committed) }
            try old.span.bytes.withUnsafeBytes { (b) throws(ProtectionError) in try st.journal!.append(io, .undo, offset: layout.offset(ofChunk: j), b) }
            st.journal!.journaled.insert(j)
        }
        try st.journal!.flush(io)
        try st.journal!.flushSynced(io, chunks: need.map { layout.offset(ofChunk: $0) })
    }

    /// Starts a change of a log's handle: continues the log after the last commit's mark, or begins it after a sync
    /// (FORMAT.md §6.7.6).
    ///
    /// With `sizeMayBeStale` (another handle may have written the file since this one last did: a database
    /// transaction's start, `forgetKeptLastChunk`), the handle keeps its size and last chunk only when the log ends in
    /// its own last mark, of that size: every change of a log's file appends an undo record to the log before it
    /// touches the file (its first write re-seals the committed last chunk or a chunk before it), so nothing has changed
    /// the file since. Otherwise it takes the size from the file and forgets the chunk. When the last mark this process
    /// knows of is another handle's, or there is none (a handle of this process emptied the log), the log cannot end in
    /// this handle's mark: the size is taken at once and the log is left to the change's first write, as without one.
    func continueLog(_ st: inout State, sizeMayBeStale: Bool) throws(ProtectionError) {
        guard let committed = st.committedSize else { return }
        if sizeMayBeStale, LogPositions.position(of: st.journal!.dataPath)?.owner != st.journal!.owner {
            try reload(&st)
            return
        }
        let fd = st.fd
        let fresh: (() throws(ProtectionError) -> Int64)? = sizeMayBeStale ? { () throws(ProtectionError) -> Int64 in try self.fileSizeNow(of: fd) } : nil
        let (fileSize, own) = try st.journal!.continueLog(io, fileSize: layout.fileSize(forPlaintextSize: committed), fresh: fresh) {
            () throws(ProtectionError) in try diskHeader(of: fd)
        }
        if sizeMayBeStale && !own {
            st.size = try plaintextSize(ofFileSize: fileSize)
            st.forgetTail()
            st.committedSize = st.size
        }
        st.keptMayBeStale = false
    }

    /// A commit of a log's handle: marks what this handle wrote since it continued the log (FORMAT.md §6.7.6), without
    /// an fsync, and lets the log go to the file's next writer. Once the log holds `logLimit` bytes the commit is a
    /// sync instead, which empties it: that bounds what recovery and the next writer of another handle read through
    /// (every record, checksummed), and what a power loss can take back.
    func markCommit(_ st: inout State) throws(ProtectionError) {
        guard st.journal?.hot == true else { return }
        if st.journal!.end >= Self.logLimit {
            try commit(&st)
            return
        }
        do throws(ProtectionError) { try st.journal!.mark(io, fileSize: layout.fileSize(forPlaintextSize: st.size)) } catch {
            st.failed = error
            throw error
        }
        st.committedSize = st.size
    }

    /// A durable commit of a log's handle whose journal is not hot: fsyncs the file, then, holding the log's lock so
    /// that no writer starts a change meanwhile, fsyncs what other handles wrote during that fsync and empties the log
    /// (every mark in it is durable now).
    ///
    /// The first fsync, which writes back everything since the last sync (a checkpoint's sync of a WAL: up to a
    /// thousand frames, a millisecond or more), is made without the lock: writers of other handles, each holding
    /// SQLite's write lock while it waits for the log's, go on committing meanwhile. The second, under the lock, finds
    /// nothing or a few frames to write back.
    func commitLog(_ st: inout State) throws(ProtectionError) {
        let header = try diskHeader(&st)
        do throws(SystemError) { try io.fsync(st.fd) } catch { throw ioError(error, "sync") }
        try st.journal!.lockLog(io, dataHeader: header)
        do throws(SystemError) { try io.fsync(st.fd) } catch {
            st.journal!.releaseLock(io)
            throw ioError(error, "sync")
        }
        try st.journal!.emptyLog(io, dataHeader: header)
        st.committedSize = st.size
    }

    /// The file's header bytes as on disk now, which a journal is bound to (a rewrap may have rewritten them since the open).
    func diskHeader(_ st: inout State) throws(ProtectionError) -> [UInt8] { try diskHeader(of: st.fd) }

    /// `diskHeader`, read through the handle's descriptor `fd`.
    func diskHeader(of fd: Int32) throws(ProtectionError) -> [UInt8] {
        let bytes: [UInt8]
        do throws(SystemError) { bytes = try io.readBytes(fd, count: FileHeader.size, at: 0) } catch { throw ioError(error, "read") }
        guard bytes.count == FileHeader.size else {
            throw ProtectionError(.authenticationFailed, "unable to write '\(path)': its header is gone (truncated while open?); restore it from a backup", path: path)
        }
        return bytes
    }

    /// Chunk `j` of a file of `size` plaintext bytes, sealed, exactly as on disk.
    func rawChunk(_ st: inout State, _ j: Int64, size: Int64) throws(ProtectionError) -> [UInt8] {
        let len = layout.plaintextLength(ofChunk: j, plaintextSize: size) + layout.overhead
        let bytes: [UInt8]
        do throws(SystemError) { bytes = try io.readBytes(st.fd, count: len, at: layout.offset(ofChunk: j)) } catch { throw ioError(error, "read") }
        guard bytes.count == len else {
            throw ProtectionError(.authenticationFailed, "unable to write '\(path)': the file is shorter than its chunks (truncated while open?); restore it from a backup", path: path)
        }
        return bytes
    }

    /// Takes the plaintext size from the file again (after recovery changed it under a reader).
    func refreshSize(_ st: inout State) throws(ProtectionError) {
        st.size = try plaintextSize(ofFileSize: try fileSizeNow(of: st.fd))
        st.forgetTail()
    }

    /// `refreshSize` after another handle may have written the file: a change this handle starts now rolls back to the
    /// file as it is, not as this handle last committed it (a database's writer commits before it gives up its write
    /// lock); otherwise a crash in that change would cut away the other handle's committed writes.
    func reload(_ st: inout State) throws(ProtectionError) {
        try refreshSize(&st)
        if st.committedSize != nil, st.journal?.hot != true, st.failed == nil { st.committedSize = st.size }
    }

    /// The file's size on disk now, through descriptor `fd`; one that fits no valid file fails authentication.
    func fileSizeNow(of fd: Int32) throws(ProtectionError) -> Int64 {
        let fileSize: Int64
        do throws(SystemError) { fileSize = try io.size(fd) } catch { throw ioError(error, "read") }
        _ = try plaintextSize(ofFileSize: fileSize)
        return fileSize
    }

    /// The plaintext size of a file of `fileSize` bytes on disk; one that fits no valid file fails authentication.
    func plaintextSize(ofFileSize fileSize: Int64) throws(ProtectionError) -> Int64 {
        guard let size = layout.plaintextSize(forFileSize: fileSize) else {
            throw ProtectionError(.authenticationFailed, "unable to read '\(path)': its size (\(fileSize) bytes) fits no valid file; restore it from a backup", path: path)
        }
        return size
    }
}
