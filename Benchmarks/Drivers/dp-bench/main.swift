// dp-bench: the project's measurement drivers (figures in BENCHMARKS.md).
//
//   dp-bench throughput [--size-mib 256] [--rounds 7] [--dir /tmp] [--cipher aes|xchacha]
//       sequential protected-file write/read against raw libsodium, interleaved, and (AES-256-GCM) the library's cipher
//       alone on one core and on both (the backend's raw rate, OpenSSL since issue 23)
//   dp-bench small-files [--files 2000] [--rounds 5] [--dir /tmp] [--fsync]
//       N × 4 KiB protected files against plain files, same durability
//   dp-bench appends [--count 20000] [--bytes 100] [--rounds 7] [--dir /tmp]
//       small appends to a protected file against O_APPEND writes to a plain file, interleaved
//   dp-bench random-reads [--ops 200000] [--rounds 7] [--dir /tmp]
//       random 4 KiB reads of a 64 MiB protected file (the figure `lock-check` measured until a131561)
//   dp-bench seal-cost [--chunks 32768] [--rounds 7]
//       AES-256-GCM per 4 KiB chunk in memory: direct nonces against extended nonces (a subkey per key nonce)
//   dp-bench fileops seq-write|seq-read PATH MIB | small-write|small-put|small-read DIR N | random-read PATH OPS
//       one file operation per process on the dpctl domain's protected files (Benchmarks/compare)
import Foundation

func now() -> Double { var t = timespec(); clock_gettime(CLOCK_MONOTONIC, &t); return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9 }
func median(_ x: [Double]) -> Double { let s = x.sorted(); return s[s.count / 2] }
func usage() -> Never {
    FileHandle.standardError.write(Data("usage: dp-bench throughput|small-files|appends|random-reads|seal-cost|fileops [options] (see the header of Benchmarks/Drivers/dp-bench/main.swift)\n".utf8))
    exit(64)
}

let argv = Array(CommandLine.arguments.dropFirst())
do {
    switch argv.first {
    case "throughput": try throughput(Array(argv.dropFirst()))
    case "seal-cost": try sealCost(Array(argv.dropFirst()))
    case "random-reads": try randomReads(Array(argv.dropFirst()))
    case "small-files": try smallFiles(Array(argv.dropFirst()))
    case "appends": try appends(Array(argv.dropFirst()))
    case "fileops": try fileOps(Array(argv.dropFirst()))
    default: usage()
    }
} catch {
    FileHandle.standardError.write(Data("dp-bench: error: \(error)\n".utf8))
    exit(1)
}
