// dp-keyringbench: KernelKeyring's calls timed against the same libkeyutils calls made directly from C.
//
// Usage: scripts/build-release --package-path Benchmarks dp-keyringbench && Benchmarks/.build/release/dp-keyringbench [iterations]
// (200,000 calls per round by default; seven interleaved rounds, medians in ns per call).
#if canImport(Glibc)
import Glibc
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count <= 1, let iterations = arguments.isEmpty ? 200_000 : Int(arguments[0]), iterations > 0 else {
    print("usage: dp-keyringbench [iterations]")
    exit(64)
}
runBenchmark(iterations: iterations)
