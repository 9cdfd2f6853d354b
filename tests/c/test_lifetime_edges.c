/* Edges of a server's and a request's lifetime: concurrent stops, frees racing late answers,
 * stale handles against reused slots, the connection limit, zero-copy bodies outliving their
 * client or server, and how long the info views stay readable. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

#include "harness.h"

/* ---- concurrency around stop and free ---- */

static ember_server *shared;
static ember_result stop_rcs[2];

static void *stop_thread(void *arg) {
    stop_rcs[*(int *)arg] = ember_server_stop(shared, 2000);
    return NULL;
}

static volatile int held_count;
static ember_request held[16];

static void hold(void *ud, ember_request req, const ember_request_info *info) {
    int i = __atomic_fetch_add(&held_count, 1, __ATOMIC_SEQ_CST);
    (void)ud; (void)info;
    if (i < 16) held[i] = req;
}

static void test_concurrent_stops(void) {
    pthread_t t[2];
    int ids[2] = {0, 1}, i;
    bg_get g[4];
    ember_stats st;
    uint16_t port;
    held_count = 0;
    shared = new_server();
    CHECK_RC(ember_server_route(shared, "GET", "/", hold, NULL, NULL), EMBER_OK);
    port = start_server(shared);
    for (i = 0; i < 4; i++) bg_get_start(&g[i], port, "/");
    CHECK(wait_for(&held_count, 4, 3000));
    CHECK_RC(ember_server_stats(shared, &st, sizeof(ember_stats)), EMBER_OK);
    CHECK(st.active_requests == 4);
    for (i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, stop_thread, &ids[i]) == 0);
    sleep_ms(50);
    for (i = 0; i < 4; i++) ember_request_respond(held[i], 200, NULL, 0, "bye", 3);
    for (i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK_RC(stop_rcs[0], EMBER_OK);
    CHECK_RC(stop_rcs[1], EMBER_OK);
    for (i = 0; i < 4; i++) {
        bg_get_join(&g[i]);
        CHECK(g[i].status == 200);
    }
    CHECK_RC(ember_server_free(shared), EMBER_OK);
}

static volatile int answering;

static void *answer_all(void *arg) {
    int i;
    (void)arg;
    while (atomic_get(&answering)) {
        for (i = 0; i < 16; i++) {
            ember_result rc = ember_request_respond(held[i], 200, NULL, 0, "x", 1);
            (void)rc; /* any error is fine; a crash or a hang is not */
        }
    }
    return NULL;
}

static void test_free_racing_answers(void) {
    pthread_t t;
    bg_get g[8];
    uint16_t port;
    int i;
    held_count = 0;
    memset(held, 0, sizeof held);
    shared = new_server();
    CHECK_RC(ember_server_route(shared, "GET", "/", hold, NULL, NULL), EMBER_OK);
    port = start_server(shared);
    for (i = 0; i < 8; i++) bg_get_start(&g[i], port, "/");
    CHECK(wait_for(&held_count, 8, 3000));
    answering = 1;
    CHECK(pthread_create(&t, NULL, answer_all, NULL) == 0);
    CHECK_RC(ember_server_free(shared), EMBER_OK);
    __atomic_store_n(&answering, 0, __ATOMIC_SEQ_CST);
    pthread_join(t, NULL);
    for (i = 0; i < 8; i++) bg_get_join(&g[i]);
    CHECK(ember_request_respond(held[0], 200, NULL, 0, "x", 1) != EMBER_OK);
}

/* A stale handle must not reach whatever request now occupies its old slot. */
static void test_stale_handle_vs_slot_reuse(void) {
    ember_server *s = new_server(), *s2;
    uint16_t port;
    bg_get g;
    ember_request old;
    int round;
    held_count = 0;
    CHECK_RC(ember_server_route(s, "GET", "/", hold, NULL, NULL), EMBER_OK);
    port = start_server(s);
    for (round = 0; round < 5; round++) {
        held_count = 0;
        bg_get_start(&g, port, "/");
        CHECK(wait_for(&held_count, 1, 3000));
        old = held[0];
        CHECK_RC(ember_request_respond(old, 200, NULL, 0, "first", 5), EMBER_OK);
        bg_get_join(&g);
        held_count = 0;
        bg_get_start(&g, port, "/");
        CHECK(wait_for(&held_count, 1, 3000));
        CHECK(held[0] != old);
        CHECK(ember_request_respond(old, 200, NULL, 0, "stale", 5) != EMBER_OK);
        CHECK_RC(ember_request_respond(held[0], 201, NULL, 0, "second", 6), EMBER_OK);
        bg_get_join(&g);
        CHECK(g.status == 201);
    }
    /* The same across servers: a handle of a freed server against a new one's request. */
    held_count = 0;
    bg_get_start(&g, port, "/");
    CHECK(wait_for(&held_count, 1, 3000));
    old = held[0];
    CHECK_RC(ember_server_free(s), EMBER_OK);
    bg_get_join(&g);
    s2 = new_server();
    CHECK_RC(ember_server_route(s2, "GET", "/", hold, NULL, NULL), EMBER_OK);
    port = start_server(s2);
    held_count = 0;
    bg_get_start(&g, port, "/");
    CHECK(wait_for(&held_count, 1, 3000));
    CHECK(ember_request_respond(old, 200, NULL, 0, "stale", 5) != EMBER_OK);
    CHECK_RC(ember_request_respond(held[0], 202, NULL, 0, "new", 3), EMBER_OK);
    bg_get_join(&g);
    CHECK(g.status == 202);
    CHECK_RC(ember_server_free(s2), EMBER_OK);
}

/* Over the connection limit, clients wait in the backlog instead of being served or refused. */
static void test_max_connections(void) {
    ember_server *s = new_server();
    bg_get g[3];
    uint16_t port;
    int i;
    held_count = 0;
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_MAX_CONNECTIONS, 2), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/", hold, NULL, NULL), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < 3; i++) bg_get_start(&g[i], port, "/");
    CHECK(wait_for(&held_count, 2, 3000));
    sleep_ms(200);
    CHECK(atomic_get(&held_count) == 2);
    CHECK_RC(ember_request_respond(held[0], 200, NULL, 0, "a", 1), EMBER_OK);
    CHECK(wait_for(&held_count, 3, 3000)); /* a slot freed up: the third gets in */
    CHECK_RC(ember_request_respond(held[1], 200, NULL, 0, "b", 1), EMBER_OK);
    CHECK_RC(ember_request_respond(held[2], 200, NULL, 0, "c", 1), EMBER_OK);
    for (i = 0; i < 3; i++) {
        bg_get_join(&g[i]);
        CHECK(g[i].status == 200);
    }
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- zero-copy bodies still on their way when the client stalls or the server goes ---- */

#define STALL_LEN (8 * 1024 * 1024)
static volatile int stall_released;
static char *stall_body;

static void release_stall(void *p) {
    free(p);
    atomic_inc(&stall_released);
}

static void big_nocopy(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    ember_request_respond_nocopy(req, 200, NULL, 0, stall_body, STALL_LEN, release_stall, stall_body);
}

static void test_nocopy_outlived_by_nothing(void) {
    static const char req[] = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    ember_server *s;
    uint16_t port;
    int fd, round;
    for (round = 0; round < 2; round++) {
        s = new_server();
        stall_released = 0;
        stall_body = calloc(1, STALL_LEN);
        CHECK_RC(ember_server_route(s, "GET", "/", big_nocopy, NULL, NULL), EMBER_OK);
        port = start_server(s);
        fd = http_connect(port);
        CHECK(fd >= 0 && http_send(fd, req, sizeof req - 1) == 0);
        sleep_ms(200); /* the engine is now stuck writing to a client that does not read */
        CHECK(atomic_get(&stall_released) == 0);
        if (round == 0) {
            /* The client leaves: the body is dropped and released once. */
            close(fd);
            CHECK(wait_for(&stall_released, 1, 3000));
            CHECK_RC(ember_server_free(s), EMBER_OK);
        } else {
            /* The server goes: once free returns, the host may unload; nothing may be left. */
            CHECK_RC(ember_server_free(s), EMBER_OK);
            CHECK(atomic_get(&stall_released) == 1);
            close(fd);
        }
        sleep_ms(50);
        CHECK(atomic_get(&stall_released) == 1);
    }
}

/* ---- the info views stay readable as long as the contract says (ASan watches the reads) ---- */

#define VIEW_BODY_LEN (64 * 1024)
static struct {
    ember_request_info info; /* a copy of the struct; its views point into the engine */
    ember_request req;
    volatile int in_handler, done;
    int views_ok;
    ember_result rc;
} v;

static int views_intact(const ember_request_info *info) {
    size_t i, sum = 0;
    int ok = info->method.len == 4 && memcmp(info->method.ptr, "POST", 4) == 0 &&
             info->path.len == 7 && memcmp(info->path.ptr, "/view/7", 7) == 0 &&
             info->query.len == 3 && memcmp(info->query.ptr, "q=1", 3) == 0 &&
             info->body.len == VIEW_BODY_LEN && info->param_count == 1 &&
             info->params[0].value.len == 1 && info->params[0].value.ptr[0] == '7';
    for (i = 0; ok && i < info->body.len; i++) ok = info->body.ptr[i] == (char)('A' + i % 26);
    for (i = 0; i < info->header_count; i++) sum += info->headers[i].name.len + info->headers[i].value.len;
    for (i = 0; i < info->remote_addr.len; i++) sum += (unsigned char)info->remote_addr.ptr[i];
    for (i = 0; i < info->route.len; i++) sum += (unsigned char)info->route.ptr[i];
    return ok && sum > 0;
}

/* Pool handler outliving the handler timeout: the 503 is sent, the views still hold. */
static void slow_reader(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud;
    atomic_inc(&v.in_handler);
    sleep_ms(250);
    v.views_ok = views_intact(info);
    v.rc = ember_request_respond(req, 200, NULL, 0, "late", 4);
    atomic_inc(&v.done);
}

/* Deferred: the views are read from another thread after the client has gone. */
static void keep_views(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud;
    v.info = *info;
    v.req = req;
    atomic_inc(&v.in_handler);
}

static int send_view_request(uint16_t port) {
    char head[160];
    char *body = malloc(VIEW_BODY_LEN);
    int fd = http_connect(port), n, i;
    for (i = 0; i < VIEW_BODY_LEN; i++) body[i] = (char)('A' + i % 26);
    n = snprintf(head, sizeof head, "POST /view/7?q=1 HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n", VIEW_BODY_LEN);
    CHECK(fd >= 0 && http_send(fd, head, (size_t)n) == 0 && http_send(fd, body, VIEW_BODY_LEN) == 0);
    free(body);
    return fd;
}

static void test_views_lifetime(void) {
    ember_server *s = new_server();
    http_resp r;
    uint16_t port;
    int fd;
    memset(&v, 0, sizeof v);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_HANDLER_TIMEOUT_MS, 50), EMBER_OK);
    CHECK_RC(ember_server_route(s, "POST", "/view/{id}", slow_reader, NULL, NULL), EMBER_OK);
    port = start_server(s);
    fd = send_view_request(port);
    CHECK(fd >= 0 && http_read(fd, &r) == 0 && r.status == 503);
    http_free(&r);
    CHECK(wait_for(&v.done, 1, 3000));
    CHECK(v.views_ok);
    CHECK_RC(v.rc, EMBER_ERR_TIMED_OUT);
    if (fd >= 0) close(fd);
    CHECK_RC(ember_server_free(s), EMBER_OK);

    s = new_server();
    memset(&v, 0, sizeof v);
    CHECK_RC(ember_server_route(s, "POST", "/view/{id}", keep_views, NULL, NULL), EMBER_OK);
    port = start_server(s);
    fd = send_view_request(port);
    CHECK(wait_for(&v.in_handler, 1, 3000));
    if (fd >= 0) close(fd);
    sleep_ms(200); /* the engine has noticed; the request is still unanswered */
    CHECK(views_intact(&v.info));
    CHECK_RC(ember_request_respond(v.req, 200, NULL, 0, "x", 1), EMBER_ERR_CLIENT_GONE);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

int main(void) {
    h_run("two threads stop at once", test_concurrent_stops);
    h_run("free racing late answers", test_free_racing_answers);
    h_run("stale handle vs slot reuse", test_stale_handle_vs_slot_reuse);
    h_run("max connections", test_max_connections);
    h_run("nocopy body released when client or server goes mid-write", test_nocopy_outlived_by_nothing);
    /* Last: under ASan a use-after-free here aborts the program. */
    h_run("info views outlive a timeout mid-handler and a departed client", test_views_lifetime);
    return h_finish();
}
