/* The end of a streamed answer through the C ABI: the final event exactly once (client gone,
 * handler timeout), zero-copy writes released exactly once whatever happens to them, stop()
 * with streams open. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

#include "harness.h"
#include "streamkit.h"

/* ---- the final event exactly once: client gone, handler timeout ---- */

static void test_aborted_exactly_once_when_the_client_leaves(void) {
    ember_server *s;
    uint16_t port;
    char sink[4096];
    int fd, i;
    ember_result rc = EMBER_OK;
    reset();
    s = server_with("GET", "/", 0, hold);
    port = start_server(s);
    fd = send_get(port, "/");
    CHECK(wait_for(&t.held, 1, 3000));
    CHECK_RC(ember_response_begin(t.req, 200, NULL, 0), EMBER_OK);
    CHECK_RC(ember_request_on_event(t.req, count_events, NULL), EMBER_OK);
    CHECK_RC(ember_response_write(t.req, "first", 5), EMBER_OK);
    CHECK(recv(fd, sink, sizeof sink, 0) > 0);
    close(fd);
    CHECK(wait_for(&t.events[EMBER_EVENT_ABORTED], 1, 3000));
    for (i = 0; i < 200 && (rc = ember_response_write(t.req, "more", 4)) == EMBER_OK; i++) sleep_ms(5);
    CHECK(rc == EMBER_ERR_CLIENT_GONE || rc == EMBER_ERR_INVALID_HANDLE);
    CHECK(ember_response_end(t.req) != EMBER_OK);
    sleep_ms(100);
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == 1);
    CHECK(atomic_get(&t.events[EMBER_EVENT_COMPLETED]) == 0 && atomic_get(&t.event_order_bad) == 0);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == 1);
}

static void test_aborted_exactly_once_on_handler_timeout(void) {
    ember_server *s;
    uint16_t port;
    http_resp r;
    reset();
    s = server_with("GET", "/", 0, hold);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_HANDLER_TIMEOUT_MS, 200), EMBER_OK);
    port = start_server(s);
    {
        bg_get g;
        bg_get_start(&g, port, "/");
        CHECK(wait_for(&t.held, 1, 3000));
        CHECK_RC(ember_request_on_event(t.req, count_events, NULL), EMBER_OK);
        bg_get_join(&g);
        CHECK(g.status == 503);
    }
    CHECK(wait_for(&t.events[EMBER_EVENT_ABORTED], 1, 3000));
    CHECK_RC(ember_response_begin(t.req, 200, NULL, 0), EMBER_ERR_TIMED_OUT);
    CHECK(ember_request_on_event(t.req, count_events, NULL) != EMBER_OK);
    CHECK(http_get(port, "/nothing-here", &r) == 0 && r.status == 404);
    http_free(&r);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == 1 && atomic_get(&t.events[EMBER_EVENT_COMPLETED]) == 0);
}

/* ---- zero-copy writes: released exactly once, whatever happens to them ---- */

#define LENT 6
static volatile int lent[LENT];
static void release_slot(void *ud) { atomic_inc(&lent[(size_t)ud]); }

static void test_nocopy_writes_released_exactly_once(void) {
    static char big[64 * 1024];
    ember_server *s;
    uint16_t port;
    int fd, i;
    ember_result rc;
    reset();
    memset((void *)lent, 0, sizeof lent);
    s = server_with("GET", "/", 0, hold);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_STREAM_QUEUE_BYTES, 1024), EMBER_OK);
    port = start_server(s);
    fd = send_get(port, "/");
    CHECK(wait_for(&t.held, 1, 3000));
    /* 0: before begin, refused (STATE): released at once */
    CHECK_RC(ember_response_write_nocopy(t.req, big, 10, release_slot, (void *)0), EMBER_ERR_STATE);
    CHECK(atomic_get(&lent[0]) == 1);
    CHECK_RC(ember_response_begin(t.req, 200, NULL, 0), EMBER_OK);
    /* 1: taken; released once sent */
    CHECK_RC(ember_response_write_nocopy(t.req, big, 10, release_slot, (void *)1), EMBER_OK);
    /* 2..: fill until refused; the refused one is released before the call returns */
    for (i = 0; i < 10000; i++) {
        rc = ember_response_write_nocopy(t.req, big, sizeof big, release_slot, (void *)2);
        if (rc != EMBER_OK) break;
    }
    CHECK_RC(rc, EMBER_ERR_WOULD_BLOCK);
    CHECK(atomic_get(&lent[2]) >= 1);
    /* 3: queued behind a client that reads nothing, then the server stops: released */
    sleep_ms(50);
    CHECK(ember_response_write_nocopy(t.req, big, 10, release_slot, (void *)3) != EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_stop(s, 200), EMBER_OK);
    /* 4: after the stop: refused, released at once */
    rc = ember_response_write_nocopy(t.req, big, 10, release_slot, (void *)4);
    CHECK(rc == EMBER_ERR_CLIENT_GONE || rc == EMBER_ERR_INVALID_HANDLE || rc == EMBER_ERR_ALREADY_ANSWERED);
    CHECK(atomic_get(&lent[4]) == 1);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    close(fd);
    /* every write that was taken was released exactly once: 1 and 3 once, 2 once per call */
    CHECK(atomic_get(&lent[1]) == 1);
    CHECK(atomic_get(&lent[3]) == 1);
    CHECK(atomic_get(&lent[2]) == i + 1);
}

/* ---- stop() with streams open ---- */

#define OPEN_STREAMS 4
static volatile int stream_route_released;
static volatile ember_request open_reqs[OPEN_STREAMS];
static volatile int opened;

static void begin_and_keep(void *ud, ember_request req, const ember_request_info *info) {
    int i;
    (void)ud; (void)info;
    ember_response_begin(req, 200, NULL, 0);
    ember_request_on_event(req, count_events, NULL);
    ember_response_write(req, "open", 4);
    i = __atomic_fetch_add(&opened, 1, __ATOMIC_SEQ_CST);
    if (i < OPEN_STREAMS) open_reqs[i] = req;
}

static void test_stop_with_streams_open(void) {
    ember_server *s;
    uint16_t port;
    int fds[OPEN_STREAMS], i, ended = 0;
    reset();
    opened = 0;
    stream_route_released = 0;
    s = new_server();
    CHECK_RC(ember_server_route(s, "GET", "/", begin_and_keep, (void *)&stream_route_released, count_release), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < OPEN_STREAMS; i++) fds[i] = send_get(port, "/");
    CHECK(wait_for(&opened, OPEN_STREAMS, 3000));
    CHECK_RC(ember_server_stop(s, 500), EMBER_OK);
    /* When stop returns, every stream heard ABORTED exactly once, and the route let go. */
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == OPEN_STREAMS);
    CHECK(atomic_get(&t.events[EMBER_EVENT_COMPLETED]) == 0);
    CHECK(atomic_get(&stream_route_released) == 1);
    for (i = 0; i < OPEN_STREAMS; i++) {
        ember_result rc = ember_response_write(open_reqs[i], "after", 5);
        CHECK(rc == EMBER_ERR_CLIENT_GONE || rc == EMBER_ERR_INVALID_HANDLE);
    }
    /* The clients see their connections end (the chunked body never completes). */
    for (i = 0; i < OPEN_STREAMS; i++) {
        char sink[4096];
        ssize_t n;
        while ((n = recv(fds[i], sink, sizeof sink, 0)) > 0) {}
        ended += n == 0 || n < 0;
        close(fds[i]);
    }
    CHECK(ended == OPEN_STREAMS);
    CHECK_RC(ember_server_stop(s, 500), EMBER_OK); /* idempotent */
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == OPEN_STREAMS);
    CHECK(atomic_get(&stream_route_released) == 1);
}

int main(void) {
    h_run("ABORTED exactly once when the client leaves", test_aborted_exactly_once_when_the_client_leaves);
    h_run("ABORTED exactly once on the handler timeout", test_aborted_exactly_once_on_handler_timeout);
    h_run("zero-copy writes released exactly once", test_nocopy_writes_released_exactly_once);
    h_run("stop with streams open: ABORTED each, release once", test_stop_with_streams_open);
    return h_finish();
}
