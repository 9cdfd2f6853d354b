/* Races the engine must settle cleanly: an answer against the handler timeout, against a
 * departing client, a stop under load, many keep-alive clients at once. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

#include "harness.h"

#define N 40

static struct {
    ember_request req[N];
    volatile int handled[N], answered[N], released[N];
    ember_result rc[N];
    int status[N];
    unsigned delay_ms;
    volatile int calls;
} r;

/* "i=<n>" from the query view (not NUL-terminated, so no atoi). */
static int query_index(const ember_request_info *info) {
    size_t k;
    int i = 0;
    if (info->query.len < 3 || info->query.len > 6 || memcmp(info->query.ptr, "i=", 2) != 0) return -1;
    for (k = 2; k < info->query.len; k++) {
        if (info->query.ptr[k] < '0' || info->query.ptr[k] > '9') return -1;
        i = i * 10 + (info->query.ptr[k] - '0');
    }
    return i < N ? i : -1;
}

typedef struct {
    int i;
    unsigned delay_ms;
    int nocopy;
} job;

static void *answer_job(void *arg) {
    job j = *(job *)arg;
    free(arg);
    sleep_ms(j.delay_ms);
    if (j.nocopy)
        r.rc[j.i] = ember_request_respond_nocopy(r.req[j.i], 200, NULL, 0, "late", 4, count_release,
                                                 (void *)&r.released[j.i]);
    else
        r.rc[j.i] = ember_request_respond(r.req[j.i], 200, NULL, 0, "late", 4);
    atomic_inc(&r.answered[j.i]);
    return NULL;
}

/* Defers every request; a thread answers it after 0..2*delay_ms (jittered by index). */
static void defer(void *ud, ember_request req, const ember_request_info *info) {
    int i = query_index(info);
    job *j;
    pthread_t t;
    if (i < 0) { ember_request_respond(req, 400, NULL, 0, NULL, 0); return; }
    r.req[i] = req;
    j = malloc(sizeof *j);
    j->i = i;
    j->delay_ms = r.delay_ms ? (unsigned)(i * 7) % (2 * r.delay_ms) : 0;
    j->nocopy = ud != NULL;
    atomic_inc(&r.handled[i]);
    if (pthread_create(&t, NULL, answer_job, j) == 0) pthread_detach(t);
}

/* After the dust settles no request or connection may be left on the books. */
static void check_settled(ember_server *s, int requests) {
    ember_stats st;
    uint64_t end = now_ms() + 2000;
    do {
        CHECK_RC(ember_server_stats(s, &st, sizeof(ember_stats)), EMBER_OK);
        if (st.active_requests == 0 && st.active_connections == 0) break;
        sleep_ms(10);
    } while (now_ms() < end);
    CHECK(st.active_requests == 0);
    CHECK(st.active_connections == 0);
    CHECK(st.requests == (uint64_t)requests);
    if (st.active_requests || st.active_connections || st.requests != (uint64_t)requests)
        fprintf(stderr, "    stats: requests %lu, active requests %lu, active connections %lu\n",
                (unsigned long)st.requests, (unsigned long)st.active_requests, (unsigned long)st.active_connections);
}

/* One round; returns 1 when the answers really straddled the timeout (some answered, some
 * timed out). Correctness is checked whatever the outcome. */
static int answer_vs_timeout_round(int32_t mode) {
    ember_server *s = new_server();
    bg_get g[N];
    char targets[N][24];
    uint16_t port;
    int i, ok = 0, late = 0;
    memset(&r, 0, sizeof r);
    r.delay_ms = 50;
    CHECK_RC(ember_server_set_dispatch(s, mode), EMBER_OK);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_HANDLER_TIMEOUT_MS, 50), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/race", defer, NULL, NULL), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < N; i++) {
        snprintf(targets[i], sizeof targets[i], "/race?i=%d", i);
        bg_get_start(&g[i], port, targets[i]);
    }
    for (i = 0; i < N; i++) {
        bg_get_join(&g[i]);
        CHECK(wait_for(&r.answered[i], 1, 3000));
        /* Whoever won, the client saw exactly that side's answer. */
        if (r.rc[i] == EMBER_OK) { ok++; CHECK(g[i].status == 200); }
        else if (r.rc[i] == EMBER_ERR_TIMED_OUT) { late++; CHECK(g[i].status == 503); }
        else CHECK_RC(r.rc[i], EMBER_OK);
    }
    printf("  answer vs timeout: %d answered, %d timed out\n", ok, late);
    check_settled(s, N);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    return ok > 0 && late > 0;
}

/* The answers are jittered over 0..100 ms against a 50 ms timeout, so both sides win some.
 * On a loaded machine (Wine beside a build) the engine's timer or the answering threads can
 * run late enough that one side wins every time: that round proves nothing either way, so
 * it is run again, and three such rounds in a row fail. */
static void answer_vs_timeout(int32_t mode) {
    int round, straddled = 0;
    for (round = 0; round < 3 && !straddled; round++) straddled = answer_vs_timeout_round(mode);
    CHECK(straddled); /* the jitter really straddled the timeout */
}

static void test_answer_vs_timeout(void) { answer_vs_timeout(EMBER_DISPATCH_POOL); }
static void test_answer_vs_timeout_inline(void) { answer_vs_timeout(EMBER_DISPATCH_INLINE); }

/* The client closes while the answer is on its way; nocopy bodies are released once. */
static void test_answer_vs_client_leaving(void) {
    ember_server *s = new_server();
    uint16_t port;
    int i, fd[N];
    char req[64];
    memset(&r, 0, sizeof r);
    r.delay_ms = 5;
    CHECK_RC(ember_server_route(s, "GET", "/race", defer, (void *)1, NULL), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < N; i++) {
        int n = snprintf(req, sizeof req, "GET /race?i=%d HTTP/1.1\r\nHost: h\r\n\r\n", i);
        fd[i] = http_connect(port);
        CHECK(fd[i] >= 0 && http_send(fd[i], req, (size_t)n) == 0);
    }
    for (i = 0; i < N; i++) {
        CHECK(wait_for(&r.handled[i], 1, 3000));
        sleep_ms((unsigned)(i % 4) * 3);
        close(fd[i]);
    }
    for (i = 0; i < N; i++) {
        CHECK(wait_for(&r.answered[i], 1, 3000));
        CHECK(r.rc[i] == EMBER_OK || r.rc[i] == EMBER_ERR_CLIENT_GONE);
        CHECK(wait_for(&r.released[i], 1, 3000));
    }
    sleep_ms(100);
    for (i = 0; i < N; i++) CHECK(atomic_get(&r.released[i]) == 1);
    check_settled(s, N);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- stop while clients keep coming ---- */

static volatile int load_calls, stop_clients;

static void count_and_answer(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    atomic_inc(&load_calls);
    ember_request_respond(req, 200, NULL, 0, "ok", 2);
}

static void *hammer(void *arg) {
    uint16_t port = *(uint16_t *)arg;
    while (!atomic_get(&stop_clients)) {
        http_resp resp;
        if (http_get(port, "/", &resp) != 0) sleep_ms(1);
        http_free(&resp);
    }
    return NULL;
}

static void test_stop_under_load(void) {
    ember_server *s = new_server();
    pthread_t t[4];
    uint16_t port;
    int i, released = 0, after_stop;
    load_calls = 0;
    stop_clients = 0;
    CHECK_RC(ember_server_route(s, "GET", "/", count_and_answer, &released, count_release), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, hammer, &port) == 0);
    sleep_ms(300);
    CHECK_RC(ember_server_stop(s, 1000), EMBER_OK);
    after_stop = atomic_get(&load_calls);
    CHECK(after_stop > 0);
    CHECK(released == 1);
    sleep_ms(200);
    CHECK(atomic_get(&load_calls) == after_stop); /* no handler runs after stop returned */
    __atomic_store_n(&stop_clients, 1, __ATOMIC_SEQ_CST);
    for (i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(released == 1);
    printf("  stop under load: %d requests served before the stop\n", after_stop);
}

/* ---- many keep-alive connections: every answer reaches its own client ---- */

static void echo_query(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud;
    ember_request_respond(req, 200, NULL, 0, info->query.ptr, info->query.len);
}

typedef struct {
    uint16_t port;
    int client, good;
} ka_client;

static void *keep_alive_client(void *arg) {
    ka_client *c = arg;
    int fd = http_connect(c->port), n;
    for (n = 0; fd >= 0 && n < 100; n++) {
        char req[96], want[32];
        http_resp resp;
        int len = snprintf(req, sizeof req, "GET /q?c=%d&n=%d HTTP/1.1\r\nHost: h\r\n\r\n", c->client, n);
        snprintf(want, sizeof want, "c=%d&n=%d", c->client, n);
        if (http_send(fd, req, (size_t)len) != 0 || http_read(fd, &resp) != 0) break;
        if (resp.status == 200 && resp.body_len == strlen(want) && memcmp(resp.body, want, resp.body_len) == 0)
            c->good++;
        http_free(&resp);
    }
    if (fd >= 0) close(fd);
    return NULL;
}

static void run_keep_alive(int32_t mode) {
    ember_server *s = new_server();
    pthread_t t[8];
    ka_client c[8];
    int i;
    uint16_t port;
    CHECK_RC(ember_server_set_dispatch(s, mode), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/q", echo_query, NULL, NULL), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < 8; i++) {
        c[i].port = port;
        c[i].client = i;
        c[i].good = 0;
        CHECK(pthread_create(&t[i], NULL, keep_alive_client, &c[i]) == 0);
    }
    for (i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        CHECK(c[i].good == 100);
    }
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void test_keep_alive_pool(void) { run_keep_alive(EMBER_DISPATCH_POOL); }
static void test_keep_alive_inline(void) { run_keep_alive(EMBER_DISPATCH_INLINE); }

int main(void) {
    h_run("answer racing the handler timeout", test_answer_vs_timeout);
    h_run("answer racing the handler timeout, inline", test_answer_vs_timeout_inline);
    h_run("answer racing a departing client", test_answer_vs_client_leaving);
    h_run("stop under load", test_stop_under_load);
    h_run("8 keep-alive clients x 100, pool", test_keep_alive_pool);
    h_run("8 keep-alive clients x 100, inline", test_keep_alive_inline);
    return h_finish();
}
