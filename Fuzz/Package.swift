// swift-tools-version: 6.1
// libFuzzer targets for swift-data-protection's parsers (a separate package with
// plain targets, as libFuzzer needs). Build and run with Fuzz/run (see Fuzz/README.md).
// The harnesses (keybag, protected file, container paths) are the root package's FuzzHarnesses product,
// which FuzzRegressionTests replays the corpora through; the targets call only their public entry points.
import PackageDescription

let package = Package(
    name: "dp-fuzz",
    dependencies: [.package(name: "swift-data-protection", path: "../")],
    targets: [
        .target(name: "CFuzz"),
        // Writing seeds.
        .target(name: "FuzzSupport"),
        .executableTarget(name: "FuzzHeader", dependencies: [
            "FuzzSupport", "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection"),
        ]),
        .executableTarget(name: "FuzzChunks", dependencies: [
            "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection"),
        ]),
        .executableTarget(name: "FuzzKeybag", dependencies: [
            "FuzzSupport", "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection"),
        ]),
        .executableTarget(name: "FuzzPath", dependencies: [
            "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection"),
        ]),
    ]
)
