// swift-tools-version: 6.1
//
// cuff's benchmarks, a package of their own on ordo-one's package-benchmark (which counts heap
// allocations through its malloc interposer): `swift package --package-path Benchmarks benchmark`.
// Kept out of the main package so that building and testing cuff needs none of it.
// SPDX-License-Identifier: GPL-2.0-or-later

import PackageDescription

let package = Package(
    name: "CuffBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        // Named: the identity of a path dependency is otherwise its directory's name (any clone's).
        .package(name: "cuff", path: ".."),
        // Only the malloc interposer: the ARC runtime interposer (a default trait) is not needed here.
        .package(url: "https://github.com/ordo-one/package-benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // Decoding, the replay pipeline in process, its stages, and the cost of one short session.
        .executableTarget(
            name: "Replay",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "BloodPressure", package: "cuff"),
                .product(name: "Capture", package: "cuff"),
                .product(name: "CuffSession", package: "cuff"),
            ],
            path: "Benchmarks/Replay",
            swiftSettings: [.swiftLanguageMode(.v5)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        // The SQLite store, plain and encrypted, and shipping an outbox to PostgreSQL.
        .executableTarget(
            name: "Store",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "BloodPressure", package: "cuff"),
                .product(name: "CuffSession", package: "cuff"),
                .product(name: "Sinks", package: "cuff"),
                .product(name: "PostgresStore", package: "cuff"),
                .product(name: "PostgresTestCluster", package: "cuff"),
            ],
            path: "Benchmarks/Store",
            swiftSettings: [.swiftLanguageMode(.v5)],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
    ]
)
