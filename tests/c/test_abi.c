/* The ABI surface itself: version, result names, NULL and invalid arguments, the
 * per-thread last error, garbage handles. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void test_version(void) {
    const char *v = ember_version();
    CHECK(v != NULL && v[0] >= '0' && v[0] <= '9');
    CHECK(ember_abi_version() == EMBER_ABI_VERSION);
}

static void test_result_names(void) {
    static const struct { ember_result code; const char *name; } names[] = {
        {EMBER_OK, "EMBER_OK"},
        {EMBER_ERR_NULL, "EMBER_ERR_NULL"},
        {EMBER_ERR_INVALID_ARG, "EMBER_ERR_INVALID_ARG"},
        {EMBER_ERR_STATE, "EMBER_ERR_STATE"},
        {EMBER_ERR_BIND, "EMBER_ERR_BIND"},
        {EMBER_ERR_ROUTE, "EMBER_ERR_ROUTE"},
        {EMBER_ERR_ALREADY_ANSWERED, "EMBER_ERR_ALREADY_ANSWERED"},
        {EMBER_ERR_TIMED_OUT, "EMBER_ERR_TIMED_OUT"},
        {EMBER_ERR_CLIENT_GONE, "EMBER_ERR_CLIENT_GONE"},
        {EMBER_ERR_INVALID_HANDLE, "EMBER_ERR_INVALID_HANDLE"},
        {EMBER_ERR_NOT_FOUND, "EMBER_ERR_NOT_FOUND"},
        {EMBER_ERR_BUFFER_TOO_SMALL, "EMBER_ERR_BUFFER_TOO_SMALL"},
        {EMBER_ERR_PANIC, "EMBER_ERR_PANIC"},
        {EMBER_ERR_RUNTIME, "EMBER_ERR_RUNTIME"},
    };
    size_t i;
    const char *unknown = ember_result_name(-12345);
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *got = ember_result_name(names[i].code);
        CHECK_STR(got, got ? strlen(got) : 0, names[i].name);
    }
    CHECK_STR(unknown, unknown ? strlen(unknown) : 0, "EMBER_ERR_UNKNOWN");
    CHECK(ember_result_name(7) != NULL);
}

static void handler_ok(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    ember_request_respond(req, 200, NULL, 0, "ok", 2);
}

static int last_error_set(void) {
    const char *e = ember_last_error();
    return e != NULL && e[0] != '\0';
}

/* Every pointer argument, one at a time. The engine must answer EMBER_ERR_NULL, explain
 * it in ember_last_error, and not crash. */
static void test_null_arguments(void) {
    ember_server *s = new_server();
    uint16_t port = 0;
    ember_stats st;

    CHECK_RC(ember_server_new(NULL), EMBER_ERR_NULL);
    CHECK(last_error_set());
    CHECK_RC(ember_server_free(NULL), EMBER_OK); /* documented as a no-op */
    CHECK_RC(ember_server_listen(NULL, "127.0.0.1:0"), EMBER_ERR_NULL);
    CHECK(last_error_set());
    CHECK_RC(ember_server_listen(s, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_set_workers(NULL, 1), EMBER_ERR_NULL);
    CHECK_RC(ember_server_set_dispatch(NULL, EMBER_DISPATCH_POOL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_set_pool_threads(NULL, 1), EMBER_ERR_NULL);
    CHECK_RC(ember_server_set_limit(NULL, EMBER_LIMIT_MAX_HEADERS, 100), EMBER_ERR_NULL);
    CHECK_RC(ember_server_set_log(NULL, NULL, NULL, EMBER_LOG_INFO), EMBER_ERR_NULL);
    CHECK_RC(ember_server_set_log(s, NULL, NULL, EMBER_LOG_INFO), EMBER_OK); /* back to the default */
    CHECK_RC(ember_server_set_thread_hooks(NULL, NULL, NULL, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_route(NULL, "GET", "/", handler_ok, NULL, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_route(s, "GET", NULL, handler_ok, NULL, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_route(s, "GET", "/", NULL, NULL, NULL), EMBER_ERR_NULL);
    CHECK(last_error_set());
    CHECK_RC(ember_server_start(NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_port(NULL, 0, &port), EMBER_ERR_NULL);
    CHECK_RC(ember_server_port(s, 0, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_stop(NULL, 0), EMBER_ERR_NULL);
    CHECK_RC(ember_server_wait(NULL, 0), EMBER_ERR_NULL);
    CHECK_RC(ember_server_stats(NULL, &st, sizeof(ember_stats)), EMBER_ERR_NULL);
    CHECK_RC(ember_server_stats(s, NULL, sizeof(ember_stats)), EMBER_ERR_NULL);
    /* NULL where it means "none" is fine. */
    CHECK_RC(ember_server_route(s, NULL, "/any", handler_ok, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_set_thread_hooks(s, NULL, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void test_invalid_arguments(void) {
    ember_server *s = new_server();
    static const char bad_utf8[] = {'/', (char)0xC3, (char)0x28, 0};
    CHECK_RC(ember_server_set_dispatch(s, 7), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_set_dispatch(s, -1), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_set_limit(s, 999, 1), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_MAX_HEADER_BYTES, 100), EMBER_ERR_INVALID_ARG); /* min 1024 */
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_MAX_BODY_BYTES, 0), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_listen(s, "not an address"), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_listen(s, "127.0.0.1:70000"), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_listen(s, bad_utf8), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_route(s, "GET", "no-slash", handler_ok, NULL, NULL), EMBER_ERR_ROUTE);
    CHECK_RC(ember_server_route(s, "GET", bad_utf8, handler_ok, NULL, NULL), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_route(s, "G T", "/m", handler_ok, NULL, NULL), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_route(s, "GET", "/dup", handler_ok, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/dup", handler_ok, NULL, NULL), EMBER_ERR_ROUTE);
    CHECK(last_error_set());
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* The documented idiom: ask for the length, then copy. Asking must not replace the
 * message being asked about. */
static void test_last_error_copy(void) {
    char msg[512], small[4], again[512];
    size_t full = 0, len = 0;
    CHECK_RC(ember_server_new(NULL), EMBER_ERR_NULL);
    snprintf(msg, sizeof msg, "%s", ember_last_error());
    full = strlen(msg);
    CHECK(full > 0);
    CHECK_RC(ember_last_error_copy(NULL, 0, &len), EMBER_ERR_BUFFER_TOO_SMALL);
    CHECK(len == full);
    CHECK_RC(ember_last_error_copy(small, sizeof small, &len), EMBER_ERR_BUFFER_TOO_SMALL);
    CHECK(len == full);
    CHECK(small[3] == '\0' && memcmp(small, msg, 3) == 0);
    CHECK_RC(ember_last_error_copy(again, sizeof again, &len), EMBER_OK);
    CHECK_STR(again, len, msg);
    CHECK_RC(ember_last_error_copy(NULL, sizeof small, &len), EMBER_ERR_NULL);
}

static void *fresh_thread_error(void *out) {
    const char *e = ember_last_error();
    *(int *)out = e != NULL && e[0] == '\0';
    return NULL;
}

static void test_last_error_is_per_thread(void) {
    pthread_t t;
    int empty = 0;
    CHECK_RC(ember_server_new(NULL), EMBER_ERR_NULL);
    CHECK(pthread_create(&t, NULL, fresh_thread_error, &empty) == 0);
    pthread_join(t, NULL);
    CHECK(empty);
    CHECK(last_error_set());
}

static void test_garbage_handles(void) {
    static const ember_request garbage[] = {0, 1, 12345, 0xdeadbeefdeadbeefULL, ~(ember_request)0};
    ember_server *s = new_server();
    ember_request_info info;
    ember_str v;
    size_t i;
    /* Also with a live server: handles must not be confused with its slots. */
    CHECK_RC(ember_server_route(s, "GET", "/", handler_ok, NULL, NULL), EMBER_OK);
    start_server(s);
    for (i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        CHECK_RC(ember_request_respond(garbage[i], 200, NULL, 0, "x", 1), EMBER_ERR_INVALID_HANDLE);
        CHECK_RC(ember_request_respond_nocopy(garbage[i], 200, NULL, 0, "x", 1, NULL, NULL), EMBER_ERR_INVALID_HANDLE);
        CHECK_RC(ember_request_get_info(garbage[i], &info, sizeof(ember_request_info)), EMBER_ERR_INVALID_HANDLE);
        CHECK_RC(ember_request_header(garbage[i], "host", &v), EMBER_ERR_INVALID_HANDLE);
        CHECK_RC(ember_request_param(garbage[i], "id", &v), EMBER_ERR_INVALID_HANDLE);
    }
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

int main(void) {
    h_run("version", test_version);
    h_run("result names", test_result_names);
    h_run("null arguments", test_null_arguments);
    h_run("invalid arguments", test_invalid_arguments);
    h_run("last error copy", test_last_error_copy);
    h_run("last error is per thread", test_last_error_is_per_thread);
    h_run("garbage handles", test_garbage_handles);
    return h_finish();
}
