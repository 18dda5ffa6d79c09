// SPDX-License-Identifier: GPL-2.0-or-later
// The BlueZ headers cuff uses, from Debian's libbluetooth-dev.
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>
#include <bluetooth/l2cap.h>
#include <bluetooth/mgmt.h>
