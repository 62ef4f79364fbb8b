// Random 4 KiB reads and writes at 4 KiB-aligned offsets of one large protected file (1 GiB by default), and plain pread.
import Benchmark
import BenchmarkSupport
import DataProtection
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// 4 KiB-aligned offsets inside `mib` MiB, the same sequence in every run (a fixed-seed generator).
func randomOffsets(count: Int, mib: Int) -> [Int64] {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    return (0..<count).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int64((state >> 33) % UInt64(mib * 256)) * 4096
    }
}

func randomAccessBenchmarks() {
    let mib = Scale.largeMiB
    let files = ProtectedFiles(keys: classKeys)
    let offsets = randomOffsets(count: 1 << 16, mib: mib)
    // 1,000 operations per measured iteration (scaling factor kilo): a read or write of a 4 KiB block allocates nothing.
    let config = configuration(.none, scalingFactor: .kilo, maxIterations: 1000)
    let path = "\(scratchDirectory)/random-\(mib)", plainPath = "\(scratchDirectory)/random-plain-\(mib)"
    let handle = Fixture<ProtectedFileHandle>(), plainFD = Fixture<Int32>()
    let block = UnsafeMutableRawBufferPointer(rebasing: megabyte[0..<4096])

    let openFile: @Sendable () async throws -> Void = {
        try writeSequentially(files, path, .complete, mib: mib)
        handle.value = try files.open(path, forWriting: true)
    }
    let closeFile: @Sendable () async throws -> Void = {
        handle.value?.close()
        try? FileManager.default.removeItem(atPath: path)
    }
    Benchmark("random 4 KiB reads in a \(mib) MiB protected file (complete)", configuration: config, closure: { benchmark in
        let h = handle.get
        for i in benchmark.scaledIterations {
            guard try h.read(into: block, at: offsets[i % offsets.count]) == 4096 else { fail("short random read") }
        }
    }, setup: openFile, teardown: closeFile)
    Benchmark("random 4 KiB writes in a \(mib) MiB protected file (complete)", configuration: config, closure: { benchmark in
        let h = handle.get
        for i in benchmark.scaledIterations { try h.write(UnsafeRawBufferPointer(block), at: offsets[i % offsets.count]) }
    }, setup: openFile, teardown: closeFile)
    Benchmark("random 4 KiB pread in a \(mib) MiB plain file", configuration: config) { benchmark in
        let fd = plainFD.get
        for i in benchmark.scaledIterations {
            guard pread(fd, block.baseAddress, 4096, off_t(offsets[i % offsets.count])) == 4096 else { fail("short pread: errno \(errno)") }
        }
    } setup: {
        let fd = open(plainPath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        for i in 0..<mib { guard pwrite(fd, megabyte.baseAddress, megabyte.count, off_t(i) << 20) == megabyte.count else { fail("pwrite: errno \(errno)") } }
        plainFD.value = fd
    } teardown: {
        if let fd = plainFD.value { close(fd) }
        try? FileManager.default.removeItem(atPath: plainPath)
    }
}
