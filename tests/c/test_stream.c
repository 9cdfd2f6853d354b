/* Streamed answers and request events through the C ABI: misuse of every function (NULL,
 * forged and stale handles, wrong order), backpressure and EMBER_EVENT_WRITABLE, HEAD, auto
 * dispatch, the final event exactly once, zero-copy writes released exactly once, stop() with
 * streams open. Streamed request bodies are in test_body.c. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

#include "harness.h"
#include "streamkit.h"

static const ember_request FORGED = 0x123456789abcdefULL;

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

int main(void) {
    h_run("misuse: forged handles, NULL arguments, lent chunks released", test_misuse_with_forged_and_null_arguments);
    h_run("wrong order: write/end before begin, begin twice, after end", test_wrong_order_on_a_live_request);
    h_run("backpressure and WRITABLE (pool dispatch)", test_backpressure_pool);
    h_run("backpressure and WRITABLE (inline dispatch)", test_backpressure_inline);
    h_run("HEAD: COMPLETED once though ended or refused early (pool)", test_head_pool);
    h_run("HEAD: COMPLETED once though ended or refused early (inline)", test_head_inline);
    h_run("wait_writable times out, then has room; refused on an I/O thread", test_wait_writable);
    h_run("auto dispatch: a blocking wait on the own I/O thread refuses", test_wait_writable_under_auto_dispatch);
    return h_finish();
}
