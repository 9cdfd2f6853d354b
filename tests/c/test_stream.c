/* Streamed answers, streamed request bodies and request events through the C ABI:
 * misuse of every function (NULL, forged and stale handles, wrong order), backpressure and
 * EMBER_EVENT_WRITABLE, the final event exactly once, zero-copy writes released exactly
 * once, stop() with streams open. Also the reference app's SHA-256 on the FIPS examples. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

#include "harness.h"
#include "sha256.h"

static const ember_request FORGED = 0x123456789abcdefULL;

/* A handler that keeps the request for the test thread to act on. */
static struct {
    volatile int held;
    ember_request req;
    volatile int events[5]; /* by EMBER_EVENT_* */
    volatile int event_order_bad;
    volatile int released;
} t;

static void reset(void) { memset((void *)&t, 0, sizeof t); }

static void hold(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    t.req = req;
    atomic_inc(&t.held);
}

static void count_events(void *ud, ember_request req, int32_t event) {
    (void)ud; (void)req;
    /* Nothing may follow the final event. */
    if (atomic_get(&t.events[EMBER_EVENT_ABORTED]) || atomic_get(&t.events[EMBER_EVENT_COMPLETED]))
        atomic_inc(&t.event_order_bad);
    if (event >= 1 && event <= 4) atomic_inc(&t.events[event]);
}

/* Connects with a small receive buffer (so the server's writes soon meet a full
 * socket), and sends a GET without reading the answer. */
static int send_get(uint16_t port, const char *target) {
    char req[256];
    struct sockaddr_in a;
    int small = 8192;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv;
    tv.tv_sec = 15;
    tv.tv_usec = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, (const void *)&small, sizeof small);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, (const void *)&tv, sizeof tv);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); fd = -1; }
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", target);
    if (fd >= 0 && http_send(fd, req, strlen(req)) != 0) { close(fd); return -1; }
    return fd;
}

static ember_server *server_with(const char *method, const char *path, uint32_t flags, ember_handler_fn h) {
    ember_server *s = new_server();
    CHECK_RC(ember_server_route_flags(s, method, path, flags, h, NULL, NULL), EMBER_OK);
    return s;
}

/* ---- misuse without any request ---- */

static volatile int lent_released;
static void release_lent(void *ud) { (void)ud; atomic_inc(&lent_released); }

static void test_misuse_with_forged_and_null_arguments(void) {
    char buf[8];
    size_t n = 99;
    lent_released = 0;
    CHECK_RC(ember_response_begin(0, 200, NULL, 0), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_response_begin(FORGED, 200, NULL, 0), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_response_write(FORGED, "x", 1), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_response_write(FORGED, NULL, 1), EMBER_ERR_NULL);
    CHECK_RC(ember_response_end(0), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_response_end(FORGED), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_response_wait_writable(FORGED, 10), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_request_read(FORGED, buf, sizeof buf, 0, &n), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_request_read(FORGED, buf, sizeof buf, 0, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_request_read(FORGED, NULL, sizeof buf, 0, &n), EMBER_ERR_NULL);
    CHECK_RC(ember_request_read(FORGED, buf, 0, 0, &n), EMBER_ERR_INVALID_ARG);
    CHECK(n == 99); /* outputs untouched on failure */
    CHECK_RC(ember_request_on_event(FORGED, count_events, NULL), EMBER_ERR_INVALID_HANDLE);
    CHECK_RC(ember_request_on_event(FORGED, NULL, NULL), EMBER_ERR_NULL);
    /* A lent chunk is released exactly once, before the call returns, whatever fails. */
    CHECK_RC(ember_response_write_nocopy(FORGED, "lent", 4, release_lent, NULL), EMBER_ERR_INVALID_HANDLE);
    CHECK(atomic_get(&lent_released) == 1);
    CHECK_RC(ember_response_write_nocopy(FORGED, NULL, 4, release_lent, NULL), EMBER_ERR_NULL);
    CHECK(atomic_get(&lent_released) == 2);
    CHECK_RC(ember_response_write_nocopy(0, "x", 1, NULL, NULL), EMBER_ERR_INVALID_HANDLE);
}

/* ---- wrong order on a live request ---- */

static void test_wrong_order_on_a_live_request(void) {
    ember_server *s;
    uint16_t port;
    http_resp r;
    char buf[8];
    size_t n = 0;
    int fd;
    reset();
    s = server_with("GET", "/", 0, hold);
    port = start_server(s);
    fd = send_get(port, "/");
    CHECK(wait_for(&t.held, 1, 3000));
    /* Before begin: no stream to write to or end. */
    CHECK_RC(ember_response_write(t.req, "x", 1), EMBER_ERR_STATE);
    CHECK_RC(ember_response_end(t.req), EMBER_ERR_STATE);
    CHECK_RC(ember_response_wait_writable(t.req, 10), EMBER_ERR_STATE);
    /* Not a streamed-body route: the body is in info->body. */
    CHECK_RC(ember_request_read(t.req, buf, sizeof buf, 0, &n), EMBER_ERR_STATE);
    /* A refused begin changes nothing. */
    CHECK_RC(ember_response_begin(t.req, 99, NULL, 0), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_response_begin(t.req, 200, "Bad Header", 10), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_response_begin(t.req, 200, "X-Mode: streamed", 16), EMBER_OK);
    /* Begun: it cannot be answered or begun again. */
    CHECK_RC(ember_response_begin(t.req, 200, NULL, 0), EMBER_ERR_ALREADY_ANSWERED);
    CHECK_RC(ember_request_respond(t.req, 200, NULL, 0, "no", 2), EMBER_ERR_ALREADY_ANSWERED);
    CHECK_RC(ember_response_write(t.req, "hello ", 6), EMBER_OK);
    CHECK_RC(ember_response_write(t.req, "", 0), EMBER_OK);      /* nothing to send, not an error */
    CHECK_RC(ember_response_write(t.req, NULL, 0), EMBER_OK);
    CHECK_RC(ember_response_write(t.req, "world", 5), EMBER_OK);
    CHECK_RC(ember_request_on_event(t.req, count_events, NULL), EMBER_OK);
    CHECK_RC(ember_response_end(t.req), EMBER_OK);
    /* Ended: the handle is spent. */
    CHECK_RC(ember_response_end(t.req), EMBER_ERR_ALREADY_ANSWERED);
    CHECK_RC(ember_response_write(t.req, "late", 4), EMBER_ERR_ALREADY_ANSWERED);
    CHECK(fd >= 0 && http_read(fd, &r) == 0);
    CHECK(r.status == 200);
    CHECK_STR(r.body, r.body_len, "hello world");
    CHECK(http_header(&r, "x-mode") != NULL);
    CHECK(strstr(r.head, "ransfer-encoding: chunked") != NULL);
    http_free(&r);
    close(fd);
    CHECK(wait_for(&t.events[EMBER_EVENT_COMPLETED], 1, 3000));
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == 0 && atomic_get(&t.event_order_bad) == 0);
    /* On an ended request, registering says why and calls nothing. */
    CHECK(ember_request_on_event(t.req, count_events, NULL) != EMBER_OK);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(atomic_get(&t.events[EMBER_EVENT_COMPLETED]) == 1);
}

/* ---- backpressure: WOULD_BLOCK takes nothing; WRITABLE says when to go on ---- */

#define CHUNK 1000
#define TOTAL_CHUNKS 12000 /* 12 MB: more than the socket buffers hold */

static struct {
    pthread_mutex_t lock;
    ember_request req;
    int next, refused, ended;
    volatile int done;
} bp;

/* Chunk i is CHUNK bytes of '0' + i % 10, so a lost or doubled chunk shows. */
static void bp_pump(void) {
    char chunk[CHUNK];
    int end = 0;
    pthread_mutex_lock(&bp.lock);
    while (bp.next < TOTAL_CHUNKS) {
        ember_result rc;
        memset(chunk, '0' + bp.next % 10, CHUNK);
        rc = ember_response_write(bp.req, chunk, CHUNK);
        if (rc == EMBER_ERR_WOULD_BLOCK) { bp.refused++; break; }
        if (rc != EMBER_OK) break;
        bp.next++;
    }
    if (bp.next == TOTAL_CHUNKS && !bp.ended) bp.ended = end = 1;
    pthread_mutex_unlock(&bp.lock);
    if (end) CHECK_RC(ember_response_end(bp.req), EMBER_OK);
}

static void bp_event(void *ud, ember_request req, int32_t event) {
    count_events(ud, req, event);
    if (event == EMBER_EVENT_WRITABLE) bp_pump();
    if (event == EMBER_EVENT_COMPLETED || event == EMBER_EVENT_ABORTED) atomic_inc(&bp.done);
}

static void bp_handler(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    bp.req = req;
    if (ember_response_begin(req, 200, NULL, 0) != EMBER_OK || ember_request_on_event(req, bp_event, NULL) != EMBER_OK)
        return;
    bp_pump();
}

static void run_backpressure(int32_t dispatch) {
    ember_server *s;
    uint16_t port;
    http_resp r;
    int fd, i, bad = 0;
    reset();
    memset(&bp, 0, sizeof bp);
    pthread_mutex_init(&bp.lock, NULL);
    s = server_with("GET", "/", 0, bp_handler);
    CHECK_RC(ember_server_set_dispatch(s, dispatch), EMBER_OK);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_STREAM_QUEUE_BYTES, 8 * CHUNK), EMBER_OK);
    port = start_server(s);
    fd = send_get(port, "/");
    sleep_ms(300); /* the client reads nothing: the queue fills and writes are refused */
    pthread_mutex_lock(&bp.lock);
    CHECK(bp.refused >= 1);
    CHECK(bp.next < TOTAL_CHUNKS);
    pthread_mutex_unlock(&bp.lock);
    CHECK(fd >= 0 && http_read(fd, &r) == 0);
    CHECK(r.status == 200 && r.body_len == (size_t)CHUNK * TOTAL_CHUNKS);
    for (i = 0; i < TOTAL_CHUNKS && r.body_len == (size_t)CHUNK * TOTAL_CHUNKS; i++)
        bad += r.body[(size_t)i * CHUNK] != '0' + i % 10 || r.body[(size_t)i * CHUNK + CHUNK - 1] != '0' + i % 10;
    CHECK(bad == 0);
    http_free(&r);
    close(fd);
    CHECK(wait_for(&bp.done, 1, 3000));
    CHECK(atomic_get(&t.events[EMBER_EVENT_WRITABLE]) >= 1);
    CHECK(atomic_get(&t.events[EMBER_EVENT_COMPLETED]) == 1 && atomic_get(&t.events[EMBER_EVENT_ABORTED]) == 0);
    CHECK(atomic_get(&t.event_order_bad) == 0);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    pthread_mutex_destroy(&bp.lock);
}

static void test_backpressure_pool(void) { run_backpressure(EMBER_DISPATCH_POOL); }
static void test_backpressure_inline(void) { run_backpressure(EMBER_DISPATCH_INLINE); }

/* HEAD: what the host streams is dropped, and its events still end with COMPLETED, also
 * when it ended (or filled its queue) before the engine learned that the answer is to a
 * HEAD (always so under inline dispatch, where the handler runs first). */
static void small_stream(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    if (ember_response_begin(req, 200, NULL, 0) != EMBER_OK) return;
    CHECK_RC(ember_request_on_event(req, count_events, NULL), EMBER_OK);
    CHECK_RC(ember_response_write(req, "abc", 3), EMBER_OK);
    CHECK_RC(ember_response_end(req), EMBER_OK);
}

static void run_head(int32_t dispatch) {
    static const char head[] = "HEAD / HTTP/1.1\r\nHost: h\r\n\r\n";
    ember_server *s;
    uint16_t port;
    int fd;
    /* 1. ended before the engine saw the answer */
    reset();
    s = server_with("GET", "/", 0, small_stream);
    CHECK_RC(ember_server_set_dispatch(s, dispatch), EMBER_OK);
    port = start_server(s);
    fd = http_connect(port);
    CHECK(fd >= 0 && http_send(fd, head, sizeof head - 1) == 0);
    sleep_ms(100);
    CHECK(wait_for(&t.events[EMBER_EVENT_COMPLETED], 1, 3000));
    close(fd);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(atomic_get(&t.events[EMBER_EVENT_COMPLETED]) == 1 && atomic_get(&t.events[EMBER_EVENT_ABORTED]) == 0);
    /* 2. a queue filled before: WRITABLE comes, the rest is dropped, then COMPLETED */
    reset();
    memset(&bp, 0, sizeof bp);
    pthread_mutex_init(&bp.lock, NULL);
    s = server_with("GET", "/", 0, bp_handler);
    CHECK_RC(ember_server_set_dispatch(s, dispatch), EMBER_OK);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_STREAM_QUEUE_BYTES, 8 * CHUNK), EMBER_OK);
    port = start_server(s);
    fd = http_connect(port);
    CHECK(fd >= 0 && http_send(fd, head, sizeof head - 1) == 0);
    {
        char got[512] = {0};
        CHECK(recv(fd, got, sizeof got - 1, 0) > 0 && strncmp(got, "HTTP/1.1 200", 12) == 0);
    }
    CHECK(wait_for(&bp.done, 1, 3000));
    CHECK(bp.next == TOTAL_CHUNKS);
    CHECK(atomic_get(&t.events[EMBER_EVENT_COMPLETED]) == 1 && atomic_get(&t.events[EMBER_EVENT_ABORTED]) == 0);
    close(fd);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    pthread_mutex_destroy(&bp.lock);
}

static void test_head_pool(void) { run_head(EMBER_DISPATCH_POOL); }
static void test_head_inline(void) { run_head(EMBER_DISPATCH_INLINE); }

/* ---- the blocking wait: a timeout, then room; never on an I/O thread ---- */

static volatile ember_result inline_wait_rc, inline_read_rc;

static struct {
    int fd, ok;
    http_resp r;
} rb;

static void *read_body(void *arg) {
    (void)arg;
    rb.ok = http_read(rb.fd, &rb.r) == 0;
    return NULL;
}

static void inline_blocking_calls(void *ud, ember_request req, const ember_request_info *info) {
    char buf[4];
    size_t n;
    (void)ud; (void)info;
    ember_response_begin(req, 200, NULL, 0);
    inline_wait_rc = ember_response_wait_writable(req, 10);
    inline_read_rc = ember_request_read(req, buf, sizeof buf, 10, &n);
    ember_response_end(req);
}

/* Auto dispatch may run a handler on its connection's own I/O thread, where the stream
 * cannot drain until the handler returns: a blocking wait there must refuse (STATE), not
 * sit out its timeout. On a pool thread it finds room as usual. */
static volatile ember_result auto_wait_rc;
static volatile int auto_done;

static void auto_fill_then_wait(void *ud, ember_request req, const ember_request_info *info) {
    char chunk[CHUNK];
    int i;
    (void)ud; (void)info;
    memset(chunk, 'q', sizeof chunk);
    ember_response_begin(req, 200, NULL, 0);
    for (i = 0; i < 10000 && ember_response_write(req, chunk, sizeof chunk) == EMBER_OK; i++) {}
    auto_wait_rc = ember_response_wait_writable(req, 2000);
    ember_response_end(req);
    atomic_inc(&auto_done);
}

static void test_wait_writable_under_auto_dispatch(void) {
    ember_server *s;
    uint16_t port;
    http_resp r;
    int round;
    for (round = 0; round < 3; round++) {
        auto_done = 0;
        s = server_with("GET", "/", 0, auto_fill_then_wait);
        CHECK_RC(ember_server_set_dispatch(s, EMBER_DISPATCH_AUTO), EMBER_OK);
        CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_STREAM_QUEUE_BYTES, 4 * CHUNK), EMBER_OK);
        port = start_server(s);
        CHECK(http_get(port, "/", &r) == 0 && r.status == 200);
        http_free(&r);
        CHECK(wait_for(&auto_done, 1, 5000));
        CHECK(auto_wait_rc == EMBER_ERR_STATE || auto_wait_rc == EMBER_OK); /* not WOULD_BLOCK after 2 s */
        CHECK_RC(ember_server_free(s), EMBER_OK);
    }
}

static void test_wait_writable(void) {
    ember_server *s;
    uint16_t port;
    http_resp r;
    char chunk[CHUNK];
    pthread_t reader;
    int fd, writes = 0;
    ember_result rc = EMBER_OK;
    reset();
    s = server_with("GET", "/", 0, hold);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_STREAM_QUEUE_BYTES, 4 * CHUNK), EMBER_OK);
    port = start_server(s);
    fd = send_get(port, "/");
    CHECK(wait_for(&t.held, 1, 3000));
    CHECK_RC(ember_response_begin(t.req, 200, NULL, 0), EMBER_OK);
    memset(chunk, 'w', sizeof chunk);
    /* Fill the queue and the socket buffers behind it until a wait times out: nobody reads. */
    for (;;) {
        while (writes < 100000 && (rc = ember_response_write(t.req, chunk, CHUNK)) == EMBER_OK) writes++;
        if (rc != EMBER_ERR_WOULD_BLOCK || writes >= 100000) break;
        if ((rc = ember_response_wait_writable(t.req, 50)) == EMBER_ERR_WOULD_BLOCK) break;
    }
    CHECK_RC(rc, EMBER_ERR_WOULD_BLOCK);
    CHECK(writes < 100000);
    /* The client starts reading (on its own thread): room again. */
    rb.fd = fd;
    CHECK(pthread_create(&reader, NULL, read_body, NULL) == 0);
    CHECK_RC(ember_response_wait_writable(t.req, EMBER_WAIT_FOREVER), EMBER_OK);
    CHECK_RC(ember_response_write(t.req, chunk, CHUNK), EMBER_OK);
    CHECK_RC(ember_response_end(t.req), EMBER_OK);
    CHECK_RC(ember_response_wait_writable(t.req, 10), EMBER_ERR_ALREADY_ANSWERED);
    pthread_join(reader, NULL);
    CHECK(rb.ok && rb.r.status == 200 && rb.r.body_len == (size_t)CHUNK * (writes + 1));
    http_free(&rb.r);
    close(fd);
    CHECK_RC(ember_server_free(s), EMBER_OK);

    /* Inline dispatch: blocking calls on the I/O thread are refused, not deadlocked. */
    s = server_with("GET", "/", 0, inline_blocking_calls);
    CHECK_RC(ember_server_set_dispatch(s, EMBER_DISPATCH_INLINE), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/", &r) == 0 && r.status == 200);
    http_free(&r);
    CHECK_RC(inline_wait_rc, EMBER_ERR_STATE);
    CHECK_RC(inline_read_rc, EMBER_ERR_STATE);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

/* ---- the final event exactly once: client gone, handler timeout ---- */

static void test_aborted_exactly_once_when_the_client_leaves(void) {
    ember_server *s;
    uint16_t port;
    char sink[4096];
    int fd, i;
    ember_result rc = EMBER_OK;
    reset();
    s = server_with("GET", "/", 0, hold);
    port = start_server(s);
    fd = send_get(port, "/");
    CHECK(wait_for(&t.held, 1, 3000));
    CHECK_RC(ember_response_begin(t.req, 200, NULL, 0), EMBER_OK);
    CHECK_RC(ember_request_on_event(t.req, count_events, NULL), EMBER_OK);
    CHECK_RC(ember_response_write(t.req, "first", 5), EMBER_OK);
    CHECK(recv(fd, sink, sizeof sink, 0) > 0);
    close(fd);
    CHECK(wait_for(&t.events[EMBER_EVENT_ABORTED], 1, 3000));
    for (i = 0; i < 200 && (rc = ember_response_write(t.req, "more", 4)) == EMBER_OK; i++) sleep_ms(5);
    CHECK(rc == EMBER_ERR_CLIENT_GONE || rc == EMBER_ERR_INVALID_HANDLE);
    CHECK(ember_response_end(t.req) != EMBER_OK);
    sleep_ms(100);
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == 1);
    CHECK(atomic_get(&t.events[EMBER_EVENT_COMPLETED]) == 0 && atomic_get(&t.event_order_bad) == 0);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == 1);
}

static void test_aborted_exactly_once_on_handler_timeout(void) {
    ember_server *s;
    uint16_t port;
    http_resp r;
    reset();
    s = server_with("GET", "/", 0, hold);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_HANDLER_TIMEOUT_MS, 200), EMBER_OK);
    port = start_server(s);
    {
        bg_get g;
        bg_get_start(&g, port, "/");
        CHECK(wait_for(&t.held, 1, 3000));
        CHECK_RC(ember_request_on_event(t.req, count_events, NULL), EMBER_OK);
        bg_get_join(&g);
        CHECK(g.status == 503);
    }
    CHECK(wait_for(&t.events[EMBER_EVENT_ABORTED], 1, 3000));
    CHECK_RC(ember_response_begin(t.req, 200, NULL, 0), EMBER_ERR_TIMED_OUT);
    CHECK(ember_request_on_event(t.req, count_events, NULL) != EMBER_OK);
    CHECK(http_get(port, "/nothing-here", &r) == 0 && r.status == 404);
    http_free(&r);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == 1 && atomic_get(&t.events[EMBER_EVENT_COMPLETED]) == 0);
}

/* ---- zero-copy writes: released exactly once, whatever happens to them ---- */

#define LENT 6
static volatile int lent[LENT];
static void release_slot(void *ud) { atomic_inc(&lent[(size_t)ud]); }

static void test_nocopy_writes_released_exactly_once(void) {
    static char big[64 * 1024];
    ember_server *s;
    uint16_t port;
    int fd, i;
    ember_result rc;
    reset();
    memset((void *)lent, 0, sizeof lent);
    s = server_with("GET", "/", 0, hold);
    CHECK_RC(ember_server_set_limit(s, EMBER_LIMIT_STREAM_QUEUE_BYTES, 1024), EMBER_OK);
    port = start_server(s);
    fd = send_get(port, "/");
    CHECK(wait_for(&t.held, 1, 3000));
    /* 0: before begin, refused (STATE): released at once */
    CHECK_RC(ember_response_write_nocopy(t.req, big, 10, release_slot, (void *)0), EMBER_ERR_STATE);
    CHECK(atomic_get(&lent[0]) == 1);
    CHECK_RC(ember_response_begin(t.req, 200, NULL, 0), EMBER_OK);
    /* 1: taken; released once sent */
    CHECK_RC(ember_response_write_nocopy(t.req, big, 10, release_slot, (void *)1), EMBER_OK);
    /* 2..: fill until refused; the refused one is released before the call returns */
    for (i = 0; i < 10000; i++) {
        rc = ember_response_write_nocopy(t.req, big, sizeof big, release_slot, (void *)2);
        if (rc != EMBER_OK) break;
    }
    CHECK_RC(rc, EMBER_ERR_WOULD_BLOCK);
    CHECK(atomic_get(&lent[2]) >= 1);
    /* 3: queued behind a client that reads nothing, then the server stops: released */
    sleep_ms(50);
    CHECK(ember_response_write_nocopy(t.req, big, 10, release_slot, (void *)3) != EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_stop(s, 200), EMBER_OK);
    /* 4: after the stop: refused, released at once */
    rc = ember_response_write_nocopy(t.req, big, 10, release_slot, (void *)4);
    CHECK(rc == EMBER_ERR_CLIENT_GONE || rc == EMBER_ERR_INVALID_HANDLE || rc == EMBER_ERR_ALREADY_ANSWERED);
    CHECK(atomic_get(&lent[4]) == 1);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    close(fd);
    /* every write that was taken was released exactly once: 1 and 3 once, 2 once per call */
    CHECK(atomic_get(&lent[1]) == 1);
    CHECK(atomic_get(&lent[3]) == 1);
    CHECK(atomic_get(&lent[2]) == i + 1);
}

/* ---- stop() with streams open ---- */

#define OPEN_STREAMS 4
static volatile int stream_route_released;
static volatile ember_request open_reqs[OPEN_STREAMS];
static volatile int opened;

static void begin_and_keep(void *ud, ember_request req, const ember_request_info *info) {
    int i;
    (void)ud; (void)info;
    ember_response_begin(req, 200, NULL, 0);
    ember_request_on_event(req, count_events, NULL);
    ember_response_write(req, "open", 4);
    i = __atomic_fetch_add(&opened, 1, __ATOMIC_SEQ_CST);
    if (i < OPEN_STREAMS) open_reqs[i] = req;
}

static void test_stop_with_streams_open(void) {
    ember_server *s;
    uint16_t port;
    int fds[OPEN_STREAMS], i, ended = 0;
    reset();
    opened = 0;
    stream_route_released = 0;
    s = new_server();
    CHECK_RC(ember_server_route(s, "GET", "/", begin_and_keep, (void *)&stream_route_released, count_release), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < OPEN_STREAMS; i++) fds[i] = send_get(port, "/");
    CHECK(wait_for(&opened, OPEN_STREAMS, 3000));
    CHECK_RC(ember_server_stop(s, 500), EMBER_OK);
    /* When stop returns, every stream heard ABORTED exactly once, and the route let go. */
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == OPEN_STREAMS);
    CHECK(atomic_get(&t.events[EMBER_EVENT_COMPLETED]) == 0);
    CHECK(atomic_get(&stream_route_released) == 1);
    for (i = 0; i < OPEN_STREAMS; i++) {
        ember_result rc = ember_response_write(open_reqs[i], "after", 5);
        CHECK(rc == EMBER_ERR_CLIENT_GONE || rc == EMBER_ERR_INVALID_HANDLE);
    }
    /* The clients see their connections end (the chunked body never completes). */
    for (i = 0; i < OPEN_STREAMS; i++) {
        char sink[4096];
        ssize_t n;
        while ((n = recv(fds[i], sink, sizeof sink, 0)) > 0) {}
        ended += n == 0 || n < 0;
        close(fds[i]);
    }
    CHECK(ended == OPEN_STREAMS);
    CHECK_RC(ember_server_stop(s, 500), EMBER_OK); /* idempotent */
    CHECK_RC(ember_server_free(s), EMBER_OK);
    CHECK(atomic_get(&t.events[EMBER_EVENT_ABORTED]) == OPEN_STREAMS);
    CHECK(atomic_get(&stream_route_released) == 1);
}

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
    h_run("misuse: forged handles, NULL arguments, lent chunks released", test_misuse_with_forged_and_null_arguments);
    h_run("wrong order: write/end before begin, begin twice, after end", test_wrong_order_on_a_live_request);
    h_run("backpressure and WRITABLE (pool dispatch)", test_backpressure_pool);
    h_run("backpressure and WRITABLE (inline dispatch)", test_backpressure_inline);
    h_run("HEAD: COMPLETED once though ended or refused early (pool)", test_head_pool);
    h_run("HEAD: COMPLETED once though ended or refused early (inline)", test_head_inline);
    h_run("wait_writable times out, then has room; refused on an I/O thread", test_wait_writable);
    h_run("auto dispatch: a blocking wait on the own I/O thread refuses", test_wait_writable_under_auto_dispatch);
    h_run("ABORTED exactly once when the client leaves", test_aborted_exactly_once_when_the_client_leaves);
    h_run("ABORTED exactly once on the handler timeout", test_aborted_exactly_once_on_handler_timeout);
    h_run("zero-copy writes released exactly once", test_nocopy_writes_released_exactly_once);
    h_run("stop with streams open: ABORTED each, release once", test_stop_with_streams_open);
    h_run("streamed body: 413, client gone, misuse", test_streamed_body_limits_and_misuse);
    h_run("streamed body: READABLE events and 100-continue (inline)", test_streamed_body_readable_events_inline);
    h_run("SHA-256 of the reference app: FIPS 180-4 examples", test_sha256_fips_examples);
    return h_finish();
}
