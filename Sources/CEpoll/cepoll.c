// SPDX-License-Identifier: GPL-2.0-or-later
#include <sys/file.h>
#include "cepoll.h"
#include <sys/epoll.h>

int cuff_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int cuff_epoll_ctl(int epfd, int op, int fd, uint32_t events) {
    struct epoll_event e = {0};
    e.events = events;
    e.data.fd = fd;
    return epoll_ctl(epfd, op, fd, &e);
}

int cuff_epoll_wait(int epfd, int *fds, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event buf[256];
    if (max > 256) max = 256;
    if (max < 1) max = 1;
    int n = epoll_wait(epfd, buf, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        fds[i] = buf[i].data.fd;
        events[i] = buf[i].events;
    }
    return n;
}

int cuff_flock(int fd, int operation) { return flock(fd, operation); }
