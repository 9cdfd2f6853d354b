/* Proves the floor library serves: starts it, answers "hello", waits for a signal. */
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
typedef const unsigned char *(*handler_fn)(void *, const unsigned char *, size_t, size_t *);
int floor_start(unsigned short port, handler_fn h, void *user);
static const unsigned char *hello(void *u, const unsigned char *p, size_t n, size_t *len) {
    (void)u; (void)p; (void)n; *len = 5; return (const unsigned char *)"hello";
}
int main(void) {
    int port = floor_start(0, hello, NULL);
    if (port < 0) return 1;
    printf("listening on http://127.0.0.1:%d\n", port);
    fflush(stdout);
    pause();
    return 0;
}
