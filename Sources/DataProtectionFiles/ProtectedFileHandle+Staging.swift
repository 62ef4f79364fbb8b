import DataProtectionKeys
import DataProtectionFormat
import SystemLayer
import ProtectionCrypto
import Locking

#if canImport(Glibc)
import Glibc
#endif

/// The handle's staging memory: its state behind one lock, the tail slot that keeps the last chunk's plaintext,
/// and the batch slots a large call seals or opens in (zeroed on close and on a lock).
extension ProtectedFileHandle {
    struct State: ~Copyable, @unchecked Sendable {  // only touched under `state`'s lock
        var fd: Int32
        var size: Int64
        var sealer: ChunkSealer?  // nil once closed or revoked
        var revokedBy: ProtectionError?
        /// The live-lock epoch the keys were obtained under.
        var epoch: UInt64
        /// The file's last chunk while its authenticated plaintext sits in the tail slot (after its nonce), or -1.
        /// Set when open authenticates the last chunk, so the first read of a small file costs nothing more, and by
        /// every write that seals the last chunk, so the next append re-seals it without reading and opening it.
        var tail: Int64 = -1
        /// Whether `tail` and `size` may be stale: another handle may have written the file since (a log's handle at
        /// the start of a database transaction, `forgetKeptLastChunk`). Reads then ignore the kept chunk; the next
        /// change keeps both only when the log shows that no writer changed the file since this handle's own last mark
        /// (`continueLog(_:sizeMayBeStale:)`).
        var keptMayBeStale = false
        /// The disk bytes of chunk `tailSealedChunk` as this handle last wrote it (a log's handle only; -1: none): the
        /// undo record of the chunk the next append re-seals, which then needs no read.
        var tailSealed: [UInt8] = []
        var tailSealedChunk: Int64 = -1
        /// The tail slot, then one slot per chunk of a batch (grown on demand up to a full batch).
        var staging: UnsafeMutableRawBufferPointer
        /// The rollback journal; nil for read-only handles and a replace's temporary file.
        var journal: WriteJournal?
        /// The plaintext size as of the last commit; nil for a created file never synced (nothing to roll back to).
        var committedSize: Int64?
        /// A replace's temporary file whose header is not written yet: the first write writes it, before its chunks
        /// (so the first chunk is sealed once, not once empty and again with data); `completeCreation` writes it with
        /// the empty chunk when nothing was written. Nil for every other handle (a file at its real name gets both at
        /// create: it must never be seen without them).
        var pendingHeader: [UInt8]?
        /// A journaled change that failed half-way: the file no longer matches this handle, so writes stop.
        var failed: ProtectionError?
        /// Whether the caller journals every whole, interior chunk it overwrites itself (a database's main file under
        /// SQLite's journal or WAL), so that the handle's journal leaves them out (FORMAT.md §6.7.5).
        var callerJournalsWholeChunks = false
        /// Whether the caller makes every write holding a lock that keeps the file's other writers out (a database's
        /// seal lock, or SQLite's own): a chunk a write reads stays as read until the write's journal records it.
        var callerExcludesOtherWriters = false
        /// Plaintext bytes per batch (`batchBytes`, or `streamingBatchBytes` behind a whole-file stream).
        var batchBytes = ProtectedFileHandle.batchBytes
        /// Plaintext bytes written and read through the handle: counted here, reported to metrics once, at close.
        var bytesSealed: Int64 = 0
        var bytesOpened: Int64 = 0

        /// For a handle that keeps chunk 0 between reads (`keepFirstChunkBetweenReads`): chunk 0 as last opened, its
        /// disk bytes in the first stride and its plaintext in the second; nil until the first read of it.
        var firstChunk: UnsafeMutableRawBufferPointer?
        /// The plaintext length chunk 0 was opened with, or -1 when `firstChunk` holds nothing valid.
        var firstChunkLength = -1
        /// The "last" flag chunk 0 was opened with.
        var firstChunkLast = false
        /// Whether the handle's journal is a log (FORMAT.md §6.7.6): commits are marks, not fsyncs (`logCommits`).
        var logsCommits = false
        /// Whether reads keep chunk 0 (a database's main file, whose page 1 SQLite reads at every rollback-mode
        /// transaction for its change counter).
        var keepsFirstChunk = false

        deinit {  // wiped by `finish`, which every handle's deinit runs first
            staging.deallocate()
            firstChunk?.deallocate()
        }

        /// Forgets the kept chunks and zeroes the staging buffers: no plaintext outlives the keys or the handle.
        mutating func dropPlaintext() {
            forgetTail()
            wipeMemory(staging)
            firstChunkLength = -1
            if let kept = firstChunk { wipeMemory(kept) }
        }

        /// Forgets the kept last chunk (its plaintext and its disk bytes).
        mutating func forgetTail() {
            tail = -1
            tailSealedChunk = -1
            keptMayBeStale = false
        }

        /// The kept last chunk a read or write may use: none while it may be stale.
        var usableTail: Int64 { keptMayBeStale ? -1 : tail }

        /// The tail slot: nonce-sized gap, then the plaintext of chunk `tail`.
        var tailSlot: UnsafeMutableRawPointer { staging.baseAddress! }

        /// Makes room for `chunks` batch slots of `stride` bytes after the tail slot, which keeps its bytes; returns
        /// the first batch slot (small files never pay for a full batch).
        @inline(__always)
        mutating func reserve(_ chunks: Int, stride: Int) -> UnsafeMutableRawPointer {
            let need = (chunks + 1) * stride
            if staging.count < need {
                let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: need, alignment: 16)  // malloc's own alignment: no memalign
                if tail >= 0 { grown.baseAddress!.copyMemory(from: staging.baseAddress!, byteCount: stride) }
                wipeMemory(staging)  // it held plaintext
                staging.deallocate()
                staging = grown
            }
            return staging.baseAddress! + stride
        }
    }

    /// Plaintext bytes sealed or opened per batch: a large call is done batch by batch, in a staging buffer the
    /// handle keeps (and zeroes when a lock revokes it), so memory is O(batch).
    static let batchBytes = 1 << 20

    /// The batch of the handles behind whole-file streams (`ProtectedFiles.write(contentsOf:)`, `read(_:into:)`),
    /// which nobody else holds and which close when the stream ends. The cores meet at the end of every batch (one
    /// waits while the other finishes the last piece), and four times fewer meetings made `dpctl put` of 1 GiB
    /// 5–8 % faster (interleaved runs; 8 MiB gained nothing more). Handles given to callers keep 1 MiB: their
    /// buffer outlives the call, and `lock` zeroes it.
    static let streamingBatchBytes = 4 << 20

    /// The bytes of a log (FORMAT.md §6.7.6) past which a commit syncs instead of marking: 250 to 500 one-page WAL
    /// commits (an undo record of the part of a chunk a commit had written, up to 4,184 bytes, and a 72-byte mark each).
    static let logLimit: Int64 = 1 << 20

    /// Chunks in a batch of `bytes` plaintext bytes (at least one).
    static func batchChunks(_ bytes: Int, chunkSize: Int) -> Int { max(1, bytes / chunkSize) }

    /// Makes this handle work in `streamingBatchBytes` batches; returns the plaintext bytes of one such batch
    /// (whole chunks), the size in which a stream should hand data to it.
    func useStreamingBatches() -> Int {
        state.withLock { $0.batchBytes = Self.streamingBatchBytes }
        return Self.batchChunks(Self.streamingBatchBytes, chunkSize: chunkSize) * chunkSize
    }

    /// Bytes of the staging buffer the handle keeps between calls (what a lock or a close zeroes).
    var stagingBytes: Int { state.withLock { $0.staging.count } }

    /// Whether the handle holds keys right now (false once closed or revoked).
    package var holdsKeys: Bool { state.withLock { $0.sealer != nil } }

    /// Whether the staging buffer holds only zero bytes (for tests: no plaintext left behind).
    var stagingIsZeroed: Bool { state.withLock { $0.staging.allSatisfy { $0 == 0 } } }
}
