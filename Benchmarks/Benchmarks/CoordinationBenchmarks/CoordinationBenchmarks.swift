// Uncontended coordinated reads and writes per second, beside the bare OFD lock they are built on.
import Benchmark
import FileCoordination
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A scratch domain shared by every benchmark of this run.
private let scratch: URL = {
    let url = URL(fileURLWithPath: "/tmp/coordination-bench-\(getpid())", isDirectory: true)
    try? FileManager.default.createDirectory(at: url.appendingPathComponent("a/b/c"), withIntermediateDirectories: true)
    return url
}()

/// One open-file-description lock and unlock of one byte, the floor of any coordination.
private func bareOFDLockUnlock(_ fd: Int32) {
    let F_OFD_SETLK: Int32 = 37  // <fcntl.h>; Glibc's Swift module does not export the OFD commands
    var lock = flock()
    lock.l_type = Int16(F_WRLCK)
    lock.l_whence = Int16(SEEK_SET)
    lock.l_start = 4096
    lock.l_len = 1
    _ = fcntl(fd, F_OFD_SETLK, &lock)
    lock.l_type = Int16(F_UNLCK)
    _ = fcntl(fd, F_OFD_SETLK, &lock)
}

/// A benchmark that runs `access` once per iteration with one coordinator on one item of the scratch domain.
private func coordinatedBenchmark(
    _ name: String, item relative: String, _ access: @escaping @Sendable (FileCoordinator, URL) throws -> Void
) {
    Benchmark(name) { benchmark in
        let coordinator = FileCoordinator(domain: try CoordinationDomain(root: scratch))
        let item = scratch.appendingPathComponent(relative)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { try access(coordinator, item) }
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.throughput, .wallClock, .syscalls],
        scalingFactor: .kilo,
        maxDuration: .seconds(3),
        maxIterations: 1_000_000
    )

    Benchmark("bare OFD lock+unlock") { benchmark in
        let fd = open(scratch.appendingPathComponent("bare.lock").path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        defer { close(fd) }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations { bareOFDLockUnlock(fd) }
    }

    coordinatedBenchmark("coordinated read, uncontended", item: "item") { coordinator, item in
        try coordinator.coordinate(readingItemAt: item) { blackHole($0) }
    }
    coordinatedBenchmark("coordinated write, uncontended", item: "item") { coordinator, item in
        try coordinator.coordinate(writingItemAt: item) { blackHole($0) }
    }
    coordinatedBenchmark("coordinated forReplacing write, uncontended", item: "item") { coordinator, item in
        try coordinator.coordinate(writingItemAt: item, options: .forReplacing) { blackHole($0) }
    }
    coordinatedBenchmark("coordinated read, item 3 directories deep", item: "a/b/c/item") { coordinator, item in
        try coordinator.coordinate(readingItemAt: item) { blackHole($0) }
    }

    Benchmark("coordinated read, async form") { benchmark in
        let coordinator = FileCoordinator(domain: try CoordinationDomain(root: scratch))
        let intents = [FileAccessIntent.readingIntent(with: scratch.appendingPathComponent("item"))]
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            try await coordinator.coordinate(with: intents) { blackHole($0) }
        }
    }
}
