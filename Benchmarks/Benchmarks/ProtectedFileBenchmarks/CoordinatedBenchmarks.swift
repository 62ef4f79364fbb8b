// Whole-file protected reads and atomic writes of 4 KiB, with and without a file coordinator.
import Benchmark
import BenchmarkSupport
import DataProtection
import FileCoordination
import Foundation

func coordinatedBenchmarks() {
    let coordinator: FileCoordinator
    do {
        coordinator = FileCoordinator(domain: try CoordinationDomain(root: URL(fileURLWithPath: scratchDirectory, isDirectory: true)))
    } catch { fail("unable to set up a coordination domain in \(scratchDirectory): \(error)") }
    let payload = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(megabyte)[0..<4096])
    let contenders = [("coordinated", ProtectedFiles(keys: classKeys, coordinator: coordinator)), ("uncoordinated", ProtectedFiles(keys: classKeys))]
    for (name, files) in contenders {
        let path = "\(scratchDirectory)/whole-\(name)"
        // An atomic replace: temporary file, fsync, rename, directory fsync (a coordinated forReplacing write when coordinated).
        Benchmark("whole-file 4 KiB atomic write, \(name)", configuration: configuration(.threaded)) { _ in
            try files.write(payload, to: path, protection: .complete)
        } teardown: {
            try? FileManager.default.removeItem(atPath: path)
        }
        Benchmark("whole-file 4 KiB read, \(name)") { _ in
            guard try files.read(path).count == 4096 else { fail("short read of \(path)") }
        } setup: {
            try files.write(payload, to: path, protection: .complete)
        } teardown: {
            try? FileManager.default.removeItem(atPath: path)
        }
    }
}
