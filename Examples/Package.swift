// swift-tools-version: 6.1
// Examples of swift-data-protection, a package of their own (like Benchmarks) so that a plain `swift build` of the
// library builds none of them. They use only the library's public products, as an app would.
//
//   swift build --package-path Examples                             # both examples (debug)
//   scripts/walkthrough                                              # the main job: dpctl, then the library tour
//   scripts/build-release --package-path Examples dp-example-service  # release, as Benchmarks/lock-latency.sh runs it
import PackageDescription

/// A product of the library package (../).
func library(_ name: String) -> Target.Dependency { .product(name: name, package: "swift-data-protection") }

let package = Package(
    name: "swift-data-protection-examples",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "dp-example-service", targets: ["dp-example-service"]),
        .executable(name: "library-tour", targets: ["library-tour"]),
        .executable(name: "dp-container-example", targets: ["dp-container-example"]),
        // For the library's own tests (DpctlTests), which run the example service as a real embedding process.
        .library(name: "ExamplePrograms", targets: ["ExamplePrograms"]),
    ],
    dependencies: [
        .package(name: "swift-data-protection", path: "../"),
    ],
    targets: [
        // A long-running service that embeds the library as an app would (BackgroundService/main.swift).
        .executableTarget(name: "dp-example-service", dependencies: [library("DataProtection")], path: "BackgroundService"),
        // The main job's tour of the library (scripts/walkthrough).
        .executableTarget(name: "library-tour", dependencies: [library("DataProtection")], path: "LibraryTour"),
        // A service where seccomp refuses the kernel keyring: the key-store choice (ContainerService/main.swift).
        .executableTarget(name: "dp-container-example", dependencies: [library("DataProtection")], path: "ContainerService"),
        // The example executables' names, for tests that run them. Depending on this library (not on the executable
        // products) builds them with the dependent's tests only: SwiftPM 6.3 builds an executable product that any
        // target of the root package names, tests included, in a plain `swift build`, but not an executable target
        // reached through another package's library.
        .target(name: "ExamplePrograms", dependencies: ["dp-example-service", "library-tour", "dp-container-example"], path: "ExamplePrograms"),
    ]
)
