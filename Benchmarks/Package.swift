// swift-tools-version: 6.1
// Benchmarks for swift-data-protection, kept apart so the library never depends on the benchmark package.
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
        )
    ]
)
