/* DRAFT written by hand before the engine exists; build.rs (cbindgen) will regenerate
 * this file with the same names and signatures. */
#ifndef EMBER_H
#define EMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EMBER_ABI_VERSION 1

/* Result codes (ember_result). 0 = OK, negative = error. Message: ember_last_error(). */
#define EMBER_OK 0
#define EMBER_ERR_NULL -1              /* a required pointer argument was NULL */
#define EMBER_ERR_INVALID_ARG -2       /* bad value: not UTF-8, bad header line, bad status, unknown option */
#define EMBER_ERR_STATE -3             /* not allowed now (configure after start, start twice, use after stop) */
#define EMBER_ERR_BIND -4              /* a listen address could not be bound (message names it) */
#define EMBER_ERR_ROUTE -5             /* route pattern malformed or conflicting */
#define EMBER_ERR_ALREADY_ANSWERED -6  /* the request was already answered */
#define EMBER_ERR_TIMED_OUT -7         /* the handler timeout answered it (503) / ember_server_wait timed out */
#define EMBER_ERR_CLIENT_GONE -8       /* the client disconnected, or the server stopped, before the answer */
#define EMBER_ERR_INVALID_HANDLE -9    /* not a request handle from this library, or one whose slot was reused */
#define EMBER_ERR_NOT_FOUND -10        /* header/param absent */
#define EMBER_ERR_BUFFER_TOO_SMALL -11
#define EMBER_ERR_PANIC -12            /* an internal panic was caught at the boundary */
#define EMBER_ERR_RUNTIME -13          /* threads/runtime could not be created, other I/O failure */

#define EMBER_DISPATCH_INLINE 0        /* handler runs on the I/O worker thread: fastest, must not block */
#define EMBER_DISPATCH_POOL 1          /* default: handler runs on a bounded pool of long-lived threads */

#define EMBER_LIMIT_MAX_HEADER_BYTES 1     /* default 16384 -> 431 (minimum 8192) */
#define EMBER_LIMIT_MAX_HEADERS 2          /* default 100 -> 431 */
#define EMBER_LIMIT_MAX_BODY_BYTES 3       /* default 16 MiB -> 413 */
#define EMBER_LIMIT_HEADER_TIMEOUT_MS 4    /* default 10000 -> 408 + close; 0 = off */
#define EMBER_LIMIT_IDLE_TIMEOUT_MS 5      /* default 30000, keep-alive idle close; 0 = off */
#define EMBER_LIMIT_MAX_CONNECTIONS 6      /* default 10000, further clients wait in the backlog */
#define EMBER_LIMIT_HANDLER_TIMEOUT_MS 7   /* default 30000 -> 503; 0 = off */

#define EMBER_LOG_ERROR 1
#define EMBER_LOG_WARN 2
#define EMBER_LOG_INFO 3
#define EMBER_LOG_DEBUG 4

#define EMBER_WAIT_FOREVER UINT32_MAX

typedef int32_t ember_result;

/* Opaque server. Created by ember_server_new, freed by ember_server_free. */
typedef struct ember_server ember_server;

/* A request handle: a generation-checked token (never 0), not a pointer. Using a
 * stale one is safe and returns an error code. */
typedef uint64_t ember_request;

/* A borrowed view: pointer + length, NOT NUL-terminated. Text is UTF-8 except header
 * values and body, which are raw bytes. ptr may be NULL when len == 0. */
typedef struct ember_str {
  const char *ptr;
  size_t len;
} ember_str;

typedef struct ember_header {
  ember_str name;   /* lower-case */
  ember_str value;
} ember_header;

/* Everything a handler usually needs, handed to it in one go. All views are owned by
 * the engine and valid until the request is answered (and at least until the handler
 * callback returns); copy what you need before answering later from another thread. */
typedef struct ember_request_info {
  ember_request id;
  ember_str method;          /* "GET" */
  ember_str path;            /* as sent, percent-encoded, without the query */
  ember_str query;           /* raw, without '?'; empty if none */
  ember_str body;            /* whole buffered body (up to the body limit) */
  ember_str remote_addr;     /* "127.0.0.1:53412" / "[::1]:53412" */
  ember_str route;           /* the matched pattern, e.g. "/users/{id}" */
  const ember_header *headers;  /* header_count entries, in arrival order */
  size_t header_count;
  const ember_header *params;   /* route parameters, values percent-decoded */
  size_t param_count;
  uint32_t http_version;     /* 10, 11 or 20 */
} ember_request_info;

typedef struct ember_stats {
  uint64_t requests;            /* requests received (all, including 404s) */
  uint64_t responses_1xx;
  uint64_t responses_2xx;
  uint64_t responses_3xx;
  uint64_t responses_4xx;
  uint64_t responses_5xx;
  uint64_t active_connections;
  uint64_t total_connections;
  uint64_t active_requests;     /* requests waiting for the host's answer */
  uint64_t bytes_read;
  uint64_t bytes_written;
} ember_stats;

/* Handler: called once per matching request. Answer with ember_request_respond, inside
 * the call or later from any thread (deferred). Runs on a pool thread (POOL) or on an
 * I/O thread (INLINE). */
typedef void (*ember_handler_fn)(void *user_data, ember_request req, const ember_request_info *info);
/* Called exactly once when the engine no longer needs user_data. */
typedef void (*ember_release_fn)(void *user_data);
/* Log line, msg not NUL-terminated; may be called from any thread. */
typedef void (*ember_log_fn)(void *user_data, int32_t level, const char *msg, size_t len);
/* Thread start/stop hook for every thread that may run host callbacks. */
typedef void (*ember_thread_fn)(void *user_data);

#ifdef __cplusplus
extern "C" {
#endif

const char *ember_version(void);                  /* static string, e.g. "0.1.0" */
uint32_t ember_abi_version(void);                 /* EMBER_ABI_VERSION */
const char *ember_result_name(ember_result code); /* static string, e.g. "EMBER_ERR_NULL" */
/* Message of the last error on this thread; never NULL ("" if none). Owned by the
 * library, valid until the next ember_ call on this thread. */
const char *ember_last_error(void);
/* Copies it into buf (NUL-terminated, truncated to cap); *out_len = full length. */
ember_result ember_last_error_copy(char *buf, size_t cap, size_t *out_len);

ember_result ember_server_new(ember_server **out_server);
/* Stops (as ember_server_stop(server, 0)) if running, then frees. Not from inside this
 * server's own handler (EMBER_ERR_STATE). NULL is fine (no-op, EMBER_OK). */
ember_result ember_server_free(ember_server *server);

/* Before start only (else EMBER_ERR_STATE). */
ember_result ember_server_listen(ember_server *server, const char *address); /* "127.0.0.1:0", "[::1]:8080" */
ember_result ember_server_set_workers(ember_server *server, uint32_t workers);     /* 0 = cores */
ember_result ember_server_set_dispatch(ember_server *server, int32_t mode);
ember_result ember_server_set_pool_threads(ember_server *server, uint32_t threads); /* 0 = default */
ember_result ember_server_set_limit(ember_server *server, int32_t limit, uint64_t value);
ember_result ember_server_set_log(ember_server *server, ember_log_fn log, void *user_data, int32_t min_level);
ember_result ember_server_set_thread_hooks(ember_server *server, ember_thread_fn on_start, ember_thread_fn on_stop, void *user_data);
/* method: "GET", "POST", ... or NULL / "*" for any. pattern: "/users/{id}", "/files/{*rest}".
 * On success the engine owns user_data until it calls release (may be NULL) exactly once,
 * after the server stopped or at free. On failure nothing is taken. */
ember_result ember_server_route(ember_server *server, const char *method, const char *pattern,
                                ember_handler_fn handler, void *user_data, ember_release_fn release);

ember_result ember_server_start(ember_server *server);  /* returns once listening */
ember_result ember_server_port(const ember_server *server, size_t index, uint16_t *out_port);
/* Graceful stop; force-closes at timeout_ms. Idempotent. From inside a handler: starts
 * the shutdown and returns EMBER_OK at once; use ember_server_wait from another thread. */
ember_result ember_server_stop(ember_server *server, uint32_t timeout_ms);
ember_result ember_server_wait(ember_server *server, uint32_t timeout_ms);
ember_result ember_server_stats(const ember_server *server, ember_stats *out_stats);

ember_result ember_request_get_info(ember_request req, ember_request_info *out_info);
ember_result ember_request_header(ember_request req, const char *name, ember_str *out_value);
ember_result ember_request_param(ember_request req, const char *name, ember_str *out_value);
/* headers: "Name: value" lines separated by "\r\n" (or "\n"); NULL/0 for none.
 * body copied. Content-Length is set by the engine. */
ember_result ember_request_respond(ember_request req, uint16_t status,
                                   const char *headers, size_t headers_len,
                                   const void *body, size_t body_len);
/* Like respond, but the body is not copied: release(release_data) is called exactly once
 * (from any thread) when the engine is done with it. On failure nothing is taken. */
ember_result ember_request_respond_nocopy(ember_request req, uint16_t status,
                                          const char *headers, size_t headers_len,
                                          const void *body, size_t body_len,
                                          ember_release_fn release, void *release_data);

#ifdef __cplusplus
}
#endif
#endif
