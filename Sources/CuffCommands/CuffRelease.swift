// SPDX-License-Identifier: GPL-2.0-or-later

/// This build of cuff: what `cuff --version` prints and Home Assistant shows as the device's
/// software version.
public enum CuffRelease {
    public static let version = "0.1.0"
}
