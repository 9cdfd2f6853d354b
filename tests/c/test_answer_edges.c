/* Edges of the answer path: use after answer, headers the engine owns, bodiless statuses,
 * HEAD, route shapes, the log callback. Lifetimes (stops, frees, stale handles) are in
 * test_lifetime_edges.c. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

#include "harness.h"

static struct {
    volatile int calls;
    ember_result info_after, header_after, cr_rc, nul_rc;
    char param[64];
} e;

static void copy_view(char *dst, size_t cap, ember_str v) {
    size_t n = v.len < cap - 1 ? v.len : cap - 1;
    if (n) memcpy(dst, v.ptr, n);
    dst[n] = '\0';
}

static void use_after_answer(void *ud, ember_request req, const ember_request_info *info) {
    ember_request_info again;
    ember_str v;
    static const char nul_header[] = "X-A: b\0c";
    (void)ud; (void)info;
    e.cr_rc = ember_request_respond(req, 200, "X-A: b\rX-B: c", 13, NULL, 0);
    e.nul_rc = ember_request_respond(req, 200, nul_header, sizeof nul_header - 1, NULL, 0);
    ember_request_respond(req, 200, NULL, 0, "done", 4);
    /* The views die with the answer, so the lookups must refuse now. */
    e.info_after = ember_request_get_info(req, &again, sizeof(ember_request_info));
    e.header_after = ember_request_header(req, "host", &v);
    atomic_inc(&e.calls);
}

static void test_use_after_answer(void) {
    ember_server *s = new_server();
    http_resp r;
    uint16_t port;
    memset(&e, 0, sizeof e);
    CHECK_RC(ember_server_route(s, "GET", "/", use_after_answer, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/", &r) == 0 && r.status == 200);
    CHECK(http_header(&r, "x-a") == NULL);
    http_free(&r);
    CHECK(wait_for(&e.calls, 1, 2000));
    CHECK_RC(e.cr_rc, EMBER_ERR_INVALID_ARG);
    CHECK_RC(e.nul_rc, EMBER_ERR_INVALID_ARG);
    CHECK(e.info_after == EMBER_ERR_ALREADY_ANSWERED || e.info_after == EMBER_ERR_INVALID_HANDLE);
    CHECK(e.header_after == EMBER_ERR_ALREADY_ANSWERED || e.header_after == EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- headers and statuses where the engine must keep the framing right ---- */

static void framing(void *ud, ember_request req, const ember_request_info *info) {
    const char *h = ud;
    uint16_t status = info->path.len > 1 && info->path.ptr[1] == '2' ? 204 : info->path.ptr[1] == '3' ? 304 : 200;
    ember_request_respond(req, status, h, strlen(h), "abc", 3);
}

static int count_header(const char *head, const char *lower_name) {
    int n = 0;
    const char *p = head;
    size_t len = strlen(lower_name);
    while (p && (p = strstr(p, "\r\n")) != NULL) {
        size_t k;
        p += 2;
        for (k = 0; k < len && p[k] && (p[k] | 0x20) == lower_name[k]; k++) {}
        if (k == len && p[k] == ':') n++;
    }
    return n;
}

/* Two requests on one connection: a wrong length or a stray body breaks the second. */
static void two_on_one(uint16_t port, const char *first, int want_status) {
    char req[256];
    http_resp r;
    int fd = http_connect(port), n;
    n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", first);
    CHECK(fd >= 0 && http_send(fd, req, (size_t)n) == 0 && http_read(fd, &r) == 0);
    if (!CHECK(r.status == want_status)) fprintf(stderr, "    %s: status %d\n", first, r.status);
    if (want_status == 200) {
        const char *cl = http_header(&r, "content-length");
        CHECK(cl && strcmp(cl, "3") == 0);
        CHECK_STR(r.body, r.body_len, "abc");
        CHECK(count_header(r.head, "content-length") == 1);
    } else {
        CHECK(r.body_len == 0);
    }
    http_free(&r);
    n = snprintf(req, sizeof req, "GET /ok HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    CHECK(fd >= 0 && http_send(fd, req, (size_t)n) == 0 && http_read(fd, &r) == 0);
    if (!CHECK(r.status == 200)) fprintf(stderr, "    after %s the next answer was broken\n", first);
    http_free(&r);
    if (fd >= 0) close(fd);
}

static void test_framing(void) {
    ember_server *s = new_server();
    http_resp r;
    uint16_t port;
    CHECK_RC(ember_server_route(s, "GET", "/ok", framing, "", NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/204", framing, "", NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/304", framing, "ETag: \"x\"", NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/cl", framing, "Content-Length: 999", NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/te", framing, "Transfer-Encoding: chunked", NULL), EMBER_OK);
    port = start_server(s);
    two_on_one(port, "/204", 204);
    two_on_one(port, "/304", 304);
    /* A host-supplied Content-Length or Transfer-Encoding must not reach the wire next
     * to the engine's own (or the respond call must refuse it: then a 5xx/timeout). */
    CHECK(http_get(port, "/cl", &r) == 0);
    CHECK(count_header(r.head, "content-length") <= 1);
    CHECK(r.status != 200 || (r.body_len == 3 && strcmp(http_header(&r, "content-length"), "3") == 0));
    http_free(&r);
    CHECK(http_get(port, "/te", &r) == 0);
    CHECK(count_header(r.head, "content-length") + count_header(r.head, "transfer-encoding") <= 1);
    CHECK(r.status != 200 || r.body_len == 3);
    http_free(&r);
    two_on_one(port, "/ok", 200);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void test_head(void) {
    ember_server *s = new_server();
    char buf[4096];
    size_t got = 0;
    ssize_t n;
    const char *end;
    static const char req[] = "HEAD /ok HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
    uint16_t port;
    int fd;
    CHECK_RC(ember_server_route(s, "GET", "/ok", framing, "", NULL), EMBER_OK);
    port = start_server(s);
    fd = http_connect(port);
    CHECK(fd >= 0 && http_send(fd, req, sizeof req - 1) == 0);
    while (fd >= 0 && got < sizeof buf - 1 && (n = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0) got += (size_t)n;
    buf[got] = '\0';
    if (fd >= 0) close(fd);
    CHECK(strncmp(buf, "HTTP/1.1 200", 12) == 0); /* HEAD falls back to the GET handler */
    end = strstr(buf, "\r\n\r\n");
    CHECK(end && end + 4 == buf + got); /* and carries no body */
    CHECK(strstr(buf, "ontent-Length: 3") || strstr(buf, "ontent-length: 3"));
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- route shapes ---- */

static void capture(void *ud, ember_request req, const ember_request_info *info) {
    ember_str v;
    (void)ud;
    if (ember_request_param(req, "rest", &v) == EMBER_OK) copy_view(e.param, sizeof e.param, v);
    ember_request_respond(req, 200, NULL, 0, info->method.ptr, info->method.len);
}

static void test_routes(void) {
    ember_server *s = new_server();
    http_resp r;
    uint16_t port;
    memset(&e, 0, sizeof e);
    CHECK_RC(ember_server_route(s, "GET", "/files/{*rest}", capture, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "*", "/any", capture, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/files/a/b%20c.txt", &r) == 0 && r.status == 200);
    http_free(&r);
    CHECK_STR(e.param, strlen(e.param), "a/b c.txt");
    CHECK(http_raw(port, "PATCH /any HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", &r) == 0);
    CHECK(r.status == 200);
    CHECK_STR(r.body, r.body_len, "PATCH");
    http_free(&r);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- the log callback ---- */

static volatile int warns, log_calls;

static void count_log(void *ud, int32_t level, const char *msg, size_t len) {
    (void)ud; (void)msg; (void)len;
    atomic_inc(&log_calls);
    if (level == EMBER_LOG_WARN) atomic_inc(&warns);
}

static void never_answer(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)req; (void)info;
}

static void test_log_callback(void) {
    ember_server *s = new_server();
    http_resp r;
    uint16_t port;
    int after_free;
    warns = log_calls = 0;
    CHECK_RC(ember_server_set_log(s, count_log, NULL, EMBER_LOG_WARN), EMBER_OK);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_HANDLER_TIMEOUT_MS, 50), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/", never_answer, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/", &r) == 0 && r.status == 503);
    http_free(&r);
    CHECK(wait_for(&warns, 1, 2000)); /* the timeout is reported as a warning */
    CHECK_RC(ember_server_free(s), EMBER_OK);
    after_free = atomic_get(&log_calls);
    sleep_ms(100);
    CHECK(atomic_get(&log_calls) == after_free);

    s = new_server(); /* min_level ERROR filters the warning out */
    warns = 0;
    CHECK_RC(ember_server_set_log(s, count_log, NULL, EMBER_LOG_ERROR), EMBER_OK);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_HANDLER_TIMEOUT_MS, 50), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/", never_answer, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/", &r) == 0 && r.status == 503);
    http_free(&r);
    sleep_ms(50);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(atomic_get(&warns) == 0);
}

int main(void) {
    h_run("use after answer, bad header bytes", test_use_after_answer);
    h_run("framing: 204, 304, host Content-Length/Transfer-Encoding", test_framing);
    h_run("HEAD uses the GET handler, no body", test_head);
    h_run("wildcard and any-method routes", test_routes);
    h_run("log callback levels, silent after free", test_log_callback);
    return h_finish();
}
