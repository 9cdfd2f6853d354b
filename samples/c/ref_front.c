/* The reference app's use of the engine's front (tests/REFERENCE_APP.md): static files
 * under /static, compression, the output cache (GET /cached, POST /cache/purge), CORS on
 * /api and request filtering. Static files, compression, CORS and filters need no
 * handler at all: they are configured once, and the engine answers. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "ref_app.h"

static const char JSON_TYPE[] = "Content-Type: application/json";
static const char OOM[] = "{\"error\": \"out of memory\"}";

static void respond(ember_request req, uint16_t status, const char *headers, const char *body, size_t len) {
    ember_result rc = ember_request_respond(req, status, headers, strlen(headers), body, len);
    if (rc != EMBER_OK && rc != EMBER_ERR_CLIENT_GONE) ref_log_failure("respond", rc);
}

/* Finds name=value in a raw query; 1 if present. The value stays percent-encoded. */
static int query_param(ember_str q, const char *name, ember_str *out) {
    size_t i = 0, n = strlen(name);
    while (i < q.len) {
        size_t end = i;
        while (end < q.len && q.ptr[end] != '&') end++;
        if (end - i >= n + 1 && memcmp(q.ptr + i, name, n) == 0 && q.ptr[i + n] == '=') {
            out->ptr = q.ptr + i + n + 1;
            out->len = end - i - n - 1;
            return 1;
        }
        i = end + 1;
    }
    return 0;
}

/* A decimal 0..max (no sign, no spaces); 0 if not. */
static int parse_decimal(ember_str v, unsigned long max, unsigned long *out) {
    size_t i;
    unsigned long x = 0;
    if (v.len == 0 || v.len > 9) return 0;
    for (i = 0; i < v.len; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9') return 0;
        x = x * 10 + (unsigned long)(v.ptr[i] - '0');
    }
    if (x > max) return 0;
    *out = x;
    return 1;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static pthread_mutex_t cached_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long cached_calls;

static void on_cached(void *ud, ember_request req, const ember_request_info *info) {
    static const char bad[] = "{\"error\": \"bad query\"}";
    ember_str v;
    unsigned long ttl = 60, pad = 0, calls, flag;
    int cookie = 0, private_ = 0;
    char h[256], *b;
    size_t hlen, blen;
    (void)ud;
    if ((query_param(info->query, "ttl", &v) && !parse_decimal(v, 3600, &ttl)) || ttl == 0 ||
        (query_param(info->query, "pad", &v) && !parse_decimal(v, 100000, &pad)) ||
        (query_param(info->query, "cookie", &v) && !parse_decimal(v, 1, &flag))) {
        respond(req, 400, JSON_TYPE, bad, sizeof bad - 1);
        return;
    }
    if (query_param(info->query, "cookie", &v)) cookie = v.len == 1 && v.ptr[0] == '1';
    if (query_param(info->query, "private", &v)) {
        if (!parse_decimal(v, 1, &flag)) { respond(req, 400, JSON_TYPE, bad, sizeof bad - 1); return; }
        private_ = flag == 1;
    }
    pthread_mutex_lock(&cached_lock);
    calls = ++cached_calls;
    pthread_mutex_unlock(&cached_lock);
    hlen = (size_t)snprintf(h, sizeof h, "%s\r\nEmber-Cache: %lu\r\n%s%s", JSON_TYPE, ttl,
                            cookie ? "Set-Cookie: seen=1\r\n" : "", private_ ? "Cache-Control: private\r\n" : "");
    /* {"calls": N, "pad": "xxx…"}: the pad makes answers of a chosen size. */
    b = malloc(64 + pad);
    if (!b) { respond(req, 500, JSON_TYPE, OOM, sizeof OOM - 1); return; }
    blen = (size_t)snprintf(b, 64, "{\"calls\": %lu", calls);
    if (pad > 0) {
        memcpy(b + blen, ", \"pad\": \"", 10);
        blen += 10;
        memset(b + blen, 'x', pad);
        blen += pad;
        b[blen++] = '"';
    }
    b[blen++] = '}';
    {
        ember_result rc = ember_request_respond(req, 200, h, hlen, b, blen);
        if (rc != EMBER_OK && rc != EMBER_ERR_CLIENT_GONE) ref_log_failure("respond /cached", rc);
    }
    free(b);
}

/* user_data is the server: purging is a call on it, allowed from inside a handler. */
static void on_purge(void *ud, ember_request req, const ember_request_info *info) {
    ember_server *server = (ember_server *)ud;
    ember_str v = {NULL, 0};
    char prefix[1024], body[64];
    size_t i, n = 0;
    uint64_t purged = 0;
    ember_result rc;
    query_param(info->query, "prefix", &v);
    for (i = 0; i < v.len && n + 1 < sizeof prefix; i++) {
        if (v.ptr[i] == '%' && i + 2 < v.len + 0 && hexval(v.ptr[i + 1]) >= 0 && hexval(v.ptr[i + 2]) >= 0) {
            prefix[n++] = (char)(hexval(v.ptr[i + 1]) * 16 + hexval(v.ptr[i + 2]));
            i += 2;
        } else {
            prefix[n++] = v.ptr[i] == '+' ? ' ' : v.ptr[i];
        }
    }
    prefix[n] = '\0';
    rc = ember_server_cache_purge(server, prefix, &purged);
    if (rc != EMBER_OK) {
        ref_log_failure("cache purge", rc);
        respond(req, 500, JSON_TYPE, "{\"error\": \"purge failed\"}", sizeof "{\"error\": \"purge failed\"}" - 1);
        return;
    }
    n = (size_t)snprintf(body, sizeof body, "{\"purged\": %llu}", (unsigned long long)purged);
    respond(req, 200, JSON_TYPE, body, n);
}

static void on_api_ping(void *ud, ember_request req, const ember_request_info *info) {
    static const char body[] = "{\"pong\": true}";
    (void)ud; (void)info;
    respond(req, 200, "Content-Type: application/json\r\nX-Api-Version: 1", body, sizeof body - 1);
}

/* Static files, compression, the output cache, CORS and request filtering: all the
 * engine's, configured here (tests/REFERENCE_APP.md). */
ember_result ref_add_front(ember_server *server) {
    const char *www = getenv("EMBER_WWW");
    ember_result rc;
    if (!www || !*www) www = "samples/www";
#define FRONT(call) do { rc = (call); if (rc != EMBER_OK) return rc; } while (0)
    FRONT(ember_server_route(server, "GET", "/cached", on_cached, NULL, NULL));
    FRONT(ember_server_route(server, "POST", "/cache/purge", on_purge, server, NULL));
    FRONT(ember_server_route(server, "GET", "/api/ping", on_api_ping, NULL, NULL));
    FRONT(ember_server_route(server, "POST", "/api/ping", on_api_ping, NULL, NULL));
    rc = ember_server_static(server, "/static", www, EMBER_STATIC_DEFAULT, "public, max-age=60");
    if (rc == EMBER_ERR_UNSUPPORTED) {
        /* A library built without static files (the minimal one) says so; the rest stays. */
        ref_log_failure("static files (left out of this build)", rc);
    } else {
        FRONT(rc);
        /* The same folder as a single-page app: paths that name no file get index.html. */
        FRONT(ember_server_static(server, "/app", www, EMBER_STATIC_INDEX | EMBER_STATIC_SPA, "no-cache"));
    }
    FRONT(ember_server_set_compression(server, EMBER_COMPRESS_GZIP | EMBER_COMPRESS_BR | EMBER_COMPRESS_ZSTD, 1024));
    FRONT(ember_server_compression_path(server, "/echo", false));
    FRONT(ember_server_set_cache(server, 67108864));
    FRONT(ember_server_cors(server, "/api", "https://app.example", "GET, POST", "Content-Type, X-Api-Key",
                            "X-Api-Version", 600, 0));
    FRONT(ember_server_filter_ip(server, "127.0.0.2", false));
    FRONT(ember_server_filter_max_url(server, 8192));
    FRONT(ember_server_filter_methods(server, "GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS"));
    FRONT(ember_server_filter_path(server, "*.bak"));
    FRONT(ember_server_filter_path(server, "/private/*"));
#undef FRONT
    return EMBER_OK;
}

