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
        .executable(name: "dpctl", targets: ["dpctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
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

        // The only importer of libsodium.
        .target(name: "ProtectionCrypto", dependencies: ["CSodium"]),
        // Typed Swift over libkeyutils.
        .target(
            name: "KernelKeyring",
            dependencies: ["CKeyutils", .product(name: "Logging", package: "swift-log")]),
        // NSFileCoordinator-style coordination; independent of the encryption.
        .target(name: "FileCoordination", dependencies: ["CShims"], exclude: ["README.md"]),
        .target(
            name: "DataProtection",
            dependencies: [
                "ProtectionCrypto", "KernelKeyring", "FileCoordination", "CShims",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // A real process for FileCoordination's cross-process tests and benchmarks.
        .executableTarget(name: "coordination-worker", dependencies: ["FileCoordination", "CShims"]),
        .executableTarget(
            name: "dpctl",
            dependencies: [
                "DataProtection",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),

        .testTarget(
            name: "ProtectionCryptoTests", dependencies: ["ProtectionCrypto"],
            resources: [.copy("Vectors")]),
        .testTarget(name: "KernelKeyringTests", dependencies: ["KernelKeyring"]),
        .testTarget(name: "FileCoordinationTests", dependencies: ["FileCoordination", "coordination-worker"]),
        .testTarget(
            name: "DataProtectionTests", dependencies: ["DataProtection", "ProtectionCrypto"],
            resources: [.copy("Fixtures")]),
        .testTarget(name: "DpctlTests", dependencies: ["DataProtection"]),
    ]
)
