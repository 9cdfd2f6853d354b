/* Dispatch modes and thread hooks, the pool's bound, stats counters, zero-copy bodies. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* on_start marks the thread, so a handler can tell whether it runs on a hooked thread. */
static pthread_key_t hooked;
static struct {
    volatile int starts, stops, calls, unhooked, running, max_running;
} d;

static void on_thread_start(void *ud) {
    (void)ud;
    pthread_setspecific(hooked, &d);
    atomic_inc(&d.starts);
}

static void on_thread_stop(void *ud) {
    (void)ud;
    atomic_inc(&d.stops);
}

static void note_call(void) {
    if (pthread_getspecific(hooked) != &d) atomic_inc(&d.unhooked);
    atomic_inc(&d.calls);
}

static void hello(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    note_call();
    ember_request_respond(req, 200, NULL, 0, "hello", 5);
}

static void *late_answer(void *arg) {
    ember_request req = *(ember_request *)arg;
    free(arg);
    sleep_ms(20);
    ember_request_respond(req, 200, NULL, 0, "later", 5);
    return NULL;
}

/* Inline handlers must not block, so a deferred answer is how they wait. */
static void deferred(void *ud, ember_request req, const ember_request_info *info) {
    pthread_t t;
    ember_request *copy = malloc(sizeof *copy);
    (void)ud; (void)info;
    note_call();
    *copy = req;
    if (pthread_create(&t, NULL, late_answer, copy) == 0) pthread_detach(t);
}

static void blocking(void *ud, ember_request req, const ember_request_info *info) {
    int now, max;
    (void)ud; (void)info;
    note_call();
    now = __atomic_add_fetch(&d.running, 1, __ATOMIC_SEQ_CST);
    max = atomic_get(&d.max_running);
    while (now > max && !__atomic_compare_exchange_n(&d.max_running, &max, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    sleep_ms(200);
    __atomic_sub_fetch(&d.running, 1, __ATOMIC_SEQ_CST);
    ember_request_respond(req, 200, NULL, 0, "slept", 5);
}

static void run_mode(int32_t mode) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    int i;
    memset(&d, 0, sizeof d);
    CHECK_RC(ember_server_set_dispatch(s, mode), EMBER_OK);
    CHECK_RC(ember_server_set_workers(s, 2), EMBER_OK);
    CHECK_RC(ember_server_set_thread_hooks(s, on_thread_start, on_thread_stop, NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/", hello, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/deferred", deferred, NULL, NULL), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < 20; i++) {
        CHECK(http_get(port, i % 2 ? "/deferred" : "/", &r) == 0 && r.status == 200);
        CHECK_STR(r.body, r.body_len, i % 2 ? "later" : "hello");
        http_free(&r);
    }
    CHECK(atomic_get(&d.calls) == 20);
    CHECK(atomic_get(&d.unhooked) == 0);
    CHECK(atomic_get(&d.starts) > 0);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    /* After free no host callback runs any more, thread hooks included. */
    CHECK(atomic_get(&d.stops) == atomic_get(&d.starts));
}

static void test_inline(void) { run_mode(EMBER_DISPATCH_INLINE); }
static void test_pool(void) { run_mode(EMBER_DISPATCH_POOL); }

static void test_pool_bound(void) {
    ember_server *s = new_server();
    bg_get g[4];
    uint16_t port;
    int i;
    memset(&d, 0, sizeof d);
    /* Pool mode explicitly: auto (the default) would run one of them inline as well. */
    CHECK_RC(ember_server_set_dispatch(s, EMBER_DISPATCH_POOL), EMBER_OK);
    CHECK_RC(ember_server_set_pool_threads(s, 2), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/block", blocking, NULL, NULL), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < 4; i++) bg_get_start(&g[i], port, "/block");
    for (i = 0; i < 4; i++) {
        bg_get_join(&g[i]);
        CHECK(g[i].status == 200);
    }
    CHECK(atomic_get(&d.max_running) == 2); /* blocking handlers ran in parallel, two at a time */
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- stats ---- */

static void fail500(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    ember_request_respond(req, 500, NULL, 0, "boom", 4);
}

static int stats_settled(ember_server *s, ember_stats *st) {
    uint64_t end = now_ms() + 2000;
    do {
        if (ember_server_stats(s, st, sizeof(ember_stats)) != EMBER_OK) return 0;
        if (st->responses_2xx == 5 && st->responses_4xx == 2 && st->responses_5xx == 1 && st->active_connections == 0)
            return 1;
        sleep_ms(10);
    } while (now_ms() < end);
    return 0;
}

static void test_stats(void) {
    ember_server *s = new_server();
    ember_stats st;
    uint16_t port;
    http_resp r;
    int i;
    CHECK_RC(ember_server_route(s, "GET", "/", hello, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/fail", fail500, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_stats(s, &st, sizeof(ember_stats)), EMBER_OK); /* before start: all zero */
    CHECK(st.requests == 0 && st.total_connections == 0);
    port = start_server(s);
    for (i = 0; i < 8; i++) {
        CHECK(http_get(port, i < 5 ? "/" : i < 7 ? "/missing" : "/fail", &r) == 0);
        http_free(&r);
    }
    CHECK(stats_settled(s, &st));
    CHECK(st.requests == 8);
    CHECK(st.responses_1xx == 0 && st.responses_3xx == 0);
    CHECK(st.total_connections == 8);
    CHECK(st.active_requests == 0);
    CHECK(st.bytes_read >= 8 * 40 && st.bytes_written >= 8 * 40);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- zero-copy answers ---- */

static volatile int small_released, big_released, big_release_ptr_ok;
static char *big_body;
#define BIG_LEN (1024 * 1024 + 7)

static void release_big(void *p) {
    big_release_ptr_ok = p == big_body;
    free(p);
    atomic_inc(&big_released);
}

static void nocopy(void *ud, ember_request req, const ember_request_info *info) {
    static const char body[] = "zero copy";
    (void)ud;
    if (info->path.len == 4) {
        ember_request_respond_nocopy(req, 200, NULL, 0, big_body, BIG_LEN, release_big, big_body);
        return;
    }
    ember_request_respond_nocopy(req, 200, "Content-Type: text/plain", 24, body, sizeof body - 1, count_release,
                                 (void *)&small_released);
}

static void test_nocopy(void) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    size_t i;
    int ok = 1;
    CHECK_RC(ember_server_route(s, "GET", "/nc", nocopy, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/big", nocopy, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/nc", &r) == 0 && r.status == 200);
    CHECK_STR(r.body, r.body_len, "zero copy");
    http_free(&r);
    CHECK(wait_for(&small_released, 1, 2000));

    big_body = malloc(BIG_LEN);
    for (i = 0; i < BIG_LEN; i++) big_body[i] = (char)('a' + i % 26);
    CHECK(http_get(port, "/big", &r) == 0 && r.status == 200 && r.body_len == BIG_LEN);
    for (i = 0; r.body && i < r.body_len && ok; i++) ok = r.body[i] == (char)('a' + i % 26);
    CHECK(ok);
    http_free(&r);
    CHECK(wait_for(&big_released, 1, 2000));
    CHECK(big_release_ptr_ok);
    sleep_ms(100);
    CHECK(atomic_get(&small_released) == 1 && atomic_get(&big_released) == 1);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

int main(void) {
    pthread_key_create(&hooked, NULL);
    h_run("inline dispatch with thread hooks", test_inline);
    h_run("pool dispatch with thread hooks", test_pool);
    h_run("pool runs blocking handlers, bounded", test_pool_bound);
    h_run("stats counters", test_stats);
    h_run("respond_nocopy releases once", test_nocopy);
    return h_finish();
}
