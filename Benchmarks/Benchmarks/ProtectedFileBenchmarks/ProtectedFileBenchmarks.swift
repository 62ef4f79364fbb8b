// Protected-file I/O through the public API with in-memory class keys: what a file costs, not what a key costs.
// Sizes scale down through DP_BENCH_LARGE_MIB and DP_BENCH_SMALL_FILES (see BenchmarkSupport).
import Benchmark
import BenchmarkSupport
import DataProtection

/// Class keys for every file benchmark of this process (the keyring's cost is KeyBenchmarks' subject).
let classKeys: InMemoryClassKeys = {
    do { return try InMemoryClassKeys.random() } catch { fail("unable to make class keys: \(error)") }
}()

/// One 1 MiB buffer of patterned plaintext, the unit of every sequential write and read.
nonisolated(unsafe) let megabyte: UnsafeMutableRawBufferPointer = {
    let b = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 64)
    for i in 0..<b.count { b[i] = UInt8(truncatingIfNeeded: i &* 31) }
    return b
}()

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = configuration(.exact)
    sequentialBenchmarks()
    smallFileBenchmarks()
    randomAccessBenchmarks()
    coordinatedBenchmarks()
}
