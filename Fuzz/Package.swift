// swift-tools-version: 6.1
// libFuzzer targets for swift-data-protection's parsers (a separate package with
// plain targets, as libFuzzer needs). Build and run with Fuzz/run (see Fuzz/README.md).
// The harnesses (keybag, protected file, container paths) are the test rigs' FuzzHarnesses product (Tests/Support,
// which reaches the library's testing SPI), which FuzzRegressionTests replays the corpora through; the targets call
// only the harnesses' public entry points.
import PackageDescription

let package = Package(
    name: "dp-fuzz",
    dependencies: [.package(name: "swift-data-protection-test-support", path: "../Tests/Support")],
    targets: [
        .target(name: "CFuzz"),
        // Writing seeds.
        .target(name: "FuzzSupport"),
        .executableTarget(name: "FuzzHeader", dependencies: [
            "FuzzSupport", "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection-test-support"),
        ]),
        .executableTarget(name: "FuzzChunks", dependencies: [
            "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection-test-support"),
        ]),
        .executableTarget(name: "FuzzKeybag", dependencies: [
            "FuzzSupport", "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection-test-support"),
        ]),
        .executableTarget(name: "FuzzPath", dependencies: [
            "CFuzz", .product(name: "FuzzHarnesses", package: "swift-data-protection-test-support"),
        ]),
    ]
)
