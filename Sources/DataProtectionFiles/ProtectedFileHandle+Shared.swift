import DataProtectionFormat
import DataProtectionKeys
import SystemLayer

// What a handle needs when other handles (other connections, other processes) change the same file between its calls,
// as a database's connections do under SQLite's own locks: the descriptor those locks go on, and a way to forget what
// the handle remembers of the file.
extension ProtectedFileHandle {
    /// The descriptor SQLite's byte-range locks are taken on (OFD locks: one set per handle; -1 once closed).
    package var lockDescriptor: Int32 { descriptor }

    /// Takes the size from the file again and forgets the kept last chunk, after another handle may have written it.
    ///
    /// Call it once the caller's own lock excludes writers (SQLite: on taking a shared lock, at the start of a WAL read
    /// transaction, before reading past the size this handle knows). The size is authenticated by the next read of the
    /// last chunk, whose "last" flag a truncation or extension by anyone without the key cannot forge.
    /// - Throws: `.locked` once the class key was withdrawn; `.authenticationFailed` when the size fits no valid file.
    package func reloadAfterOtherWriters() throws(ProtectionError) {
        try state.withLock { (st) throws(ProtectionError) in
            _ = try live(&st, "read")
            try reload(&st)
        }
    }

    /// `reloadAfterOtherWriters()` for a change that starts now, holding a lock that keeps the file's other writers out
    /// (a database's seal lock under SQLite's write lock): a log's handle (`logCommits`) continues the log at once, and
    /// keeps its size and last chunk when the log ends in this handle's own last mark, of that size (no writer has
    /// changed the file since: `continueLog(_:sizeMayBeStale:)`); otherwise, and for any other handle, it takes them
    /// from the file.
    ///
    /// Why: a database with one writer connection (GRDB's `DatabasePool`) commits through the same WAL handle every
    /// time, and taking the WAL's size and reading and opening its last chunk again cost two system calls and an
    /// AES-GCM open of each one-row commit.
    /// - Throws: `.locked` once the class key was withdrawn; as `write` when the log cannot be continued.
    package func prepareChangeAfterOtherWriters() throws(ProtectionError) {
        try state.withLock { (st) throws(ProtectionError) in
            _ = try live(&st, "write")
            if st.logsCommits, st.journal?.hot == false, st.committedSize != nil, st.failed == nil {
                try continueLog(&st, sizeMayBeStale: true)
            } else {
                try reload(&st)
            }
        }
    }

    /// Forgets the kept last chunk, without a system call: the start of a read transaction, after which another
    /// handle may have re-sealed that chunk (a WAL's commit appends into it). A log's handle that wrote that chunk last
    /// keeps it aside, unused by reads, for its next change to take back if the log shows no other writer since
    /// (`prepareChangeAfterOtherWriters`).
    ///
    /// The size is left as it is. Where another handle changed it since, a read still returns only authenticated bytes:
    /// each chunk is opened as chunk `j` of a file of this handle's size (its index, its "last" flag and its length are
    /// bound into the seal), so a chunk re-sealed or moved since fails and the caller reads again after
    /// `reloadAfterOtherWriters()`, and a read past the known end comes back short, which the caller treats the same way.
    package func forgetKeptLastChunk() {
        state.withLock { (st) in
            if st.logsCommits, st.tail >= 0, st.tailSealedChunk == st.tail { st.keptMayBeStale = true } else { st.forgetTail() }
        }
    }

    /// Throws `.locked` when the handle's class was locked (its keys are wiped then), and gets keys again after an unlock.
    ///
    /// The check a database makes at the start of every statement, which SQLite may answer from its page cache without
    /// reading the file.
    package func checkAvailable() throws(ProtectionError) {
        try state.withLock { (st) throws(ProtectionError) in _ = try live(&st, "use") }
    }

    /// Leaves the whole, interior chunks this handle overwrites out of its rollback journal, for a caller that journals
    /// them itself before overwriting them (a database's main file: SQLite's rollback journal or WAL holds every page it
    /// writes back in place, and its recovery rewrites the page whole). FORMAT.md §6.7.5 gives the reasoning and limits.
    package func leaveWholeChunksToTheCallersJournal() {
        state.withLock { $0.callerJournalsWholeChunks = true }
    }

    /// Declares that every write through this handle is made holding a lock that keeps the file's other writers out
    /// (a database's seal lock, `ProtectedDatabaseFile.sealedForWriting`, or SQLite's EXCLUSIVE or checkpoint lock for
    /// the pages `writesOnlyUnreadPages` lets through without it): a write then journals the chunks it read from the
    /// bytes it read, without reading them again.
    package func writeOnlyUnderCallersExclusiveLock() {
        state.withLock { $0.callerExcludesOtherWriters = true }
    }

    /// Keeps chunk 0 between reads, opening it again only when its bytes on disk changed (`readFirstChunk`): a
    /// database's main file, whose page 1 SQLite reads at the start of every rollback-mode transaction (16 bytes of
    /// its change counter), which otherwise costs opening the whole 4 KiB chunk each time.
    package func keepFirstChunkBetweenReads() {
        state.withLock { $0.keepsFirstChunk = true }
    }

    /// Makes the handle's commits marks in a log instead of fsyncs (FORMAT.md §6.7.6; a WAL): `markCommit()` ends a
    /// change, and `sync()` (of any handle of the file that logs) makes every mark durable and empties the log.
    package func logCommits() {
        state.withLock { $0.logsCommits = true }
    }

    /// Marks the change this handle made as committed, without an fsync: until the file's next `sync()`, a crash of
    /// the process keeps it, and a crash of the machine may take it back to that sync, never to a state between.
    /// - Throws: as `sync()`.
    package func markCommit() throws(ProtectionError) {
        try state.withLock { (st) throws(ProtectionError) in
            _ = try live(&st, "sync")
            if let failed = st.failed { throw failedChange(failed, "sync") }
            try markCommit(&st)
        }
    }

    /// Whether the handle's rollback journal is hot: it changed committed chunks since its last `sync()`. A database
    /// commits before it gives up its write lock, so the next writer (another handle) can start a journal of its own.
    package var holdsHotJournal: Bool { state.withLock { $0.journal?.hot == true } }
}
