/* The app bench/hotpath.sh counts instructions in: GET / answers the hello body, inline
 * dispatch, one I/O worker, port 0 (printed). It uses only the ABI every Ember has, and the
 * access log and metrics functions when the library has them (weak references) and the env
 * asks: EMBER_HOTPATH_METRICS=1, EMBER_HOTPATH_ACCESS_LOG=<file>. EMBER_HOTPATH_DISPATCH=auto|pool
 * measures another dispatch mode (auto's monitor thread is counted too). Stops on SIGTERM. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "ember.h"

#pragma weak ember_server_set_metrics
#pragma weak ember_server_set_access_log

static void hello(void *ud, ember_request req, const ember_request_info *info) {
    static const char type[] = "Content-Type: application/json";
    static const char body[] = "{\"code\": 1, \"msg\": \"Hello WebAPI\"}";
    (void)ud; (void)info;
    ember_request_respond(req, 200, type, sizeof type - 1, body, sizeof body - 1);
}

int main(void) {
    ember_server *s = NULL;
    uint16_t port = 0;
    sigset_t stop;
    int sig;
    const char *log = getenv("EMBER_HOTPATH_ACCESS_LOG");
    const char *mode = getenv("EMBER_HOTPATH_DISPATCH");
    int32_t dispatch = EMBER_DISPATCH_INLINE;
    if (mode && strcmp(mode, "auto") == 0) dispatch = 2;   /* EMBER_DISPATCH_AUTO, by number: older headers lack it */
    else if (mode && strcmp(mode, "pool") == 0) dispatch = EMBER_DISPATCH_POOL;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    if (ember_server_new(&s) || ember_server_listen(s, "127.0.0.1:0") ||
        ember_server_set_dispatch(s, dispatch) || ember_server_set_workers(s, 1) ||
        ember_server_route(s, "GET", "/", hello, NULL, NULL)) goto fail;
    if (getenv("EMBER_HOTPATH_METRICS") && (!ember_server_set_metrics || ember_server_set_metrics(s, "/metrics"))) goto fail;
    if (log && (!ember_server_set_access_log || ember_server_set_access_log(s, EMBER_ACCESS_LOG_COMBINED, log))) goto fail;
    if (ember_server_start(s) || ember_server_port(s, 0, &port)) goto fail;
    printf("listening on http://127.0.0.1:%u\n", (unsigned)port);
    fflush(stdout);
    sigwait(&stop, &sig);
    ember_server_stop(s, 1000);
    ember_server_free(s);
    return 0;
fail:
    fprintf(stderr, "hotpath_app: %s\n", ember_last_error());
    return 1;
}
