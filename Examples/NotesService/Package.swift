// swift-tools-version: 6.1
// The notes service: an HTTP service on Hummingbird that keeps each user's notes and uploads in a protected container
// (issue 25, item 6). A package of its own, like Examples and Benchmarks, so that neither the library's build nor its
// tests build Hummingbird: scripts/test-notes-service builds and tests it.
//
//   swift build --package-path Examples/NotesService        # notes-service and dpctl (debug)
//   scripts/test-notes-service                              # its tests: the real service, driven over loopback HTTP
import PackageDescription

/// A product of the library package (../../).
func library(_ name: String) -> Target.Dependency { .product(name: name, package: "swift-data-protection") }

let package = Package(
    name: "notes-service",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "notes-service", targets: ["notes-service"]),
    ],
    dependencies: [
        .package(name: "swift-data-protection", path: "../../"),
        // No traits: the service needs neither swift-configuration nor the full-Foundation extras (a shorter build).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        .executableTarget(
            name: "notes-service",
            dependencies: [
                library("DataProtection"), library("DataProtectionService"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // NIOThreadPool: the few container calls that have no async form run there, off the cooperative pool.
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Starts notes-service and dpctl as real processes in a session keyring of its own and drives them with curl.
        // Depending on dpctl's product builds it into this package's build directory, beside notes-service.
        .testTarget(
            name: "NotesServiceTests",
            dependencies: ["notes-service", library("dpctl"), library("KernelKeyring")]),
    ]
)
