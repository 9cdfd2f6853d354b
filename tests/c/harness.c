#define _POSIX_C_SOURCE 200809L

#include "harness.h"

#include "portable.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static int passed, failed, test_failed;
static const char *current = "";

int h_check(int ok, const char *expr, const char *file, int line) {
    if (ok) { passed++; return 1; }
    failed++;
    test_failed++;
    fprintf(stderr, "FAIL [%s] %s:%d: %s\n", current, file, line, expr);
    return 0;
}

int h_check_rc(ember_result got, ember_result want, const char *expr, const char *file, int line) {
    if (got == want) { passed++; return 1; }
    failed++;
    test_failed++;
    fprintf(stderr, "FAIL [%s] %s:%d: %s\n    got %s (%d), want %s (%d); last error: %s\n", current, file, line,
            expr, ember_result_name(got), (int)got, ember_result_name(want), (int)want, ember_last_error());
    return 0;
}

int h_check_str(const char *got, size_t got_len, const char *want, const char *expr, const char *file, int line) {
    size_t n = strlen(want);
    if (got_len == n && (n == 0 || (got && memcmp(got, want, n) == 0))) { passed++; return 1; }
    failed++;
    test_failed++;
    fprintf(stderr, "FAIL [%s] %s:%d: %s\n    got \"%.*s\" (%lu bytes), want \"%s\"\n", current, file, line, expr,
            got ? (int)got_len : 0, got ? got : "", (unsigned long)got_len, want);
    return 0;
}

#ifdef _WIN32
/* Windows has no alarm(): a thread ends the process when a test runs past its deadline. */
static volatile LONG64 deadline_ms;

static void *watchdog_main(void *arg) {
    (void)arg;
    for (;;) {
        LONG64 d = InterlockedCompareExchange64(&deadline_ms, 0, 0);
        if (d != 0 && (LONG64)now_ms() > d) {
            fprintf(stderr, "FAIL [%s] watchdog: the test hung\n", current);
            fflush(stderr);
            _exit(3);
        }
        Sleep(200);
    }
    return NULL;
}

static void watchdog(unsigned seconds) {
    static int started;
    if (!started) {
        pthread_t t;
        WSADATA wsa;
        WSAStartup(MAKEWORD(2, 2), &wsa);
        started = pthread_create(&t, NULL, watchdog_main, NULL) == 0;
    }
    InterlockedExchange64(&deadline_ms, seconds ? (LONG64)(now_ms() + seconds * 1000u) : 0);
}
#else
static void watchdog(unsigned seconds) { alarm(seconds); }
#endif

void h_run(const char *name, void (*fn)(void)) {
    uint64_t t0 = now_ms();
    current = name;
    test_failed = 0;
    watchdog(60);
    fn();
    watchdog(0);
    printf("%s %s (%lu ms)\n", test_failed ? "not ok" : "ok", name, (unsigned long)(now_ms() - t0));
    fflush(stdout);
}

int h_finish(void) {
    printf("%d passed, %d failed\n", passed, failed);
    fflush(stdout);
    return failed ? 1 : 0;
}

void sleep_ms(unsigned ms) {
    struct timespec t;
    t.tv_sec = ms / 1000;
    t.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

uint64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

int atomic_get(volatile int *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
void atomic_inc(volatile int *p) { __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST); }

int wait_for(volatile int *counter, int want, unsigned timeout_ms) {
    uint64_t end = now_ms() + timeout_ms;
    while (atomic_get(counter) != want) {
        if (now_ms() >= end) return 0;
        sleep_ms(2);
    }
    return 1;
}

static void quiet_log(void *ud, int32_t level, const char *msg, size_t len) {
    (void)ud;
    fprintf(stderr, "  engine[%d]: %.*s\n", (int)level, (int)len, len ? msg : "");
}

ember_server *new_server(void) {
    ember_server *s = NULL;
    if (!CHECK_RC(ember_server_new(&s), EMBER_OK)) return NULL;
    CHECK_RC(ember_server_listen(s, "127.0.0.1:0"), EMBER_OK);
    if (getenv("EMBER_TEST_LOG")) CHECK_RC(ember_server_set_log(s, quiet_log, NULL, EMBER_LOG_DEBUG), EMBER_OK);
    return s;
}

uint16_t start_server(ember_server *s) {
    uint16_t port = 0;
    if (!CHECK_RC(ember_server_start(s), EMBER_OK)) return 0;
    CHECK_RC(ember_server_port(s, 0, &port), EMBER_OK);
    CHECK(port != 0);
    return port;
}

/* ---- HTTP client ---- */

int http_connect(uint16_t port) {
    struct sockaddr_in a;
#ifdef _WIN32
    DWORD tv;
#else
    struct timeval tv;
#endif
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* Long enough for the slowest test, short enough that a hung engine fails the test. */
#ifdef _WIN32
    tv = 15000; /* Winsock takes milliseconds as a DWORD */
#else
    tv.tv_sec = 15;
    tv.tv_usec = 0;
#endif
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, (const void *)&tv, sizeof tv);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, (const void *)&one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
    return fd;
}

int http_send(int fd, const char *data, size_t len) {
    while (len) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static const char *header_into(const http_resp *r, const char *name, char *value, size_t cap);

typedef struct {
    char *p;
    size_t len, cap;
} bytes;

static int bytes_add(bytes *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        char *p;
        while (cap < b->len + n + 1) cap *= 2;
        p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

/* Reads more into b; returns bytes read, 0 at EOF, -1 on error/timeout. */
static ssize_t fill(int fd, bytes *b) {
    char tmp[8192];
    ssize_t n;
    do n = recv(fd, tmp, sizeof tmp, 0); while (n < 0 && errno == EINTR);
    if (n > 0 && bytes_add(b, tmp, (size_t)n) != 0) return -1;
    return n;
}

static char *find_head_end(bytes *b) {
    size_t i;
    for (i = 0; i + 3 < b->len; i++)
        if (memcmp(b->p + i, "\r\n\r\n", 4) == 0) return b->p + i;
    return NULL;
}

/* Decodes a chunked body that starts at in[0..]; returns 1 when complete. */
static int dechunk(const char *in, size_t len, bytes *out) {
    size_t pos = 0;
    out->len = 0;
    for (;;) {
        char *end;
        unsigned long size;
        const char *eol = NULL;
        size_t i;
        for (i = pos; i + 1 < len; i++)
            if (in[i] == '\r' && in[i + 1] == '\n') { eol = in + i; break; }
        if (!eol) return 0;
        size = strtoul(in + pos, &end, 16);
        pos = (size_t)(eol - in) + 2;
        if (size == 0) return len >= pos + 2; /* no trailers expected */
        if (len < pos + size + 2) return 0;
        if (bytes_add(out, in + pos, size) != 0) return 0;
        pos += size + 2;
    }
}

int http_read(int fd, http_resp *out) {
    bytes b = {0}, body = {0};
    char *head_end;
    size_t head_len;
    const char *v;
    char vbuf[256]; /* http_header's static buffer is not for client threads */
    memset(out, 0, sizeof *out);
    while (!(head_end = b.p ? find_head_end(&b) : NULL))
        if (fill(fd, &b) <= 0) { free(b.p); return -1; }
    head_len = (size_t)(head_end - b.p) + 4;
    out->head = malloc(head_len + 1);
    if (!out->head) { free(b.p); return -1; }
    memcpy(out->head, b.p, head_len);
    out->head[head_len] = '\0';
    if (sscanf(out->head, "HTTP/1.%*d %d", &out->status) != 1) out->status = 0;
    if ((v = header_into(out, "content-length", vbuf, sizeof vbuf)) != NULL) {
        size_t want = (size_t)strtoul(v, NULL, 10);
        while (b.len - head_len < want)
            if (fill(fd, &b) <= 0) break;
        bytes_add(&body, b.p + head_len, b.len - head_len < want ? b.len - head_len : want);
    } else if ((v = header_into(out, "transfer-encoding", vbuf, sizeof vbuf)) != NULL && strstr(v, "chunked")) {
        while (!dechunk(b.p + head_len, b.len - head_len, &body))
            if (fill(fd, &b) <= 0) break;
    } else if (out->status != 204 && out->status != 304 && out->status >= 200) {
        while (fill(fd, &b) > 0) {}
        bytes_add(&body, b.p + head_len, b.len - head_len);
    }
    if (!body.p) bytes_add(&body, "", 0);
    out->body = body.p;
    out->body_len = body.len;
    free(b.p);
    return 0;
}

int http_raw(uint16_t port, const char *raw, http_resp *out) {
    int rc, fd = http_connect(port);
    memset(out, 0, sizeof *out);
    if (fd < 0) return -1;
    rc = http_send(fd, raw, strlen(raw)) == 0 ? http_read(fd, out) : -1;
    close(fd);
    return rc;
}

int http_get(uint16_t port, const char *target, http_resp *out) {
    char req[1024];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", target);
    return http_raw(port, req, out);
}

static const char *header_into(const http_resp *r, const char *name, char *value, size_t cap) {
    size_t n = strlen(name);
    const char *line = r->head ? strstr(r->head, "\r\n") : NULL;
    while (line && line[2] != '\r') {
        line += 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1, *e = strstr(v, "\r\n");
            size_t len;
            while (*v == ' ' || *v == '\t') v++;
            len = (size_t)(e - v) < cap - 1 ? (size_t)(e - v) : cap - 1;
            memcpy(value, v, len);
            value[len] = '\0';
            return value;
        }
        line = strstr(line, "\r\n");
    }
    return NULL;
}

const char *http_header(const http_resp *r, const char *name) {
    static char value[1024];
    return header_into(r, name, value, sizeof value);
}

void http_free(http_resp *r) {
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

static void *bg_get_main(void *arg) {
    bg_get *g = arg;
    http_resp r;
    uint64_t t0 = now_ms();
    g->status = http_get(g->port, g->target, &r) == 0 ? r.status : 0;
    g->ms = now_ms() - t0;
    http_free(&r);
    return NULL;
}

void bg_get_start(bg_get *g, uint16_t port, const char *target) {
    g->port = port;
    g->target = target;
    g->status = -1;
    g->ms = 0;
    g->started = CHECK(pthread_create(&g->thread, NULL, bg_get_main, g) == 0);
}

void bg_get_join(bg_get *g) {
    if (g->started) pthread_join(g->thread, NULL);
    g->started = 0;
}

void count_release(void *user_data) { atomic_inc((volatile int *)user_data); }
