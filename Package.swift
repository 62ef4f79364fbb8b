// swift-tools-version: 6.1
// swift-data-protection: Apple-style Data Protection for files on Linux.
//
// Layers (dependencies point down only):
//   dpctl → DataProtection → { DataProtectionFormat, KernelKeyring, FileCoordination } → { SystemLayer, ProtectionCrypto } → C shims
// A plain `swift build` builds these and, of the rigs, only the four that reach package-level test hooks (below).
// The other test rigs (Tests/Support), the examples (Examples) and the benchmarks (Benchmarks) are packages of their
// own on this one by path; the first two are dependencies of the test targets only, which SwiftPM does not resolve for
// packages that depend on this one (Fuzz, Benchmarks, an app). SwiftPM builds every target of this package in a
// plain build.
import PackageDescription

/// A product of the test rigs' package (Tests/Support): TestSupport, whose dependents get every rig built with them.
func rigs(_ name: String) -> Target.Dependency { .product(name: name, package: "Support") }

let package = Package(
    name: "swift-data-protection",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DataProtection", targets: ["DataProtection"]),
        // The protected-file, keybag and journal formats, parsing and encoding only (the fuzzers' entry point).
        .library(name: "DataProtectionFormat", targets: ["DataProtectionFormat"]),
        // Test rig, not an API: the fuzz harnesses, a product only so that the Fuzz package can link them.
        .library(name: "FuzzHarnesses", targets: ["FuzzHarnesses"]),
        .library(name: "FileCoordination", targets: ["FileCoordination"]),
        // Protected SQLite databases: a VFS over protected files, and the connection that opens one with a class.
        .library(name: "DataProtectionSQLite", targets: ["DataProtectionSQLite"]),
        // Secrets and primitives that appear in DataProtection's API (SecretBytes, ClassKey material).
        .library(name: "ProtectionCrypto", targets: ["ProtectionCrypto"]),
        // The kernel keyring, for embedders that manage session keyrings themselves (and the benchmarks).
        .library(name: "KernelKeyring", targets: ["KernelKeyring"]),
        .executable(name: "dpctl", targets: ["dpctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        // The examples (their own package, on this one by path): only DpctlTests use it, to run the example service.
        .package(path: "Examples"),
        // The test rigs (their own package under Tests/Support, on this one by path): only the test targets use it.
        .package(path: "Tests/Support"),
    ],
    targets: [
        // C edges: system libraries through pkg-config, and the syscalls Swift's Glibc lacks.
        .systemLibrary(
            name: "CSodium", pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(
            name: "CKeyutils", pkgConfig: "libkeyutils",
            providers: [.apt(["libkeyutils-dev"])]),
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "CShims"),
        // The one lock type (pthread mutex; ThreadSanitizer sees it, unlike Synchronization.Mutex on Linux).
        .target(name: "Locking", exclude: ["README.md"]),
        // Paths taken apart and compared at the byte "/", as the kernel does (not by Character).
        .target(name: "PathSyntax", exclude: ["README.md"]),
        // The system layer: the only module that makes file system calls and imports CShims (typed, on swift-system).
        .target(
            name: "SystemLayer",
            dependencies: ["CShims", "PathSyntax", .product(name: "SystemPackage", package: "swift-system")],
            exclude: ["README.md"]),

        // The only importer of libsodium.
        .target(name: "ProtectionCrypto", dependencies: ["CSodium", "Locking"], exclude: ["README.md"]),
        // Typed Swift over libkeyutils.
        .target(
            name: "KernelKeyring",
            dependencies: ["CKeyutils", .product(name: "Logging", package: "swift-log")],
            exclude: ["README.md"]),
        // NSFileCoordinator-style coordination; independent of the encryption.
        .target(name: "FileCoordination", dependencies: ["Locking", "PathSyntax", "SystemLayer"], exclude: ["README.md"]),
        // The pure format: header, chunk layout, keybag and journal encodings; no I/O, no keys held.
        .target(name: "DataProtectionFormat", dependencies: ["ProtectionCrypto"], exclude: ["README.md"]),
        .target(
            name: "DataProtection",
            dependencies: [
                "DataProtectionFormat", "ProtectionCrypto", "KernelKeyring", "FileCoordination", "Locking", "PathSyntax", "SystemLayer",
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Domain/README.md", "Container/README.md"]),
        // Protected databases: SQLite's edge (the only importer of CSQLite), on DataProtection's files and SystemLayer.
        .target(
            name: "DataProtectionSQLite",
            dependencies: ["DataProtection", "CSQLite", "Locking", "SystemLayer"],
            exclude: ["README.md"]),
        .executableTarget(
            name: "dpctl",
            dependencies: [
                "DataProtection",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            exclude: ["README.md"]),

        // The fuzz harnesses (keybag parser and unwrapping, protected-file reads, container paths through the package-level
        // Confinement), shared by Fuzz/ (through the product FuzzHarnesses) and FuzzRegressionTests, so the replay
        // applies the fuzzers' own oracles.
        .target(
            name: "FuzzHarnesses", dependencies: ["DataProtection", "DataProtectionFormat", "ProtectionCrypto", "SystemLayer"],
            path: "Tests/Support/FuzzHarnesses"),
        // The rigs kept in this package (under Tests/Support, whose other rigs are a package of their own), because they
        // reach package-level test hooks another package cannot see: guarantee-worker checks admissions through
        // DataProtection's AdmissionProbe; crash-worker and the power-loss tests run the crash scenarios through the
        // file-system seam (package-level initialisers that take `io:`). A plain `swift build` builds these four too.
        // The matrix's drivers (one per ProtectedDataEntryPoint), for its test and its worker process.
        .target(name: "GuaranteeMatrix", dependencies: ["DataProtection", "DataProtectionSQLite"], path: "Tests/Support/GuaranteeMatrix"),
        // Runs one guarantee-matrix cell in another process (GuaranteeMatrixTests).
        .executableTarget(name: "guarantee-worker", dependencies: ["GuaranteeMatrix", "DataProtection"], path: "Tests/Support/guarantee-worker"),
        // The crash harness's operations and invariants (issue 8), shared by crash-worker and the power-loss tests.
        .target(
            name: "CrashScenarios", dependencies: ["DataProtection", "DataProtectionSQLite", "ProtectionCrypto", "SystemLayer"],
            path: "Tests/Support/CrashScenarios"),
        // Performs one crash-harness operation so CrashHarnessTests can SIGKILL it at any point (through the seam).
        .executableTarget(
            name: "crash-worker", dependencies: ["CrashScenarios", "DataProtection", "SystemLayer"], path: "Tests/Support/crash-worker"),

        .testTarget(
            name: "ProtectionCryptoTests", dependencies: ["ProtectionCrypto"],
            resources: [.copy("Vectors")]),
        .testTarget(
            name: "KernelKeyringTests",
            dependencies: [
                "KernelKeyring", rigs("TestSupport"), .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "FileCoordinationTests", dependencies: ["FileCoordination", "PathSyntax", "SystemLayer", rigs("TestSupport")]),
        .testTarget(
            name: "DataProtectionTests",
            dependencies: [
                "DataProtection", "DataProtectionFormat", "ProtectionCrypto", "KernelKeyring", "FileCoordination", "Locking", "PathSyntax", "SystemLayer",
                "DataProtectionSQLite", "CSQLite", "GuaranteeMatrix", "guarantee-worker", "CrashScenarios", "crash-worker", "FuzzHarnesses", rigs("TestSupport"),
            ],
            resources: [.copy("Fixtures")]),
        // Runs the built dpctl (and keyctl-deny) in a private session keyring; needs `swift build` first.
        .testTarget(
            name: "DpctlTests",
            dependencies: [
                "DataProtection", "DataProtectionFormat", "KernelKeyring", "Locking", "dpctl", "crash-worker", rigs("TestSupport"),
                .product(name: "ExamplePrograms", package: "Examples"),
            ]),
    ]
)
