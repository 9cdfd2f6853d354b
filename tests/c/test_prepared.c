/* Prepared answers (ember_answer_new / _free, ember_request_respond_answer) and
 * ember_request_respond_small: what a client receives, and misuse (NULL pointers, bad
 * lengths, a freed or forged answer) giving error codes without a crash. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

#include "harness.h"

static ember_answer hello;

/* http_header gives NULL for an absent header. */
static int header_is(const http_resp *r, const char *name, const char *want) {
    const char *v = http_header(r, name);
    return v != NULL && strcmp(v, want) == 0;
}

/* What handlers saw, asserted on the main thread. */
static struct {
    volatile int calls;
    ember_result freed_rc, forged_rc, zero_rc, again_rc;
    ember_result small_null_type, small_null_body, small_bad_status, small_bad_type;
} seen;

static void answer_prepared(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    ember_request_respond_answer(req, hello);
    seen.again_rc = ember_request_respond_answer(req, hello);
    atomic_inc(&seen.calls);
}

/* Answers with a freed answer, a forged one and 0 (each refused, the request still
 * open), then with a good small answer. */
static void answer_stale(void *ud, ember_request req, const ember_request_info *info) {
    ember_answer gone = 0;
    (void)ud; (void)info;
    if (ember_answer_new(200, NULL, 0, "x", 1, &gone) == EMBER_OK) ember_answer_free(gone);
    seen.freed_rc = ember_request_respond_answer(req, gone);
    seen.forged_rc = ember_request_respond_answer(req, 0x1234567800000042ull);
    seen.zero_rc = ember_request_respond_answer(req, 0);
    ember_request_respond_small(req, 200, "text/plain", 10, "still open", 10);
    atomic_inc(&seen.calls);
}

static void answer_small(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    seen.small_null_type = ember_request_respond_small(req, 200, NULL, 4, "body", 4);
    seen.small_null_body = ember_request_respond_small(req, 200, "text/plain", 10, NULL, 7);
    seen.small_bad_status = ember_request_respond_small(req, 42, "text/plain", 10, "x", 1);
    seen.small_bad_type = ember_request_respond_small(req, 200, "a\r\nX-Evil: 1", 13, "x", 1);
    ember_request_respond_small(req, 201, "application/json", 16, "{\"ok\": true}", 12);
    atomic_inc(&seen.calls);
}

static void answer_small_empty(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    ember_request_respond_small(req, 204, NULL, 0, NULL, 0);
}

static void test_prepared_answer_serves_many_requests(void) {
    static const char head[] = "Content-Type: application/json\r\nX-Prepared: yes\r\n";
    static const char body[] = "{\"code\": 1, \"msg\": \"Hello WebAPI\"}";
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    int i;
    memset(&seen, 0, sizeof seen);
    CHECK_RC(ember_answer_new(200, head, sizeof head - 1, body, sizeof body - 1, &hello), EMBER_OK);
    CHECK(hello != 0);
    CHECK_RC(ember_server_route(s, "GET", "/", answer_prepared, NULL, NULL), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < 5; i++) {
        CHECK(http_get(port, "/", &r) == 0);
        CHECK(r.status == 200);
        CHECK_STR(r.body, r.body_len, body);
        CHECK(header_is(&r, "content-type", "application/json"));
        CHECK(header_is(&r, "x-prepared", "yes"));
        http_free(&r);
    }
    CHECK(wait_for(&seen.calls, 5, 2000));
    CHECK_RC(seen.again_rc, EMBER_ERR_ALREADY_ANSWERED);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK_RC(ember_answer_free(hello), EMBER_OK);
    CHECK_RC(ember_answer_free(hello), EMBER_ERR_INVALID_HANDLE);
}

static void test_stale_answers_are_refused(void) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    memset(&seen, 0, sizeof seen);
    CHECK_RC(ember_server_route(s, "GET", "/", answer_stale, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/", &r) == 0);
    CHECK(r.status == 200);
    CHECK_STR(r.body, r.body_len, "still open");
    http_free(&r);
    CHECK(wait_for(&seen.calls, 1, 2000));
    CHECK_RC(seen.freed_rc, EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(seen.forged_rc, EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(seen.zero_rc, EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void test_small_answer(void) {
    ember_server *s = new_server();
    uint16_t port;
    http_resp r;
    memset(&seen, 0, sizeof seen);
    CHECK_RC(ember_server_route(s, "GET", "/", answer_small, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/empty", answer_small_empty, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/", &r) == 0);
    CHECK(r.status == 201);
    CHECK_STR(r.body, r.body_len, "{\"ok\": true}");
    CHECK(header_is(&r, "content-type", "application/json"));
    CHECK(strstr(r.head, "X-Evil") == NULL && strstr(r.head, "x-evil") == NULL);
    http_free(&r);
    CHECK(wait_for(&seen.calls, 1, 2000));
    CHECK_RC(seen.small_null_type, EMBER_ERR_NULL);
    CHECK_RC(seen.small_null_body, EMBER_ERR_NULL);
    CHECK_RC(seen.small_bad_status, EMBER_ERR_INVALID_ARG);
    CHECK_RC(seen.small_bad_type, EMBER_ERR_INVALID_ARG);
    CHECK(http_get(port, "/empty", &r) == 0);
    CHECK(r.status == 204 && r.body_len == 0);
    CHECK(http_header(&r, "content-type") == NULL);
    http_free(&r);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void test_misuse_outside_a_request(void) {
    ember_answer a = 7;
    /* NULL output, bad pointers for their lengths, bad status and header lines. */
    CHECK_RC(ember_answer_new(200, NULL, 0, NULL, 0, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_answer_new(200, NULL, 3, "x", 1, &a), EMBER_ERR_NULL);
    CHECK_RC(ember_answer_new(200, NULL, 0, NULL, 9, &a), EMBER_ERR_NULL);
    CHECK_RC(ember_answer_new(99, NULL, 0, NULL, 0, &a), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_answer_new(200, "no colon", 8, NULL, 0, &a), EMBER_ERR_INVALID_ARG);
    CHECK(a == 7); /* outputs untouched on failure */
    CHECK(strlen(ember_last_error()) > 0);
    /* Garbage answer handles and a request handle that was never issued. */
    CHECK_RC(ember_answer_free(0), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_answer_free(~0ull), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_answer_new(204, NULL, 0, NULL, 0, &a), EMBER_OK);
    CHECK_RC(ember_request_respond_answer(0xdeadbeefull, a), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_request_respond_small(0xdeadbeefull, 200, NULL, 0, NULL, 0), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_answer_free(a), EMBER_OK);
    CHECK_RC(ember_request_respond_answer(0xdeadbeefull, a), EMBER_ERR_INVALID_HANDLE);
}

int main(void) {
    h_run("a prepared answer serves many requests", test_prepared_answer_serves_many_requests);
    h_run("freed, forged and zero answers are refused", test_stale_answers_are_refused);
    h_run("the one-call small answer", test_small_answer);
    h_run("misuse outside a request", test_misuse_outside_a_request);
    return h_finish();
}
