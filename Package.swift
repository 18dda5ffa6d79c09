// swift-tools-version: 6.0
//
// cuff — simulate and decode Bluetooth LE blood-pressure cuffs on Linux.
// SPDX-License-Identifier: GPL-2.0-or-later
//
// Layers, bottom to top (data flows one way):
//   bytes → BloodPressure (codecs) → GATT (ATT PDUs, client, server) → CuffSession → Sinks
// CuffCore, BloodPressure, GATT, Omron, CuffSimulator and CuffSession are pure: no Glibc, no sockets, no clocks.
// Transport, CuffRuntime, Capture's file readers, Sinks' store, BlueZ and the CLI are the I/O edges.
// Only BlueZ (and its C module CBlueZ) touches libbluetooth (GPL-2.0-or-later).

import PackageDescription

let package = Package(
    name: "cuff",
    products: [
        .executable(name: "cuff", targets: ["cuff"]),
        .library(name: "BloodPressure", targets: ["BloodPressure"]),
        .library(name: "GATT", targets: ["GATT"]),
        .library(name: "CuffSession", targets: ["CuffSession"]),
        .library(name: "Capture", targets: ["Capture"]),
        .library(name: "Sinks", targets: ["Sinks"]),
        // cuff in your own tests: replay a capture, run a simulated cuff, decode a value.
        .library(name: "CuffTesting", targets: ["CuffTesting"]),
        // What the benchmarks (Benchmarks/, a package of their own) use besides the above.
        .library(name: "CuffCore", targets: ["CuffCore"]),
        .library(name: "PostgresStore", targets: ["PostgresStore"]),
        .library(name: "PostgresTestCluster", targets: ["PostgresTestCluster"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.25.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        // Pure foundations: byte reading/writing, hex, JSON writer, time values, the bearer seam.
        .target(name: "CuffCore", linkerSettings: [.linkedLibrary("m")]),
        // Blood Pressure Service codecs (pure).
        .target(name: "BloodPressure", dependencies: ["CuffCore"]),
        // ATT PDUs, attribute database, GATT client and server state machines (pure).
        .target(name: "GATT", dependencies: ["CuffCore"]),
        // The simulated cuff as a state machine over a GATT server (pure).
        .target(name: "CuffSimulator", dependencies: ["CuffCore", "BloodPressure", "GATT", "Omron"]),
        // Omron's proprietary EEPROM protocol: framing, channels, model profiles, record layouts,
        // the simulated cuff and the central session as state machines (pure).
        .target(name: "Omron", dependencies: ["CuffCore", "BloodPressure"]),
        // The protocol seam (any cuff protocol's central, observer and simulated roles, and the
        // registry that picks one) and the standard measurement session state machine (pure).
        .target(name: "CuffSession", dependencies: ["CuffCore", "BloodPressure", "GATT", "CuffSimulator", "Omron"]),
        // epoll as plain arrays (Glibc's module leaves out <sys/epoll.h>; its event struct is packed).
        .target(name: "CEpoll"),
        // Syscalls wrapped once (the file calls through swift-system), the event loop, Unix
        // SEQPACKET and in-process bearers. Only Transport imports SystemPackage.
        .target(
            name: "Transport",
            dependencies: ["CuffCore", "CEpoll", .product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: [.define("ENABLE_MOCKING", .when(configuration: .debug))]
        ),
        // cuff's swift-log handler (the lines stderr has always shown) and the stderr they go to.
        .target(
            name: "CuffLogging",
            dependencies: ["CuffCore", "Transport", .product(name: "Logging", package: "swift-log")]),
        // Drivers that run the state machines over a bearer with a real clock.
        .target(
            name: "CuffRuntime",
            dependencies: [
                "CuffCore", "BloodPressure", "GATT", "CuffSimulator", "CuffSession", "Transport", "CuffLogging",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // btsnoop / pcap / pcapng readers and writers, HCI → L2CAP → ATT.
        .target(name: "Capture", dependencies: ["CuffCore", "BloodPressure", "GATT", "CuffSession", "Transport"]),
        // cuff replay's engine: a capture replayed into sinks, on one thread, a reader and a writer
        // thread, or (a btsnoop file) several replay threads with the same output.
        .target(
            name: "ReplayEngine",
            dependencies: ["CuffCore", "BloodPressure", "Capture", "CuffSession", "Sinks", "Transport"]),
        // The store's rows: the measurement row type, the schema, and the reader that checks every
        // cell (pure; SQLite itself is the Sinks target's, or the fuzz target's).
        .target(name: "StoreFormat", dependencies: ["CuffCore", "BloodPressure", "CuffSession"]),
        // NDJSON, FHIR R4, Open mHealth, SQLite store (sealed with AES-GCM when given a key).
        .target(
            name: "Sinks",
            dependencies: [
                "CuffCore", "BloodPressure", "CuffSession", "StoreFormat", "Transport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // `--store postgres://…`: the shared PostgreSQL store behind a local SQLite outbox. The only
        // library target that imports SwiftNIO (through postgres-nio); it bridges to the blocking sink API.
        .target(
            name: "PostgresStore",
            dependencies: [
                "CuffCore", "BloodPressure", "CuffSession", "Sinks", "StoreFormat", "Transport", "CuffLogging",
                .product(name: "PostgresNIO", package: "postgres-nio"), .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `--publish mqtt://…`: readings published to an MQTT broker (Home Assistant discovery) from a
        // local SQLite outbox, through Debian's libmosquitto driven by cuff's own event loop.
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        .target(
            name: "MQTTSink",
            dependencies: [
                "CMosquitto", "CuffCore", "BloodPressure", "CuffSession", "Sinks", "StoreFormat", "Transport",
            ]),
        // Charts as SVG: document model and writer, scales, the session and history charts (pure).
        .target(name: "Plot"),
        // What `cuff plot` reads and writes: NDJSON, captures replayed in process, the store; SVG/PNG files.
        .target(
            name: "PlotIO",
            dependencies: ["Plot", "BloodPressure", "Capture", "CuffCore", "CuffSession", "Sinks", "StoreFormat"]),
        // The D-Bus wire format: values, signatures, messages, parsed with bounded lengths and depth (pure,
        // no libbluetooth, so the fuzz build compiles it alone).
        .target(name: "DBus"),
        // BlueZ (libbluetooth, GPL-2.0-or-later): HCI scan/advertise, L2CAP ATT sockets, MGMT pairing agent.
        .systemLibrary(name: "CBlueZ", pkgConfig: "bluez", providers: [.apt(["libbluetooth-dev"])]),
        .target(
            name: "BlueZ",
            dependencies: [
                "CBlueZ", "CuffCore", "DBus", "GATT", "Transport", "CuffLogging",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.define("ENABLE_MOCKING", .when(configuration: .debug))]
        ),
        // cuff in your own tests: one entry point per job (replay a capture into records, a simulated
        // cuff in process or on a Unix socket, decode one value) over the targets above. No Sinks,
        // so a package that uses it builds none of SQLite, crypto or SwiftNIO.
        .target(
            name: "CuffTesting",
            dependencies: [
                "CuffCore", "BloodPressure", "GATT", "Omron", "CuffSimulator", "CuffSession", "Capture", "CuffRuntime",
                "Transport",
                "CuffLogging", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The live Bluetooth paths of the commands (agents, bonds, the ATT connect, the simulator's
        // accept loop), so the CLI only wires.
        .target(
            name: "BluetoothLive",
            dependencies: [
                "BlueZ", "BloodPressure", "CuffCore", "CuffRuntime", "CuffSession", "GATT", "Omron", "Sinks",
                "Transport", "CuffLogging",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // What each command does once its options are parsed (the runs of measure, watch, replay,
        // simulate, decode, sync; the sinks a command's options make; stdout and stderr), as
        // library code the executable only wires and tests call in process.
        .target(
            name: "CuffCommands",
            dependencies: [
                "CuffCore", "BloodPressure", "GATT", "Omron", "CuffSimulator", "CuffSession", "Transport",
                "CuffRuntime",
                "Capture", "Sinks", "ReplayEngine", "BlueZ", "BluetoothLive", "Plot", "PlotIO", "PostgresStore",
                "MQTTSink", "CuffLogging",
                .product(name: "Logging", package: "swift-log"),
                // `cuff decode` decodes through the library's CuffDecoder (one decoder for both).
                "CuffTesting",
            ]
        ),
        // The command-line options the commands share, as argument-parser option groups, and the
        // values options take (so the CLI target holds only the commands' wiring).
        .target(
            name: "CuffOptions",
            dependencies: [
                "CuffCore", "BloodPressure", "Omron", "CuffSimulator", "CuffSession", "Transport", "Capture", "Sinks",
                "BlueZ", "BluetoothLive", "CuffCommands", "Plot", "PlotIO", "MQTTSink",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "cuff",
            dependencies: [
                "CuffCore", "BloodPressure", "GATT", "Omron", "CuffSimulator", "CuffSession", "Transport",
                "CuffRuntime",
                "Capture", "Sinks", "ReplayEngine", "BlueZ", "BluetoothLive", "CuffCommands", "CuffOptions", "Plot",
                "PlotIO", "PostgresStore", "MQTTSink",
                "CuffLogging", .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            linkerSettings: [
                // The static standard library's link line exports every symbol of the executable
                // (-export-dynamic): 49,000 dynamic symbols, which the runtime's start-up dladdr
                // (finding its own path) scans one by one, about a millisecond of every run.
                // Nothing looks the executable's own symbols up by name.
                .unsafeFlags(["-Xlinker", "--no-export-dynamic"], .when(configuration: .release))
            ]
        ),

        .testTarget(name: "CuffCoreTests", dependencies: ["CuffCore"]),
        .testTarget(name: "BloodPressureTests", dependencies: ["BloodPressure", "CuffCore"]),
        .testTarget(
            name: "OmronTests",
            dependencies: ["Omron", "BloodPressure", "CuffCore", "GATT", "CuffSession", "CuffSimulator"]),
        .testTarget(name: "GATTTests", dependencies: ["GATT", "CuffCore", "Transport"]),
        .testTarget(name: "TransportTests", dependencies: ["Transport", "CuffCore", "CuffTestSupport"]),
        .testTarget(
            name: "CuffSimulatorTests",
            dependencies: [
                "CuffLogging", "CuffSimulator", "CuffRuntime", "Transport", "GATT", "BloodPressure", "CuffCore",
                "Omron",
            ]),
        .testTarget(
            name: "CuffSessionTests",
            dependencies: [
                "CuffLogging", "CuffSession", "Omron", "CuffRuntime", "Capture", "CuffSimulator", "Transport", "GATT",
                "BloodPressure", "CuffCore",
            ]),
        .testTarget(
            name: "CaptureTests",
            dependencies: ["Capture", "CuffSession", "GATT", "BloodPressure", "CuffCore", "Sinks", "CuffTestSupport"]),
        .testTarget(
            name: "SinksTests",
            dependencies: [
                "Sinks", "StoreFormat", "CuffSession", "BloodPressure", "CuffCore", "CuffTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // What the test targets share: child processes (posix_spawn, stdio to files), the cuff
        // binary, scratch directories, waitUntil, a background thread.
        .target(name: "CuffTestSupport", path: "Tests/CuffTestSupport"),
        // A throwaway PostgreSQL cluster (Debian's server binaries) that the tests start and stop.
        .target(name: "PostgresTestCluster", dependencies: ["CuffTestSupport"], path: "Tests/PostgresTestCluster"),
        .testTarget(
            name: "PostgresStoreTests",
            dependencies: [
                "CuffLogging", "PostgresStore", "PostgresTestCluster", "Sinks", "CuffSession", "BloodPressure",
                "CuffCore", "CuffTestSupport",
            ]),
        .testTarget(
            name: "MQTTSinkTests", dependencies: ["MQTTSink", "Sinks", "CuffSession", "BloodPressure", "CuffCore"]),
        .testTarget(
            name: "ReplayEngineTests",
            dependencies: ["ReplayEngine", "Capture", "Sinks", "CuffSession", "Transport", "CuffCore"]),
        .testTarget(
            name: "BlueZTests",
            dependencies: [
                "CuffLogging", .product(name: "Logging", package: "swift-log"), "BlueZ", "DBus", "CuffRuntime",
                "CuffSimulator", "Omron", "GATT", "CuffSession", "BloodPressure", "Transport", "CuffCore",
                "CuffTestSupport",
            ]),
        .testTarget(
            name: "CLITests",
            dependencies: [
                "CuffCore", "Omron", "PostgresTestCluster", "CuffTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        .testTarget(
            name: "CuffTestingTests",
            dependencies: ["CuffLogging", "CuffTesting", "CuffRuntime", "Transport", "CuffTestSupport"]),
        .testTarget(
            name: "CuffCommandsTests",
            dependencies: [
                "CuffCommands", "CuffLogging", "BluetoothLive", "BlueZ", "Capture", "CuffSimulator", "Omron",
                "ReplayEngine", "Sinks", "CuffSession", "BloodPressure", "Transport", "CuffCore", "MQTTSink",
            ]
        ),
        .testTarget(
            name: "PlotTests",
            dependencies: ["Plot", "PlotIO", "Capture", "Sinks", "CuffSession", "BloodPressure", "CuffCore"],
            exclude: ["Golden"]),
    ]
)
