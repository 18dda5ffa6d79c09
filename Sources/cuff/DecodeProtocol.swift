// SPDX-License-Identifier: GPL-2.0-or-later
import ArgumentParser
import CuffOptions
import CuffCommands

/// `cuff decode --protocol NAME`.
extension VendorProtocol: ExpressibleByArgument {}
