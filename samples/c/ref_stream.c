/* The reference app's streaming routes (tests/REFERENCE_APP.md): GET /sse, GET /stream and
 * POST /upload. They show the two ways to wait on a stream:
 * - /stream and /upload are driven by request events (EMBER_EVENT_WRITABLE / READABLE):
 *   nothing ever blocks, so they work unchanged under inline dispatch, where handlers
 *   run on the engine's I/O threads.
 * - /sse runs on a thread of its own, which may block (sleeps between events, and
 *   ember_response_wait_writable when a write is refused). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "ref_app.h"
#include "sha256.h"

static const char JSON_TYPE[] = "Content-Type: application/json";

static void respond_json(ember_request req, uint16_t status, const char *body) {
    ember_result rc = ember_request_respond(req, status, JSON_TYPE, sizeof JSON_TYPE - 1, body, strlen(body));
    if (rc != EMBER_OK && rc != EMBER_ERR_CLIENT_GONE) ref_log_failure("respond", rc);
}

/* Returns 1 and sets *out when the raw query has name=<decimal> (first occurrence) <= max. */
static int query_ulong(ember_str q, const char *name, unsigned long max, unsigned long *out) {
    size_t i = 0, nlen = strlen(name);
    while (i < q.len) {
        size_t end = i;
        while (end < q.len && q.ptr[end] != '&') end++;
        if (end - i > nlen && memcmp(q.ptr + i, name, nlen) == 0 && q.ptr[i + nlen] == '=') {
            unsigned long v = 0;
            size_t d;
            for (d = i + nlen + 1; d < end; d++) {
                if (q.ptr[d] < '0' || q.ptr[d] > '9') return 0;
                v = v * 10 + (unsigned long)(q.ptr[d] - '0');
                if (v > max) return 0;
            }
            *out = v;
            return 1;
        }
        i = end + 1;
    }
    return 0;
}

/* ---- GET /stream?n=N&size=S: N writes of S bytes, event-driven ---- */

#define STREAM_MAX 1048576UL

/* One streamed answer. Two owners: the handler while it runs, and the event callback
 * until its final event (ABORTED or COMPLETED, exactly once, last); the last one out
 * frees it. `lock` keeps the handler and a WRITABLE event from writing at once. */
typedef struct {
    pthread_mutex_t lock;
    ember_request req;
    unsigned long next, count;
    size_t size;
    int letter;          /* what `chunk` is filled with now */
    int finished;        /* ended, or the handle is dead: write nothing more */
    int refs;
    unsigned char *chunk;
} stream_job;

static void stream_unref(stream_job *job) {
    int left;
    pthread_mutex_lock(&job->lock);
    left = --job->refs;
    pthread_mutex_unlock(&job->lock);
    if (left > 0) return;
    pthread_mutex_destroy(&job->lock);
    free(job->chunk);
    free(job);
}

/* Writes until the queue refuses (a WRITABLE event resumes here) or all is written. */
static void stream_pump(stream_job *job) {
    int end_now = 0;
    pthread_mutex_lock(&job->lock);
    while (!job->finished && job->next < job->count) {
        int letter = 'a' + (int)(job->next % 26);
        ember_result rc;
        if (letter != job->letter) {
            memset(job->chunk, letter, job->size);
            job->letter = letter;
        }
        rc = ember_response_write(job->req, job->chunk, job->size);
        if (rc == EMBER_ERR_WOULD_BLOCK) break; /* nothing was taken; EMBER_EVENT_WRITABLE follows */
        if (rc != EMBER_OK) {
            /* The client left or the server stops; this failed call also released the
             * request's data, so nothing more is owed. */
            if (rc != EMBER_ERR_CLIENT_GONE) ref_log_failure("/stream write", rc);
            job->finished = 1;
            break;
        }
        job->next++;
    }
    if (!job->finished && job->next == job->count) job->finished = end_now = 1;
    pthread_mutex_unlock(&job->lock);
    /* Outside the lock: under inline dispatch, ending an answer to HEAD runs the
     * COMPLETED event right inside this call, and that event takes the lock. */
    if (end_now) {
        ember_result rc = ember_response_end(job->req);
        if (rc != EMBER_OK && rc != EMBER_ERR_CLIENT_GONE) ref_log_failure("/stream end", rc);
    }
}

static void stream_event(void *ud, ember_request req, int32_t event) {
    stream_job *job = (stream_job *)ud;
    if (event == EMBER_EVENT_WRITABLE) {
        stream_pump(job);
        return;
    }
    if (event == EMBER_EVENT_ABORTED) {
        int ack;
        pthread_mutex_lock(&job->lock);
        ack = !job->finished;
        job->finished = 1;
        pthread_mutex_unlock(&job->lock);
        /* The engine keeps an aborted request's data until the host's next call on it;
         * this end (which reports EMBER_ERR_CLIENT_GONE) lets it go now. */
        if (ack) (void)ember_response_end(req);
    }
    if (event == EMBER_EVENT_ABORTED || event == EMBER_EVENT_COMPLETED) stream_unref(job);
}

static void on_stream(void *ud, ember_request req, const ember_request_info *info) {
    static const char bad[] = "{\"error\": \"expected n=0..1048576&size=1..1048576\"}";
    static const char head[] = "Content-Type: application/octet-stream";
    unsigned long n, size;
    stream_job *job;
    ember_result rc;
    (void)ud;
    if (!query_ulong(info->query, "n", STREAM_MAX, &n) || !query_ulong(info->query, "size", STREAM_MAX, &size) ||
        size == 0) {
        respond_json(req, 400, bad);
        return;
    }
    job = calloc(1, sizeof *job);
    if (job) job->chunk = malloc(size);
    if (!job || !job->chunk) {
        if (job) free(job);
        respond_json(req, 500, "{\"error\": \"out of memory\"}");
        return;
    }
    pthread_mutex_init(&job->lock, NULL);
    job->req = req;
    job->count = n;
    job->size = size;
    job->refs = 2; /* this handler, and the event callback */
    rc = ember_response_begin(req, 200, head, sizeof head - 1);
    if (rc == EMBER_OK) rc = ember_request_on_event(req, stream_event, job);
    if (rc != EMBER_OK) {
        /* Not begun, or the request ended already: no event will come. */
        if (rc != EMBER_ERR_CLIENT_GONE && rc != EMBER_ERR_TIMED_OUT) ref_log_failure("/stream begin", rc);
        job->refs = 1;
        (void)ember_response_end(req);
        stream_unref(job);
        return;
    }
    stream_pump(job);
    stream_unref(job);
}

/* ---- GET /sse: three events 100 ms apart, from a thread of its own ---- */

/* The SSE helper of this host: one event's fields in the text/event-stream format.
 * `data` may span lines (each becomes a data: field). Blocks while the queue is full,
 * so this is for threads of the host's own, never for inline-dispatch handlers. */
static ember_result sse_write(ember_request req, const char *text, size_t len) {
    for (;;) {
        ember_result rc = ember_response_write(req, text, len);
        if (rc != EMBER_ERR_WOULD_BLOCK) return rc;
        rc = ember_response_wait_writable(req, 10000);
        if (rc != EMBER_OK) return rc; /* gone, or a reader stuck for 10 s */
    }
}

static ember_result sse_event(ember_request req, const char *id, const char *event, const char *data) {
    char frame[512];
    size_t len = 0;
    const char *line = data;
    if (id) len += (size_t)snprintf(frame + len, sizeof frame - len, "id: %s\n", id);
    if (event && len < sizeof frame) len += (size_t)snprintf(frame + len, sizeof frame - len, "event: %s\n", event);
    while (line && len < sizeof frame) {
        const char *nl = strchr(line, '\n');
        int n = nl ? (int)(nl - line) : (int)strlen(line);
        len += (size_t)snprintf(frame + len, sizeof frame - len, "data: %.*s\n", n, line);
        line = nl ? nl + 1 : NULL;
    }
    if (len + 1 >= sizeof frame) return EMBER_ERR_INVALID_ARG; /* this small helper's limit */
    frame[len++] = '\n';
    return sse_write(req, frame, len);
}

typedef struct {
    ember_request req;
    unsigned long first; /* the first event's number */
} sse_job;

static void sleep_ms(unsigned ms) {
    struct timespec left;
    left.tv_sec = (time_t)(ms / 1000);
    left.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {}
}

static void *sse_thread(void *arg) {
    sse_job job = *(sse_job *)arg;
    static const char retry[] = "retry: 1000\n\n";
    ember_result rc;
    unsigned long n;
    free(arg);
    rc = sse_write(job.req, retry, sizeof retry - 1);
    for (n = job.first; rc == EMBER_OK && n <= 3; n++) {
        char id[16], data[32];
        if (n > job.first) sleep_ms(100);
        snprintf(id, sizeof id, "%lu", n);
        snprintf(data, sizeof data, "{\"n\": %lu}", n);
        rc = sse_event(job.req, id, "tick", data);
    }
    /* Ending also answers a stream whose client left: that releases its data now. */
    if (rc == EMBER_OK) rc = ember_response_end(job.req);
    else (void)ember_response_end(job.req);
    if (rc != EMBER_OK && rc != EMBER_ERR_CLIENT_GONE) ref_log_failure("/sse", rc);
    return NULL;
}

static void on_sse(void *ud, ember_request req, const ember_request_info *info) {
    static const char head[] = "Content-Type: text/event-stream\nCache-Control: no-cache";
    unsigned long last = 0;
    ember_str v;
    sse_job *job;
    pthread_t t;
    pthread_attr_t attr;
    int err;
    (void)ud; (void)info;
    /* A reconnecting EventSource says which event it saw last: go on after it (past the
     * last event, nothing is left). An id that is not a decimal number starts over. */
    if (ember_request_header(req, "last-event-id", &v) == EMBER_OK && v.len > 0) {
        size_t i;
        for (i = 0; i < v.len && v.ptr[i] >= '0' && v.ptr[i] <= '9'; i++)
            if (last < 3) last = last * 10 + (unsigned long)(v.ptr[i] - '0');
        if (i < v.len) last = 0;
        if (last > 3) last = 3;
    }
    job = malloc(sizeof *job);
    if (!job) { respond_json(req, 500, "{\"error\": \"out of memory\"}"); return; }
    job->req = req;
    job->first = last + 1;
    if (ember_response_begin(req, 200, head, sizeof head - 1) != EMBER_OK) {
        free(job); /* the request ended before we could begin */
        return;
    }
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    err = pthread_create(&t, &attr, sse_thread, job);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        free(job);
        fprintf(stderr, "ember_ref: /sse: pthread_create: %s\n", strerror(err));
        (void)ember_response_end(req);
    }
}

/* ---- POST /upload: the body read in pieces, counted and hashed ---- */

/* Owned like stream_job: the handler while it runs, the event callback until its final
 * event. `lock` keeps the handler and a READABLE event from reading at once. */
typedef struct {
    pthread_mutex_t lock;
    ember_request req;
    sha256_ctx sha;
    uint64_t bytes;
    int finished;
    int refs;
    unsigned char buf[65536];
} upload_job;

static void upload_unref(upload_job *job) {
    int left;
    pthread_mutex_lock(&job->lock);
    left = --job->refs;
    pthread_mutex_unlock(&job->lock);
    if (left > 0) return;
    pthread_mutex_destroy(&job->lock);
    free(job);
}

/* Reads what is there without blocking; EMBER_EVENT_READABLE brings us back. */
static void upload_drain(upload_job *job) {
    char body[128];
    int answer = 0, failed = 0;
    pthread_mutex_lock(&job->lock);
    while (!job->finished) {
        size_t n = 0;
        ember_result rc = ember_request_read(job->req, job->buf, sizeof job->buf, 0, &n);
        if (rc == EMBER_OK && n > 0) {
            sha256_update(&job->sha, job->buf, n);
            job->bytes += n;
        } else if (rc == EMBER_OK) { /* n == 0: the end of the body */
            unsigned char digest[32];
            char hex[65];
            sha256_final(&job->sha, digest);
            sha256_hex(digest, hex);
            snprintf(body, sizeof body, "{\"bytes\": %llu, \"sha256\": \"%s\"}", (unsigned long long)job->bytes, hex);
            job->finished = answer = 1;
        } else if (rc == EMBER_ERR_WOULD_BLOCK) {
            break;
        } else {
            /* Too large (the engine answered 413), too slow (408), or the client left. */
            if (rc != EMBER_ERR_TOO_LARGE && rc != EMBER_ERR_TIMED_OUT && rc != EMBER_ERR_CLIENT_GONE)
                ref_log_failure("/upload read", rc);
            job->finished = failed = 1;
        }
    }
    pthread_mutex_unlock(&job->lock);
    /* Outside the lock: an answer may run the final event (which takes it) at once. */
    if (answer) respond_json(job->req, 200, body);
    /* The engine answered already; this attempt is refused and releases the request. */
    if (failed) (void)ember_request_respond(job->req, 500, NULL, 0, NULL, 0);
}

static void upload_event(void *ud, ember_request req, int32_t event) {
    upload_job *job = (upload_job *)ud;
    if (event == EMBER_EVENT_READABLE) {
        upload_drain(job);
        return;
    }
    if (event == EMBER_EVENT_ABORTED) {
        int ack;
        pthread_mutex_lock(&job->lock);
        ack = !job->finished;
        job->finished = 1;
        pthread_mutex_unlock(&job->lock);
        if (ack) (void)ember_request_respond(req, 500, NULL, 0, NULL, 0); /* releases it */
    }
    if (event == EMBER_EVENT_ABORTED || event == EMBER_EVENT_COMPLETED) upload_unref(job);
}

static void on_upload(void *ud, ember_request req, const ember_request_info *info) {
    upload_job *job;
    ember_result rc;
    (void)ud; (void)info;
    job = malloc(sizeof *job);
    if (!job) { respond_json(req, 500, "{\"error\": \"out of memory\"}"); return; }
    pthread_mutex_init(&job->lock, NULL);
    job->req = req;
    sha256_init(&job->sha);
    job->bytes = 0;
    job->finished = 0;
    job->refs = 2; /* this handler, and the event callback */
    rc = ember_request_on_event(req, upload_event, job);
    if (rc != EMBER_OK) {
        job->refs = 1;
        (void)ember_request_respond(req, 500, NULL, 0, NULL, 0);
        upload_unref(job);
        return;
    }
    upload_drain(job); /* the first read also sends "100 Continue" when it was asked for */
    upload_unref(job);
}

ember_result ref_add_stream_routes(ember_server *server) {
    ember_result rc = ember_server_route(server, "GET", "/sse", on_sse, NULL, NULL);
    if (rc == EMBER_OK) rc = ember_server_route(server, "GET", "/stream", on_stream, NULL, NULL);
    if (rc == EMBER_OK)
        rc = ember_server_route_flags(server, "POST", "/upload", EMBER_ROUTE_STREAM_BODY, on_upload, NULL, NULL);
    return rc;
}
