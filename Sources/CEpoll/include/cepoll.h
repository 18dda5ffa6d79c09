// SPDX-License-Identifier: GPL-2.0-or-later
// epoll for Swift: Glibc's module map leaves out <sys/epoll.h>, and struct epoll_event is packed
// on x86-64, which Swift cannot lay out. These take and give plain arrays instead.
#ifndef CUFF_CEPOLL_H
#define CUFF_CEPOLL_H
#include <stdint.h>

/// epoll_create1(EPOLL_CLOEXEC).
int cuff_epoll_create(void);
/// epoll_ctl with data.fd = fd. op: 1 add, 2 delete, 3 modify (EPOLL_CTL_*).
int cuff_epoll_ctl(int epfd, int op, int fd, uint32_t events);
/// epoll_wait into fds[] and events[] (max entries each); returns the count or -1 (errno set).
int cuff_epoll_wait(int epfd, int *fds, uint32_t *events, int max, int timeout_ms);
/// flock(fd, operation): Swift sees only the struct of that name.
int cuff_flock(int fd, int operation);

enum {
    CUFF_EPOLLIN = 0x001,
    CUFF_EPOLLOUT = 0x004,
    CUFF_EPOLLERR = 0x008,
    CUFF_EPOLLHUP = 0x010,
    CUFF_EPOLLRDHUP = 0x2000,
};
#endif
