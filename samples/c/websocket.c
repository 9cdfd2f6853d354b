/* websocket.c: a chat room over WebSocket with Ember, in one short file.
 *
 *   make -C samples/c && samples/c/websocket 8080
 *   then, from two terminals:  python3 -m websockets ws://127.0.0.1:8080/chat
 *
 * Every text message goes to everyone in the room, the sender included. "/quit" closes
 * the sender's connection. Upgrades from a foreign web page (an Origin header that is not
 * this machine) are refused with 403. Ctrl-C stops the server: every client gets the
 * close code 1001 ("going away"), then the program exits. Port 0 picks a free port and
 * prints it as "listening on http://127.0.0.1:PORT". */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"

/* 1. The room. Its connections are the engine's group named after the route pattern
 *    ("/chat"), so the program keeps no list of them; it only counts them, to greet. */
typedef struct {
    ember_server *server;
    int online;
    pthread_mutex_t lock;
} room;

/* 2. An upgrade request arrived on /chat. `info` is the HTTP request: headers, query,
 *    remote address. Accept it with ember_ws_accept, or refuse it by answering the
 *    request (info->id) like any other. Here: a browser page from another site may not
 *    join (browsers send Origin; other clients usually do not). */
static void on_open(void *user_data, ember_ws ws, const ember_request_info *info) {
    room *r = (room *)user_data;
    ember_str origin;
    char hello[64];
    int n;
    if (ember_request_header(info->id, "origin", &origin) == EMBER_OK &&
        !(origin.len >= 16 && memcmp(origin.ptr, "http://127.0.0.1", 16) == 0) &&
        !(origin.len >= 16 && memcmp(origin.ptr, "http://localhost", 16) == 0)) {
        static const char no[] = "this chat only takes pages from 127.0.0.1 or localhost\n";
        ember_request_respond(info->id, 403, "Content-Type: text/plain", 24, no, sizeof no - 1);
        return;
    }
    if (ember_ws_accept(ws, NULL, 0) != EMBER_OK) return; /* the client already left */
    pthread_mutex_lock(&r->lock);
    n = ++r->online;
    pthread_mutex_unlock(&r->lock);
    /* Sends right after accept are fine: they go out once the 101 answer has. */
    snprintf(hello, sizeof hello, "welcome: %d online", n);
    ember_ws_send(ws, EMBER_WS_TEXT, hello, strlen(hello));
}

/* 3. One whole message (fragments are reassembled; text is checked UTF-8 already).
 *    `data` is ours only during the call: ember_ws_send and the broadcast copy it. */
static void on_message(void *user_data, ember_ws ws, int32_t kind, const uint8_t *data, size_t len) {
    room *r = (room *)user_data;
    size_t sent = 0;
    if (kind == EMBER_WS_TEXT && len == 5 && memcmp(data, "/quit", 5) == 0) {
        /* The closing handshake: queued messages go first, then the close frame;
         * on_close follows when the client answers it. */
        ember_ws_close(ws, 1000, "bye", 3);
        return;
    }
    /* One frame, encoded once, queued to every connection of "/chat" (0: nobody is
     * left out). A client whose queue is full misses it: broadcasts never wait. */
    ember_server_ws_broadcast(r->server, "/chat", kind, data, len, 0, &sent);
    printf("message of %zu bytes to %zu clients\n", len, sent);
    fflush(stdout);
}

/* 4. Exactly once per accepted connection, whoever ended it: 1000 for a normal close,
 *    1005 when the client gave no code, 1006 when it vanished, 1001 when we stop. */
static void on_close(void *user_data, ember_ws ws, uint16_t code, const char *reason, size_t len) {
    room *r = (room *)user_data;
    (void)ws;
    pthread_mutex_lock(&r->lock);
    r->online--;
    pthread_mutex_unlock(&r->lock);
    printf("closed %u %.*s\n", (unsigned)code, (int)len, reason);
    fflush(stdout);
}

int main(int argc, char **argv) {
    static room r;
    ember_server *server = NULL;
    ember_ws_handlers handlers;
    sigset_t stop;
    char addr[32];
    uint16_t port = 0;
    int sig;

    /* The signals wait for sigwait below; block them before the engine's threads start. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    snprintf(addr, sizeof addr, "127.0.0.1:%s", argc > 1 ? argv[1] : "8080");
    pthread_mutex_init(&r.lock, NULL);
    if (ember_server_new(&server) != EMBER_OK || ember_server_listen(server, addr) != EMBER_OK) {
        fprintf(stderr, "websocket: %s\n", ember_last_error());
        return 1;
    }
    r.server = server;

    /* 5. The handlers. `size` lets later versions add callbacks; on_writable (a refused
     *    send may go again) is not needed here, since broadcasts never wait. */
    memset(&handlers, 0, sizeof handlers);
    handlers.size = sizeof handlers;
    handlers.on_open = on_open;
    handlers.on_message = on_message;
    handlers.on_close = on_close;
    if (ember_server_websocket(server, "/chat", &handlers, &r, NULL) != EMBER_OK ||
        ember_server_start(server) != EMBER_OK || ember_server_port(server, 0, &port) != EMBER_OK) {
        fprintf(stderr, "websocket: %s\n", ember_last_error());
        ember_server_free(server);
        return 1;
    }
    printf("listening on http://127.0.0.1:%u\n", (unsigned)port);
    fflush(stdout);

    /* 6. Stop: every open connection is closed with 1001 and its on_close runs before
     *    ember_server_stop returns; after it, no callback runs. */
    while (sigwait(&stop, &sig) != 0) {}
    ember_server_stop(server, 5000);
    ember_server_free(server);
    pthread_mutex_destroy(&r.lock);
    return 0;
}
