// swift-tools-version: 6.1
// swift-data-protection: Apple-style Data Protection for files on Linux.
//
// Layers (dependencies point down only):
//   dpctl → DataProtection → { KernelKeyring, FileCoordination, ProtectionCrypto } → C shims
import PackageDescription

let package = Package(
    name: "swift-data-protection",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DataProtection", targets: ["DataProtection"]),
        .library(name: "FileCoordination", targets: ["FileCoordination"]),
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
        // `swift package generate-documentation --target DataProtection` (the DocC catalog, Sources/DataProtection/DataProtection.docc).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // C edges: system libraries through pkg-config, and the syscalls Swift's Glibc lacks.
        .systemLibrary(
            name: "CSodium", pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(
            name: "CKeyutils", pkgConfig: "libkeyutils",
            providers: [.apt(["libkeyutils-dev"])]),
        .target(name: "CShims"),
        // The one lock type (pthread mutex; ThreadSanitizer sees it, unlike Synchronization.Mutex on Linux).
        .target(name: "Locking"),
        // Paths taken apart and compared at the byte "/", as the kernel does (not by Character).
        .target(name: "PathSyntax"),
        // The system layer: the only module that makes file system calls and imports CShims (typed, on swift-system).
        .target(
            name: "SystemLayer",
            dependencies: ["CShims", "PathSyntax", .product(name: "SystemPackage", package: "swift-system")],
            exclude: ["README.md"]),

        // The only importer of libsodium.
        .target(name: "ProtectionCrypto", dependencies: ["CSodium", "Locking"]),
        // Typed Swift over libkeyutils.
        .target(
            name: "KernelKeyring",
            dependencies: ["CKeyutils", .product(name: "Logging", package: "swift-log")],
            exclude: ["README.md"]),
        // NSFileCoordinator-style coordination; independent of the encryption.
        .target(name: "FileCoordination", dependencies: ["Locking", "PathSyntax", "SystemLayer"], exclude: ["README.md"]),
        .target(
            name: "DataProtection",
            dependencies: [
                "ProtectionCrypto", "KernelKeyring", "FileCoordination", "Locking", "PathSyntax", "SystemLayer",
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Domain/README.md", "Container/README.md"]),
        // Measures unlock, key fetch per open, passphrase change at 10 vs 10,000 files, rotation (BENCHMARKS.md).
        .executableTarget(name: "dp-keybench", dependencies: ["DataProtection", "ProtectionCrypto", "KernelKeyring"]),
        .executableTarget(
            name: "dpctl",
            dependencies: [
                "DataProtection",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            exclude: ["README.md"]),

        // Measurement drivers behind BENCHMARKS.md (throughput against raw libsodium, lock-check cost).
        .executableTarget(
            name: "dp-bench", dependencies: ["DataProtection", "ProtectionCrypto", "CSodium", "CShims"]),
        // A long-running service that embeds the library as an app would (Examples/BackgroundService).
        .executableTarget(name: "dp-example-service", dependencies: ["DataProtection", "Locking"], path: "Examples/BackgroundService"),
        // The main job's tour of the library (scripts/walkthrough).
        .executableTarget(name: "library-tour", dependencies: ["DataProtection"], path: "Examples/LibraryTour"),

        // Test rigs: helpers and worker processes the tests run, under Tests/Support (not shipped).
        // Finding a built helper product next to the test bundle (every test target that runs one).
        .target(name: "TestSupport", path: "Tests/Support/TestSupport"),
        // Runs a command with add_key/keyctl/request_key refused by seccomp (hostile-environment tool).
        .executableTarget(name: "keyctl-deny", path: "Tests/Support/keyctl-deny"),
        // Prints whether the kernel keyring works here; KernelKeyringTests run it under keyctl-deny.
        .executableTarget(
            name: "keyring-probe",
            dependencies: ["KernelKeyring", "CKeyutils", .product(name: "Logging", package: "swift-log")],
            path: "Tests/Support/keyring-probe"),
        // Holds a container in use from another process (ContainerPurgeTests).
        .executableTarget(
            name: "container-hold", dependencies: ["DataProtection", "ProtectionCrypto"], path: "Tests/Support/container-hold"),
        // The crash harness's operations and invariants (issue 8), shared by crash-worker and the power-loss tests.
        .target(name: "CrashScenarios", dependencies: ["DataProtection", "ProtectionCrypto", "SystemLayer"], path: "Tests/Support/CrashScenarios"),
        // Performs one crash-harness operation so CrashHarnessTests can SIGKILL it at any point.
        .executableTarget(
            name: "crash-worker", dependencies: ["CrashScenarios", "DataProtection"], path: "Tests/Support/crash-worker"),
        // A real process for FileCoordination's cross-process tests and benchmarks.
        .executableTarget(
            name: "coordination-worker", dependencies: ["FileCoordination", "CShims", "PathSyntax"],
            path: "Tests/Support/coordination-worker"),
        // The guarantee matrix's drivers (one per ProtectedDataEntryPoint), for its test and its worker process.
        .target(name: "GuaranteeMatrix", dependencies: ["DataProtection"], path: "Tests/Support/GuaranteeMatrix"),
        // Runs one guarantee-matrix cell in another process (GuaranteeMatrixTests).
        .executableTarget(name: "guarantee-worker", dependencies: ["GuaranteeMatrix", "DataProtection"], path: "Tests/Support/guarantee-worker"),

        .testTarget(
            name: "ProtectionCryptoTests", dependencies: ["ProtectionCrypto"],
            resources: [.copy("Vectors")]),
        .testTarget(
            name: "KernelKeyringTests",
            dependencies: [
                "KernelKeyring", "keyring-probe", "keyctl-deny", "TestSupport", .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "FileCoordinationTests", dependencies: ["FileCoordination", "coordination-worker", "PathSyntax", "SystemLayer", "TestSupport"]),
        .testTarget(
            name: "DataProtectionTests",
            dependencies: [
                "DataProtection", "ProtectionCrypto", "KernelKeyring", "FileCoordination", "container-hold", "coordination-worker", "CrashScenarios",
                "Locking", "PathSyntax", "SystemLayer", "GuaranteeMatrix", "guarantee-worker", "TestSupport",
            ],
            resources: [.copy("Fixtures")]),
        // Runs the built dpctl (and keyctl-deny) in a private session keyring; needs `swift build` first.
        .testTarget(
            name: "DpctlTests",
            dependencies: [
                "DataProtection", "KernelKeyring", "Locking", "dpctl", "dp-example-service", "crash-worker", "keyctl-deny",
                "TestSupport",
            ]),
    ]
)
