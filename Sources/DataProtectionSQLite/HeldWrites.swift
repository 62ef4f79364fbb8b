internal import CSQLite
import DataProtection

/// A journal's or WAL's small writes, held and written with the write that follows them.
///
/// SQLite writes a WAL frame as two `xWrite`s, its 24-byte header and then its page (walformat.html;
/// `walWriteOneFrame`), and a rollback-journal record as three, the 4-byte page number, the page and a 4-byte checksum
/// (`pager_write`). In a protected file each write re-seals the chunk it ends in, so a frame cost three chunk seals, two
/// `pwrite`s and two seal-lock pairs, and a journal record four seals, three `pwrite`s and three pairs. The VFS therefore
/// holds a small write (at most `heldLimit` bytes; it returns `SQLITE_OK` for it), adds the small writes that follow it
/// at the next offsets, and writes them with the first larger write that follows at the next offset, as one write: a
/// frame then costs two seals, one `pwrite` and one pair, a journal record (its checksum held with the next record's
/// page number) the same. Anything else first writes what is held on its own: a write elsewhere, a read, a sync, a
/// truncate, a size, a close, the WAL write lock's release. A WAL header at offset 0 is never held (it may start the log
/// over: `ProtectedDatabaseFile.write`).
///
/// What a small write holds is no row: frame headers (a page number, the database size after a commit, the salts and
/// checksums), page numbers and checksums of journal records, the journal header's record count, a super-journal's file
/// names. The buffer a held write and a page are joined in is zeroed after every write.
extension ProtectedDatabaseFile {
    /// The most bytes held.
    static let heldLimit = 64

    /// For a journal's or WAL's `xWrite`: holds a small write, adds it to what is held, or writes what is held joined to
    /// `buffer` (or on its own before a write elsewhere); nil when `buffer` is to be written as it is.
    func holdingSmallWrites(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32? {
        if heldAt >= 0 {
            if offset == heldAt + Int64(heldCount) {
                if heldCount + buffer.count <= Self.heldLimit { return hold(buffer, at: offset) }
                return writeJoined(buffer, at: offset)
            }
            let rc = writeHeld()
            guard rc == SQLITE_OK else { return rc }
        }
        guard buffer.count <= Self.heldLimit, !(isWAL && offset == 0) else { return nil }
        return hold(buffer, at: offset)
    }

    /// Writes what is held on its own, if anything.
    func writeHeld() -> Int32 {
        guard heldAt >= 0 else { return SQLITE_OK }
        let at = heldAt, n = heldCount
        heldAt = -1
        heldCount = 0
        return held.withUnsafeMutableBytes { b in
            defer { b.initializeMemory(as: UInt8.self, repeating: 0) }
            return writeSealed(UnsafeRawBufferPointer(rebasing: b[..<n]), at: at)
        }
    }

    private func hold(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        if heldAt < 0 { heldAt = offset }
        held.withUnsafeMutableBytes { UnsafeMutableRawBufferPointer(rebasing: $0[heldCount...]).copyMemory(from: buffer) }
        heldCount += buffer.count
        return isWAL ? committingAfterACommitFrame(buffer, at: offset) : SQLITE_OK  // notes a commit frame's header
    }

    /// What is held and `buffer` (at `offset`, right after it) as one write.
    private func writeJoined(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        let n = heldCount + buffer.count
        if (joined?.count ?? 0) < n {
            releaseJoined()
            joined = .allocate(byteCount: max(n, Self.heldLimit + 65_536), alignment: 16)
        }
        let j = UnsafeMutableRawBufferPointer(rebasing: joined![..<n])
        held.withUnsafeMutableBytes { h in
            j.copyMemory(from: UnsafeRawBufferPointer(rebasing: h[..<heldCount]))
            h.initializeMemory(as: UInt8.self, repeating: 0)
        }
        UnsafeMutableRawBufferPointer(rebasing: j[heldCount...]).copyMemory(from: buffer)
        let at = heldAt
        heldAt = -1
        heldCount = 0
        let rc = writeSealed(UnsafeRawBufferPointer(j), at: at)
        j.initializeMemory(as: UInt8.self, repeating: 0)
        guard rc == SQLITE_OK else { return rc }
        return isWAL ? committingAfterACommitFrame(buffer, at: offset) : SQLITE_OK
    }

    /// Zeroes and frees the joining buffer.
    func releaseJoined() {
        guard let b = joined else { return }
        b.initializeMemory(as: UInt8.self, repeating: 0)
        b.deallocate()
        joined = nil
    }
}
