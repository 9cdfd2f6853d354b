/* Stop and free under continuous load (issue 12 item 7), counted on both sides.
 *
 * Eight clients keep sending on keep-alive connections (reconnecting when one closes) while
 * the host calls ember_server_stop (with a grace period) and ember_server_free. Each client
 * sorts every request into exactly one of: a complete answer (status and all 32 KiB of the
 * body), a clean close before any byte of the answer came, or a truncated answer (some bytes,
 * then the close): there must be none of those. The host counts handler calls, answers the
 * engine took, calls after free (none allowed) and release callbacks (exactly one per route).
 * Every answer the engine took must have reached its client whole. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "portable.h"

#include "harness.h"

#define CLIENTS 8
#define BODY_LEN 32768

static char body[BODY_LEN];
static volatile int calls, answered, after_free, freed, stop_clients;

static void answer(void *ud, ember_request req, const ember_request_info *info) {
    (void)ud; (void)info;
    if (atomic_get(&freed)) atomic_inc(&after_free);
    atomic_inc(&calls);
    if (ember_request_respond(req, 200, "Content-Type: application/octet-stream", 38, body, BODY_LEN) == EMBER_OK)
        atomic_inc(&answered);
}

typedef struct {
    uint16_t port;
    int complete, clean_close, truncated, refused;
    pthread_t thread;
} client;

static const char *find_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0) return hay;
    return NULL;
}

/* One request on fd: 1 complete, 0 clean close before any byte, -1 truncated. */
static int one_request(int fd) {
    static const char req[] = "GET /load HTTP/1.1\r\nHost: t\r\n\r\n";
    char buf[8192];
    size_t got = 0, head_len = 0, want = 0;
    char head[1024];
    if (http_send(fd, req, sizeof req - 1) != 0) return 0; /* nothing of an answer came */
    for (;;) {
        int n = (int)recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return got == 0 ? 0 : -1;
        if (head_len == 0) {
            size_t keep = got < sizeof head ? (size_t)n < sizeof head - got ? (size_t)n : sizeof head - got : 0;
            memcpy(head + got, buf, keep);
            got += (size_t)n;
            if (got >= 4) {
                char *end;
                head[got < sizeof head ? got : sizeof head - 1] = '\0';
                end = strstr(head, "\r\n\r\n");
                if (end) {
                    const char *cl = find_ci(head, "content-length:");
                    head_len = (size_t)(end - head) + 4;
                    if (strncmp(head, "HTTP/1.1 200", 12) != 0 || !cl) return -1;
                    want = head_len + strtoul(cl + 15, NULL, 10);
                    if (want - head_len != BODY_LEN) return -1;
                }
            }
        } else {
            got += (size_t)n;
        }
        if (head_len && got >= want) return got == want ? 1 : -1;
    }
}

static void *client_main(void *arg) {
    client *c = arg;
    int fd = -1;
    while (!atomic_get(&stop_clients)) {
        int r;
        if (fd < 0 && (fd = http_connect(c->port)) < 0) {
            c->refused++; /* stopped: nothing listens any more */
            sleep_ms(2);
            continue;
        }
        r = one_request(fd);
        if (r == 1) { c->complete++; continue; }
        if (r == 0) c->clean_close++;
        else c->truncated++;
        close(fd);
        fd = -1;
    }
    if (fd >= 0) close(fd);
    return NULL;
}

static void stop_free_under_load(int32_t mode) {
    ember_server *s = new_server();
    client c[CLIENTS];
    int released = 0, i, complete = 0, clean = 0, truncated = 0;
    uint16_t port;
    calls = answered = after_free = freed = stop_clients = 0;
    memset(body, 'e', sizeof body);
    CHECK_RC(ember_server_set_dispatch(s, mode), EMBER_OK);
    CHECK_RC(ember_server_route(s, "GET", "/load", answer, &released, count_release), EMBER_OK);
    port = start_server(s);
    for (i = 0; i < CLIENTS; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].port = port;
        CHECK(pthread_create(&c[i].thread, NULL, client_main, &c[i]) == 0);
    }
    /* Under way (the count grows past any exact value, so wait_for does not fit). */
    for (i = 0; i < 3000 && atomic_get(&calls) < 2000; i++) sleep_ms(10);
    CHECK(atomic_get(&calls) >= 2000);
    CHECK_RC(ember_server_stop(s, 5000), EMBER_OK);
    CHECK(atomic_get(&released) == 1);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    __atomic_store_n(&freed, 1, __ATOMIC_SEQ_CST);
    sleep_ms(100); /* clients keep trying: refused, and no callback may run */
    __atomic_store_n(&stop_clients, 1, __ATOMIC_SEQ_CST);
    for (i = 0; i < CLIENTS; i++) {
        pthread_join(c[i].thread, NULL);
        complete += c[i].complete;
        clean += c[i].clean_close;
        truncated += c[i].truncated;
    }
    CHECK(truncated == 0);
    CHECK(atomic_get(&after_free) == 0);
    CHECK(released == 1);
    /* Every answer the engine took reached its client whole; the rest were closed cleanly. */
    CHECK(complete == atomic_get(&answered));
    CHECK(atomic_get(&calls) == atomic_get(&answered)); /* every handler call was answered */
    CHECK(complete > 0);
    printf("  %s: %d handler calls, %d answers taken, %d complete, %d clean closes, %d truncated\n",
           mode == EMBER_DISPATCH_POOL ? "pool" : "inline", calls, answered, complete, clean, truncated);
}

static void test_stop_free_under_load_pool(void) { stop_free_under_load(EMBER_DISPATCH_POOL); }
static void test_stop_free_under_load_inline(void) { stop_free_under_load(EMBER_DISPATCH_INLINE); }

int main(void) {
    h_run("stop and free under load (pool)", test_stop_free_under_load_pool);
    h_run("stop and free under load (inline)", test_stop_free_under_load_inline);
    return h_finish();
}
