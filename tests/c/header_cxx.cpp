// Compiles the header as C++11 and links against the library: the extern "C" block works.
#include "ember.h"

#include <cstdio>
#include <cstring>

static void handler(void *, ember_request req, const ember_request_info *) {
    ember_request_respond(req, 200, nullptr, 0, nullptr, 0);
}

int main() {
    ember_server *server = nullptr;
    bool ok = ember_server_new(&server) == EMBER_OK &&
              ember_server_route(server, "GET", "/", handler, nullptr, nullptr) == EMBER_OK &&
              ember_server_free(server) == EMBER_OK &&
              std::strlen(ember_version()) > 0;
    std::puts(ok ? "1 passed, 0 failed" : "0 passed, 1 failed");
    return ok ? 0 : 1;
}
