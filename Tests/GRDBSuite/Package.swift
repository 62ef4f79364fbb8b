// swift-tools-version: 6.1
// GRDB 7.10.0's own test suite (GRDBTests), run against the protected VFS: a test rig, not part of the library.
//
//   scripts/grdb-suite          # copies GRDB's tests into Tests/ (not committed), builds, runs them twice:
//                               # with SQLite's default VFS, and with the protected VFS as this process's default
//
// The test target is GRDB's own, as its manifest declares it (same sources, resources and settings). The rig adds
// two things linked into the test process: `ProtectedDefaultVFS` (a domain in a private session keyring, its VFS made
// the process default with sqlite3_vfs_register(…, 1): the library itself never does that) and `SuiteStartup` (a
// C constructor that installs it before the first test when GRDB_SUITE_VFS=protected).
import PackageDescription

let package = Package(
    name: "GRDBSuite",
    defaultLocalization: "en",  // GRDB's tests have localized resources
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(name: "swift-data-protection", path: "../.."),
    ],
    targets: [
        .systemLibrary(name: "SuiteSQLite", path: "Sources/SuiteSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(
            name: "ProtectedDefaultVFS",
            dependencies: [
                "SuiteSQLite",
                .product(name: "DataProtection", package: "swift-data-protection"),
                .product(name: "DataProtectionSQLite", package: "swift-data-protection"),
                .product(name: "KernelKeyring", package: "swift-data-protection"),
                .product(name: "ProtectionCrypto", package: "swift-data-protection"),
            ]),
        .target(name: "SuiteStartup", dependencies: ["ProtectedDefaultVFS"]),
        .testTarget(
            name: "GRDBTests",
            dependencies: [
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift"),
                "SuiteStartup", "ProtectedDefaultVFS",
            ],
            path: "Tests",
            exclude: ["GRDBTests/getThreadsCount.c"],
            resources: [
                .copy("GRDBTests/Betty.jpeg"),
                .copy("GRDBTests/InflectionsTests.json"),
                .copy("GRDBTests/Issue1383.sqlite"),
                .copy("GRDBTests/db.SQLCipher3"),
            ],
            swiftSettings: [
                .define("SQLITE_ENABLE_FTS5"), .define("SQLITE_ENABLE_SNAPSHOT"), .define("SQLITE_DISABLE_SNAPSHOT"),
                .swiftLanguageMode(.v5),
                .enableUpcomingFeature("InferSendableFromCaptures"),
                .enableUpcomingFeature("GlobalActorIsolatedTypesUsability"),
            ]),
    ]
)
