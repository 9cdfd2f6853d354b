/* CivetWeb hello server for the Ember benchmark suite.
 * Usage: civetweb_hello [port] [workers]   (port 0 = free port; workers = worker threads)
 * First stdout line: "listening on http://127.0.0.1:PORT". Stops on SIGTERM/SIGINT.
 * Head and body go out in one mg_write and tcp_nodelay is on: CivetWeb's usual
 * mg_printf-then-mg_write pattern sends them apart and waits on Nagle + delayed ACK. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <civetweb.h>

static const char BODY[] = "{\"code\": 1, \"msg\": \"Hello WebAPI\"}";
static char response[256];
static size_t response_len;

static int on_hello(struct mg_connection *c, void *cbdata) {
    (void)cbdata;
    mg_write(c, response, response_len);
    return 200;
}

int main(int argc, char **argv) {
    const char *port = argc > 1 ? argv[1] : "8080";
    int workers = argc > 2 ? atoi(argv[2]) : 0;
    char listen[64], threads[16];
    const char *options[16];
    int n = 0, ports_n, sig;
    struct mg_context *ctx;
    struct mg_server_port ports[4];
    struct mg_callbacks cb;
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    response_len = (size_t)snprintf(response, sizeof response,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
        "Connection: keep-alive\r\n\r\n%s", sizeof BODY - 1, BODY);

    if (workers <= 0) workers = 50; /* CivetWeb's default thread count */
    snprintf(listen, sizeof listen, "127.0.0.1:%s", port);
    snprintf(threads, sizeof threads, "%d", workers);
    options[n++] = "listening_ports";   options[n++] = listen;
    options[n++] = "num_threads";       options[n++] = threads;
    options[n++] = "enable_keep_alive"; options[n++] = "yes";
    options[n++] = "keep_alive_timeout_ms"; options[n++] = "60000";
    options[n++] = "tcp_nodelay";       options[n++] = "1";
    options[n++] = NULL;

    mg_init_library(0);
    memset(&cb, 0, sizeof cb);
    ctx = mg_start(&cb, NULL, options);
    if (!ctx) { fprintf(stderr, "mg_start failed (%s)\n", listen); return 1; }
    mg_set_request_handler(ctx, "/", on_hello, NULL);
    ports_n = mg_get_server_ports(ctx, 4, ports);
    if (ports_n < 1) { fprintf(stderr, "no listening port\n"); mg_stop(ctx); return 1; }
    printf("listening on http://127.0.0.1:%d\n", ports[0].port);
    fflush(stdout);
    sigwait(&set, &sig);
    mg_stop(ctx);
    mg_exit_library();
    return 0;
}
