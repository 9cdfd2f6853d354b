/* Runs samples/c/ember_ref (path in argv[1]) in both dispatch modes and checks it
 * against tests/REFERENCE_APP.md over real sockets, then stops it with a signal. */
#define _POSIX_C_SOURCE 200809L

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static const char *app_path;
static const char *mode;
static uint16_t port;

/* Starts the app on port 0 and reads the port from its first stdout line. */
static pid_t spawn_app(void) {
    int fds[2];
    char line[128];
    size_t len = 0;
    pid_t pid;
    struct pollfd pfd;
    if (pipe(fds) != 0) return -1;
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        setenv("EMBER_DISPATCH", mode, 1);
        execl(app_path, app_path, "0", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    pfd.fd = fds[0];
    pfd.events = POLLIN;
    while (len < sizeof line - 1 && !memchr(line, '\n', len) && poll(&pfd, 1, 5000) == 1) {
        ssize_t n = read(fds[0], line + len, sizeof line - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
    }
    line[len] = '\0';
    close(fds[0]);
    port = 0;
    {
        unsigned p = 0;
        if (CHECK(sscanf(line, "listening on http://127.0.0.1:%u\n", &p) == 1)) port = (uint16_t)p;
    }
    return pid;
}

static void expect(const char *raw, int status, const char *type, const char *body) {
    http_resp r;
    const char *ct;
    CHECK(http_raw(port, raw, &r) == 0);
    if (!CHECK(r.status == status)) fprintf(stderr, "    status %d for: %.40s\n", r.status, raw);
    if (body) CHECK_STR(r.body, r.body_len, body);
    ct = http_header(&r, "content-type");
    if (type) CHECK(ct && strcmp(ct, type) == 0);
    http_free(&r);
}

#define GET(target) "GET " target " HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"

static void check_routes(void) {
    static const char inspect_head[] =
        "{\"method\": \"GET\", \"path\": \"/inspect\", \"query\": \"a=1&b=%20\", \"headers\": {\"host\": \"h\", "
        "\"x-rep\": \"1, 2\", \"x-q\": \"\\\"q\\\\\", \"x-bin\": \"a\\ufffdb\", \"connection\": \"close\"}, \"remote_addr\": \"127.0.0.1:";
    http_resp r;
    bg_get g[5];
    uint64_t t0;
    int i;

    expect(GET("/"), 200, "application/json", "{\"code\": 1, \"msg\": \"Hello WebAPI\"}");
    expect(GET("/users/42"), 200, "application/json", "{\"id\": \"42\"}");
    expect(GET("/users/a%22b%5Cc%0A%01"), 200, NULL, "{\"id\": \"a\\\"b\\\\c\\n\\u0001\"}");
    expect(GET("/users/%C3%A9"), 200, NULL, "{\"id\": \"\xC3\xA9\"}");
    /* %FF decodes to invalid UTF-8; the engine then hands the param over undecoded. */
    expect(GET("/users/%FF"), 200, NULL, "{\"id\": \"%FF\"}");
    expect("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Type: text/x-test\r\nContent-Length: 5\r\n"
           "Connection: close\r\n\r\nhello", 200, "text/x-test", "hello");
    expect("POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc", 200,
           "application/octet-stream", "abc");
    expect(GET("/echo"), 405, NULL, NULL);
    expect(GET("/nowhere"), 404, NULL, NULL);

    CHECK(http_raw(port, "GET /inspect?a=1&b=%20 HTTP/1.1\r\nHost: h\r\nX-Rep: 1\r\nX-Rep: 2\r\nX-Q: \"q\\\r\nX-Bin: a\xFF" "b\r\n"
                         "Connection: close\r\n\r\n", &r) == 0 && r.status == 200);
    if (!CHECK(r.body_len > sizeof inspect_head && memcmp(r.body, inspect_head, sizeof inspect_head - 1) == 0))
        fprintf(stderr, "    got %s\n", r.body ? r.body : "");
    CHECK(r.body_len > 2 && memcmp(r.body + r.body_len - 2, "\"}", 2) == 0);
    http_free(&r);

    t0 = now_ms();
    expect(GET("/slow?ms=100"), 200, "application/json", "{\"slept_ms\": 100}");
    CHECK(now_ms() - t0 >= 100);
    expect(GET("/slow?ms=abc"), 400, NULL, NULL);
    /* Deferred answers hold no engine thread: five at once take one sleep, not five. */
    t0 = now_ms();
    for (i = 0; i < 5; i++) bg_get_start(&g[i], port, "/slow?ms=300");
    for (i = 0; i < 5; i++) {
        bg_get_join(&g[i]);
        CHECK(g[i].status == 200);
    }
    CHECK(now_ms() - t0 < 1400); /* one-at-a-time would take 1500 */

    expect(GET("/fail"), 500, "application/json", NULL);
    expect(GET("/"), 200, NULL, NULL); /* still serving */

    t0 = now_ms();
    expect(GET("/slow?ms=3500"), 503, NULL, NULL); /* the 3000 ms handler timeout */
    CHECK(now_ms() - t0 >= 2900);
    sleep_ms(600); /* the late answer must be shrugged off */
    expect(GET("/"), 200, NULL, NULL);
}

static void run(int sig) {
    int status = -1;
    uint64_t t0;
    pid_t pid = spawn_app();
    if (!CHECK(pid > 0 && port != 0)) {
        if (pid > 0) { kill(pid, SIGKILL); waitpid(pid, &status, 0); }
        return;
    }
    check_routes();
    t0 = now_ms();
    kill(pid, sig);
    while (waitpid(pid, &status, WNOHANG) == 0 && now_ms() - t0 < 8000) sleep_ms(10);
    if (!CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    CHECK(http_connect(port) < 0);
}

static void test_pool_sigterm(void) { mode = "pool"; run(SIGTERM); }
static void test_inline_sigint(void) { mode = "inline"; run(SIGINT); }

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/ember_ref\n", argv[0]);
        return 2;
    }
    app_path = argv[1];
    h_run("reference app, pool dispatch, SIGTERM", test_pool_sigterm);
    h_run("reference app, inline dispatch, SIGINT", test_inline_sigint);
    return h_finish();
}
