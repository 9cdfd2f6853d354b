/* A tiny assertion harness and a blocking HTTP/1.1 client for the C tests. */
#ifndef EMBER_TEST_HARNESS_H
#define EMBER_TEST_HARNESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ember.h"

/* ---- assertions: failures are counted, the test goes on ---- */

int h_check(int ok, const char *expr, const char *file, int line);
int h_check_rc(ember_result got, ember_result want, const char *expr, const char *file, int line);
int h_check_str(const char *got, size_t got_len, const char *want, const char *expr, const char *file, int line);

#define CHECK(cond) h_check((cond) ? 1 : 0, #cond, __FILE__, __LINE__)
#define CHECK_RC(call, want) h_check_rc((call), (want), #call, __FILE__, __LINE__)
#define CHECK_STR(ptr, len, want) h_check_str((ptr), (len), (want), #ptr, __FILE__, __LINE__)

/* Runs one test with a watchdog: a hang kills the process (no final line, non-zero exit). */
void h_run(const char *name, void (*fn)(void));
/* Prints "N passed, N failed" and returns the exit status. */
int h_finish(void);

/* ---- time and waiting ---- */

void sleep_ms(unsigned ms);
uint64_t now_ms(void);
/* Polls *counter (atomically) until it equals want or timeout_ms passes; returns 1 if it did. */
int wait_for(volatile int *counter, int want, unsigned timeout_ms);
int atomic_get(volatile int *p);
void atomic_inc(volatile int *p);

/* ---- servers ---- */

/* A server listening on 127.0.0.1:0 with the engine's log quiet unless EMBER_TEST_LOG is set. */
ember_server *new_server(void);
/* Starts it and returns its port (0 on failure, counted as a failed check). */
uint16_t start_server(ember_server *s);

/* ---- HTTP client ---- */

typedef struct {
    int status;        /* 0 if no response could be read */
    char *head;        /* the status line and headers, NUL-terminated */
    char *body;        /* NUL-terminated for convenience; body_len is the truth */
    size_t body_len;
} http_resp;

/* Connects to 127.0.0.1:port with a receive timeout; -1 on failure. */
int http_connect(uint16_t port);
int http_send(int fd, const char *data, size_t len);
/* Reads one response (Content-Length, chunked, or until close). Returns 0 on success. */
int http_read(int fd, http_resp *out);
/* Connect, send raw, read, close. */
int http_raw(uint16_t port, const char *raw, http_resp *out);
/* A GET with Connection: close. */
int http_get(uint16_t port, const char *target, http_resp *out);
/* The value of a response header (case-insensitive name), copied into a static buffer. */
const char *http_header(const http_resp *r, const char *name);
void http_free(http_resp *r);

/* A GET on its own thread, for requests that must be in flight while the test acts. */
typedef struct {
    uint16_t port;
    const char *target;
    int status;        /* 0: no response (refused, reset, closed) */
    uint64_t ms;       /* how long it took */
    pthread_t thread;
    int started;
} bg_get;
void bg_get_start(bg_get *g, uint16_t port, const char *target);
void bg_get_join(bg_get *g);

/* A release callback that counts into the int that user_data points at. */
void count_release(void *user_data);

#endif
