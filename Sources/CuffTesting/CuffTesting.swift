// SPDX-License-Identifier: GPL-2.0-or-later
//
// CuffTesting: cuff in your own tests. One entry point per job, for a package that depends on cuff:
//
// - ``CuffReplay``: a capture (btsnoop, pcap, pcapng; a file or bytes) replayed into the records
//   `cuff replay` prints.
// - ``SimulatedCuff`` (in process, bytes in and out, simulated time) and ``SimulatedCuffServer``
//   (a Unix SEQPACKET socket, as `cuff simulate --listen unix:PATH`): a simulated cuff for your
//   own GATT client, of any scenario, persona, quirk or Omron model, or a captured cuff served
//   back (``CuffSimulation``).
// - ``CuffDecoder``: one value decoded into the object `cuff decode` prints.
//
// A thin layer over the library targets: it adds no Bluetooth logic of its own. The modules whose
// types its API uses are re-exported, so `import CuffTesting` is the one import a test needs.

@_exported import BloodPressure
@_exported import Capture
@_exported import CuffCore
@_exported import CuffSession
@_exported import CuffSimulator
@_exported import GATT
@_exported import Omron

/// Why a CuffTesting entry point refused: a code to match and a message for people.
///
/// Match ``code``, never ``message`` (its words may change). The codes are an extensible set:
/// a new one is not a breaking change.
public struct CuffTestingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable, machine-readable reason.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The code's name, as in `CuffTestingError.description`.
        public var rawValue: String

        /// Wraps a code name.
        ///
        /// - Parameter rawValue: the code's name.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The code's name.
        public var description: String { rawValue }

        /// No Omron profile has this model id, alias or sales name.
        public static let unknownModel = Code(rawValue: "unknown_model")
        /// The cuff protocol asked for has no simulated cuff (or no protocol has that id).
        public static let noSimulatedCuff = Code(rawValue: "no_simulated_cuff")
        /// The simulated cuff cannot listen at the socket path (in use, too long, no permission).
        public static let cannotListen = Code(rawValue: "cannot_listen")
        /// The simulated cuff's event loop or thread could not be started.
        public static let cannotStart = Code(rawValue: "cannot_start")
        /// A capture to serve (``CuffSimulation/captured(path:session:handles:loop:)``) cannot be
        /// read: not a capture, damaged, missing.
        public static let badCapture = Code(rawValue: "bad_capture")
        /// A capture shows no connection that can be served (no Blood Pressure Service, or no
        /// such session).
        public static let nothingToServe = Code(rawValue: "nothing_to_serve")
        /// ``SimulatedCuffServer/start()`` was called on a server that is already running.
        public static let alreadyStarted = Code(rawValue: "already_started")
    }

    /// What went wrong.
    public var code: Code
    /// What went wrong and where, for people.
    public var message: String

    /// Makes an error.
    ///
    /// - Parameters:
    ///   - code: the reason.
    ///   - message: what was wrong and where.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `CuffTestingError.<code>: <message>`.
    public var description: String { "CuffTestingError.\(code.rawValue): \(message)" }
}
