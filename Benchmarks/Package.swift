// swift-tools-version: 6.1
// Benchmarks for swift-data-protection, kept apart so the library never depends on the benchmark package.
//
//   cd Benchmarks && swift package benchmark                      # run everything (see ../BENCHMARKS.md, "How to run")
//   swift package benchmark thresholds check                      # fail (exit 2) when allocation counts regress
import PackageDescription

let package = Package(
    name: "swift-data-protection-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-data-protection", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.0", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "CoordinationBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "FileCoordination", package: "swift-data-protection"),
            ],
            path: "Benchmarks/CoordinationBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // What the protected-file and key benchmarks share: sizes from the environment, scratch files, thresholds.
        .target(
            name: "BenchmarkSupport",
            dependencies: [.product(name: "Benchmark", package: "benchmark")],
            path: "Benchmarks/BenchmarkSupport"
        ),
        // Protected-file I/O with in-memory class keys: sequential, many small files, random 4 KiB, coordinated.
        .executableTarget(
            name: "ProtectedFileBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "DataProtection", package: "swift-data-protection"),
                .product(name: "FileCoordination", package: "swift-data-protection"),
                .product(name: "ProtectionCrypto", package: "swift-data-protection"),
            ],
            path: "Benchmarks/ProtectedFileBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // A real domain in the kernel keyring (own session keyring): key fetch, unwrap, unlock, lock with open handles.
        .executableTarget(
            name: "KeyBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "DataProtection", package: "swift-data-protection"),
                .product(name: "ProtectionCrypto", package: "swift-data-protection"),
            ],
            path: "Benchmarks/KeyBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
