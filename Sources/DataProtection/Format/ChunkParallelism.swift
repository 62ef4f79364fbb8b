internal import CShims
import Dispatch
import Locking

/// Splits the chunks of one batch across the machine's cores.
///
/// Chunks are sealed and opened independently, so a batch of `n` chunks is cut
/// into at most `activeProcessorCount` contiguous parts, each handled on its
/// own thread by `DispatchQueue.concurrentPerform` (the calling thread takes
/// one part). Small batches stay on the calling thread: waking a second
/// thread costs tens of microseconds in a VM, more than sealing a few chunks.
///
/// Each part is handed to `body` in pieces of at most `bytesPerPiece`, in
/// order, so the bytes a piece reads (or seals) are still in the core's cache
/// when it opens (or writes) them, and one core's system call overlaps the
/// other's cipher work.
enum ChunkParallelism {
    static let cores = Int(dp_available_cpus())
    /// Fewer chunk bytes than this per part are not worth a thread wake-up.
    static let minBytesPerPart = 128 * 1024
    /// Chunk bytes per call of `body`: well inside a core's L2 (1 MiB here) with room for the output.
    static let bytesPerPiece = 128 * 1024

    /// Calls `body` for disjoint ranges covering `0..<n`, concurrently when worthwhile;
    /// the ranges of one part come in ascending order on one thread.
    /// - Throws: the error of the lowest-indexed failing part (a part stops at its first error).
    static func forEachPart<E: Error>(count n: Int, chunkSize: Int, _ body: (Range<Int>) throws(E) -> Void) throws(E) {
        let parts = min(cores, max(1, (n * chunkSize) / minBytesPerPart))
        let step = max(1, bytesPerPiece / chunkSize)
        guard parts > 1 else { return try inPieces(0..<n, step, body) }
        let failures = Locked<[Int: E]>([:])
        withoutActuallyEscaping(body) { body in
            // The parts touch disjoint chunk slots; `body` runs only until concurrentPerform returns.
            nonisolated(unsafe) let body = body
            DispatchQueue.concurrentPerform(iterations: parts) { p in
                let lo = n * p / parts, hi = n * (p + 1) / parts
                do throws(E) { try inPieces(lo..<hi, step, body) } catch { failures.withLock { $0[p] = error } }
            }
        }
        if let first = failures.withLock({ $0.min { $0.key < $1.key }?.value }) { throw first }
    }

    /// Calls `body` on consecutive sub-ranges of `r` of at most `step` elements.
    @inline(__always)
    private static func inPieces<E: Error>(_ r: Range<Int>, _ step: Int, _ body: (Range<Int>) throws(E) -> Void) throws(E) {
        var lo = r.lowerBound
        while lo < r.upperBound {
            let hi = min(r.upperBound, lo + step)
            try body(lo..<hi)
            lo = hi
        }
    }
}
