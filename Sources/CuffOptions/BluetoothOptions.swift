// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import BlueZ
import BluetoothLive
import CuffCommands
import CuffCore
import CuffSession
import Transport

/// `--backend`'s values (the type lives with the live paths).
public typealias Backend = BluetoothLive.Backend

extension Backend: ExpressibleByArgument {
    public static let help: ArgumentHelp = """
        auto (default: bluetoothd when it runs, i.e. org.bluez is on the system bus), bluetoothd, or raw \
        (HCI/MGMT/L2CAP sockets, needs root). On the bluetoothd path bluetoothd confirms indications itself \
        before cuff has stored the reading; the raw path confirms only after the sinks took it.
        """
}

/// A command's help for its Bluetooth options; nil: the command does not take that option.
public protocol BluetoothOptionsHelp {
    static var adapter: ArgumentHelp { get }
    static var bonds: ArgumentHelp? { get }
    static var security: ArgumentHelp? { get }
    static var setTime: ArgumentHelp? { get }
}

private let notTaken = ArgumentHelp(visibility: .private)

/// `--adapter`, `--backend`, `--bonds`, `--security`, `--no-set-time`: the Bluetooth options of
/// `measure`, `watch`, `pair` and `scan`, each command with its own help; an option a command does
/// not take is refused as unknown.
public struct BluetoothOptions<Help: BluetoothOptionsHelp>: ParsableArguments {
    public init() {}

    @Option(help: Help.adapter)
    public var adapter: String?

    @Option(help: Backend.help)
    public var backend: Backend = .auto

    @Option(help: Help.bonds ?? notTaken)
    public var bonds: String?

    @Option(help: Help.security ?? notTaken)
    public var security: SecurityLevel?

    @Flag(name: .customLong("no-set-time"), help: Help.setTime ?? notTaken)
    public var noSetTime = false

    public func validate() throws {
        for (given, help, name) in [
            (bonds != nil, Help.bonds, "--bonds"), (security != nil, Help.security, "--security"),
            (noSetTime, Help.setTime, "--no-set-time"),
        ]
        where given && help == nil {
            throw ValidationError("Unknown option '\(name)'")
        }
    }

    /// `--adapter`, parsed (default hci0).
    public func parsedAdapter() throws -> BluetoothAdapter { try BlueZCommands.adapter(adapter ?? "hci0") }
}

/// Parsing what names an adapter or a device.
public enum BlueZCommands {
    public static func adapter(_ text: String) throws -> BluetoothAdapter {
        do { return try BluetoothAdapter(parsing: text) } catch {
            throw ValidationError("--adapter: \(error.message)")
        }
    }

    public static func address(_ text: String) throws -> BluetoothAddress {
        try usage { try LiveBluetooth.address(text) }
    }

    public static let bondsHelp: ArgumentHelp =
        "Bond store for the raw path (default $XDG_STATE_HOME/cuff/bonds, else ~/.local/state/cuff/bonds; mode 0600). Its keys are loaded into the kernel before connecting, new ones stored after pairing. With bluetoothd, bluetoothd keeps the bonds."
}
