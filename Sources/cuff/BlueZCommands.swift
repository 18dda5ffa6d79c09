// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffRuntime

/// The live Bluetooth paths (filled in by the BlueZ transport).
enum BlueZCommands {
    static func simulate(adapter: String, driver: PeripheralDriver, options: SimulatorOptions) throws {
        Output.log("cuff simulate: --adapter is not available in this build yet")
        throw ExitCode(9)
    }
}
