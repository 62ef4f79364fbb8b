// Sequential write and read of whole protected files (1 MiB, 64 MiB, 1 GiB) per class and cipher, in 1 MiB calls.
import Benchmark
import BenchmarkSupport
import DataProtection
import Foundation
import ProtectionCrypto

/// Writes `mib` MiB to a new protected file at `path` in 1 MiB calls, then closes it.
func writeSequentially(_ files: ProtectedFiles, _ path: String, _ c: ProtectionClass, mib: Int) throws {
    let h = try files.create(path, protection: c)
    for i in 0..<mib { try h.write(UnsafeRawBufferPointer(megabyte), at: Int64(i) << 20) }
    h.close()
}

func sequentialBenchmarks() {
    for mib in Scale.sequentialMiB {
        let large = mib >= 256
        // Each 1 MiB call's chunks are sealed (or opened) on both cores: a few allocations vary.
        let config = configuration(.threaded, warmupIterations: large ? 0 : 1, maxDuration: .seconds(large ? 15 : 3), maxIterations: large ? 5 : 100)
        for cipher in [AEADCipher.aes256gcm, .xchacha20poly1305] {
            let files = ProtectedFiles(keys: classKeys, options: .init(cipher: cipher))
            for c in ProtectionClass.allCases {
                let label = "\(mib) MiB, \(c.name), \(cipher)"
                let path = "\(scratchDirectory)/sequential-\(mib)-\(c.name)-\(cipher)"
                Benchmark("sequential write \(label)", configuration: config) { benchmark in
                    try? FileManager.default.removeItem(atPath: path)
                    benchmark.startMeasurement()
                    try writeSequentially(files, path, c, mib: mib)
                } teardown: {
                    try? FileManager.default.removeItem(atPath: path)
                }
                Benchmark("sequential read \(label)", configuration: config) { benchmark in
                    let h = try files.open(path)
                    var offset: Int64 = 0
                    while case let n = try h.read(into: megabyte, at: offset), n > 0 { offset += Int64(n) }
                    h.close()
                    guard offset == Int64(mib) << 20 else { fail("read \(offset) bytes of \(mib) MiB back from \(path)") }
                } setup: {
                    try writeSequentially(files, path, c, mib: mib)
                } teardown: {
                    try? FileManager.default.removeItem(atPath: path)
                }
            }
        }
    }
}
