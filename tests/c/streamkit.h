/* What the streaming C tests share (streamkit.c). */
#ifndef EMBER_TEST_STREAMKIT_H
#define EMBER_TEST_STREAMKIT_H

#include "harness.h"

/* What `hold` and `count_events` record; `reset` zeroes it. */
struct held_state {
    volatile int held;
    ember_request req;
    volatile int events[5]; /* by EMBER_EVENT_* */
    volatile int event_order_bad; /* an event after the final one */
};
extern struct held_state t;

void reset(void);
/* A handler that keeps the request in t.req for the test thread to act on. */
void hold(void *ud, ember_request req, const ember_request_info *info);
/* An ember_event_fn counting into t.events. */
void count_events(void *ud, ember_request req, int32_t event);
/* Connects with a small receive buffer (so the server's writes soon meet a full socket)
 * and sends a GET without reading the answer; the fd or -1. */
int send_get(uint16_t port, const char *target);
/* A server with one route (`flags` as for ember_server_route_flags). */
ember_server *server_with(const char *method, const char *path, uint32_t flags, ember_handler_fn h);

#endif
