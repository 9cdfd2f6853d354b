/* libmicrohttpd hello server for the Ember benchmark suite.
 * Usage: mhd_hello [port] [workers]   (port 0 = free port; workers 0 or 1 = one poll thread)
 * First stdout line: "listening on http://127.0.0.1:PORT". Stops on SIGTERM/SIGINT. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <microhttpd.h>

static const char BODY[] = "{\"code\": 1, \"msg\": \"Hello WebAPI\"}";
static struct MHD_Response *hello;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls) {
    static int first_call_marker;
    (void)cls; (void)url; (void)method; (void)version; (void)upload_data;
    /* Answer once the whole request has been read (the third call for a body, the second
     * without): an answer queued on the first call makes MHD close the connection. */
    if (*req_cls == NULL) { *req_cls = &first_call_marker; return MHD_YES; }
    if (*upload_data_size != 0) { *upload_data_size = 0; return MHD_YES; } /* ignore bodies */
    return MHD_queue_response(c, MHD_HTTP_OK, hello);
}

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 8080;
    int workers = argc > 2 ? atoi(argv[2]) : 1;
    struct sockaddr_in addr;
    struct MHD_Daemon *d;
    const union MHD_DaemonInfo *info;
    /* poll(), not epoll: libmicrohttpd 0.9.75's epoll mode stops answering once ~256 connections
     * arrive together (one answer per connection, then silence); poll mode serves them. */
    unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_TURBO | MHD_USE_ERROR_LOG;
    sigset_t set;
    int sig;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* inherited by MHD's threads; main sigwaits */
    signal(SIGPIPE, SIG_IGN);

    hello = MHD_create_response_from_buffer(sizeof BODY - 1, (void *)BODY, MHD_RESPMEM_PERSISTENT);
    if (!hello || MHD_add_response_header(hello, "Content-Type", "application/json") != MHD_YES) {
        fprintf(stderr, "cannot build the response\n");
        return 1;
    }
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    {
        struct MHD_OptionItem opts[6];
        int n = 0;
        opts[n].option = MHD_OPTION_SOCK_ADDR; opts[n].value = 0; opts[n++].ptr_value = &addr;
        opts[n].option = MHD_OPTION_CONNECTION_LIMIT; opts[n].value = 10000; opts[n++].ptr_value = NULL;
        opts[n].option = MHD_OPTION_CONNECTION_TIMEOUT; opts[n].value = 60; opts[n++].ptr_value = NULL;
        if (workers > 1) {
            opts[n].option = MHD_OPTION_THREAD_POOL_SIZE; opts[n].value = workers; opts[n++].ptr_value = NULL;
        }
        opts[n].option = MHD_OPTION_END; opts[n].value = 0; opts[n++].ptr_value = NULL;
        d = MHD_start_daemon(flags, (unsigned short)port, NULL, NULL, on_request, NULL,
                             MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    }
    if (!d) { fprintf(stderr, "MHD_start_daemon failed (port %d)\n", port); return 1; }
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on http://127.0.0.1:%u\n", info ? (unsigned)info->port : (unsigned)port);
    fflush(stdout);
    sigwait(&set, &sig);
    MHD_stop_daemon(d);
    MHD_destroy_response(hello);
    return 0;
}
