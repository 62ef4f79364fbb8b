// swift-tools-version: 6.1
// swift-data-protection: Apple-style Data Protection for files on Linux.
//
// Layers (dependencies point down only):
//   dpctl → DataProtection → DataProtectionContainers → DataProtectionFiles → DataProtectionKeys
//         → { DataProtectionFormat, KernelKeyring, FileCoordination } → { SystemLayer, ProtectionCrypto } → C shims
// DataProtection is the umbrella a newcomer imports: the main path (open a domain, unlock, files, lock), the domain's
// life (ProtectionDomain, rotation) and `@_exported import`s of the three modules below it. Containers sit below the
// umbrella, not above it, because they need class keys and protected files but never a ProtectionDomain (they take a
// domain's `keys`); so `import DataProtection` keeps reaching containers too, and an app that wants only containers
// and files can depend on DataProtectionContainers alone (its own product).
// A plain `swift build` builds these and dpctl, nothing else (SwiftPM builds every non-test target of this package in
// a plain build; scripts/module-graph fails if anything else appears here). The test rigs (Tests/Support), the examples
// (Examples) and the benchmarks (Benchmarks) are packages of their own on this one by path; the first two are
// dependencies of the test targets only, which SwiftPM does not resolve for packages that depend on this one (Fuzz,
// Benchmarks, an app). Rigs that need a test hook (the file-system seam, the admission probe, the keybag's and the
// confinement's internals) reach it as testing SPI: `@_spi(Testing) import DataProtection`.
import PackageDescription

/// A product of the test rigs' package (Tests/Support): TestSupport, whose dependents get every rig built with them.
func rigs(_ name: String) -> Target.Dependency { .product(name: name, package: "Support") }

let package = Package(
    name: "swift-data-protection",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "DataProtection", targets: ["DataProtection"]),
        // App containers (Documents, Library, tmp, a sealed bundle) on protected files, without the domain's life cycle.
        .library(name: "DataProtectionContainers", targets: ["DataProtectionContainers"]),
        // Foundation's shapes (Data.write(to:), Data(contentsOf:), FileHandle, FileManager, CocoaError) on an app context,
        // so iOS file code ports by changing its imports and its set-up.
        .library(name: "DataProtectionFoundation", targets: ["DataProtectionFoundation"]),
        // The protected-file, keybag and journal formats, parsing and encoding only (the fuzzers' entry point).
        .library(name: "DataProtectionFormat", targets: ["DataProtectionFormat"]),
        .library(name: "FileCoordination", targets: ["FileCoordination"]),
        // Protected SQLite databases: a VFS over protected files, and the connection that opens one with a class.
        .library(name: "DataProtectionSQLite", targets: ["DataProtectionSQLite"]),
        // GRDB's DatabaseQueue and DatabasePool on protected databases (the only target that depends on GRDB).
        .library(name: "DataProtectionGRDB", targets: ["DataProtectionGRDB"]),
        // Secrets and primitives that appear in DataProtection's API (SecretBytes, ClassKey material).
        .library(name: "ProtectionCrypto", targets: ["ProtectionCrypto"]),
        // The kernel keyring, for embedders that manage session keyrings themselves (and the benchmarks).
        .library(name: "KernelKeyring", targets: ["KernelKeyring"]),
        // A domain as a swift-service-lifecycle Service: graceful shutdown retires its keys and stops its listener.
        .library(name: "DataProtectionService", targets: ["DataProtectionService"]),
        .executable(name: "dpctl", targets: ["dpctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // swift-metrics: the dataprotection_* counters, timers and meters (DataProtectionTelemetry); MetricsTestKit in tests.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        // GRDB, for the DataProtectionGRDB product only; it links the system libsqlite3, as CSQLite does.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // swift-service-lifecycle, for the DataProtectionService product only.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
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
        // OpenSSL 3's libcrypto: the chunk cipher's AES-256-GCM (issue 23; ProtectionCrypto is its only importer).
        .systemLibrary(
            name: "COpenSSL", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CKeyutils", pkgConfig: "libkeyutils",
            providers: [.apt(["libkeyutils-dev"])]),
        .systemLibrary(
            name: "CTSS2", pkgConfig: "tss2-esys",
            providers: [.apt(["libtss2-dev"])]),
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "CShims"),
        // AES-256-GCM on VAES and VPCLMULQDQ, the chunk cipher's fast path (issue 23; ProtectionCrypto is its only importer).
        .target(name: "CAESGCM"),
        // The one lock type (pthread mutex; ThreadSanitizer sees it, unlike Synchronization.Mutex on Linux).
        .target(name: "Locking", exclude: ["README.md"]),
        // Paths taken apart and compared at the byte "/", as the kernel does (not by Character).
        .target(name: "PathSyntax", exclude: ["README.md"]),
        // The system layer: the only module that makes file system calls and imports CShims (typed, on swift-system).
        .target(
            name: "SystemLayer",
            dependencies: ["CShims", "PathSyntax", .product(name: "SystemPackage", package: "swift-system")],
            exclude: ["README.md"]),

        // The only importer of libsodium, and of the AES-256-GCM chunk cipher's two implementations (CAESGCM, OpenSSL's libcrypto).
        .target(name: "ProtectionCrypto", dependencies: ["CSodium", "CAESGCM", "COpenSSL", "Locking"], exclude: ["README.md"]),
        // The only importer of tpm2-tss (ESAPI): HMAC keys inside a TPM 2.0, no tss2 type in its API.
        .target(name: "TPMBinding", dependencies: ["CTSS2", "ProtectionCrypto"], exclude: ["README.md"]),
        // Typed Swift over libkeyutils.
        .target(
            name: "KernelKeyring",
            dependencies: ["CKeyutils", .product(name: "Logging", package: "swift-log")],
            exclude: ["README.md"]),
        // A domain's logger and cached metric objects, carried to every layer that logs or counts (issue 25).
        .target(
            name: "DataProtectionTelemetry",
            dependencies: [.product(name: "Logging", package: "swift-log"), .product(name: "CoreMetrics", package: "swift-metrics")],
            exclude: ["README.md"]),
        // NSFileCoordinator-style coordination; independent of the encryption.
        .target(
            name: "FileCoordination",
            dependencies: ["Locking", "PathSyntax", "SystemLayer", "DataProtectionTelemetry", .product(name: "Logging", package: "swift-log")],
            exclude: ["README.md"]),
        // The pure format: header, chunk layout, keybag and journal encodings; no I/O, no keys held.
        .target(name: "DataProtectionFormat", dependencies: ["ProtectionCrypto"], exclude: ["README.md"]),
        // Domain: the keybag, the device secret, class keys and their one admission, the live lock.
        .target(
            name: "DataProtectionKeys",
            dependencies: [
                "DataProtectionFormat", "ProtectionCrypto", "KernelKeyring", "Locking", "PathSyntax", "SystemLayer", "TPMBinding", "DataProtectionTelemetry",
            ],
            exclude: ["README.md"]),
        // Protected files and handles, with the chunk pipeline (Pipeline/); keys come from DataProtectionKeys.
        .target(
            name: "DataProtectionFiles",
            dependencies: [
                "DataProtectionKeys", "DataProtectionFormat", "ProtectionCrypto", "FileCoordination", "Locking", "PathSyntax", "SystemLayer",
                "DataProtectionTelemetry",
                // FileDescriptor, the descriptor type of its API (re-exported).
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            exclude: ["README.md"]),
        // App containers on protected files: layout, confinement, backup, purge, preferences, the sealed bundle.
        .target(
            name: "DataProtectionContainers",
            dependencies: [
                "DataProtectionKeys", "DataProtectionFiles", "DataProtectionFormat", "ProtectionCrypto", "FileCoordination", "Locking",
                "PathSyntax", "SystemLayer", "DataProtectionTelemetry",
            ],
            exclude: ["README.md"]),
        // The umbrella: the main path, the domain's life cycle, and the three modules below it re-exported.
        .target(
            name: "DataProtection",
            dependencies: [
                "DataProtectionKeys", "DataProtectionFiles", "DataProtectionContainers", "DataProtectionFormat", "ProtectionCrypto",
                "KernelKeyring", "FileCoordination", "Locking", "PathSyntax", "SystemLayer", .product(name: "Logging", package: "swift-log"),
                "DataProtectionTelemetry", .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            exclude: ["README.md"]),
        // Foundation-shaped calls on the app context's container, with Apple's names, shapes and errors (issue 22).
        .target(name: "DataProtectionFoundation", dependencies: ["DataProtection", "FileCoordination", "Locking"], exclude: ["README.md"]),
        // Protected databases: SQLite's edge (the only importer of CSQLite), on the protected-file layer and SystemLayer.
        .target(
            name: "DataProtectionSQLite",
            dependencies: ["DataProtection", "DataProtectionKeys", "DataProtectionFiles", "CSQLite", "Locking", "SystemLayer"],
            exclude: ["README.md"]),
        // GRDB on protected databases: its connections open through DataProtectionSQLite's VFS (no C import of its own).
        .target(
            name: "DataProtectionGRDB",
            dependencies: ["DataProtection", "DataProtectionSQLite", .product(name: "GRDB", package: "GRDB.swift")],
            exclude: ["README.md"]),
        // A domain run as a Service in a ServiceGroup (the only target that depends on swift-service-lifecycle).
        .target(
            name: "DataProtectionService",
            dependencies: [
                "DataProtection", "Locking", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["README.md"]),
        .executableTarget(
            name: "dpctl",
            dependencies: [
                "DataProtection", "DataProtectionSQLite",
                .product(name: "ArgumentParser", package: "swift-argument-parser"), .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["README.md"]),

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
                "DataProtection", "DataProtectionKeys", "DataProtectionFiles", "DataProtectionContainers", "DataProtectionFormat", "ProtectionCrypto",
                "KernelKeyring", "FileCoordination", "Locking", "PathSyntax", "SystemLayer", "TPMBinding", "DataProtectionSQLite", "CSQLite",
                "DataProtectionGRDB", .product(name: "GRDB", package: "GRDB.swift"), "DataProtectionTelemetry",
                .product(name: "Logging", package: "swift-log"), .product(name: "MetricsTestKit", package: "swift-metrics"),
                rigs("TestSupport"), rigs("GuaranteeMatrix"), rigs("CrashScenarios"), rigs("FuzzHarnesses"),
            ],
            resources: [.copy("Fixtures")]),
        // Its own target: importing DataProtectionFoundation changes what `Data(contentsOf:)` and `data.write(to:)` mean in
        // every file of the importing module, so DataProtectionTests' plain-file helpers stay Foundation's.
        .testTarget(
            name: "DataProtectionFoundationTests",
            dependencies: ["DataProtectionFoundation", "DataProtection", "DataProtectionFormat", "KernelKeyring", "ProtectionCrypto", rigs("TestSupport")],
            // The iOS original of the port test, kept beside its port and read by PortTests, not compiled.
            exclude: ["Port/NotesStore.ios.swift.txt"]),
        // Runs the built dpctl (and keyctl-deny) in a private session keyring; needs `swift build` first.
        .testTarget(
            name: "DpctlTests",
            dependencies: [
                "DataProtection", "DataProtectionKeys", "DataProtectionFiles", "DataProtectionFormat", "KernelKeyring", "Locking", "TPMBinding", "dpctl", rigs("TestSupport"),
                "DataProtectionSQLite", "DataProtectionService", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"), .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "ExamplePrograms", package: "Examples"),
            ]),
    ]
)
