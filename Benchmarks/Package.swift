// swift-tools-version: 6.1
// Benchmarks for swift-data-protection, kept apart so the library never depends on the benchmark package.
//
//   cd Benchmarks && swift package benchmark                      # run everything (see ../BENCHMARKS.md, "How to run")
//   swift package benchmark thresholds check                      # fail (exit 2) when allocation counts regress
import PackageDescription

/// An ordo-one benchmark executable whose sources are in Benchmarks/NAME.
func benchmarkTarget(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(
        name: name,
        dependencies: [.product(name: "Benchmark", package: "benchmark")] + dependencies,
        path: "Benchmarks/\(name)",
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    )
}

/// A product of the library package (../).
func library(_ name: String) -> Target.Dependency { .product(name: name, package: "swift-data-protection") }

let package = Package(
    name: "swift-data-protection-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-data-protection", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.0", traits: ["MallocInterposer"]),
    ],
    targets: [
        benchmarkTarget("CoordinationBenchmarks", [library("FileCoordination")]),
        // What the protected-file and key benchmarks share: sizes from the environment, scratch files, thresholds.
        .target(
            name: "BenchmarkSupport",
            dependencies: [.product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/BenchmarkSupport"
        ),
        // Protected-file I/O with in-memory class keys: sequential, many small files, random 4 KiB, coordinated.
        benchmarkTarget(
            "ProtectedFileBenchmarks",
            ["BenchmarkSupport", library("DataProtection"), library("FileCoordination"), library("ProtectionCrypto")]),
        // A real domain in the kernel keyring (own session keyring): key fetch, unwrap, unlock, lock with open handles.
        benchmarkTarget("KeyBenchmarks", ["BenchmarkSupport", library("DataProtection"), library("ProtectionCrypto"), library("KernelKeyring")]),
    ]
)
