// swift-tools-version: 6.1
// libFuzzer targets for swift-data-protection's parsers (a separate package with
// plain targets, as libFuzzer needs). Build and run with Fuzz/run (see Fuzz/README.md).
import PackageDescription

let package = Package(
    name: "dp-fuzz",
    dependencies: [.package(name: "swift-data-protection", path: "../")],
    targets: [
        .target(name: "CFuzz"),
        .target(name: "FuzzSupport", dependencies: [
            .product(name: "DataProtection", package: "swift-data-protection"),
            .product(name: "ProtectionCrypto", package: "swift-data-protection"),
        ]),
        .executableTarget(name: "FuzzHeader", dependencies: ["FuzzSupport", "CFuzz", .product(name: "DataProtection", package: "swift-data-protection")]),
        .executableTarget(name: "FuzzChunks", dependencies: ["FuzzSupport", "CFuzz", .product(name: "DataProtection", package: "swift-data-protection")]),
        .executableTarget(name: "FuzzKeybag", dependencies: ["FuzzSupport", "CFuzz"]),
        .executableTarget(name: "FuzzPath", dependencies: ["FuzzSupport", "CFuzz"]),
    ]
)
