// swift-tools-version: 6.1
// Benchmarks for swift-data-protection, kept apart so the library never depends on the benchmark package.
//
//   cd Benchmarks && swift package benchmark                      # run everything (see ../BENCHMARKS.md, "How to run")
//   swift package benchmark thresholds check                      # fail (exit 2) when allocation counts regress
//   swift build -c release --product dp-bench                     # a measurement driver (Drivers/; BENCHMARKS.md)
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

/// A measurement driver: a plain executable whose sources are in Drivers/NAME (figures in ../BENCHMARKS.md).
func driver(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(name: name, dependencies: dependencies, path: "Drivers/\(name)")
}

/// A product of the library package (../).
func library(_ name: String) -> Target.Dependency { .product(name: name, package: "swift-data-protection") }

let package = Package(
    name: "swift-data-protection-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-data-protection", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.0", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // A bulk-AEAD candidate (issue 23), measured by dp-aead only: BoringSSL's AES-GCM behind Crypto.AES.GCM.
        .package(url: "https://github.com/apple/swift-crypto", exact: "4.5.2"),
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

        // Drivers: whole-process measurements that ordo-one's harness does not fit (interleaved rounds, peers, raw C
        // baselines). They use only the library's public products; the raw baselines call C through this package's own
        // system libraries (the library's CSodium, CKeyutils and CShims are internal to it).
        .systemLibrary(name: "BaselineSodium", path: "Drivers/BaselineSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(
            name: "BaselineKeyutils", path: "Drivers/BaselineKeyutils", pkgConfig: "libkeyutils", providers: [.apt(["libkeyutils-dev"])]),
        .systemLibrary(name: "BaselineOpenSSL", path: "Drivers/BaselineOpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // AES-256-GCM seal and open in memory, one core: libsodium, swift-crypto (BoringSSL), OpenSSL 3.0; key residue.
        driver("dp-aead", [library("ProtectionCrypto"), "BaselineOpenSSL", "BaselineSodium", .product(name: "Crypto", package: "swift-crypto")]),
        // Throughput against raw libsodium, small files, appends, random reads, seal cost, the peers' file operations.
        driver("dp-bench", [library("DataProtection"), library("ProtectionCrypto"), "BaselineSodium"]),
        // Unlock, key fetch per open, passphrase change at 10 vs 10,000 files, rotation, random writes.
        driver("dp-keybench", [library("DataProtection"), library("ProtectionCrypto"), library("KernelKeyring")]),
        // FileCoordination between processes: lock handoff latency and contended throughput.
        driver("dp-coordbench", [library("FileCoordination")]),
        // Protected SQLite databases (issue 21): one workload source (Drivers/dp-sqlbench/Workload.swift) in two
        // executables, as libsqlcipher exports the same sqlite3_* symbols as libsqlite3: plain SQLite and the protected
        // VFS in one, SQLCipher alone in the other (Benchmarks/compare-sqlite runs them interleaved).
        .systemLibrary(name: "BaselineSQLite", path: "Drivers/BaselineSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(
            name: "BaselineSQLCipher", path: "Drivers/BaselineSQLCipher", pkgConfig: "sqlcipher", providers: [.apt(["libsqlcipher-dev"])]),
        driver("dp-sqlbench", [library("DataProtection"), library("DataProtectionSQLite"), library("KernelKeyring"), library("ProtectionCrypto"), "BaselineSQLite"]),
        .executableTarget(name: "dp-sqlbench-cipher", dependencies: ["BaselineSQLCipher"], path: "Drivers/dp-sqlbench-cipher", swiftSettings: [.define("SQLCIPHER")]),
        // KernelKeyring's calls against the raw libkeyutils calls.
        driver("dp-keyringbench", [library("KernelKeyring"), "BaselineKeyutils", .product(name: "Logging", package: "swift-log")]),
    ]
)
