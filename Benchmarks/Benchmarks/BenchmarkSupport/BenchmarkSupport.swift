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

/// How far a run's p90 allocation count (`mallocCountTotal`) may move from the one recorded under
/// `Thresholds/` before `swift package benchmark thresholds check` fails (exit 2; exit 4 when it only fell).
///
/// Allocation counts do not depend on the machine's load, but paths that hand work to other threads
/// (the chunk batches split across cores, the live lock's messages, the atomic replace) vary by a few
/// allocations between iterations, so their tolerance is wider.
public enum AllocationTolerance {
    /// Single-threaded paths: the count is exact to a few allocations; 2 %.
    case exact
    /// Paths that use other threads: 12 %.
    case threaded
    /// Paths that allocate nothing per operation (figures per 1,000 operations, scaling factor kilo): the
    /// harness's own dozen or so allocations may move by 15, one allocation per operation (+1,000) fails.
    case none

    public var thresholds: [BenchmarkMetric: BenchmarkThresholds] {
        switch self {
        case .exact: [.mallocCountTotal: .init(relative: [.p90: 2.0])]
        case .threaded: [.mallocCountTotal: .init(relative: [.p90: 12.0])]
        case .none: [.mallocCountTotal: .init(absolute: [.p90: 15])]
        }
    }
}

/// A configuration that records `recordedMetrics` and checks allocations with `tolerance`.
public func configuration(
    _ tolerance: AllocationTolerance, warmupIterations: Int = 1, scalingFactor: BenchmarkScalingFactor = .one,
    maxDuration: Duration = .seconds(3), maxIterations: Int = 10_000
) -> Benchmark.Configuration {
    .init(
        metrics: recordedMetrics, warmupIterations: warmupIterations, scalingFactor: scalingFactor, maxDuration: maxDuration,
        maxIterations: maxIterations, thresholds: tolerance.thresholds)
}

/// What every benchmark of the suite records: time, allocations (thresholded) and peak resident memory.
public var recordedMetrics: [BenchmarkMetric] { [.wallClock, .throughput, .mallocCountTotal, .peakMemoryResident] }

/// Stops the benchmark process with `message` when a measured call fails (the runner would report a misleading figure).
public func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("benchmark: error: \(message)\n".utf8))
    exit(1)
}
