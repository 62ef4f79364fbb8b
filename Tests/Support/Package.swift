// swift-tools-version: 6.1
// The test rigs of swift-data-protection: the worker processes and helpers its tests run, a package of their own on
// the library by path (like Benchmarks and Examples), so that a plain `swift build` of the library builds none of them.
//
// The library's test targets depend on the TestSupport product, and TestSupport on every rig executable below: SwiftPM
// 6.3 builds an executable that is reached only through another package's library with the tests
// (`swift build --build-tests`, `swift test`), while it builds every target of the root package, and every executable
// product a root target names (test targets included), in a plain `swift build`. The rigs here use the library's public
// products; those that need a test hook (the file-system seam, the admission probe, the keybag's and the confinement's
// internals) import it as testing SPI, `@_spi(Testing) import DataProtection`, as swift-system and swift-nio expose
// theirs, since another package cannot see `package` declarations.
import PackageDescription

/// A product of the library package (../../).
func library(_ name: String) -> Target.Dependency { .product(name: name, package: "swift-data-protection") }

let package = Package(
    name: "swift-data-protection-test-support",
    platforms: [.macOS(.v15)],
    products: [
        // Every rig is an executable product: SwiftPM links a target's executable dependency, before compiling the
        // target, only when a product names it.
        .executable(name: "keyctl-deny", targets: ["keyctl-deny"]),
        .executable(name: "keyring-probe", targets: ["keyring-probe"]),
        .executable(name: "container-hold", targets: ["container-hold"]),
        .executable(name: "coordination-worker", targets: ["coordination-worker"]),
        .executable(name: "guarantee-worker", targets: ["guarantee-worker"]),
        .executable(name: "crash-worker", targets: ["crash-worker"]),
        .executable(name: "unlock-hold", targets: ["unlock-hold"]),
        .executable(name: "service-worker", targets: ["service-worker"]),
        .executable(name: "database-hold", targets: ["database-hold"]),
        .library(name: "TestSupport", targets: ["TestSupport"]),
        // The guarantee matrix's drivers (GuaranteeMatrixTests) and the crash scenarios (PowerLossTests).
        .library(name: "GuaranteeMatrix", targets: ["GuaranteeMatrix"]),
        .library(name: "CrashScenarios", targets: ["CrashScenarios"]),
        // The fuzz harnesses: linked by the Fuzz package's libFuzzer targets and replayed by FuzzRegressionTests.
        .library(name: "FuzzHarnesses", targets: ["FuzzHarnesses"]),
    ],
    dependencies: [
        .package(name: "swift-data-protection", path: "../../"),
        // GRDB, for database-hold's DatabasePool (the root package's GRDB: same URL, one resolution).
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // Finding a built rig next to the test bundle; depending on it builds every rig with the tests.
        .target(
            name: "TestSupport",
            dependencies: [
                "keyctl-deny", "keyring-probe", "container-hold", "coordination-worker", "guarantee-worker", "crash-worker", "unlock-hold",
                "service-worker", "database-hold",
            ],
            path: "TestSupport"),
        // Runs a command with add_key/keyctl/request_key refused by seccomp (hostile-environment tool).
        .executableTarget(name: "keyctl-deny", path: "keyctl-deny"),
        // Prints whether the kernel keyring works here; KernelKeyringTests run it under keyctl-deny.
        .executableTarget(name: "keyring-probe", dependencies: [library("KernelKeyring")], path: "keyring-probe"),
        // Holds a container in use from another process (ContainerPurgeTests).
        .executableTarget(
            name: "container-hold", dependencies: [library("DataProtection"), library("DataProtectionFoundation"), library("ProtectionCrypto")],
            path: "container-hold"),
        // A real process for the cross-process coordination tests (its benchmark drivers: Benchmarks/Drivers/dp-coordbench).
        .executableTarget(name: "coordination-worker", dependencies: [library("FileCoordination")], path: "coordination-worker"),

        // The rigs below reach the library's testing SPI (`@_spi(Testing) import DataProtection`): the file-system seam
        // (initialisers that take `io:`), the admission probe and the entry points' record.
        // The fuzz harnesses (keybag parser and unwrapping, protected-file reads, container paths through the
        // confinement), shared by Fuzz/ (through the product FuzzHarnesses) and FuzzRegressionTests, so the replay
        // applies the fuzzers' own oracles.
        .target(
            name: "FuzzHarnesses", dependencies: [library("DataProtection"), library("DataProtectionFormat"), library("ProtectionCrypto")],
            path: "FuzzHarnesses"),
        // The matrix's drivers (one per ProtectedDataEntryPoint), for its test and its worker process.
        .target(name: "GuaranteeMatrix", dependencies: [library("DataProtection"), library("DataProtectionSQLite")], path: "GuaranteeMatrix"),
        // Unlocks a domain in its own process and stays, for the key-residue scan of a TPM-bound unlock (KeyResidueTests).
        .executableTarget(
            name: "unlock-hold", dependencies: [library("DataProtection"), library("ProtectionCrypto")], path: "unlock-hold"),
        // Holds protected databases (raw and GRDB, classes A and B) with rows in SQLite's page cache, for the
        // plaintext-page scan after a lock (KeyResidueTests).
        .executableTarget(
            name: "database-hold",
            dependencies: [
                library("DataProtection"), library("DataProtectionSQLite"), library("DataProtectionGRDB"), .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "database-hold"),
        // Runs one guarantee-matrix cell in another process (GuaranteeMatrixTests).
        .executableTarget(
            name: "guarantee-worker", dependencies: ["GuaranteeMatrix", library("DataProtection")], path: "guarantee-worker"),
        // The crash harness's operations and invariants (issue 8), shared by crash-worker and the power-loss tests.
        .target(
            name: "CrashScenarios", dependencies: [library("DataProtection"), library("DataProtectionSQLite"), library("ProtectionCrypto")],
            path: "CrashScenarios"),
        // Performs one crash-harness operation so CrashHarnessTests can SIGKILL it at any point (through the seam).
        .executableTarget(name: "crash-worker", dependencies: ["CrashScenarios", library("DataProtection")], path: "crash-worker"),
        // Runs a ServiceGroup with DataProtectionService and a writer; SIGTERM during its writes (ServiceLifecycleTests).
        .executableTarget(
            name: "service-worker", dependencies: [library("DataProtection"), library("DataProtectionService")], path: "service-worker"),
    ]
)
