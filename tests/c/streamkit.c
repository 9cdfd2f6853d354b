/* What the streaming C tests share: a handler that keeps its request for the test thread,
 * an event counter that checks the final event is last, and a client that reads nothing. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>
#include "portable.h"

#include "harness.h"
#include "streamkit.h"

struct held_state t;

void reset(void) { memset((void *)&t, 0, sizeof t); }

void hold(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    t.req = req;
    atomic_inc(&t.held);
}

void count_events(void *ud, ember_request req, int32_t event) {
    (void)ud; (void)req;
    /* Nothing may follow the final event. */
    if (atomic_get(&t.events[EMBER_EVENT_ABORTED]) || atomic_get(&t.events[EMBER_EVENT_COMPLETED]))
        atomic_inc(&t.event_order_bad);
    if (event >= 1 && event <= 4) atomic_inc(&t.events[event]);
}

int send_get(uint16_t port, const char *target) {
    char req[256];
    struct sockaddr_in a;
    int small = 8192;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv;
    tv.tv_sec = 15;
    tv.tv_usec = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, (const void *)&small, sizeof small);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, (const void *)&tv, sizeof tv);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); fd = -1; }
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", target);
    if (fd >= 0 && http_send(fd, req, strlen(req)) != 0) { close(fd); return -1; }
    return fd;
}

ember_server *server_with(const char *method, const char *path, uint32_t flags, ember_handler_fn h) {
    ember_server *s = new_server();
    CHECK_RC(ember_server_route_flags(s, method, path, flags, h, NULL, NULL), EMBER_OK);
    return s;
}
