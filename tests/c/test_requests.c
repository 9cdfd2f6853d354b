/* Requests and answers: the info struct, lookups, deferred answers, the error codes of
 * late, double and gone answers, respond argument checks, engine 404/405. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

#include "harness.h"

/* Handlers run on engine threads; they record, the main thread asserts. */
static struct {
    volatile int calls;
    ember_request held;
    char method[16], path[64], query[64], route[64], remote[64], param[64], xtest[64], xtest_mixed[64];
    uint32_t http_version;
    int lower_names, same_info, body_ok;
    ember_result missing_header, missing_param, null_rc[7], nocopy_null_released;
    ember_result again_rc, again_nocopy_rc, bad_rc[4];
    int again_nocopy_released;
} seen;

static void reset(void) { memset(&seen, 0, sizeof seen); }

static void copy_view(char *dst, size_t cap, ember_str v) {
    size_t n = v.len < cap - 1 ? v.len : cap - 1;
    if (n) memcpy(dst, v.ptr, n);
    dst[n] = '\0';
}

static void inspect(void *ud, ember_request req, const ember_request_info *info) {
    ember_request_info again;
    ember_str v;
    size_t i;
    int released = 0;
    (void)ud;
    copy_view(seen.method, sizeof seen.method, info->method);
    copy_view(seen.path, sizeof seen.path, info->path);
    copy_view(seen.query, sizeof seen.query, info->query);
    copy_view(seen.route, sizeof seen.route, info->route);
    copy_view(seen.remote, sizeof seen.remote, info->remote_addr);
    seen.http_version = info->http_version;
    seen.lower_names = info->header_count > 0;
    for (i = 0; i < info->header_count; i++) {
        const ember_header *h = &info->headers[i];
        size_t k;
        for (k = 0; k < h->name.len; k++)
            if (h->name.ptr[k] >= 'A' && h->name.ptr[k] <= 'Z') seen.lower_names = 0;
    }
    if (ember_request_param(req, "id", &v) == EMBER_OK) copy_view(seen.param, sizeof seen.param, v);
    if (ember_request_header(req, "x-test", &v) == EMBER_OK) copy_view(seen.xtest, sizeof seen.xtest, v);
    if (ember_request_header(req, "X-Test", &v) == EMBER_OK) copy_view(seen.xtest_mixed, sizeof seen.xtest_mixed, v);
    seen.missing_header = ember_request_header(req, "x-absent", &v);
    seen.missing_param = ember_request_param(req, "nope", &v);
    seen.same_info = ember_request_get_info(req, &again, sizeof(ember_request_info)) == EMBER_OK && again.id == req && info->id == req &&
                     again.path.ptr == info->path.ptr && again.header_count == info->header_count;
    /* NULL where a pointer is required, with a live handle. */
    seen.null_rc[0] = ember_request_get_info(req, NULL, sizeof(ember_request_info));
    seen.null_rc[1] = ember_request_header(req, NULL, &v);
    seen.null_rc[2] = ember_request_header(req, "x-test", NULL);
    seen.null_rc[3] = ember_request_param(req, NULL, &v);
    seen.null_rc[4] = ember_request_param(req, "id", NULL);
    seen.null_rc[5] = ember_request_respond(req, 200, NULL, 5, "x", 1);
    seen.null_rc[6] = ember_request_respond(req, 200, NULL, 0, NULL, 5);
    seen.nocopy_null_released = 0;
    ember_request_respond_nocopy(req, 200, NULL, 0, NULL, 5, count_release, &released);
    seen.nocopy_null_released = released; /* documented: on failure, called before returning */
    ember_request_respond(req, 200, NULL, 0, "seen", 4);
    atomic_inc(&seen.calls);
}

static void test_request_info(void) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    int i;
    reset();
    CHECK_RC(ember_server_route(s, "GET", "/users/{id}", inspect, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_raw(port, "GET /users/a%20b?x=1&y=2 HTTP/1.1\r\nHost: h\r\nX-Test: one\r\nX-Test: two\r\n"
                         "Connection: close\r\n\r\n", &r) == 0);
    CHECK(r.status == 200);
    CHECK_STR(r.body, r.body_len, "seen");
    http_free(&r);
    CHECK(wait_for(&seen.calls, 1, 2000)); /* the handler may still be running after it answered */
    CHECK_STR(seen.method, strlen(seen.method), "GET");
    CHECK_STR(seen.path, strlen(seen.path), "/users/a%20b");
    CHECK_STR(seen.query, strlen(seen.query), "x=1&y=2");
    CHECK_STR(seen.route, strlen(seen.route), "/users/{id}");
    CHECK_STR(seen.param, strlen(seen.param), "a b");
    CHECK(strncmp(seen.remote, "127.0.0.1:", 10) == 0);
    CHECK(seen.http_version == 11);
    CHECK(seen.lower_names);
    CHECK_STR(seen.xtest, strlen(seen.xtest), "one"); /* the first value */
    CHECK_STR(seen.xtest_mixed, strlen(seen.xtest_mixed), "one");
    CHECK_RC(seen.missing_header, EMBER_ERR_NOT_FOUND);
    CHECK_RC(seen.missing_param, EMBER_ERR_NOT_FOUND);
    CHECK(seen.same_info);
    for (i = 0; i < 7; i++) CHECK_RC(seen.null_rc[i], EMBER_ERR_NULL);
    CHECK(seen.nocopy_null_released == 1);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void echo(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud;
    seen.body_ok = info->body.len == 11 && memcmp(info->body.ptr, "hello\0world", 11) == 0;
    ember_request_respond(req, 200, "Content-Type: application/octet-stream", 38, info->body.ptr, info->body.len);
}

static void test_body(void) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    static const char req[] = "POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello\0world";
    int fd;
    reset();
    CHECK_RC(ember_server_route(s, "POST", "/echo", echo, NULL, NULL), EMBER_OK);
    port = start_server(s);
    fd = http_connect(port);
    CHECK(fd >= 0 && http_send(fd, req, sizeof req - 1) == 0 && http_read(fd, &r) == 0);
    if (fd >= 0) close(fd);
    CHECK(seen.body_ok);
    CHECK(r.status == 200 && r.body_len == 11 && memcmp(r.body, "hello\0world", 11) == 0);
    http_free(&r);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- deferred answers ---- */

static void *answer_from_thread(void *arg) {
    ember_request req = *(ember_request *)arg;
    free(arg);
    sleep_ms(50);
    seen.bad_rc[0] = ember_request_respond(req, 200, NULL, 0, "deferred", 8);
    seen.again_rc = ember_request_respond(req, 200, NULL, 0, "twice", 5);
    atomic_inc(&seen.calls);
    return NULL;
}

static void defer(void *ud, ember_request req, const ember_request_info *info) {
    pthread_t t;
    ember_request *copy = malloc(sizeof *copy);
    (void)ud; (void)info;
    *copy = req;
    if (pthread_create(&t, NULL, answer_from_thread, copy) == 0) pthread_detach(t);
}

static void test_deferred(void) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    uint64_t t0;
    reset();
    CHECK_RC(ember_server_route(s, "GET", "/defer", defer, NULL, NULL), EMBER_OK);
    port = start_server(s);
    t0 = now_ms();
    CHECK(http_get(port, "/defer", &r) == 0 && r.status == 200);
    CHECK(now_ms() - t0 >= 45);
    CHECK_STR(r.body, r.body_len, "deferred");
    http_free(&r);
    CHECK(wait_for(&seen.calls, 1, 2000));
    CHECK_RC(seen.bad_rc[0], EMBER_OK);
    CHECK_RC(seen.again_rc, EMBER_ERR_ALREADY_ANSWERED);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void hold(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    seen.held = req;
    atomic_inc(&seen.calls);
}

static void test_answer_after_timeout(void) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    uint64_t t0, took;
    reset();
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_HANDLER_TIMEOUT_MS, 200), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/hold", hold, NULL, NULL), EMBER_OK);
    port = start_server(s);
    t0 = now_ms();
    CHECK(http_get(port, "/hold", &r) == 0 && r.status == 503);
    took = now_ms() - t0;
    CHECK(took >= 180 && took < 2000);
    http_free(&r);
    CHECK_RC(ember_request_respond(seen.held, 200, NULL, 0, "late", 4), EMBER_ERR_TIMED_OUT);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void test_answer_after_client_left(void) {
    ember_server *s = new_server();
    uint16_t port;
    int fd, released = 0;
    static const char req[] = "GET /hold HTTP/1.1\r\nHost: h\r\n\r\n";
    reset();
    CHECK_RC(ember_server_route(s, "GET", "/hold", hold, NULL, NULL), EMBER_OK);
    port = start_server(s);
    fd = http_connect(port);
    CHECK(fd >= 0 && http_send(fd, req, sizeof req - 1) == 0);
    CHECK(wait_for(&seen.calls, 1, 5000));
    close(fd);
    sleep_ms(300); /* the engine learns of the close from the socket */
    CHECK_RC(ember_request_respond(seen.held, 200, NULL, 0, "x", 1), EMBER_ERR_CLIENT_GONE);
    CHECK_RC(ember_request_respond_nocopy(seen.held, 200, NULL, 0, "x", 1, count_release, &released),
             EMBER_ERR_CLIENT_GONE);
    CHECK(released == 1);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- answering twice, bad answers ---- */

static void answer_twice(void *ud, ember_request req, const ember_request_info *info) {
    int released = 0;
    (void)ud; (void)info;
    seen.bad_rc[0] = ember_request_respond(req, 99, NULL, 0, NULL, 0);
    seen.bad_rc[1] = ember_request_respond(req, 1000, NULL, 0, NULL, 0);
    seen.bad_rc[2] = ember_request_respond(req, 200, "NoColonHere", 11, NULL, 0);
    seen.bad_rc[3] = ember_request_respond(req, 200, "Bad Name: v", 11, NULL, 0);
    /* After refused answers the request still waits for a correct one. */
    ember_request_respond(req, 201, "X-Custom: yes\r\nContent-Type: text/plain", 39, "created", 7);
    seen.again_rc = ember_request_respond(req, 200, NULL, 0, "again", 5);
    seen.again_nocopy_rc = ember_request_respond_nocopy(req, 200, NULL, 0, "again", 5, count_release, &released);
    seen.again_nocopy_released = released;
    seen.held = req;
    atomic_inc(&seen.calls);
}

static void test_answer_twice(void) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    ember_result late;
    int i;
    reset();
    CHECK_RC(ember_server_route(s, "GET", "/twice", answer_twice, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/twice", &r) == 0 && r.status == 201);
    CHECK_STR(r.body, r.body_len, "created");
    CHECK(http_header(&r, "x-custom") && strcmp(http_header(&r, "x-custom"), "yes") == 0);
    CHECK(http_header(&r, "content-length") && strcmp(http_header(&r, "content-length"), "7") == 0);
    http_free(&r);
    CHECK(wait_for(&seen.calls, 1, 2000)); /* the handler may still be running after it answered */
    for (i = 0; i < 4; i++) CHECK_RC(seen.bad_rc[i], EMBER_ERR_INVALID_ARG);
    CHECK_RC(seen.again_rc, EMBER_ERR_ALREADY_ANSWERED);
    CHECK_RC(seen.again_nocopy_rc, EMBER_ERR_ALREADY_ANSWERED);
    CHECK(seen.again_nocopy_released == 1);
    sleep_ms(50);
    /* Long after: still an error; which one depends on whether the slot was recycled. */
    late = ember_request_respond(seen.held, 200, NULL, 0, "x", 1);
    CHECK(late == EMBER_ERR_ALREADY_ANSWERED || late == EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void test_engine_404_405(void) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    const char *allow;
    reset();
    CHECK_RC(ember_server_route(s, "GET", "/users/{id}", hold, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/nothing/here", &r) == 0 && r.status == 404);
    http_free(&r);
    CHECK(http_raw(port, "DELETE /users/1 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", &r) == 0);
    CHECK(r.status == 405);
    allow = http_header(&r, "allow");
    CHECK(allow && strstr(allow, "GET"));
    http_free(&r);
    CHECK(seen.calls == 0);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* HTTP/1.0 over IPv6 loopback: the version and the bracketed remote address. */
static int connect6(uint16_t port) {
    struct sockaddr_in6 a;
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_loopback;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
    return fd;
}

static void test_http10_ipv6(void) {
    ember_server *s;
    uint16_t port6 = 0;
    http_resp r;
    int fd, probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a;
    static const char req[] = "GET /users/6 HTTP/1.0\r\n\r\n";
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    if (probe < 0 || bind(probe, (struct sockaddr *)&a, sizeof a) != 0) {
        printf("  (no IPv6 loopback here: skipped)\n");
        if (probe >= 0) close(probe);
        return;
    }
    close(probe);
    reset();
    s = new_server();
    CHECK_RC(ember_server_listen(s, "[::1]:0"), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/users/{id}", inspect, NULL, NULL), EMBER_OK);
    start_server(s);
    CHECK_RC(ember_server_port(s, 1, &port6), EMBER_OK);
    fd = connect6(port6);
    CHECK(fd >= 0 && http_send(fd, req, sizeof req - 1) == 0 && http_read(fd, &r) == 0);
    if (fd >= 0) close(fd);
    CHECK(r.status == 200);
    CHECK_STR(r.body, r.body_len, "seen");
    http_free(&r);
    CHECK(wait_for(&seen.calls, 1, 2000));
    CHECK(seen.http_version == 10);
    CHECK(strncmp(seen.remote, "[::1]:", 6) == 0);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

int main(void) {
    h_run("request info and lookups", test_request_info);
    h_run("binary request body", test_body);
    h_run("deferred answer from another thread", test_deferred);
    h_run("answer after the handler timeout", test_answer_after_timeout);
    h_run("answer after the client left", test_answer_after_client_left);
    h_run("answering twice, refused answers", test_answer_twice);
    h_run("engine 404 and 405", test_engine_404_405);
    h_run("HTTP/1.0 over IPv6", test_http10_ipv6);
    return h_finish();
}
