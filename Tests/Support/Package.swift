// swift-tools-version: 6.1
// The test rigs of swift-data-protection: the worker processes and helpers its tests run, a package of their own on
// the library by path (like Benchmarks and Examples), so that a plain `swift build` of the library builds none of them.
//
// The library's test targets depend on the TestSupport product, and TestSupport on every rig executable below: SwiftPM
// 6.3 builds an executable that is reached only through another package's library with the tests
// (`swift build --build-tests`, `swift test`), while it builds every target of the root package, and every executable
// product a root target names (test targets included), in a plain `swift build`. The rigs here use only the library's
// public products. GuaranteeMatrix, guarantee-worker, CrashScenarios and crash-worker (in this folder) stay
// targets of the library package: they reach package-level test hooks (DataProtection's AdmissionProbe, and the
// file-system seam the crash worker kills processes through), which another package cannot see, so a plain
// `swift build` still builds those four.
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
        .library(name: "TestSupport", targets: ["TestSupport"]),
    ],
    dependencies: [
        .package(name: "swift-data-protection", path: "../../"),
    ],
    targets: [
        // Finding a built rig next to the test bundle; depending on it builds every rig with the tests.
        .target(
            name: "TestSupport",
            dependencies: ["keyctl-deny", "keyring-probe", "container-hold", "coordination-worker"],
            path: "TestSupport"),
        // Runs a command with add_key/keyctl/request_key refused by seccomp (hostile-environment tool).
        .executableTarget(name: "keyctl-deny", path: "keyctl-deny"),
        // Prints whether the kernel keyring works here; KernelKeyringTests run it under keyctl-deny.
        .executableTarget(name: "keyring-probe", dependencies: [library("KernelKeyring")], path: "keyring-probe"),
        // Holds a container in use from another process (ContainerPurgeTests).
        .executableTarget(
            name: "container-hold", dependencies: [library("DataProtection"), library("ProtectionCrypto")], path: "container-hold"),
        // A real process for the cross-process coordination tests (its benchmark drivers: Benchmarks/Drivers/dp-coordbench).
        .executableTarget(name: "coordination-worker", dependencies: [library("FileCoordination")], path: "coordination-worker"),
    ]
)
