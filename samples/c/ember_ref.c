/* The Ember reference app in C: the contract is tests/REFERENCE_APP.md.
 * Usage: ember_ref [port]   (default 8080; 0 picks a free port)
 * Env EMBER_TLS_CERT + EMBER_TLS_KEY (PEM files): also listen with TLS on EMBER_TLS_PORT
 * (default 0); EMBER_ACCESS_LOG=<file> (EMBER_ACCESS_LOG_FORMAT=combined|json). SIGHUP
 * reloads the certificates and reopens the access log. /metrics is the engine's.
 * This file: setup and the request/response routes. /slow's timer is in ref_slow.c, the
 * load-balancer options and the drain on SIGTERM in ref_fleet.c. Streaming (/sse, /stream,
 * /upload) is in ref_stream.c, WebSocket (/ws, /ws/chat) in ref_ws.c, the engine's front (static
 * files, compression, /cached, CORS on /api, filters) in ref_front.c. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "ref_app.h"

#ifdef _WIN32
/* Windows: Ctrl+C, Ctrl+Break and closing the console stop the server gracefully. */
#include <windows.h>
static HANDLE stop_event;
static volatile LONG stop_reason;

static BOOL WINAPI on_console_event(DWORD type) {
    InterlockedExchange(&stop_reason, (LONG)type + 1);
    SetEvent(stop_event);
    return TRUE; /* handled: main returns once the server stopped */
}
#endif

/* ---- a growable byte buffer; on out-of-memory it just stops growing and says so ---- */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} buf;

static void buf_add(buf *b, const char *s, size_t n) {
    if (b->oom || n == 0) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        char *p;
        while (cap < b->len + n) cap *= 2;
        p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void buf_adds(buf *b, const char *s) { buf_add(b, s, strlen(s)); }

/* Length of the valid UTF-8 sequence at s, 0 if it is not one (overlong, surrogate,
 * truncated...). Header values are raw bytes and JSON must be UTF-8. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    size_t len, i;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if ((s[0] & 0xE0) == 0xC0) { len = 2; cp = s[0] & 0x1Fu; }
    else if ((s[0] & 0xF0) == 0xE0) { len = 3; cp = s[0] & 0x0Fu; }
    else if ((s[0] & 0xF8) == 0xF0) { len = 4; cp = s[0] & 0x07u; }
    else return 0;
    if (len > n) return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return 0;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* Appends s as a quoted JSON string; invalid UTF-8 becomes U+FFFD. */
static void buf_json(buf *b, ember_str s) {
    const unsigned char *p = (const unsigned char *)s.ptr;
    size_t i = 0;
    buf_add(b, "\"", 1);
    while (i < s.len) {
        unsigned char c = p[i];
        size_t n;
        char esc[8];
        if (c == '"' || c == '\\') { esc[0] = '\\'; esc[1] = (char)c; buf_add(b, esc, 2); i++; continue; }
        if (c < 0x20 || c == 0x7F) {
            const char *named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            if (named) buf_adds(b, named);
            else { snprintf(esc, sizeof esc, "\\u%04x", (unsigned)c); buf_adds(b, esc); }
            i++;
            continue;
        }
        n = utf8_len(p + i, s.len - i);
        if (n == 0) { buf_adds(b, "\\ufffd"); i++; continue; }
        buf_add(b, (const char *)p + i, n);
        i += n;
    }
    buf_add(b, "\"", 1);
}

static int str_eq(ember_str a, const char *b) {
    size_t n = strlen(b);
    return a.len == n && (n == 0 || memcmp(a.ptr, b, n) == 0);
}

/* ---- answering ---- */

static const char JSON_TYPE[] = "Content-Type: application/json";
static const char OOM[] = "{\"error\": \"out of memory\"}";

/* The engine's error message must be copied before the next ember_ call replaces it. */
void ref_log_failure(const char *what, ember_result rc) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ember_last_error());
    fprintf(stderr, "ember_ref: %s: %s: %s\n", what, ember_result_name(rc), msg);
}

static void respond(ember_request req, uint16_t status, const char *headers, const char *body, size_t len) {
    ember_result rc = ember_request_respond(req, status, headers, strlen(headers), body, len);
    /* A client that hung up is ordinary traffic, not worth a log line under load. */
    if (rc != EMBER_OK && rc != EMBER_ERR_CLIENT_GONE) ref_log_failure("respond", rc);
}

static void respond_buf(ember_request req, buf *b) {
    if (b->oom) respond(req, 500, JSON_TYPE, OOM, sizeof OOM - 1);
    else respond(req, 200, JSON_TYPE, b->p, b->len);
    free(b->p);
}

/* ---- routes ---- */

static void on_root(void *ud, ember_request req, const ember_request_info *info) {
    static const char body[] = "{\"code\": 1, \"msg\": \"Hello WebAPI\"}";
    (void)ud; (void)info;
    respond(req, 200, JSON_TYPE, body, sizeof body - 1);
}

static void on_user(void *ud, ember_request req, const ember_request_info *info) {
    buf b = {0};
    ember_str id = {NULL, 0};
    size_t i;
    (void)ud;
    for (i = 0; i < info->param_count; i++)
        if (str_eq(info->params[i].name, "id")) id = info->params[i].value;
    buf_adds(&b, "{\"id\": ");
    buf_json(&b, id);
    buf_adds(&b, "}");
    respond_buf(req, &b);
}

static const char OCTETS[] = "Content-Type: application/octet-stream";

static void on_echo(void *ud, ember_request req, const ember_request_info *info) {
    buf h = {0};
    size_t i;
    int found = 0;
    (void)ud;
    buf_adds(&h, "Content-Type: ");
    for (i = 0; i < info->header_count && !found; i++) {
        if (str_eq(info->headers[i].name, "content-type")) {
            buf_add(&h, info->headers[i].value.ptr, info->headers[i].value.len);
            found = 1;
        }
    }
    if (!found) buf_adds(&h, "application/octet-stream");
    if (h.oom) respond(req, 500, JSON_TYPE, OOM, sizeof OOM - 1);
    else {
        ember_result rc = ember_request_respond(req, 200, h.p, h.len, info->body.ptr, info->body.len);
        /* A Content-Type the engine will not send back (odd bytes) must not leave the
         * request hanging until the handler timeout. */
        if (rc == EMBER_ERR_INVALID_ARG)
            rc = ember_request_respond(req, 200, OCTETS, sizeof OCTETS - 1, info->body.ptr, info->body.len);
        if (rc != EMBER_OK && rc != EMBER_ERR_CLIENT_GONE) ref_log_failure("respond /echo", rc);
    }
    free(h.p);
}

static void on_inspect(void *ud, ember_request req, const ember_request_info *info) {
    buf b = {0};
    size_t i, j, k;
    int first = 1;
    (void)ud;
    buf_adds(&b, "{\"method\": ");
    buf_json(&b, info->method);
    buf_adds(&b, ", \"path\": ");
    buf_json(&b, info->path);
    buf_adds(&b, ", \"query\": ");
    buf_json(&b, info->query);
    buf_adds(&b, ", \"headers\": {");
    /* A repeated header becomes one member, its values joined in arrival order; the
     * quadratic scan is fine for the engine's 100-header limit. */
    for (i = 0; i < info->header_count; i++) {
        const ember_str name = info->headers[i].name;
        buf joined = {0};
        int seen = 0;
        for (j = 0; j < i && !seen; j++)
            seen = info->headers[j].name.len == name.len &&
                   memcmp(info->headers[j].name.ptr, name.ptr, name.len) == 0;
        if (seen) continue;
        for (k = i; k < info->header_count; k++) {
            const ember_header *h = &info->headers[k];
            if (h->name.len != name.len || memcmp(h->name.ptr, name.ptr, name.len) != 0) continue;
            if (k != i) buf_adds(&joined, ", ");
            buf_add(&joined, h->value.ptr, h->value.len);
        }
        if (!first) buf_adds(&b, ", ");
        first = 0;
        buf_json(&b, name);
        buf_adds(&b, ": ");
        {
            ember_str v;
            v.ptr = joined.p;
            v.len = joined.len;
            buf_json(&b, v);
        }
        b.oom |= joined.oom;
        free(joined.p);
    }
    buf_adds(&b, "}, \"remote_addr\": ");
    buf_json(&b, info->remote_addr);
    buf_adds(&b, "}");
    respond_buf(req, &b);
}

static void on_fail(void *ud, ember_request req, const ember_request_info *info) {
    static const char body[] = "{\"error\": \"this handler always fails\"}";
    (void)ud;
    fprintf(stderr, "ember_ref: %.*s %.*s failed on purpose\n", (int)info->method.len,
            info->method.ptr ? info->method.ptr : "", (int)info->path.len, info->path.ptr ? info->path.ptr : "");
    respond(req, 500, JSON_TYPE, body, sizeof body - 1);
}

/* ---- setup ---- */

static void log_to_stderr(void *ud, int32_t level, const char *msg, size_t len) {
    static const char *names[] = {"?", "error", "warn", "info", "debug", "access"};
    (void)ud;
    fprintf(stderr, "ember [%s] ", level >= 1 && level <= 5 ? names[level] : names[0]);
    if (len) fwrite(msg, 1, len, stderr);
    fputc('\n', stderr);
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out) {
    char *end;
    if (!s || *s < '0' || *s > '9') return 0;
    errno = 0;
    *out = strtoul(s, &end, 10);
    return errno == 0 && *end == '\0' && *out <= max;
}

/* The optional parts of the contract: a TLS listener (listener 1) from EMBER_TLS_CERT and
 * EMBER_TLS_KEY, the access log from EMBER_ACCESS_LOG, and /metrics. Returns 1 when a TLS
 * listener was added. */
static int setup_extras(ember_server *server, ember_result *rc) {
    const char *cert = getenv("EMBER_TLS_CERT"), *key = getenv("EMBER_TLS_KEY");
    const char *log = getenv("EMBER_ACCESS_LOG"), *format = getenv("EMBER_ACCESS_LOG_FORMAT");
    const char *tls_port = getenv("EMBER_TLS_PORT");
    unsigned long port = 0;
    int tls = 0;
    char addr[32];
    if ((*rc = ember_server_set_metrics(server, "/metrics")) != EMBER_OK) return -1;
    if (log && *log) {
        int32_t f = format && strcmp(format, "json") == 0 ? EMBER_ACCESS_LOG_JSON : EMBER_ACCESS_LOG_COMBINED;
        if ((*rc = ember_server_set_access_log(server, f, log)) != EMBER_OK) return -1;
    }
    if (cert && *cert && key && *key) {
        ember_tls_config *config = NULL;
        if (tls_port && !parse_uint(tls_port, 65535, &port)) { *rc = EMBER_ERR_INVALID_ARG; return -1; }
        snprintf(addr, sizeof addr, "127.0.0.1:%lu", port);
        if ((*rc = ember_tls_config_new(&config)) != EMBER_OK) return -1;
        *rc = ember_tls_config_add_cert_files(config, NULL, cert, key);
        if (*rc == EMBER_OK) *rc = ember_server_listen_tls(server, addr, 0, config);
        ember_tls_config_free(config); /* the listener keeps its own copy */
        if (*rc != EMBER_OK) return -1;
        tls = 1;
    }
    *rc = EMBER_OK;
    return tls;
}

#define TRY(what, call) do { ember_result rc_ = (call); \
        if (rc_ != EMBER_OK) { ref_log_failure(what, rc_); ember_server_free(server); return 1; } } while (0)
/* A part of the contract a smaller build of the library may leave out (the minimal one has
 * no WebSocket and no static files): EMBER_ERR_UNSUPPORTED is said and the app goes on. */
#define TRY_OPTIONAL(what, call) do { ember_result rc_ = (call); \
        if (rc_ == EMBER_ERR_UNSUPPORTED) ref_log_failure(what " (left out of this build)", rc_); \
        else if (rc_ != EMBER_OK) { ref_log_failure(what, rc_); ember_server_free(server); return 1; } } while (0)

int main(int argc, char **argv) {
    ember_server *server = NULL;
#ifndef _WIN32
    sigset_t stop_signals;
#endif
    unsigned long port = 8080, workers = 0;
    int32_t dispatch = EMBER_DISPATCH_AUTO; /* the engine's default: fast and blocking-safe */
    const char *env;
    char addr[32];
    uint16_t bound = 0;
    int sig = 0;
    ember_result rc;
    int tls;

    if (argc > 2 || (argc == 2 && !parse_uint(argv[1], 65535, &port))) {
        fprintf(stderr, "usage: %s [port]\n", argv[0]);
        return 2;
    }
    env = getenv("EMBER_DISPATCH");
    if (env && strcmp(env, "inline") == 0) dispatch = EMBER_DISPATCH_INLINE;
    else if (env && strcmp(env, "pool") == 0) dispatch = EMBER_DISPATCH_POOL;
    else if (env && strcmp(env, "auto") != 0) { fprintf(stderr, "EMBER_DISPATCH must be inline, pool or auto\n"); return 2; }
    env = getenv("EMBER_WORKERS");
    if (env && !parse_uint(env, 1024, &workers)) { fprintf(stderr, "EMBER_WORKERS must be 0..1024\n"); return 2; }

#ifdef _WIN32
    stop_event = CreateEventA(NULL, TRUE, FALSE, NULL);
    if (!stop_event || !SetConsoleCtrlHandler(on_console_event, TRUE)) {
        fprintf(stderr, "ember_ref: cannot install the console handler\n");
        return 1;
    }
#else
    /* Blocked before the engine starts its threads, so they inherit the mask and the
     * signal waits for sigwait below instead of killing the process mid-request. */
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    /* A client hanging up mid-answer must not kill the process; say so ourselves rather
     * than rely on the engine noticing the default disposition. */
    signal(SIGPIPE, SIG_IGN);
#endif

    TRY("server_new", ember_server_new(&server));
    snprintf(addr, sizeof addr, "127.0.0.1:%lu", port);
    TRY("listen", ember_server_listen(server, addr));
    TRY("dispatch", ember_server_set_dispatch(server, dispatch));
    TRY("workers", ember_server_set_workers(server, (uint32_t)workers));
    TRY("log", ember_server_set_log(server, log_to_stderr, NULL, EMBER_LOG_INFO));
    TRY("limit", ember_server_set_limit(server, EMBER_LIMIT_MAX_BODY_BYTES, 1048576));
    TRY("limit", ember_server_set_limit(server, EMBER_LIMIT_HEADER_TIMEOUT_MS, 1000));
    TRY("limit", ember_server_set_limit(server, EMBER_LIMIT_IDLE_TIMEOUT_MS, 5000));
    TRY("limit", ember_server_set_limit(server, EMBER_LIMIT_HANDLER_TIMEOUT_MS, 3000));
    TRY("limit", ember_server_set_limit(server, EMBER_LIMIT_MAX_HEADER_BYTES, 16384));
    TRY("limit", ember_server_set_limit(server, EMBER_LIMIT_MAX_HEADERS, 100));
    TRY("limit", ember_server_set_limit(server, EMBER_LIMIT_MAX_STREAM_BODY_BYTES, 4294967296ULL));
    TRY("route /", ember_server_route(server, "GET", "/", on_root, NULL, NULL));
    TRY("route /users", ember_server_route(server, "GET", "/users/{id}", on_user, NULL, NULL));
    TRY("route /echo", ember_server_route(server, "POST", "/echo", on_echo, NULL, NULL));
    TRY("route /inspect", ember_server_route(server, "GET", "/inspect", on_inspect, NULL, NULL));
    TRY("route /slow", ember_server_route(server, "GET", "/slow", ref_on_slow, NULL, NULL));
    TRY("route /fail", ember_server_route(server, "GET", "/fail", on_fail, NULL, NULL));
    TRY("static files, compression, cache, CORS, filters", ref_add_front(server));
    TRY("streaming routes", ref_add_stream_routes(server));
    TRY_OPTIONAL("WebSocket routes", ref_add_ws_routes(server));
    tls = setup_extras(server, &rc);
    TRY("tls, access log or metrics", rc);
    TRY("fleet options", ref_fleet_options(server));
    if (ref_slow_start() != 0) { fprintf(stderr, "ember_ref: cannot start the /slow timer thread\n"); ember_server_free(server); return 1; }
    TRY("start", ember_server_start(server));
    TRY("port", ember_server_port(server, 0, &bound));

    printf("listening on http://127.0.0.1:%u\n", (unsigned)bound);
    if (tls) {
        TRY("tls port", ember_server_port(server, 1, &bound));
        printf("listening on https://127.0.0.1:%u\n", (unsigned)bound);
    }
    fflush(stdout);

#ifdef _WIN32
    WaitForSingleObject(stop_event, INFINITE);
    sig = (int)stop_reason - 1;
    fprintf(stderr, "ember_ref: console event %d, stopping\n", sig);
#else
    for (;;) {
        while (sigwait(&stop_signals, &sig) != 0) {}
        if (sig != SIGHUP) break;
        /* logrotate and renewed certificates: neither needs a restart. */
        if (tls && (rc = ember_server_tls_reload(server)) != EMBER_OK) ref_log_failure("tls reload", rc);
        if (getenv("EMBER_ACCESS_LOG") && (rc = ember_server_reopen_access_log(server)) != EMBER_OK)
            ref_log_failure("reopen access log", rc);
        fprintf(stderr, "ember_ref: SIGHUP: certificates reloaded, access log reopened\n");
    }
    fprintf(stderr, "ember_ref: signal %d, stopping\n", sig);
#endif
#ifdef _WIN32
    ref_drain(server, NULL);
#else
    ref_drain(server, &stop_signals);
#endif
    rc = ember_server_stop(server, 5000);
    if (rc != EMBER_OK) ref_log_failure("stop", rc); /* free below still force-closes */
    rc = ember_server_free(server);
    if (rc != EMBER_OK) { ref_log_failure("free", rc); return 1; }
    ref_slow_finish();
    return 0;
}
