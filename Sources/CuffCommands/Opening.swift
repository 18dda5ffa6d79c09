// SPDX-License-Identifier: GPL-2.0-or-later
import CuffCore
import Sinks
import Transport

/// What a command opens first, a failure said once as `command: …` on stderr and thrown as the
/// command's status.
enum Opening {
    /// The sinks (`openSinks`): a failure is a failed sink.
    static func sinks(_ command: String, _ openSinks: () throws -> (FanOutSink, (any MeasurementStore)?))
        throws(ExitStatus) -> (FanOutSink, (any MeasurementStore)?)
    {
        do { return try openSinks() } catch {
            Console.log("\(command): \(error)")
            throw .sinkFailed
        }
    }

    /// A `cuff simulate` socket, `unix:PATH`: a failure is a failed connection.
    static func socket(_ command: String, _ connect: String) throws(ExitStatus) -> UnixSeqpacketBearer {
        do { return try UnixSeqpacketBearer.connect(path: String(connect.dropFirst("unix:".count))) } catch {
            Console.log("\(command): \(error.message)")
            throw .connectionFailed
        }
    }
}
