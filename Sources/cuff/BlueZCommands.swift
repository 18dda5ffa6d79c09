// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffRuntime
import CuffSession
import Sinks
import Transport

/// The live Bluetooth paths (filled in by the BlueZ transport).
enum BlueZCommands {
    static func simulate(adapter: String, driver: PeripheralDriver, options: SimulatorOptions) throws {
        Output.log("cuff simulate: --adapter is not available in this build yet")
        throw ExitCode(9)
    }
}

extension BlueZCommands {
    static func measure(
        address: String, adapter: String, configuration: (String) -> CuffSessionConfiguration, hooks: SessionHooks,
        signals: SignalFlags, stopAfter: Duration?, store: SQLiteStore?
    ) throws -> (SessionOutcome, Int32, Bool) {
        Output.log("cuff measure: live Bluetooth is not available in this build yet")
        throw ExitCode(SessionOutcome.connectionFailed.exitCode)
    }
}
