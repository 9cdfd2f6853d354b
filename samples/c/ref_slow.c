/* The reference app's GET /slow?ms=N (tests/REFERENCE_APP.md): the handler returns at once
 * and one timer thread of ours answers 200 {"slept_ms": N} when it is due. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "ref_app.h"

static const char JSON_TYPE[] = "Content-Type: application/json";
static const char OOM[] = "{\"error\": \"out of memory\"}";

static void respond(ember_request req, uint16_t status, const char *body, size_t len) {
    ember_result rc = ember_request_respond(req, status, JSON_TYPE, strlen(JSON_TYPE), body, len);
    if (rc != EMBER_OK && rc != EMBER_ERR_CLIENT_GONE) ref_log_failure("respond", rc);
}

/* One thread and a queue ordered by due time, not a thread per request: 10,000 pending
 * /slow requests (a hostile-client test) then cost a few MB, not 10,000 thread stacks. */

#define SLOW_MAX_MS 600000UL

typedef struct slow_job {
    ember_request req;
    unsigned long ms;
    struct timespec due;
    struct slow_job *next;
} slow_job;

#ifdef _WIN32
#define SLOW_CLOCK CLOCK_REALTIME /* winpthreads' condition variables time by the wall clock */
#else
#define SLOW_CLOCK CLOCK_MONOTONIC
#endif

static pthread_mutex_t slow_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slow_cond; /* timed by SLOW_CLOCK, set up in ref_slow_start */
static slow_job *slow_queue;     /* sorted by due, earliest first */
static slow_job *slow_tail;
static int slow_quit;
static pthread_t slow_timer;

static int ts_before(struct timespec a, struct timespec b) {
    return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

/* Returns 1 and sets *ms when the raw query has ms=<decimal> within range. */
static int query_ms(ember_str q, unsigned long *ms) {
    size_t i = 0;
    while (i < q.len) {
        size_t end = i;
        while (end < q.len && q.ptr[end] != '&') end++;
        if (end - i > 3 && memcmp(q.ptr + i, "ms=", 3) == 0) {
            unsigned long v = 0;
            size_t d;
            for (d = i + 3; d < end; d++) {
                if (q.ptr[d] < '0' || q.ptr[d] > '9') return 0;
                v = v * 10 + (unsigned long)(q.ptr[d] - '0');
                if (v > SLOW_MAX_MS) return 0;
            }
            *ms = v;
            return 1;
        }
        i = end + 1;
    }
    return 0;
}

static void slow_answer(slow_job *job) {
    char body[64];
    int n = snprintf(body, sizeof body, "{\"slept_ms\": %lu}", job->ms);
    ember_result rc = ember_request_respond(job->req, 200, JSON_TYPE, strlen(JSON_TYPE), body, (size_t)n);
    /* The handler timeout (503) or a departed client may have ended the request
     * first; that is expected here, not an error of ours. */
    if (rc != EMBER_OK && rc != EMBER_ERR_TIMED_OUT && rc != EMBER_ERR_CLIENT_GONE)
        ref_log_failure("respond /slow", rc);
    free(job);
}

static void *slow_thread(void *arg) {
    (void)arg;
    pthread_mutex_lock(&slow_lock);
    while (!slow_quit) {
        struct timespec now;
        clock_gettime(SLOW_CLOCK, &now);
        if (slow_queue && !ts_before(now, slow_queue->due)) {
            slow_job *job = slow_queue;
            slow_queue = job->next;
            if (!slow_queue) slow_tail = NULL;
            /* Answered outside the lock: the handler thread queueing the next job
             * must not wait for the engine. */
            pthread_mutex_unlock(&slow_lock);
            slow_answer(job);
            pthread_mutex_lock(&slow_lock);
        } else if (slow_queue) {
            pthread_cond_timedwait(&slow_cond, &slow_lock, &slow_queue->due);
        } else {
            pthread_cond_wait(&slow_cond, &slow_lock);
        }
    }
    pthread_mutex_unlock(&slow_lock);
    return NULL;
}

int ref_slow_start(void) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
#ifndef _WIN32
    pthread_condattr_setclock(&ca, SLOW_CLOCK);
#endif
    pthread_cond_init(&slow_cond, &ca);
    pthread_condattr_destroy(&ca);
    return pthread_create(&slow_timer, NULL, slow_thread, NULL);
}

/* After the server was freed (which freed every request): the thread ends and what is
 * still queued is dropped. */
void ref_slow_finish(void) {
    slow_job *job;
    pthread_mutex_lock(&slow_lock);
    slow_quit = 1;
    pthread_cond_signal(&slow_cond);
    pthread_mutex_unlock(&slow_lock);
    pthread_join(slow_timer, NULL);
    while ((job = slow_queue) != NULL) {
        slow_queue = job->next;
        free(job);
    }
}

void ref_on_slow(void *ud, ember_request req, const ember_request_info *info) {
    static const char bad[] = "{\"error\": \"expected ms=0..600000\"}";
    slow_job *job, **at;
    (void)ud;
    job = malloc(sizeof *job);
    if (!job) { respond(req, 500, OOM, sizeof OOM - 1); return; }
    job->req = req; /* the info views die with the request; the id is all we keep */
    if (!query_ms(info->query, &job->ms)) {
        free(job);
        respond(req, 400, bad, sizeof bad - 1);
        return;
    }
    clock_gettime(SLOW_CLOCK, &job->due);
    job->due.tv_sec += (time_t)(job->ms / 1000);
    job->due.tv_nsec += (long)(job->ms % 1000) * 1000000L;
    if (job->due.tv_nsec >= 1000000000L) { job->due.tv_sec++; job->due.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&slow_lock);
    /* Jobs mostly come in due order (one delay for many requests): append at the
     * tail, else walk to the place. */
    if (slow_tail && !ts_before(job->due, slow_tail->due)) at = &slow_tail->next;
    else at = &slow_queue;
    while (*at && !ts_before(job->due, (*at)->due)) at = &(*at)->next;
    job->next = *at;
    *at = job;
    if (!job->next) slow_tail = job;
    if (slow_queue == job) pthread_cond_signal(&slow_cond);
    pthread_mutex_unlock(&slow_lock);
}
