// Sizes from the environment, scratch paths and the allocation thresholds every protected-file benchmark uses.
import Benchmark
import Foundation

/// Sizes of the suite: full by default, smaller through the environment for a quick run.
///
/// Benchmark names carry the size, so a scaled-down run never compares itself
/// with the full-size thresholds under `Thresholds/`.
public enum Scale {
    /// `DP_BENCH_LARGE_MIB` (default 1024): the largest sequential file and the random-access file, in MiB.
    public static let largeMiB = integer("DP_BENCH_LARGE_MIB", 1024)
    /// `DP_BENCH_SMALL_FILES` (default 10,000): how many 4 KiB files the small-file benchmarks create and read.
    public static let smallFiles = integer("DP_BENCH_SMALL_FILES", 10_000)
    /// Sequential sizes in MiB: 1, 64 and the large size (deduplicated when scaled down).
    public static var sequentialMiB: [Int] { Array(Set([1, 64, largeMiB].filter { $0 <= largeMiB })).sorted() }

    static func integer(_ name: String, _ fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap { Int($0) }.flatMap { $0 > 0 ? $0 : nil } ?? fallback
    }
}

/// A throwaway directory for one benchmark process: `$DP_BENCH_DIR` (default the temporary directory, ext4 here).
public let scratchDirectory: String = {
    let base = ProcessInfo.processInfo.environment["DP_BENCH_DIR"] ?? NSTemporaryDirectory()
    let dir = "\(base)/dp-benchmarks-\(getpid())"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    atexit { try? FileManager.default.removeItem(atPath: "\(ProcessInfo.processInfo.environment["DP_BENCH_DIR"] ?? NSTemporaryDirectory())/dp-benchmarks-\(getpid())") }
    return dir
}()

/// State a benchmark's setup hands to its closure (the hooks cannot return a value).
public final class Fixture<Value>: @unchecked Sendable {
    public var value: Value?
    public init() {}
    /// The value set by setup; a benchmark run without it is a bug in the suite.
    public var get: Value {
        guard let value else { fatalError("benchmark fixture used before its setup ran") }
        return value
    }
}

/// Tolerances for `swift package benchmark thresholds check`: allocation counts are deterministic,
/// so the p90 of a run may differ from the recorded one (Thresholds/*.p90.json) by 1 % and 20 allocations at most.
///
/// Both limits apply: the relative one catches a new allocation per chunk or per call in a large
/// benchmark, the absolute one a new allocation in a benchmark that recorded none.
public var allocationThresholds: [BenchmarkMetric: BenchmarkThresholds] {
    [.mallocCountTotal: .init(relative: [.p90: 1.0], absolute: [.p90: 20])]
}

/// What every benchmark of the suite records: time, allocations (thresholded) and peak resident memory.
public var recordedMetrics: [BenchmarkMetric] { [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident] }

/// Stops the benchmark process with `message` when a measured call fails (the runner would report a misleading figure).
public func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("benchmark: error: \(message)\n".utf8))
    exit(1)
}
