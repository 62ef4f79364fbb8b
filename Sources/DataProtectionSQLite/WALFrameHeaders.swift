internal import CSQLite
import DataProtection

/// A WAL frame's header and page, written as one write.
///
/// SQLite writes a frame as two `xWrite`s: its 24-byte header, then its page right after it (walformat.html; `walWriteOneFrame`). In a
/// protected WAL each write re-seals the chunk it ends in, so a frame cost three chunk seals, two `pwrite`s and two seal-lock
/// pairs: the header re-sealed the chunk holding the end of the previous frame, and the page re-sealed that chunk again
/// and sealed the next. The VFS therefore holds a frame header (it returns `SQLITE_OK` for it) until the page follows
/// at the next offset, and writes both at once: two seals, one `pwrite`, one lock pair. Anything else first writes a
/// held header on its own: another write elsewhere (SQLite rewriting a frame's checksums), a read, a sync, a truncate, a
/// size, a close. A header holds no row (a page number, the database size after a commit, the salts and checksums),
/// and the joined buffer, which holds a page, is zeroed after every write.
extension ProtectedDatabaseFile {
    static let frameHeaderSize = 24

    /// For a WAL's `xWrite`: holds a frame header, joins a held one to its page, or writes a held one before a write
    /// elsewhere; nil when `buffer` is to be written as it is.
    func holdingFrameHeaders(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32? {
        if heldFrameHeaderAt >= 0 {
            if offset == heldFrameHeaderAt + Int64(Self.frameHeaderSize) { return writeJoined(page: buffer, at: offset) }
            let rc = writeHeldFrameHeader()
            guard rc == SQLITE_OK else { return rc }
        }
        guard buffer.count == Self.frameHeaderSize, offset >= Int64(Self.walHeaderSize) else { return nil }
        heldFrameHeader.withUnsafeMutableBytes { $0.copyMemory(from: buffer) }
        heldFrameHeaderAt = offset
        return committingAfterACommitFrame(buffer, at: offset)  // notes a commit frame's header
    }

    /// Writes the held frame header on its own, if there is one.
    func writeHeldFrameHeader() -> Int32 {
        guard heldFrameHeaderAt >= 0 else { return SQLITE_OK }
        let at = heldFrameHeaderAt
        heldFrameHeaderAt = -1
        return heldFrameHeader.withUnsafeBytes { writeSealed($0, at: at) }
    }

    /// The held header and `page` (at `offset`, right after the header) as one write.
    private func writeJoined(page: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        let n = Self.frameHeaderSize + page.count
        if (joinedFrame?.count ?? 0) < n {
            releaseJoinedFrame()
            joinedFrame = .allocate(byteCount: n, alignment: 16)
        }
        let joined = UnsafeMutableRawBufferPointer(rebasing: joinedFrame![..<n])
        heldFrameHeader.withUnsafeBytes { joined.copyMemory(from: $0) }
        UnsafeMutableRawBufferPointer(rebasing: joined[Self.frameHeaderSize...]).copyMemory(from: page)
        let at = heldFrameHeaderAt
        heldFrameHeaderAt = -1
        let rc = writeSealed(UnsafeRawBufferPointer(joined), at: at)
        joined.initializeMemory(as: UInt8.self, repeating: 0)
        guard rc == SQLITE_OK else { return rc }
        return committingAfterACommitFrame(page, at: offset)
    }

    /// Zeroes and frees the joined-frame buffer.
    func releaseJoinedFrame() {
        guard let b = joinedFrame else { return }
        b.initializeMemory(as: UInt8.self, repeating: 0)
        b.deallocate()
        joinedFrame = nil
    }
}
