/* The reference app's WebSocket routes (tests/REFERENCE_APP.md): GET /ws echoes every
 * message, GET /ws/chat broadcasts every message to all connections of /ws/chat.
 *
 * Echo and backpressure: a client that sends faster than it reads fills its
 * connection's send queue, and ember_ws_send refuses (EMBER_ERR_WOULD_BLOCK) rather than
 * buffer without bound. The echo then keeps the refused messages in a backlog of its
 * own, in order, sends them when the engine calls on_writable, and gives up on a client
 * whose backlog passes ECHO_BACKLOG_MAX (close 1008): memory stays bounded, and nothing
 * is dropped silently. Most connections never need a backlog and have none. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "ref_app.h"

#define ECHO_BACKLOG_MAX (4u << 20)
#define TABLE_SIZE 256

typedef struct pending {
    struct pending *next;
    int32_t kind;
    size_t len;
    unsigned char data[];
} pending;

typedef struct backlog {
    struct backlog *next; /* in its table bucket */
    ember_ws ws;
    pending *head, *tail;
    size_t bytes;
} backlog;

/* Backlogs by connection. The table is shared by all connections (lock); one backlog is
 * only touched by its own connection's callbacks, which the engine never runs at once. */
static backlog *table[TABLE_SIZE];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static backlog **slot_of(ember_ws ws) {
    backlog **p = &table[(ws ^ (ws >> 32)) % TABLE_SIZE];
    while (*p && (*p)->ws != ws) p = &(*p)->next;
    return p;
}

static backlog *find(ember_ws ws) {
    backlog *b;
    pthread_mutex_lock(&table_lock);
    b = *slot_of(ws);
    pthread_mutex_unlock(&table_lock);
    return b;
}

/* Unlinks and frees the connection's backlog, if it has one. */
static void drop_backlog(ember_ws ws) {
    backlog *b;
    pthread_mutex_lock(&table_lock);
    {
        backlog **p = slot_of(ws);
        b = *p;
        if (b) *p = b->next;
    }
    pthread_mutex_unlock(&table_lock);
    while (b && b->head) {
        pending *m = b->head;
        b->head = m->next;
        free(m);
    }
    free(b);
}

/* Queues a copy behind what is waiting; 0 when over the limit or out of memory. */
static int defer(ember_ws ws, backlog *b, int32_t kind, const uint8_t *data, size_t len) {
    pending *m;
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b) return 0;
        b->ws = ws;
        pthread_mutex_lock(&table_lock);
        {
            backlog **p = slot_of(ws);
            *p = b;
        }
        pthread_mutex_unlock(&table_lock);
    }
    if (b->bytes + len > ECHO_BACKLOG_MAX) return 0;
    m = malloc(sizeof *m + len);
    if (!m) return 0;
    m->next = NULL;
    m->kind = kind;
    m->len = len;
    if (len) memcpy(m->data, data, len);
    if (b->tail) b->tail->next = m;
    else b->head = m;
    b->tail = m;
    b->bytes += len;
    return 1;
}

static void give_up(ember_ws ws) {
    static const char why[] = "echo backlog over 4 MiB: read your messages";
    drop_backlog(ws);
    (void)ember_ws_close(ws, 1008, why, sizeof why - 1);
}

static void on_echo_message(void *ud, ember_ws ws, int32_t kind, const uint8_t *data, size_t len) {
    backlog *b = find(ws);
    ember_result rc;
    (void)ud;
    if (b) { /* older messages wait: this one goes behind them */
        if (!defer(ws, b, kind, data, len)) give_up(ws);
        return;
    }
    rc = ember_ws_send(ws, kind, data, len);
    if (rc == EMBER_ERR_WOULD_BLOCK && !defer(ws, NULL, kind, data, len)) give_up(ws);
    else if (rc != EMBER_OK && rc != EMBER_ERR_WOULD_BLOCK && rc != EMBER_ERR_CLIENT_GONE)
        ref_log_failure("/ws send", rc);
}

static void on_echo_writable(void *ud, ember_ws ws) {
    backlog *b = find(ws);
    (void)ud;
    while (b && b->head) {
        pending *m = b->head;
        ember_result rc = ember_ws_send(ws, m->kind, m->data, m->len);
        if (rc == EMBER_ERR_WOULD_BLOCK) return; /* on_writable comes again */
        if (rc != EMBER_OK) break;               /* closing: the rest has nowhere to go */
        b->head = m->next;
        if (!b->head) b->tail = NULL;
        b->bytes -= m->len;
        free(m);
    }
    if (b) drop_backlog(ws);
}

static void on_echo_close(void *ud, ember_ws ws, uint16_t code, const char *reason, size_t len) {
    (void)ud; (void)code; (void)reason; (void)len;
    drop_backlog(ws); /* the last callback of this connection */
}

/* /ws/chat: the engine encodes the frame once and queues it to every member of the
 * group the route's pattern names; a member whose queue is full misses it. */
static void on_chat_message(void *ud, ember_ws ws, int32_t kind, const uint8_t *data, size_t len) {
    ember_server *server = (ember_server *)ud;
    ember_result rc = ember_server_ws_broadcast(server, "/ws/chat", kind, data, len, 0, NULL);
    (void)ws;
    if (rc != EMBER_OK) ref_log_failure("/ws/chat broadcast", rc);
}

ember_result ref_add_ws_routes(ember_server *server) {
    ember_ws_handlers echo, chat;
    ember_result rc;
    memset(&echo, 0, sizeof echo);
    echo.size = sizeof echo;
    echo.on_open = NULL; /* accept every upgrade, no subprotocol */
    echo.on_message = on_echo_message;
    echo.on_close = on_echo_close;
    echo.on_writable = on_echo_writable;
    rc = ember_server_websocket(server, "/ws", &echo, NULL, NULL);
    if (rc != EMBER_OK) return rc;
    memset(&chat, 0, sizeof chat);
    chat.size = sizeof chat;
    chat.on_message = on_chat_message;
    return ember_server_websocket(server, "/ws/chat", &chat, server, NULL);
}
