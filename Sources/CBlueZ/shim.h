// SPDX-License-Identifier: GPL-2.0-or-later
// The BlueZ headers cuff uses, from Debian's libbluetooth-dev.
#include <stddef.h>
#include <sys/ioctl.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/hci.h>
#include <bluetooth/hci_lib.h>
#include <bluetooth/l2cap.h>
// <bluetooth/mgmt.h> is not installed by Debian's libbluetooth-dev; MGMT constants live in Swift (MGMT.swift).

// What Swift can't import: ioctl request numbers (function-like _IOR/_IOW macros) and C's own
// answer to sizeof/offsetof, which the layout tests compare with Swift's view of the structs.
static inline unsigned long cuff_ioctl_hcidevup(void) { return HCIDEVUP; }
static inline unsigned long cuff_ioctl_hcigetdevlist(void) { return HCIGETDEVLIST; }
static inline unsigned long cuff_ioctl_hcigetdevinfo(void) { return HCIGETDEVINFO; }

static inline size_t cuff_sizeof_sockaddr_l2(void) { return sizeof(struct sockaddr_l2); }
static inline size_t cuff_offsetof_l2_bdaddr(void) { return offsetof(struct sockaddr_l2, l2_bdaddr); }
static inline size_t cuff_offsetof_l2_cid(void) { return offsetof(struct sockaddr_l2, l2_cid); }
static inline size_t cuff_offsetof_l2_bdaddr_type(void) { return offsetof(struct sockaddr_l2, l2_bdaddr_type); }
static inline size_t cuff_sizeof_sockaddr_hci(void) { return sizeof(struct sockaddr_hci); }
static inline size_t cuff_sizeof_hci_filter(void) { return sizeof(struct hci_filter); }
static inline size_t cuff_sizeof_hci_dev_info(void) { return sizeof(struct hci_dev_info); }
