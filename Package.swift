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
        // The examples (their own package, on this one by path): only DpctlTests use it, to run the example service.
        .package(path: "Examples"),
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

        // The only importer of libsodium.
        .target(name: "ProtectionCrypto", dependencies: ["CSodium", "Locking"]),
        // Typed Swift over libkeyutils.
        .target(
            name: "KernelKeyring",
            dependencies: ["CKeyutils", .product(name: "Logging", package: "swift-log")],
            exclude: ["README.md"]),
        // NSFileCoordinator-style coordination; independent of the encryption.
        .target(name: "FileCoordination", dependencies: ["CShims", "Locking", "PathSyntax"], exclude: ["README.md"]),
        .target(
            name: "DataProtection",
            dependencies: [
                "ProtectionCrypto", "KernelKeyring", "FileCoordination", "CShims", "Locking", "PathSyntax",
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Domain/README.md", "Container/README.md"]),
        .executableTarget(
            name: "dpctl",
            dependencies: [
                "DataProtection",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            exclude: ["README.md"]),

        // Test rigs: helpers and worker processes the tests run, under Tests/Support (not shipped).
        // Finding a built helper product next to the test bundle (every test target that runs one).
        .target(name: "TestSupport", path: "Tests/Support/TestSupport"),
        // Runs a command with add_key/keyctl/request_key refused by seccomp (hostile-environment tool).
        .executableTarget(name: "keyctl-deny", path: "Tests/Support/keyctl-deny"),
        // Prints whether the kernel keyring works here; KernelKeyringTests run it under keyctl-deny.
        .executableTarget(
            name: "keyring-probe",
            dependencies: ["KernelKeyring"],
            path: "Tests/Support/keyring-probe"),
        // Holds a container in use from another process (ContainerPurgeTests).
        .executableTarget(
            name: "container-hold", dependencies: ["DataProtection", "ProtectionCrypto"], path: "Tests/Support/container-hold"),
        // The crash harness's operations and invariants (issue 8), shared by crash-worker and the power-loss tests.
        .target(name: "CrashScenarios", dependencies: ["DataProtection", "ProtectionCrypto"], path: "Tests/Support/CrashScenarios"),
        // Performs one crash-harness operation so CrashHarnessTests can SIGKILL it at any point.
        .executableTarget(
            name: "crash-worker", dependencies: ["CrashScenarios", "DataProtection"], path: "Tests/Support/crash-worker"),
        // A real process for the cross-process coordination tests (its benchmark drivers: Benchmarks/Drivers/dp-coordbench).
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
            name: "FileCoordinationTests", dependencies: ["FileCoordination", "coordination-worker", "PathSyntax", "TestSupport"]),
        .testTarget(
            name: "DataProtectionTests",
            dependencies: [
                "DataProtection", "ProtectionCrypto", "KernelKeyring", "FileCoordination", "container-hold", "coordination-worker", "CrashScenarios",
                "Locking", "PathSyntax", "GuaranteeMatrix", "guarantee-worker", "TestSupport",
            ],
            resources: [.copy("Fixtures")]),
        // Runs the built dpctl (and keyctl-deny) in a private session keyring; needs `swift build` first.
        .testTarget(
            name: "DpctlTests",
            dependencies: [
                "DataProtection", "KernelKeyring", "Locking", "dpctl", "crash-worker", "keyctl-deny", "TestSupport",
                .product(name: "ExamplePrograms", package: "Examples"),
            ]),
    ]
)
