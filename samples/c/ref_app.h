/* What the reference app's source files share (ember_ref.c, ref_slow.c, ref_fleet.c,
 * ref_stream.c, ref_ws.c, ref_front.c). */
#ifndef EMBER_REF_APP_H
#define EMBER_REF_APP_H

#include "ember.h"

/* Logs "ember_ref: <what>: <result name>: <last error>" to stderr. */
void ref_log_failure(const char *what, ember_result rc);

/* GET /sse, GET /stream, POST /upload (ref_stream.c). */
ember_result ref_add_stream_routes(ember_server *server);

/* GET /ws (echo) and GET /ws/chat (broadcast) (ref_ws.c). */
ember_result ref_add_ws_routes(ember_server *server);

/* Static files, compression, GET /cached, POST /cache/purge, CORS on /api, request
 * filters (ref_front.c). */
ember_result ref_add_front(ember_server *server);

/* GET /slow?ms=N, answered later by one timer thread (ref_slow.c): start the thread
 * before the server, finish it after the server was freed. */
int ref_slow_start(void);
void ref_slow_finish(void);
void ref_on_slow(void *ud, ember_request req, const ember_request_info *info);

/* EMBER_HEALTH_PATH and EMBER_TRUSTED_PROXIES (ref_fleet.c). */
ember_result ref_fleet_options(ember_server *server);

/* After a stop signal: EMBER_DRAIN_MS of drain, then EMBER_REFUSE_MS refusing new
 * connections (each if set). A second SIGTERM/SIGINT among `stop_signals` (a sigset_t* of
 * blocked signals; NULL on Windows) cuts it short. */
void ref_drain(ember_server *server, const void *stop_signals);

#endif
