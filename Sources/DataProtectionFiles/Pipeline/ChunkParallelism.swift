import DataProtectionKeys
import SystemLayer

/// Splits the chunks of one batch across the machine's cores.
///
/// Chunks are sealed and opened independently, so a batch of `n` chunks is cut
/// into pieces of at most `bytesPerPiece`, and the calling thread and the idle
/// helper threads (`ChunkWorkers`, one per extra core) take pieces in turn
/// until none are left. Small batches stay on the calling thread: waking a
/// second thread costs tens of microseconds in a VM, more than sealing a few
/// chunks.
///
/// A piece is small enough that the bytes it reads (or seals) are still in the
/// core's cache when it opens (or writes) them, and one core's system call
/// overlaps the other's cipher work.
enum ChunkParallelism {
    static let cores = Processor.available()
    /// Fewer chunk bytes than this per core are not worth a thread wake-up.
    static let minBytesPerPart = 128 * 1024
    /// Chunk bytes per call of `body` when pieces are independent (reads): small, so the cores finish a batch
    /// together, yet well inside a core's L2 with room for the output.
    static let bytesPerPiece = 64 * 1024
    /// Chunk bytes per piece with an ordered stage (writes): twice as large, as each piece also takes a turn
    /// of the serial stage (measured: 64 KiB and 128 KiB pieces read at 1.50–1.57× and 1.38–1.54× one core,
    /// write at 0.96–1.01× and 0.97–1.21×, interleaved runs of `dp-bench throughput`).
    static let bytesPerOrderedPiece = 128 * 1024

    /// Calls `body` for disjoint ranges covering `0..<n`, concurrently when worthwhile, in any order.
    /// - Throws: the error of the lowest failing range (no new range starts after a failure).
    static func forEachPart<E: Error>(count n: Int, chunkSize: Int, _ body: (Range<Int>) throws(E) -> Void) throws(E) {
        let (step, pieces, helpers) = split(n, chunkSize, bytesPerPiece)
        guard helpers > 0 else {
            for p in 0..<pieces { try body(p * step..<min(n, (p + 1) * step)) }
            return
        }
        try ChunkWorkers.shared.run(pieces: pieces, helpers: helpers) { (p) throws(E) in try body(p * step..<min(n, (p + 1) * step)) }
    }

    /// `forEachPart`, then `serial` over the same ranges in ascending order, one call at a time, adjacent
    /// finished ranges merged into one call; each call runs on whichever thread is free when its ranges are.
    ///
    /// For writes into one file: its inode lock lets one `pwrite` in at a time, so a thread that would queue
    /// for it goes on sealing instead, and the file is written front to back in large writes.
    /// - Throws: the first error of `body` or `serial` (nothing more is written after a failure).
    static func forEachPart<E: Error>(
        count n: Int, chunkSize: Int, _ body: (Range<Int>) throws(E) -> Void, thenInOrder serial: (Range<Int>) throws(E) -> Void
    ) throws(E) {
        let (step, pieces, helpers) = split(n, chunkSize, bytesPerOrderedPiece)
        guard helpers > 0 else {
            for p in 0..<pieces {
                let r = p * step..<min(n, (p + 1) * step)
                try body(r)
                try serial(r)
            }
            return
        }
        let order = InOrder(pieces: pieces)
        try ChunkWorkers.shared.run(pieces: pieces, helpers: helpers) { (p) throws(E) in
            try body(p * step..<min(n, (p + 1) * step))
            order.finished(p)
            try order.drain { (lo, hi) throws(E) in try serial(lo * step..<min(n, hi * step)) }
        }
        try order.drain { (lo, hi) throws(E) in try serial(lo * step..<min(n, hi * step)) }  // a no-op: the last finisher drained; kept so completeness never rests on timing
    }

    /// Piece size in chunks, pieces, and helper threads worth waking for `n` chunks.
    private static func split(_ n: Int, _ chunkSize: Int, _ pieceBytes: Int) -> (step: Int, pieces: Int, helpers: Int) {
        let step = max(1, pieceBytes / chunkSize)
        let pieces = (n + step - 1) / step
        return (step, pieces, min(cores, max(1, (n * chunkSize) / minBytesPerPart), pieces) - 1)
    }

    /// The ordered stage of `forEachPart(count:chunkSize:_:thenInOrder:)`: which pieces are finished, how far
    /// the serial stage has got, and a token held by the one thread running it.
    private final class InOrder: @unchecked Sendable {  // every field is an atomic word
        private let pieces: Int
        /// [0]: token (1 while a thread runs the serial stage); [1]: failed; [2]: the first piece not yet through
        /// the serial stage (written only by the token holder); [3 + p]: piece p finished.
        private let words: UnsafeMutablePointer<UInt32>
        private var cursor: UnsafeMutablePointer<UInt32> { words + 2 }

        init(pieces: Int) {
            self.pieces = pieces
            words = .allocate(capacity: pieces + 3)
            words.initialize(repeating: 0, count: pieces + 3)
        }

        deinit { words.deallocate() }

        func finished(_ p: Int) { AtomicWord32(words + 3 + p).store(1) }

        private func isFinished(_ p: Int) -> Bool { p < pieces && AtomicWord32(words + 3 + p).load() != 0 }

        /// Runs `serial` over the finished pieces from the cursor on, unless another thread is doing so. A thread
        /// that finds the token taken leaves; the holder looks again after letting go, so no finished piece is missed.
        func drain<E: Error>(_ serial: (Int, Int) throws(E) -> Void) throws(E) {
            while AtomicWord32(words).compareExchange(expected: 0, desired: 1) {
                guard AtomicWord32(words + 1).load() == 0 else {  // checked under the token: a failed stage stays stopped
                    AtomicWord32(words).store(0)
                    return
                }
                let from = Int(AtomicWord32(cursor).load())
                var to = from
                while isFinished(to) { to += 1 }
                if to > from {
                    do throws(E) { try serial(from, to) } catch {
                        AtomicWord32(words + 1).store(1)
                        AtomicWord32(words).store(0)
                        throw error
                    }
                    AtomicWord32(cursor).store(UInt32(to))
                }
                AtomicWord32(words).store(0)
                guard isFinished(Int(AtomicWord32(cursor).load())) else { return }
            }
        }
    }
}
