/* Server lifecycle: start/stop/free, ports and binding, state errors, stopping from a
 * handler, freeing with work in flight, release callbacks. */
#define _POSIX_C_SOURCE 200809L

#include "portable.h"
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* user_data is either a release counter or NULL; the body is always "ok". */
static void answer_ok(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    ember_request_respond(req, 200, "Content-Type: text/plain", 24, "ok", 2);
}

static void answer_text(void *ud, ember_request req, const ember_request_info *info) {
    const char *body = ud;
    (void)info;
    ember_request_respond(req, 200, "Content-Type: text/plain", 24, body, strlen(body));
}

static int get_status(uint16_t port, const char *target, const char *want_body) {
    http_resp r;
    int status = http_get(port, target, &r) == 0 ? r.status : 0;
    if (want_body && !CHECK_STR(r.body, r.body_len, want_body)) status = -status;
    http_free(&r);
    return status;
}

static void test_start_stop_cycles(void) {
    int released = 0, i;
    for (i = 0; i < 20; i++) {
        ember_server *s = new_server();
        uint16_t port;
        CHECK_RC(ember_server_route(s, "GET", "/", answer_ok, &released, count_release), EMBER_OK);
        port = start_server(s);
        CHECK(get_status(port, "/", "ok") == 200);
        CHECK_RC(ember_server_stop(s, 1000), EMBER_OK);
        CHECK(atomic_get(&released) == i + 1); /* stop already released it */
        CHECK_RC(ember_server_free(s), EMBER_OK);
        CHECK(atomic_get(&released) == i + 1);
    }
}

static void test_two_servers(void) {
    ember_server *a = new_server(), *b = new_server();
    uint16_t pa, pb;
    CHECK_RC(ember_server_route(a, "GET", "/", answer_text, "server a", NULL), EMBER_OK);
    CHECK_RC(ember_server_route(b, "GET", "/", answer_text, "server b", NULL), EMBER_OK);
    pa = start_server(a);
    pb = start_server(b);
    CHECK(pa != pb);
    CHECK(get_status(pa, "/", "server a") == 200);
    CHECK(get_status(pb, "/", "server b") == 200);
    CHECK_RC(ember_server_stop(a, 1000), EMBER_OK);
    CHECK(get_status(pb, "/", "server b") == 200); /* b is untouched by a's stop */
    CHECK_RC(ember_server_free(a), EMBER_OK);
    CHECK_RC(ember_server_free(b), EMBER_OK);
}

static void test_ports(void) {
    ember_server *s = new_server();
    uint16_t p0 = 0, p1 = 0;
    CHECK_RC(ember_server_listen(s, "127.0.0.1:0"), EMBER_OK); /* a second listener */
    CHECK_RC(ember_server_route(s, "GET", "/", answer_ok, NULL, NULL), EMBER_OK);
    CHECK(ember_server_port(s, 0, &p0) != EMBER_OK); /* not bound before start */
    CHECK_RC(ember_server_start(s), EMBER_OK);
    CHECK_RC(ember_server_port(s, 0, &p0), EMBER_OK);
    CHECK_RC(ember_server_port(s, 1, &p1), EMBER_OK);
    CHECK(p0 != 0 && p1 != 0 && p0 != p1);
    CHECK(ember_server_port(s, 2, &p1) != EMBER_OK);
    CHECK(get_status(p0, "/", "ok") == 200);
    CHECK(get_status(p1, "/", "ok") == 200);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void test_bind_error(void) {
    ember_server *a = new_server(), *b = NULL;
    char addr[32], port_text[8];
    uint16_t port;
    int released = 0, fd;
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;

    CHECK_RC(ember_server_route(a, "GET", "/", answer_ok, NULL, NULL), EMBER_OK);
    port = start_server(a);
    snprintf(addr, sizeof addr, "127.0.0.1:%u", (unsigned)port);
    snprintf(port_text, sizeof port_text, "%u", (unsigned)port);
    CHECK_RC(ember_server_new(&b), EMBER_OK);
    CHECK_RC(ember_server_listen(b, addr), EMBER_OK);
    CHECK_RC(ember_server_route(b, "GET", "/", answer_ok, &released, count_release), EMBER_OK);
    CHECK_RC(ember_server_start(b), EMBER_ERR_BIND);
    CHECK(strstr(ember_last_error(), port_text) != NULL); /* the message names the address */
    CHECK(get_status(port, "/", "ok") == 200);             /* a still serves */
    CHECK_RC(ember_server_free(b), EMBER_OK);
    CHECK(released == 1);
    CHECK_RC(ember_server_free(a), EMBER_OK);

    /* A port held by someone else entirely. */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 1) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
    snprintf(addr, sizeof addr, "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    CHECK_RC(ember_server_new(&b), EMBER_OK);
    CHECK_RC(ember_server_listen(b, addr), EMBER_OK);
    CHECK_RC(ember_server_start(b), EMBER_ERR_BIND);
    CHECK_RC(ember_server_free(b), EMBER_OK);
    close(fd);
}

static void test_state_errors(void) {
    ember_server *s = new_server();
    int released = 0;
    CHECK_RC(ember_server_route(s, "GET", "/", answer_ok, NULL, NULL), EMBER_OK);
    start_server(s);
    CHECK_RC(ember_server_listen(s, "127.0.0.1:0"), EMBER_ERR_STATE);
    CHECK_RC(ember_server_set_workers(s, 1), EMBER_ERR_STATE);
    CHECK_RC(ember_server_set_dispatch(s, EMBER_DISPATCH_INLINE), EMBER_ERR_STATE);
    CHECK_RC(ember_server_set_pool_threads(s, 2), EMBER_ERR_STATE);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_MAX_HEADERS, 10), EMBER_ERR_STATE);
    CHECK_RC(ember_server_set_log(s, NULL, NULL, EMBER_LOG_INFO), EMBER_ERR_STATE);
    CHECK_RC(ember_server_set_thread_hooks(s, NULL, NULL, NULL), EMBER_ERR_STATE);
    CHECK_RC(ember_server_route(s, "GET", "/late", answer_ok, &released, count_release), EMBER_ERR_STATE);
    CHECK_RC(ember_server_start(s), EMBER_ERR_STATE);
    CHECK_RC(ember_server_stop(s, 1000), EMBER_OK);
    CHECK_RC(ember_server_start(s), EMBER_ERR_STATE); /* no restart after stop */
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(released == 0); /* a refused route takes nothing */
}

static void test_stop_and_wait(void) {
    ember_server *s = new_server();
    uint16_t port;
    CHECK_RC(ember_server_route(s, "GET", "/", answer_ok, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK_RC(ember_server_wait(s, 100), EMBER_ERR_TIMED_OUT);
    CHECK_RC(ember_server_stop(s, 1000), EMBER_OK);
    CHECK_RC(ember_server_stop(s, 1000), EMBER_OK); /* idempotent */
    CHECK_RC(ember_server_wait(s, 0), EMBER_OK);
    CHECK_RC(ember_server_wait(s, EMBER_WAIT_FOREVER), EMBER_OK);
    CHECK(http_connect(port) < 0); /* the listener is closed */
    CHECK_RC(ember_server_free(s), EMBER_OK);

    s = new_server(); /* stop before start is harmless too */
    CHECK_RC(ember_server_stop(s, 0), EMBER_OK);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- stopping from inside a handler ---- */

static struct {
    ember_server *server;
    ember_result stop_rc, free_rc, wait_rc;
    uint64_t stop_ms;
} inside;

static void stop_from_handler(void *ud, ember_request req, const ember_request_info *info) {
    uint64_t t0 = now_ms();
    (void)ud; (void)info;
    inside.stop_rc = ember_server_stop(inside.server, 5000);
    inside.stop_ms = now_ms() - t0;
    inside.free_rc = ember_server_free(inside.server);
    inside.wait_rc = ember_server_wait(inside.server, 10);
    ember_request_respond(req, 200, NULL, 0, "stopping", 8);
}

static void stop_inside_handler(int32_t mode) {
    uint16_t port;
    http_resp r;
    memset(&inside, 0, sizeof inside);
    inside.server = new_server();
    CHECK_RC(ember_server_set_dispatch(inside.server, mode), EMBER_OK);
    CHECK_RC(ember_server_route(inside.server, "GET", "/stop", stop_from_handler, NULL, NULL), EMBER_OK);
    port = start_server(inside.server);
    CHECK(http_get(port, "/stop", &r) == 0 && r.status == 200); /* in flight, so it finishes */
    CHECK_STR(r.body, r.body_len, "stopping");
    http_free(&r);
    CHECK_RC(inside.stop_rc, EMBER_OK);
    CHECK(inside.stop_ms < 1000); /* it only starts the shutdown */
    CHECK_RC(inside.free_rc, EMBER_ERR_STATE);
    CHECK_RC(inside.wait_rc, EMBER_ERR_STATE);
    CHECK_RC(ember_server_wait(inside.server, 5000), EMBER_OK);
    CHECK_RC(ember_server_free(inside.server), EMBER_OK);
}

static void test_stop_inside_handler(void) { stop_inside_handler(EMBER_DISPATCH_POOL); }
static void test_stop_inside_inline_handler(void) { stop_inside_handler(EMBER_DISPATCH_INLINE); }

/* Stopping and freeing *another* server from a handler is an ordinary blocking call. */
static struct {
    ember_server *other;
    ember_result stop_rc, free_rc;
    int other_released;
    volatile int freed;
} cross;

static void *free_other(void *arg) {
    (void)arg;
    if (ember_server_free(cross.other) == EMBER_OK) atomic_inc(&cross.freed);
    return NULL;
}

static void stop_other(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    cross.stop_rc = ember_server_stop(cross.other, 1000);
    /* After a failed stop, free here has been seen to hang; main frees it then, so one
     * engine bug fails this test instead of wedging the whole program. */
    cross.free_rc = cross.stop_rc == EMBER_OK ? ember_server_free(cross.other) : EMBER_ERR_STATE;
    if (cross.free_rc == EMBER_OK) cross.other = NULL;
    ember_request_respond(req, 200, NULL, 0, "done", 4);
}

static void stop_other_server(int32_t mode) {
    ember_server *s = new_server();
    uint16_t port, other_port;
    http_resp r;
    memset(&cross, 0, sizeof cross);
    cross.other = new_server();
    CHECK_RC(ember_server_route(cross.other, "GET", "/", answer_ok, &cross.other_released, count_release), EMBER_OK);
    other_port = start_server(cross.other);
    CHECK(get_status(other_port, "/", "ok") == 200);
    CHECK_RC(ember_server_set_dispatch(s, mode), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/", stop_other, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/", &r) == 0 && r.status == 200);
    http_free(&r);
    if (CHECK_RC(cross.stop_rc, EMBER_OK)) CHECK_RC(cross.free_rc, EMBER_OK);
    if (cross.other) { /* the handler could not free it */
        /* On its own thread: a free that hangs fails this check, not the whole program. */
        pthread_t t;
        CHECK(pthread_create(&t, NULL, free_other, NULL) == 0 && pthread_detach(t) == 0);
        CHECK(wait_for(&cross.freed, 1, 3000));
    }
    CHECK(atomic_get(&cross.other_released) == 1);
    CHECK(http_connect(other_port) < 0);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* Creating and starting a server from a handler (its runtime inside another's thread). */
static struct {
    ember_server *made;
    ember_result start_rc;
    uint16_t port;
} nested;

static void start_other(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    if (ember_server_new(&nested.made) == EMBER_OK && ember_server_listen(nested.made, "127.0.0.1:0") == EMBER_OK &&
        ember_server_route(nested.made, "GET", "/", answer_ok, NULL, NULL) == EMBER_OK) {
        nested.start_rc = ember_server_start(nested.made);
        if (nested.start_rc == EMBER_OK) ember_server_port(nested.made, 0, &nested.port);
    }
    ember_request_respond(req, 200, NULL, 0, "made", 4);
}

static void start_from_handler(int32_t mode) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    memset(&nested, 0, sizeof nested);
    nested.start_rc = EMBER_ERR_RUNTIME;
    CHECK_RC(ember_server_set_dispatch(s, mode), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/", start_other, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/", &r) == 0 && r.status == 200);
    http_free(&r);
    CHECK_RC(nested.start_rc, EMBER_OK);
    if (nested.port) CHECK(get_status(nested.port, "/", "ok") == 200);
    CHECK_RC(ember_server_free(nested.made), EMBER_OK);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void test_start_from_pool(void) { start_from_handler(EMBER_DISPATCH_POOL); }
static void test_start_from_inline(void) { start_from_handler(EMBER_DISPATCH_INLINE); }

static void test_stop_other_from_pool(void) { stop_other_server(EMBER_DISPATCH_POOL); }
static void test_stop_other_from_inline(void) { stop_other_server(EMBER_DISPATCH_INLINE); }

/* ---- freeing with requests in flight ---- */

static struct {
    volatile int calls, running;
    ember_request held[8];
} flight;

static void hold_request(void *ud, ember_request req, const ember_request_info *info) {
    int slot = __atomic_fetch_add(&flight.calls, 1, __ATOMIC_SEQ_CST);
    (void)ud; (void)info;
    if (slot < 8) flight.held[slot] = req;
}

static void block_then_answer(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    atomic_inc(&flight.running);
    atomic_inc(&flight.calls);
    sleep_ms(300);
    ember_request_respond(req, 200, NULL, 0, "late", 4);
    __atomic_sub_fetch(&flight.running, 1, __ATOMIC_SEQ_CST);
}

static void test_free_in_flight(void) {
    ember_server *s = new_server();
    bg_get g[4];
    int released = 0, i;
    uint16_t port;
    uint64_t t0;
    memset(&flight, 0, sizeof flight);
    CHECK_RC(ember_server_route(s, "GET", "/hold", hold_request, &released, count_release), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/block", block_then_answer, &released, count_release), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < 3; i++) bg_get_start(&g[i], port, "/hold");
    bg_get_start(&g[3], port, "/block");
    CHECK(wait_for(&flight.calls, 4, 5000));
    t0 = now_ms();
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(now_ms() - t0 < 3000);
    /* After free returns no callback runs any more: the blocking one has finished. */
    CHECK(atomic_get(&flight.running) == 0);
    CHECK(atomic_get(&released) == 2);
    for (i = 0; i < 4; i++) {
        bg_get_join(&g[i]);
        CHECK(g[i].status != 200 || i == 3);
    }
    for (i = 0; i < 3; i++) /* the held handles are stale now: an error, never a crash */
        CHECK(ember_request_respond(flight.held[i], 200, NULL, 0, "x", 1) != EMBER_OK);
}

/* Graceful: a deferred answer that comes within the stop timeout still reaches the client. */
static void *answer_later(void *arg) {
    sleep_ms(200);
    ember_request_respond(*(ember_request *)arg, 200, NULL, 0, "finished", 8);
    return NULL;
}

static void test_graceful_stop(void) {
    ember_server *s = new_server();
    bg_get g;
    pthread_t t;
    uint64_t t0;
    uint16_t port;
    memset(&flight, 0, sizeof flight);
    CHECK_RC(ember_server_route(s, "GET", "/hold", hold_request, NULL, NULL), EMBER_OK);
    port = start_server(s);
    bg_get_start(&g, port, "/hold");
    CHECK(wait_for(&flight.calls, 1, 5000));
    CHECK(pthread_create(&t, NULL, answer_later, &flight.held[0]) == 0);
    t0 = now_ms();
    CHECK_RC(ember_server_stop(s, 3000), EMBER_OK);
    CHECK(now_ms() - t0 >= 150);
    pthread_join(t, NULL);
    bg_get_join(&g);
    CHECK(g.status == 200);

    /* And one that never comes is cut off at the timeout. */
    CHECK_RC(ember_server_free(s), EMBER_OK);
    s = new_server();
    memset(&flight, 0, sizeof flight);
    CHECK_RC(ember_server_route(s, "GET", "/hold", hold_request, NULL, NULL), EMBER_OK);
    port = start_server(s);
    bg_get_start(&g, port, "/hold");
    CHECK(wait_for(&flight.calls, 1, 5000));
    t0 = now_ms();
    CHECK_RC(ember_server_stop(s, 300), EMBER_OK);
    CHECK(now_ms() - t0 < 2000);
    bg_get_join(&g);
    CHECK(g.status != 200);
    CHECK_RC(ember_request_respond(flight.held[0], 200, NULL, 0, "x", 1), EMBER_ERR_CLIENT_GONE);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void test_release_exactly_once(void) {
    ember_server *s = new_server();
    int counts[3] = {0, 0, 0};
    CHECK_RC(ember_server_route(s, "GET", "/a", answer_ok, &counts[0], count_release), EMBER_OK);
    CHECK_RC(ember_server_route(s, "POST", "/a", answer_ok, &counts[1], count_release), EMBER_OK);
    CHECK_RC(ember_server_route(s, NULL, "/b/{*rest}", answer_ok, &counts[2], count_release), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/a", answer_ok, &counts[2], count_release), EMBER_ERR_ROUTE);
    CHECK_RC(ember_server_free(s), EMBER_OK); /* never started */
    CHECK(counts[0] == 1 && counts[1] == 1 && counts[2] == 1);

    s = new_server();
    memset(counts, 0, sizeof counts);
    CHECK_RC(ember_server_route(s, "GET", "/a", answer_ok, &counts[0], count_release), EMBER_OK);
    CHECK_RC(ember_server_route(s, NULL, "/b/{*rest}", answer_ok, &counts[1], count_release), EMBER_OK);
    start_server(s);
    CHECK(counts[0] == 0 && counts[1] == 0);
    CHECK_RC(ember_server_stop(s, 1000), EMBER_OK);
    CHECK(counts[0] == 1 && counts[1] == 1);
    CHECK_RC(ember_server_stop(s, 1000), EMBER_OK);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(counts[0] == 1 && counts[1] == 1);
}

int main(void) {
    h_run("20 start/stop cycles", test_start_stop_cycles);
    h_run("two servers at once", test_two_servers);
    h_run("port 0, two listeners, ember_server_port", test_ports);
    h_run("bind error", test_bind_error);
    h_run("configure after start", test_state_errors);
    h_run("stop, wait, idempotence", test_stop_and_wait);
    h_run("stop from inside a handler", test_stop_inside_handler);
    h_run("stop from inside an inline handler", test_stop_inside_inline_handler);
    h_run("stop and free another server from a pool handler", test_stop_other_from_pool);
    h_run("stop and free another server from an inline handler", test_stop_other_from_inline);
    h_run("start a server from a pool handler", test_start_from_pool);
    h_run("start a server from an inline handler", test_start_from_inline);
    h_run("free with requests in flight", test_free_in_flight);
    h_run("graceful stop", test_graceful_stop);
    h_run("release callbacks exactly once", test_release_exactly_once);
    return h_finish();
}
