/* Streamed request bodies through the C ABI (routes with EMBER_ROUTE_STREAM_BODY): blocking
 * and event-driven reads, READABLE, 100-continue at the first read, 413 (TOO_LARGE), a client
 * that leaves mid-body, misuse. Also the reference app's SHA-256 on the FIPS examples. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

#include "harness.h"
#include "sha256.h"
#include "streamkit.h"

/* ---- streamed request bodies ---- */

static struct {
    volatile int done;
    ember_result last, late;
    unsigned long bytes;
    volatile int readable;
} rd;

static void read_all_blocking(void *ud, ember_request req, const ember_request_info *info) {
    char buf[1000];
    size_t n = 0;
    ember_result rc;
    char body[64];
    (void)ud;
    CHECK(info->flags & EMBER_REQUEST_BODY_STREAMED);
    CHECK(info->body.len == 0);
    rd.bytes = 0;
    while ((rc = ember_request_read(req, buf, sizeof buf, 5000, &n)) == EMBER_OK && n > 0) rd.bytes += n;
    rd.last = rc;
    if (rc == EMBER_OK) {
        snprintf(body, sizeof body, "%lu", rd.bytes);
        ember_request_respond(req, 200, NULL, 0, body, strlen(body));
    } else {
        /* The engine answered (413/408) or the client left: this is refused, and lets go. */
        rd.late = ember_request_respond(req, 200, NULL, 0, "late", 4);
    }
    atomic_inc(&rd.done);
}

static void test_streamed_body_limits_and_misuse(void) {
    ember_server *s;
    uint16_t port;
    http_resp r;
    static const char small[] = "POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
    static const char chunked_big[] =
        "POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        "3e8\r\n%s\r\n3e8\r\n%s\r\n0\r\n\r\n";
    char *big;
    char filler[1001];
    memset(&rd, 0, sizeof rd);
    CHECK_RC(ember_server_route_flags(NULL, "POST", "/up", EMBER_ROUTE_STREAM_BODY, read_all_blocking, NULL, NULL),
             EMBER_ERR_NULL);
    s = new_server();
    CHECK_RC(ember_server_route_flags(s, "POST", "/up", 0x80, read_all_blocking, NULL, NULL), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_route_flags(s, "POST", "/up", EMBER_ROUTE_STREAM_BODY, read_all_blocking, NULL, NULL),
             EMBER_OK);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_MAX_STREAM_BODY_BYTES, 1500), EMBER_OK);
    port = start_server(s);
    CHECK(http_raw(port, small, &r) == 0 && r.status == 200);
    CHECK_STR(r.body, r.body_len, "5");
    http_free(&r);
    CHECK(wait_for(&rd.done, 1, 3000));
    /* 2000 bytes chunked (no length declared) against a 1500-byte limit: the reader hears
     * TOO_LARGE and the client 413. */
    memset(filler, 'z', 1000);
    filler[1000] = '\0';
    big = malloc(sizeof chunked_big + 2000);
    snprintf(big, sizeof chunked_big + 2000, chunked_big, filler, filler);
    CHECK(http_raw(port, big, &r) == 0 && r.status == 413);
    http_free(&r);
    free(big);
    CHECK(wait_for(&rd.done, 2, 3000));
    CHECK_RC(rd.last, EMBER_ERR_TOO_LARGE);
    CHECK_RC(rd.late, EMBER_ERR_TOO_LARGE); /* the engine's 413 was the answer */
    /* A client that leaves mid-body: CLIENT_GONE. */
    {
        static const char partial[] = "POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\nonly this";
        int fd = http_connect(port);
        CHECK(fd >= 0 && http_send(fd, partial, sizeof partial - 1) == 0);
        sleep_ms(100);
        close(fd);
        CHECK(wait_for(&rd.done, 3, 3000));
        CHECK_RC(rd.last, EMBER_ERR_CLIENT_GONE);
        /* (the answer after it may still be taken, for a connection about to close) */
    }
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* Inline dispatch: never block; READABLE says when to read again. */
static struct {
    pthread_mutex_t lock;
    ember_request req;
    unsigned long bytes;
    int finished;
} nb;

static void nb_drain(void) {
    char buf[512];
    size_t n;
    ember_result rc = EMBER_OK;
    int answer = 0;
    pthread_mutex_lock(&nb.lock);
    while (!nb.finished && (rc = ember_request_read(nb.req, buf, sizeof buf, 0, &n)) == EMBER_OK) {
        if (n == 0) { nb.finished = answer = 1; break; }
        nb.bytes += n;
    }
    if (rc != EMBER_OK && rc != EMBER_ERR_WOULD_BLOCK) nb.finished = 1;
    pthread_mutex_unlock(&nb.lock);
    if (answer) {
        char body[32];
        snprintf(body, sizeof body, "%lu", nb.bytes);
        ember_request_respond(nb.req, 200, NULL, 0, body, strlen(body));
    }
}

static void nb_event(void *ud, ember_request req, int32_t event) {
    count_events(ud, req, event);
    if (event == EMBER_EVENT_READABLE) nb_drain();
}

static void nb_handler(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    nb.req = req;
    if (ember_request_on_event(req, nb_event, NULL) == EMBER_OK) nb_drain();
}

static void test_streamed_body_readable_events_inline(void) {
    static const char expect_head[] =
        "POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n";
    ember_server *s;
    uint16_t port;
    http_resp r;
    int fd, i;
    char piece[100];
    reset();
    memset(&nb, 0, sizeof nb);
    pthread_mutex_init(&nb.lock, NULL);
    s = server_with("POST", "/up", EMBER_ROUTE_STREAM_BODY, nb_handler);
    CHECK_RC(ember_server_set_dispatch(s, EMBER_DISPATCH_INLINE), EMBER_OK);
    port = start_server(s);
    fd = http_connect(port);
    /* Expect: 100-continue is answered at the first read, which comes at once here. */
    CHECK(fd >= 0 && http_send(fd, expect_head, sizeof expect_head - 1) == 0);
    {
        char got[64] = {0};
        CHECK(recv(fd, got, 25, 0) > 0 && strncmp(got, "HTTP/1.1 100 Continue", 21) == 0);
    }
    memset(piece, 'p', sizeof piece);
    for (i = 0; i < 10; i++) {
        CHECK(http_send(fd, piece, sizeof piece) == 0);
        sleep_ms(20); /* pieces arrive apart: each empty read is followed by READABLE */
    }
    CHECK(http_read(fd, &r) == 0 && r.status == 200);
    CHECK_STR(r.body, r.body_len, "1000");
    http_free(&r);
    close(fd);
    CHECK(atomic_get(&t.events[EMBER_EVENT_READABLE]) >= 2);
    CHECK(wait_for(&t.events[EMBER_EVENT_COMPLETED], 1, 3000));
    CHECK_RC(ember_server_free(s), EMBER_OK);
    pthread_mutex_destroy(&nb.lock);
}

/* ---- the reference app's SHA-256 (samples/c/sha256.c), FIPS 180-4 examples ---- */

static void sha_hex(const char *msg, size_t len, size_t step, char out[65]) {
    sha256_ctx c;
    unsigned char d[32];
    size_t i;
    sha256_init(&c);
    for (i = 0; i < len; i += step) sha256_update(&c, msg + i, len - i < step ? len - i : step);
    sha256_final(&c, d);
    sha256_hex(d, out);
}

static void test_sha256_fips_examples(void) {
    static const char two_blocks[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    char hex[65], *million;
    size_t step;
    for (step = 1; step <= 64; step *= 4) {
        sha_hex("abc", 3, step, hex);
        CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
        sha_hex(two_blocks, sizeof two_blocks - 1, step, hex);
        CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
    }
    sha_hex("", 0, 1, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    million = malloc(1000000);
    memset(million, 'a', 1000000);
    sha_hex(million, 1000000, 4093, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
    free(million);
}

int main(void) {
    h_run("streamed body: 413, client gone, misuse", test_streamed_body_limits_and_misuse);
    h_run("streamed body: READABLE events and 100-continue (inline)", test_streamed_body_readable_events_inline);
    h_run("SHA-256 of the reference app: FIPS 180-4 examples", test_sha256_fips_examples);
    return h_finish();
}
