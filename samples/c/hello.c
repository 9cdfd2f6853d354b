/* The smallest Ember server: GET / answers "Hello from Ember". Usage: hello [port] */
#include <stdio.h>
#include <string.h>
#include "ember.h"

static void hello(void *user_data, ember_request req, const ember_request_info *info) {
    const char *type = "Content-Type: text/plain", *body = "Hello from Ember";
    (void)user_data; (void)info;
    ember_request_respond(req, 200, type, strlen(type), body, strlen(body));
}

int main(int argc, char **argv) {
    char addr[64];
    ember_server *server = NULL;
    snprintf(addr, sizeof addr, "127.0.0.1:%s", argc > 1 ? argv[1] : "8080");
    if (ember_server_new(&server) || ember_server_listen(server, addr) ||
        ember_server_route(server, "GET", "/", hello, NULL, NULL) || ember_server_start(server)) {
        fprintf(stderr, "ember: %s\n", ember_last_error());
        return 1;
    }
    printf("listening on http://%s\n", addr);
    fflush(stdout);
    ember_server_wait(server, EMBER_WAIT_FOREVER); /* until Ctrl-C ends the process */
    return 0;
}
