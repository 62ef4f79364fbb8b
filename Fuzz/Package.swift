// swift-tools-version: 6.1
// libFuzzer targets for swift-data-protection's parsers (a separate package with
// plain targets, as libFuzzer needs). Build and run with Fuzz/run (see Fuzz/README.md).
// The keybag and protected-file harnesses are the root package's FuzzHarnesses product (on
// DataProtectionFormat's public parser), which FuzzRegressionTests replays the corpora through.
import PackageDescription

let package = Package(
    name: "dp-fuzz",
    dependencies: [.package(name: "swift-data-protection", path: "../")],
    targets: [
        .target(name: "CFuzz"),
        // Writing seeds, and the container path harness (still linked into the tests by a symbolic link).
        .target(name: "FuzzSupport", dependencies: [
            .product(name: "DataProtection", package: "swift-data-protection"),
            .product(name: "ProtectionCrypto", package: "swift-data-protection"),
        ]),
        .executableTarget(name: "FuzzHeader", dependencies: [
            "FuzzSupport", "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection"),
        ]),
        .executableTarget(name: "FuzzChunks", dependencies: [
            "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection"),
        ]),
        .executableTarget(name: "FuzzKeybag", dependencies: [
            "FuzzSupport", "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection"),
        ]),
        .executableTarget(name: "FuzzPath", dependencies: ["FuzzSupport", "CFuzz"]),
    ]
)
