/* What the reference app's source files share (ember_ref.c, ref_stream.c, ref_ws.c, ref_front.c). */
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

#endif
