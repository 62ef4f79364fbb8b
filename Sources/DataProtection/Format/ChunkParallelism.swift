internal import CShims
import Dispatch
import Synchronization

/// Splits the chunks of one batch across the machine's cores.
///
/// Chunks are sealed and opened independently, so a batch of `n` chunks is cut
/// into at most `activeProcessorCount` contiguous parts, each handled on its
/// own thread by `DispatchQueue.concurrentPerform` (the calling thread takes
/// one part). Small batches stay on the calling thread: waking a second
/// thread costs tens of microseconds in a VM, more than sealing a few chunks.
enum ChunkParallelism {
    static let cores = Int(dp_available_cpus())
    /// Fewer chunk bytes than this per part are not worth a thread wake-up.
    static let minBytesPerPart = 128 * 1024

    /// Calls `body` for disjoint ranges covering `0..<n`, concurrently when worthwhile.
    /// - Throws: the error of the lowest-indexed failing part.
    static func forEachPart<E: Error>(count n: Int, chunkSize: Int, _ body: (Range<Int>) throws(E) -> Void) throws(E) {
        let parts = min(cores, max(1, (n * chunkSize) / minBytesPerPart))
        guard parts > 1 else { return try body(0..<n) }
        let failures = Mutex<[Int: E]>([:])
        withoutActuallyEscaping(body) { body in
            // The parts touch disjoint chunk slots; `body` runs only until concurrentPerform returns.
            nonisolated(unsafe) let body = body
            DispatchQueue.concurrentPerform(iterations: parts) { p in
                let lo = n * p / parts, hi = n * (p + 1) / parts
                do throws(E) { try body(lo..<hi) } catch { failures.withLock { $0[p] = error } }
            }
        }
        if let first = failures.withLock({ $0.min { $0.key < $1.key }?.value }) { throw first }
    }
}

