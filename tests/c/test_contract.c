/* The ABI contract points that the core review (issue 13) found loose: struct sizes that
 * let the ABI grow, what a refused answer leaves behind, and stop/free called from the
 * engine's own callbacks (log, release, thread hooks). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- sized structs: an older, shorter struct is never written past its end ---- */

static struct {
    volatile int calls;
    ember_result short_rc, tiny_rc, full_rc;
    unsigned char canary[16];
    size_t size_seen;
    uint64_t id_seen;
} z;

static void sized(void *ud, ember_request req, const ember_request_info *info) {
    unsigned char buf[sizeof(ember_request_info) + 16];
    size_t older = offsetof(ember_request_info, http_version);
    ember_request_info full;
    (void)ud;
    memset(buf, 0xA5, sizeof buf);
    z.short_rc = ember_request_get_info(req, (ember_request_info *)(void *)buf, older);
    memcpy(z.canary, buf + older, sizeof z.canary);
    memcpy(&z.size_seen, buf, sizeof z.size_seen);
    memcpy(&z.id_seen, buf + offsetof(ember_request_info, id), sizeof z.id_seen);
    z.tiny_rc = ember_request_get_info(req, &full, 3);
    z.full_rc = ember_request_get_info(req, &full, sizeof full);
    CHECK(info->size == sizeof(ember_request_info));
    CHECK(full.size == sizeof(ember_request_info) && full.id == req);
    ember_request_respond(req, 200, NULL, 0, "ok", 2);
    atomic_inc(&z.calls);
}

static void test_sized_structs(void) {
    ember_server *s = new_server();
    http_resp r;
    ember_stats st;
    unsigned char sbuf[sizeof(ember_stats) + 8];
    size_t older_stats = offsetof(ember_stats, responses_other);
    size_t i;
    int untouched = 1;
    uint16_t port;
    memset(&z, 0, sizeof z);
    CHECK_RC(ember_server_route(s, "GET", "/", sized, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/", &r) == 0 && r.status == 200);
    http_free(&r);
    CHECK(wait_for(&z.calls, 1, 2000));
    CHECK_RC(z.short_rc, EMBER_OK);
    for (i = 0; i < sizeof z.canary; i++) untouched &= z.canary[i] == 0xA5;
    CHECK(untouched); /* nothing written past the caller's size */
    CHECK(z.size_seen == sizeof(ember_request_info)); /* the library says what it has */
    CHECK(z.id_seen != 0);
    CHECK_RC(z.tiny_rc, EMBER_ERR_INVALID_ARG);
    CHECK_RC(z.full_rc, EMBER_OK);

    memset(sbuf, 0x5A, sizeof sbuf);
    CHECK_RC(ember_server_stats(s, (ember_stats *)(void *)sbuf, older_stats), EMBER_OK);
    untouched = 1;
    for (i = older_stats; i < sizeof sbuf; i++) untouched &= sbuf[i] == 0x5A;
    CHECK(untouched);
    CHECK_RC(ember_server_stats(s, &st, sizeof st), EMBER_OK);
    CHECK(st.size == sizeof st && st.requests >= 1 && st.held_requests == 0);
    CHECK_RC(ember_server_stats(s, &st, 0), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- a refused answer changes nothing: the views stay, the request still waits ---- */

static struct {
    volatile int calls;
    ember_result bad_status, bad_header, good, after;
    int views_ok;
} v;

static void refuse_then_answer(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud;
    v.bad_status = ember_request_respond(req, 42, NULL, 0, info->body.ptr, info->body.len);
    v.bad_header = ember_request_respond(req, 200, "No colon here", 13, info->body.ptr, info->body.len);
    /* The views must still point at the request: read them again after the refusals. */
    v.views_ok = info->path.len == 5 && memcmp(info->path.ptr, "/echo", 5) == 0 && info->body.len == 11 &&
                 memcmp(info->body.ptr, "hello world", 11) == 0;
    v.good = ember_request_respond(req, 200, "Content-Type: text/plain", 24, info->body.ptr, info->body.len);
    v.after = ember_request_respond(req, 200, NULL, 0, NULL, 0);
    atomic_inc(&v.calls);
}

static void test_refused_answer_keeps_the_request(void) {
    ember_server *s = new_server();
    http_resp r;
    uint16_t port;
    memset(&v, 0, sizeof v);
    CHECK_RC(ember_server_route(s, "POST", "/echo", refuse_then_answer, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_raw(port, "POST /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 11\r\n\r\nhello world", &r) == 0);
    CHECK(r.status == 200);
    CHECK(r.body_len == 11 && memcmp(r.body, "hello world", 11) == 0);
    http_free(&r);
    CHECK(wait_for(&v.calls, 1, 2000));
    CHECK_RC(v.bad_status, EMBER_ERR_INVALID_ARG);
    CHECK_RC(v.bad_header, EMBER_ERR_INVALID_ARG);
    CHECK(v.views_ok);
    CHECK_RC(v.good, EMBER_OK);
    CHECK_RC(v.after, EMBER_ERR_ALREADY_ANSWERED);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- stop and free from the engine's own callbacks never deadlock ---- */

static struct {
    ember_server *s;
    volatile int released, free_refused, stop_ok, hook_stops, log_stops;
} k;

static void release_stops_and_frees(void *ud) {
    (void)ud;
    /* Runs during the stop: stopping again returns at once, freeing is refused. */
    if (ember_server_stop(k.s, 1000) == EMBER_OK) atomic_inc(&k.stop_ok);
    if (ember_server_free(k.s) == EMBER_ERR_STATE) atomic_inc(&k.free_refused);
    if (ember_server_wait(k.s, 10) == EMBER_ERR_STATE) atomic_inc(&k.free_refused);
    atomic_inc(&k.released);
}

static void hook_stops(void *ud) {
    (void)ud;
    if (k.s && ember_server_stop(k.s, 1000) == EMBER_OK) atomic_inc(&k.hook_stops);
}

static void never_answer(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)req; (void)info;
}

/* msg is not NUL-terminated. */
static int contains(const char *msg, size_t len, const char *word) {
    size_t n = strlen(word), i;
    for (i = 0; i + n <= len; i++)
        if (memcmp(msg + i, word, n) == 0) return 1;
    return 0;
}

static void log_stops(void *ud, int32_t level, const char *msg, size_t len) {
    (void)ud; (void)level;
    /* The handler timeout's warning is logged on an I/O thread. */
    if (contains(msg, len, "no answer within") && ember_server_stop(k.s, 1000) == EMBER_OK) atomic_inc(&k.log_stops);
}

static void test_stop_from_callbacks(void) {
    ember_server *s = new_server();
    http_resp r;
    uint16_t port;
    memset((void *)&k, 0, sizeof k);
    k.s = s;
    CHECK_RC(ember_server_set_thread_hooks(s, NULL, hook_stops, NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/", never_answer, NULL, release_stops_and_frees), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/nothing-here", &r) == 0 && r.status == 404);
    http_free(&r);
    CHECK_RC(ember_server_stop(s, 2000), EMBER_OK);
    CHECK(atomic_get(&k.released) == 1);
    CHECK(atomic_get(&k.stop_ok) == 1);
    CHECK(atomic_get(&k.free_refused) == 2);
    CHECK(atomic_get(&k.hook_stops) >= 1);
    CHECK_RC(ember_server_free(s), EMBER_OK);

    /* A log callback on an I/O thread that stops the server. */
    s = new_server();
    memset((void *)&k, 0, sizeof k);
    k.s = s;
    CHECK_RC(ember_server_set_log(s, log_stops, NULL, EMBER_LOG_WARN), EMBER_OK);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_HANDLER_TIMEOUT_MS, 100), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/", never_answer, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/", &r) == 0 && r.status == 503);
    http_free(&r);
    CHECK_RC(ember_server_wait(s, 5000), EMBER_OK);
    CHECK(atomic_get(&k.log_stops) == 1);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

int main(void) {
    h_run("sized structs: get_info and stats never write past the caller's size", test_sized_structs);
    h_run("a refused answer keeps the request and its views", test_refused_answer_keeps_the_request);
    h_run("stop/free/wait from release, thread-hook and log callbacks", test_stop_from_callbacks);
    return h_finish();
}
