// swift-tools-version: 6.0
//
// An example of cuff in your own tests: a package that depends on cuff (here by path, from inside
// the cuff repository; yours would name cuff's Git URL) and uses the CuffTesting product only.
// Building it compiles cuff's pure targets and runtime, none of its SQLite, crypto or SwiftNIO.
// SPDX-License-Identifier: GPL-2.0-or-later

import PackageDescription

let package = Package(
    name: "ReplayInTests",
    dependencies: [
        .package(name: "cuff", path: "../..")
    ],
    targets: [
        .testTarget(
            name: "ReplayInTestsTests",
            dependencies: [.product(name: "CuffTesting", package: "cuff")]
        )
    ]
)
