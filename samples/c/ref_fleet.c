/* Behind a load balancer (tests/REFERENCE_APP.md): EMBER_HEALTH_PATH (the engine's health
 * path), EMBER_TRUSTED_PROXIES (comma-separated CIDRs), and on SIGTERM EMBER_DRAIN_MS (drain
 * that long: health 503, answers close) then EMBER_REFUSE_MS (refuse new connections that
 * long while open ones finish), then the stop. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "ref_app.h"

#ifdef _WIN32
#include <windows.h>
#endif

ember_result ref_fleet_options(ember_server *server) {
    const char *health = getenv("EMBER_HEALTH_PATH");
    const char *trusted = getenv("EMBER_TRUSTED_PROXIES");
    ember_result rc;
    if (health && *health && (rc = ember_server_set_health_path(server, health)) != EMBER_OK) return rc;
    while (trusted && *trusted) {
        char cidr[64];
        size_t n = strcspn(trusted, ",");
        if (n > 0 && n < sizeof cidr) {
            memcpy(cidr, trusted, n);
            cidr[n] = '\0';
            if ((rc = ember_server_add_trusted_proxy(server, cidr)) != EMBER_OK) return rc;
        }
        trusted += n + (trusted[n] == ',');
    }
    return EMBER_OK;
}

static unsigned long env_ms(const char *name) {
    const char *env = getenv(name);
    char *end;
    unsigned long ms;
    if (!env || *env < '0' || *env > '9') return 0;
    errno = 0;
    ms = strtoul(env, &end, 10);
    return errno == 0 && *end == '\0' && ms <= 600000 ? ms : 0;
}

#ifndef _WIN32
/* Waits up to ms for another SIGTERM / SIGINT (still blocked, so they queue for us): an
 * operator who signals twice wants the stop now. SIGHUP is not a stop; it waits on. */
static int wait_or_signal(const sigset_t *signals, unsigned long ms) {
    struct timespec end, now, left;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += (time_t)(ms / 1000);
    end.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) { end.tv_sec++; end.tv_nsec -= 1000000000L; }
    for (;;) {
        int sig;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec)) return 0;
        left.tv_sec = end.tv_sec - now.tv_sec;
        left.tv_nsec = end.tv_nsec - now.tv_nsec;
        if (left.tv_nsec < 0) { left.tv_sec--; left.tv_nsec += 1000000000L; }
        sig = sigtimedwait(signals, NULL, &left);
        if (sig == SIGTERM || sig == SIGINT) {
            fprintf(stderr, "ember_ref: signal %d during the drain, stopping now\n", sig);
            return 1;
        }
        if (sig < 0 && errno == EAGAIN) return 0;
    }
}
#endif

#ifdef _WIN32
static int wait_ms(const void *stop_signals, unsigned long ms) {
    (void)stop_signals;
    Sleep((DWORD)ms);
    return 0;
}
#else
static int wait_ms(const void *stop_signals, unsigned long ms) {
    return wait_or_signal((const sigset_t *)stop_signals, ms);
}
#endif

/* On SIGTERM a fleet member first drains: health answers 503 and every answer closes its
 * connection, while it goes on serving, so a balancer with active health checks moves away.
 * Then it refuses new connections (nginx open source, with passive checks only, retries
 * them elsewhere) while what is open finishes and the balancer's idle connections expire;
 * only then the stop, so no request meets a closing connection. */
void ref_drain(ember_server *server, const void *stop_signals) {
    unsigned long drain = env_ms("EMBER_DRAIN_MS"), refuse = env_ms("EMBER_REFUSE_MS");
    ember_result rc;
    if (drain > 0) {
        if ((rc = ember_server_drain(server)) != EMBER_OK) { ref_log_failure("drain", rc); return; }
        fprintf(stderr, "ember_ref: draining for %lu ms\n", drain);
        if (wait_ms(stop_signals, drain)) return;
    }
    if (refuse > 0) {
        if ((rc = ember_server_stop_accepting(server)) != EMBER_OK) { ref_log_failure("stop accepting", rc); return; }
        fprintf(stderr, "ember_ref: refusing new connections for %lu ms\n", refuse);
        wait_ms(stop_signals, refuse);
    }
}
