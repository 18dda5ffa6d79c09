// SPDX-License-Identifier: GPL-2.0-or-later

import CuffCore
import Transport

/// The errors a user meets on the live Bluetooth path, each with what to do about it.
enum BlueZErrors {
    static let absentHint =
        "this kernel has no Bluetooth (AF_BLUETOOTH): load the `bluetooth` module (`modprobe bluetooth`), or run where Bluetooth exists, e.g. inside the test VM (tools/vm/run.sh)"
    static let permissionHint =
        "raw Bluetooth sockets need CAP_NET_RAW and CAP_NET_ADMIN: run as root, or `sudo setcap cap_net_raw,cap_net_admin+eip $(command -v cuff)`"

    /// `socket(AF_BLUETOOTH, …)` failed.
    static func socket(_ what: String, _ e: Errno) -> TransportError {
        switch e {
        case .addressFamilyNotSupported, .protocolNotSupported:
            TransportError.system("socket", what, e, hint: absentHint, code: .unsupported)
        case .permissionDenied, .notPermitted:
            TransportError.system("socket", what, e, hint: permissionHint)
        default:
            TransportError.system("socket", what, e)
        }
    }

    /// Hints for errors about the adapter itself (bind, ioctl).
    static func adapterHint(_ e: Errno, adapter: String) -> String? {
        switch e {
        case .noSuchDevice:
            "there is no adapter \(adapter): list adapters with `btmgmt info` or `hciconfig`, then pass --adapter hciN"
        case .networkDown:
            "adapter \(adapter) is down: power it on with `btmgmt -i \(adapter) power on` (or `bluetoothctl power on`)"
        case .rfkill:
            "adapter \(adapter) is blocked by rfkill: `rfkill unblock bluetooth`"
        case .permissionDenied, .notPermitted:
            permissionHint
        case .addressNotAvailable:
            "adapter \(adapter) has no usable address (is it up?)"
        case .addressFamilyNotSupported:
            absentHint
        default:
            nil
        }
    }

    /// Hints for an L2CAP connect that failed.
    static func connectHint(_ e: Errno, peer: String, adapter: String) -> String? {
        switch e {
        case .resourceBusy:
            "another program already owns the ATT channel to \(peer) — usually bluetoothd after `bluetoothctl connect`: run `bluetoothctl disconnect \(peer)` or stop bluetoothd"
        case .connectionRefused:
            "\(peer) refused: check the address type (public vs /random) and that the device is advertising and connectable"
        case .timedOut:
            "\(peer) did not answer: is it advertising, in range, and not connected to another central (a phone)?"
        case .hostIsDown, .noRouteToHost:
            "\(peer) is not reachable through \(adapter): is the adapter up and the device advertising?"
        case .permissionDenied:
            "pairing with \(peer) was rejected: run a pairing agent (cuff runs one when it can), or remove the old bond (`bluetoothctl remove \(peer)`) and retry"
        case .alreadyInProcess:
            "a connection to \(peer) is already being set up: wait and retry"
        default:
            adapterHint(e, adapter: adapter)
        }
    }

    /// What the SO_ERROR of a link that went away means.
    static func closeReason(_ e: Errno?) -> String {
        switch e {
        case nil: "peer disconnected"
        case .connectionReset?: "peer disconnected (remote user terminated)"
        case .timedOut?: "link lost (supervision timeout: out of range or powered off)"
        case .connectionAborted?: "link closed by this host"
        case .permissionDenied?: "pairing failed (authentication rejected)"
        case let e?: "link failed: \(e)"
        }
    }
}
