// dp-coordbench: the cross-process figures of BENCHMARKS.md, "File coordination": lock handoff latency and
// contended throughput between real processes (this executable runs copies of itself as the peers).
//
// Usage (scripts/build-release --package-path Benchmarks dp-coordbench, then from Benchmarks/):
//   .build/release/dp-coordbench bench-handoff --root DIR [--rounds 2000] [--bare]
//   .build/release/dp-coordbench bench-contention --root DIR --readers R --writers W [--duration-ms 2000]
// The peers' commands, `handoff` (HandoffCommand.swift) and `loop` (LoopCommand.swift), are run by the two above.
import Foundation

do {
    let options = try Options(CommandLine.arguments.dropFirst())
    switch options.command {
    case "bench-handoff": exit(try BenchDriver.handoff(options))
    case "bench-contention": exit(try BenchDriver.contention(options))
    case "handoff": exit(try HandoffCommand.run(options))
    case "loop": exit(try LoopCommand.run(options))
    default: throw BenchError(description: "unknown command '\(options.command)' (bench-handoff, bench-contention)")
    }
} catch {
    FileHandle.standardError.write(Data("dp-coordbench: error: \(error)\n".utf8))
    exit(2)
}
