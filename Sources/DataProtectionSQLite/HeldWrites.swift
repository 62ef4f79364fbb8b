internal import CSQLite
import DataProtection
import DataProtectionKeys
import Locking

/// A journal's or WAL's small writes, and a WAL transaction's frames, held and written with the write that ends them.
///
/// SQLite writes a WAL frame as two `xWrite`s, its 24-byte header and then its page (walformat.html;
/// `walWriteOneFrame`), and a rollback-journal record as three, the 4-byte page number, the page and a 4-byte checksum
/// (`pager_write`). In a protected file each write re-seals the chunk it ends in, so a journal record cost four seals,
/// three `pwrite`s and three seal-lock pairs. The VFS therefore holds a small write (at most `heldLimit` bytes; it
/// returns `SQLITE_OK` for it), adds the small writes that follow it at the next offsets, and writes them with the
/// first larger write that follows at the next offset, as one write: a journal record (its checksum held with the
/// next record's page number) then costs two seals, one `pwrite` and one pair.
///
/// A WAL goes further: a transaction's frames are held whole, up to `heldFramesLimit` bytes, and written with its
/// commit frame as one write (`holdsFrame`). Each frame re-seals the chunk the frame before it ends in (a frame is
/// 4,120 bytes, a chunk 4,096), so a commit of n frames cost 2n seals, n `pwrite`s and n seal-lock pairs; held, it
/// costs n + 1 seals, one `pwrite` and one pair. No other connection reads a frame before its commit frame is written
/// (SQLite publishes a commit in the wal-index after its last frame's `xWrite`); this connection reads its own frames
/// only after its cache spilled them, and a read writes what is held first.
///
/// Anything else first writes what is held on its own: a write elsewhere, a read, a sync, a truncate, a size, a close,
/// the WAL write lock's release. A WAL header at offset 0 is never held (it may start the log over:
/// `ProtectedDatabaseFile.write`). Held bytes are zeroed after every write. A WAL's held frames are pages of rows: a
/// lock of the class zeroes them too, through the same revocation as SQLite's own pages (`HeldBytes.revoke`), and the
/// write they were held for then fails as locked.
extension ProtectedDatabaseFile {
    /// The most bytes held of small writes.
    static let heldLimit = 64

    /// The most bytes of a WAL transaction's frames held for its commit frame (64 frames of 4 KiB pages).
    static let heldFramesLimit = 64 * (frameHeaderSize + ProtectedVFS.pageSize)

    /// A WAL frame's header (walformat.html).
    static let frameHeaderSize = 24

    /// For a journal's or WAL's `xWrite`: holds a small write or a frame, adds it to what is held, or writes what is
    /// held joined to `buffer` (or on its own before a write elsewhere); nil when `buffer` is to be written as it is.
    func holdingSmallWrites(_ buffer: UnsafeRawBufferPointer, at offset: Int64) -> Int32? {
        enum Step { case held, joined, alone, nothing }
        let step: Step = held.state.withLock { st in
            if st.at >= 0 {
                guard offset == st.at + Int64(st.count) else { return .alone }
                if st.count + buffer.count <= Self.heldLimit || holdsFrame(st, buffer.count, at: offset) {
                    hold(&st, buffer, at: offset)
                    return .held
                }
                // A frame header that no longer fits starts the next frames: what is held goes first, on its own.
                return isWAL && buffer.count == Self.frameHeaderSize ? .alone : .joined
            }
            guard buffer.count <= Self.heldLimit, !(isWAL && offset == 0) else { return .nothing }
            hold(&st, buffer, at: offset)
            return .held
        }
        switch step {
        case .held: return isWAL ? committingAfterACommitFrame(buffer, at: offset) : SQLITE_OK  // notes a commit frame's header
        case .joined: return writeJoined(buffer, at: offset)
        case .nothing: return nil
        case .alone:
            let rc = writeHeld()
            guard rc == SQLITE_OK else { return rc }
            return holdingSmallWrites(buffer, at: offset)
        }
    }

    /// Whether a write of `count` bytes at `offset`, right after what is held, is part of a WAL frame to hold with it:
    /// a frame header after a whole frame, or a page after its header when that is not a commit frame's; and the
    /// frame fits beside what is held.
    private func holdsFrame(_ st: HeldBytes.State, _ count: Int, at offset: Int64) -> Bool {
        guard isWAL else { return false }
        let page = ProtectedVFS.pageSize
        if count == Self.frameHeaderSize { return offset == st.frameEnd && st.count + count + page <= Self.heldFramesLimit }
        return count == page && offset == st.frameHeaderEnd && commitFrameHeaderAt < 0 && st.count + count <= Self.heldFramesLimit
    }

    private func hold(_ st: inout HeldBytes.State, _ buffer: UnsafeRawBufferPointer, at offset: Int64) {
        if st.at < 0 { st.at = offset }
        st.reserve(st.count + buffer.count)
        UnsafeMutableRawBufferPointer(rebasing: st.buffer![st.count...]).copyMemory(from: buffer)
        st.count += buffer.count
        let end = offset + Int64(buffer.count)
        (st.frameHeaderEnd, st.frameEnd) = !isWAL ? (-1, -1)
            : buffer.count == Self.frameHeaderSize ? (end, -1)
            : buffer.count == ProtectedVFS.pageSize && offset == st.frameHeaderEnd ? (-1, end) : (-1, -1)
    }

    /// Writes what is held on its own, if anything.
    func writeHeld() -> Int32 { writeJoined(nil, at: -1) }

    /// What is held and `buffer` (at `offset`, right after it) as one write, under the holder's lock, so that a lock
    /// of the class zeroes the bytes before or after the write, never under it.
    private func writeJoined(_ buffer: UnsafeRawBufferPointer?, at offset: Int64) -> Int32 {
        let rc: Int32 = held.state.withLock { st in
            if st.revoked {
                st.revoked = false
                return VFSFailure.record(ProtectionError(.locked, "unable to write '\(handle.path)': its class was locked while the write transaction was open, and the pages held for its commit were wiped; roll the transaction back, run `dpctl unlock`, then run it again", path: handle.path), io: DP_IOERR_WRITE)
            }
            guard st.at >= 0 || buffer != nil else { return SQLITE_OK }
            let extra = buffer?.count ?? 0, n = st.count + extra
            st.reserve(n)
            let j = UnsafeMutableRawBufferPointer(rebasing: st.buffer![..<n])
            if let buffer { UnsafeMutableRawBufferPointer(rebasing: j[st.count...]).copyMemory(from: buffer) }
            let at = st.at >= 0 ? st.at : offset
            st.clear()
            defer { j.initializeMemory(as: UInt8.self, repeating: 0) }
            return writeSealed(UnsafeRawBufferPointer(j), at: at)
        }
        guard rc == SQLITE_OK, let buffer else { return rc }
        return isWAL ? committingAfterACommitFrame(buffer, at: offset) : SQLITE_OK
    }
}

/// What a journal or WAL holds (`HeldWrites.swift`), behind a lock that a lock of the class takes too: it zeroes the
/// held bytes of a locked class, and the write they were held for fails (`revoked`).
///
/// Registered with the domain's `Revocation` for a WAL (the one file that holds pages between calls), unregistered at
/// its close; a journal's holder is never registered (it holds page numbers and checksums between calls, no rows).
final class HeldBytes: KeyHolder, @unchecked Sendable {  // every access to the bytes holds `state`'s lock
    struct State {
        /// Where the held bytes start (-1: none) and how many they are.
        var at: Int64 = -1
        var count = 0
        var buffer: UnsafeMutableRawBufferPointer?
        /// For a WAL: where the frame header that is the last held write ends, or the whole frame (-1: it is not).
        var frameHeaderEnd: Int64 = -1
        var frameEnd: Int64 = -1
        /// A lock of the class zeroed what was held: the next write of it fails.
        var revoked = false

        /// Makes the buffer hold at least `n` bytes, keeping what it holds (its old copy zeroed).
        mutating func reserve(_ n: Int) {
            if let b = buffer, b.count >= n { return }
            let new = UnsafeMutableRawBufferPointer.allocate(byteCount: max(n, ProtectedDatabaseFile.heldLimit + 65_536), alignment: 16)
            new.initializeMemory(as: UInt8.self, repeating: 0)
            if let old = buffer {
                UnsafeMutableRawBufferPointer(rebasing: new[..<count]).copyMemory(from: UnsafeRawBufferPointer(rebasing: old[..<count]))
                old.initializeMemory(as: UInt8.self, repeating: 0)
                old.deallocate()
            }
            buffer = new
        }

        /// Forgets what is held (the caller zeroes the bytes once written).
        mutating func clear() { (at, count, frameHeaderEnd, frameEnd) = (-1, 0, -1, -1) }

        /// Zeroes and frees the buffer.
        mutating func release() {
            if count > 0 { revoked = true }
            clear()
            guard let b = buffer else { return }
            b.initializeMemory(as: UInt8.self, repeating: 0)
            b.deallocate()
            buffer = nil
        }
    }

    let state = Locked(State())
    let protection: ProtectionClass

    init(protection: ProtectionClass) { self.protection = protection }

    deinit { state.withLock { $0.release() } }

    func revoke(where locked: (ProtectionClass) -> Bool) {
        guard locked(protection) else { return }
        state.withLock { $0.release() }
    }
}
