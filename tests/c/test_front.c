/* The engine's own features through the C ABI: static mounts, the output cache (marked by
 * "Ember-Cache", purged by prefix, counted), CORS preflights and request filters; and the
 * errors every one of those functions gives for misuse. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char dir[256];

static void write_file(const char *name, const char *text) {
    char path[512];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!CHECK(f != NULL)) return;
    fputs(text, f);
    fclose(f);
}

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/ember-front-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    write_file("a.txt", "file a\n");
    write_file("index.html", "<h1>index</h1>\n");
}

static void remove_dir(void) {
    char path[512];
    const char *names[] = {"a.txt", "index.html"};
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* ---- misuse: every function checks its arguments and the server's state ---- */

static void test_misuse_gets_error_codes(void) {
    ember_server *s = new_server();
    ember_cache_stats st;
    uint64_t n = 99;
    make_dir();
    CHECK_RC(ember_server_static(NULL, "/s", dir, 0, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_static(s, NULL, dir, 0, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_static(s, "/s", NULL, 0, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_static(s, "s", dir, 0, NULL), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_static(s, "/s", dir, 0x100, NULL), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_static(s, "/s", "/no/such/folder", 0, NULL), EMBER_ERR_INVALID_ARG);
    CHECK(strstr(ember_last_error(), "/no/such/folder") != NULL);
    CHECK_RC(ember_server_static(s, "/s", dir, 0, "bad\r\nvalue"), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_static(s, "/s", dir, EMBER_STATIC_DEFAULT, "max-age=5"), EMBER_OK);
    CHECK_RC(ember_server_static(s, "/s/", dir, 0, NULL), EMBER_ERR_ROUTE);
    /* Bit 8 names no coding (gzip 1, br 2, zstd 4); zstd is accepted by every build and
       left out by one without it. */
    CHECK_RC(ember_server_set_compression(s, 8, 0), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_set_compression(s, EMBER_COMPRESS_ZSTD, 0), EMBER_OK);
    CHECK_RC(ember_server_compression_path(s, "nope", false), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_cache_key_header(s, "bad name"), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_cors(s, "/api", "not an origin", NULL, NULL, NULL, 0, 0), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_cors(s, "/api", "*", "GET, B A D", NULL, NULL, 0, 0), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_cors(s, "/api", "*", NULL, NULL, NULL, 0, 2), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_cors(s, "/api", NULL, NULL, NULL, NULL, 0, 0), EMBER_ERR_NULL);
    CHECK_RC(ember_server_filter_ip(s, "10.0.0.0/40", true), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_filter_ip(s, "host.example", false), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_filter_methods(s, " , "), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_filter_path(s, ""), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_filter_path(NULL, "*"), EMBER_ERR_NULL);
    /* Not running: nothing cached, and the stats are zeros of the right size. */
    CHECK_RC(ember_server_cache_purge(s, "", &n), EMBER_OK);
    CHECK(n == 0);
    CHECK_RC(ember_server_cache_stats(s, &st, sizeof st), EMBER_OK);
    CHECK(st.size == sizeof st && st.hits == 0);
    CHECK_RC(ember_server_cache_stats(s, NULL, sizeof st), EMBER_ERR_NULL);
    start_server(s);
    /* Running with the cache off: the calls say so. */
    CHECK_RC(ember_server_cache_purge(s, "", &n), EMBER_ERR_STATE);
    CHECK_RC(ember_server_cache_stats(s, &st, sizeof st), EMBER_ERR_STATE);
    /* Settings are for before start. */
    CHECK_RC(ember_server_static(s, "/t", dir, 0, NULL), EMBER_ERR_STATE);
    CHECK_RC(ember_server_set_cache(s, 1 << 20), EMBER_ERR_STATE);
    CHECK_RC(ember_server_filter_max_url(s, 10), EMBER_ERR_STATE);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    remove_dir();
}

/* ---- behaviour over HTTP ---- */

static volatile int cached_calls;

static void cached(void *ud, ember_request req, const ember_request_info *info) {
    static const char head[] = "Content-Type: text/plain\r\nEmber-Cache: 60";
    char body[32];
    int n = snprintf(body, sizeof body, "call %d", atomic_get(&cached_calls) + 1);
    (void)ud; (void)info;
    atomic_inc(&cached_calls);
    ember_request_respond(req, 200, head, sizeof head - 1, body, (size_t)n);
}

static void ping(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    ember_request_respond(req, 200, NULL, 0, "pong", 4);
}

static void test_features_over_http(void) {
    ember_server *s = new_server();
    http_resp r;
    ember_cache_stats st;
    unsigned char small[offsetof(ember_cache_stats, stores) + 8];
    uint64_t purged = 0;
    uint16_t port;
    size_t i;
    int untouched = 1;
    make_dir();
    cached_calls = 0;
    CHECK_RC(ember_server_static(s, "/files", dir, EMBER_STATIC_DEFAULT, "max-age=5"), EMBER_OK);
    CHECK_RC(ember_server_set_cache(s, 1 << 20), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/c/{x}", cached, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/api/ping", ping, NULL, NULL), EMBER_OK);
    CHECK_RC(ember_server_cors(s, "/api", "https://a.example", "GET", NULL, NULL, 60, EMBER_CORS_CREDENTIALS), EMBER_OK);
    CHECK_RC(ember_server_filter_methods(s, "GET, HEAD, OPTIONS"), EMBER_OK);
    CHECK_RC(ember_server_filter_path(s, "*.secret"), EMBER_OK);
    port = start_server(s);

    CHECK(http_get(port, "/files/a.txt", &r) == 0 && r.status == 200);
    CHECK_STR(r.body, r.body_len, "file a\n");
    CHECK(strcmp(http_header(&r, "cache-control"), "max-age=5") == 0);
    http_free(&r);
    CHECK(http_get(port, "/files/", &r) == 0 && r.status == 200);
    CHECK_STR(r.body, r.body_len, "<h1>index</h1>\n");
    http_free(&r);
    CHECK(http_get(port, "/files/%2e%2e/etc/passwd", &r) == 0 && r.status == 403);
    http_free(&r);

    /* Cached: the handler runs once per key; the marker never reaches the client. */
    for (i = 0; i < 3; i++) {
        CHECK(http_get(port, "/c/one", &r) == 0 && r.status == 200);
        CHECK_STR(r.body, r.body_len, "call 1");
        CHECK(http_header(&r, "ember-cache") == NULL);
        http_free(&r);
    }
    CHECK(http_get(port, "/c/two", &r) == 0);
    CHECK_STR(r.body, r.body_len, "call 2");
    http_free(&r);
    CHECK(atomic_get(&cached_calls) == 2);
    CHECK_RC(ember_server_cache_stats(s, &st, sizeof st), EMBER_OK);
    CHECK(st.hits == 2 && st.misses == 2 && st.stores == 2 && st.entries == 2 && st.bytes > 0);
    memset(small, 0xA5, sizeof small);
    CHECK_RC(ember_server_cache_stats(s, (ember_cache_stats *)(void *)small, offsetof(ember_cache_stats, stores)), EMBER_OK);
    for (i = offsetof(ember_cache_stats, stores); i < sizeof small; i++) untouched &= small[i] == 0xA5;
    CHECK(untouched);
    CHECK_RC(ember_server_cache_purge(s, "/c/o", &purged), EMBER_OK);
    CHECK(purged == 1);
    CHECK_RC(ember_server_cache_purge(s, "/c/", NULL), EMBER_OK);
    CHECK(http_get(port, "/c/one", &r) == 0);
    CHECK_STR(r.body, r.body_len, "call 3");
    http_free(&r);

    /* CORS: the engine answers the preflight; credentials name the origin. */
    CHECK(http_raw(port, "OPTIONS /api/ping HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\n"
                         "Access-Control-Request-Method: GET\r\nConnection: close\r\n\r\n", &r) == 0);
    CHECK(r.status == 204);
    CHECK(strcmp(http_header(&r, "access-control-allow-origin"), "https://a.example") == 0);
    CHECK(strcmp(http_header(&r, "access-control-allow-credentials"), "true") == 0);
    http_free(&r);

    /* Filters: a method outside the list, a denied pattern. */
    CHECK(http_raw(port, "DELETE /api/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r) == 0);
    CHECK(r.status == 405 && strcmp(http_header(&r, "allow"), "GET, HEAD, OPTIONS") == 0);
    http_free(&r);
    CHECK(http_get(port, "/files/x.SECRET", &r) == 0 && r.status == 404);
    http_free(&r);

    CHECK_RC(ember_server_free(s), EMBER_OK);
    remove_dir();
}

int main(void) {
    h_run("misuse of the static, cache, CORS and filter functions gets error codes", test_misuse_gets_error_codes);
    h_run("static files, the output cache, CORS and filters over HTTP", test_features_over_http);
    return h_finish();
}
