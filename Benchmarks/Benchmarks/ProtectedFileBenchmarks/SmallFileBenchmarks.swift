// Many small files: N × 4 KiB create+write+close, and open+read+close, protected (class complete) and plain.
import Benchmark
import BenchmarkSupport
import DataProtection
import Foundation

#if canImport(Glibc)
import Glibc
#endif

func smallFileBenchmarks() {
    let count = Scale.smallFiles
    let files = ProtectedFiles(keys: classKeys)
    let payload = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(megabyte)[0..<4096])
    let config = configuration(.exact, warmupIterations: 0, maxDuration: .seconds(10), maxIterations: 5)
    let writeRoot = "\(scratchDirectory)/small-write", readRoot = "\(scratchDirectory)/small-read"
    let round = Fixture<Int>()

    /// A fresh, empty directory for one round of creates (the previous round's is removed unmeasured).
    func freshDirectory(_ benchmark: Benchmark) -> String {
        try? FileManager.default.removeItem(atPath: "\(writeRoot)/\(round.value ?? 0)")
        round.value = (round.value ?? 0) + 1
        let dir = "\(writeRoot)/\(round.get)"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    Benchmark("small files: \(count) × 4 KiB create+write+close, protected (complete)", configuration: config) { benchmark in
        let dir = freshDirectory(benchmark)
        benchmark.startMeasurement()
        for i in 0..<count {
            let h = try files.create("\(dir)/\(i)", protection: .complete)
            try h.write(payload, at: 0)
            h.close()
        }
    } teardown: {
        try? FileManager.default.removeItem(atPath: writeRoot)
    }
    Benchmark("small files: \(count) × 4 KiB create+write+close, plain", configuration: config) { benchmark in
        let dir = freshDirectory(benchmark)
        benchmark.startMeasurement()
        for i in 0..<count {
            let fd = open("\(dir)/\(i)", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0, write(fd, payload.baseAddress, payload.count) == payload.count else { fail("plain write of \(dir)/\(i): errno \(errno)") }
            close(fd)
        }
    } teardown: {
        try? FileManager.default.removeItem(atPath: writeRoot)
    }

    Benchmark("small files: \(count) × 4 KiB open+read+close, protected (complete)", configuration: config) { _ in
        for i in 0..<count {
            let h = try files.open("\(readRoot)/p\(i)")
            guard try h.read(into: megabyte, at: 0) == 4096 else { fail("short read of \(readRoot)/p\(i)") }
            h.close()
        }
    } setup: {
        try FileManager.default.createDirectory(atPath: readRoot, withIntermediateDirectories: true)
        for i in 0..<count { try files.write(payload, to: "\(readRoot)/p\(i)", protection: .complete) }
    } teardown: {
        try? FileManager.default.removeItem(atPath: readRoot)
    }
    Benchmark("small files: \(count) × 4 KiB open+read+close, plain", configuration: config) { _ in
        for i in 0..<count {
            let fd = open("\(readRoot)/q\(i)", O_RDONLY | O_CLOEXEC)
            guard fd >= 0, read(fd, megabyte.baseAddress, megabyte.count) == 4096 else { fail("plain read of \(readRoot)/q\(i): errno \(errno)") }
            close(fd)
        }
    } setup: {
        try FileManager.default.createDirectory(atPath: readRoot, withIntermediateDirectories: true)
        for i in 0..<count { try Data(payload).write(to: URL(fileURLWithPath: "\(readRoot)/q\(i)")) }
    } teardown: {
        try? FileManager.default.removeItem(atPath: readRoot)
    }
}
