/* A raw WebSocket client for the C tests (handshake with the RFC's sample key, masked
 * frames out, frames in). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "portable.h"

#include "harness.h"
#include "wsclient.h"

/* Connects, upgrades with the RFC's sample key; returns the fd or -1; *status gets the
 * HTTP status of the answer (101 on success). `rcvbuf` > 0 shrinks the receive buffer. */
int ws_connect(uint16_t port, const char *path, int rcvbuf, int *status) {
    char req[512], head[2048];
    size_t n = 0;
    struct sockaddr_in a;
    struct timeval tv;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    *status = 0;
    if (fd < 0) return -1;
    tv.tv_sec = 15;
    tv.tv_usec = 0;
    if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, (const void *)&rcvbuf, sizeof rcvbuf);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, (const void *)&tv, sizeof tv);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, (const void *)&one, sizeof one);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
    snprintf(req, sizeof req,
             "GET %s HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path);
    if (http_send(fd, req, strlen(req)) != 0) { close(fd); return -1; }
    /* Byte by byte: nothing after the head may be taken from the socket here. */
    while (n < sizeof head - 1 && (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4) != 0)) {
        if (recv(fd, head + n, 1, 0) != 1) { close(fd); return -1; }
        n++;
    }
    head[n] = '\0';
    if (sscanf(head, "HTTP/1.1 %d", status) != 1) *status = 0;
    if (*status == 101 && !strstr(head, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")) *status = -101;
    return fd;
}

int ws_send(int fd, int opcode, const void *data, size_t len) {
    unsigned char head[14];
    static const unsigned char key[4] = {0x11, 0x22, 0x33, 0x44};
    unsigned char *out;
    size_t h = 0, i;
    int rc;
    head[h++] = (unsigned char)(0x80 | opcode);
    if (len < 126) head[h++] = (unsigned char)(0x80 | len);
    else if (len < 65536) { head[h++] = 0x80 | 126; head[h++] = (unsigned char)(len >> 8); head[h++] = (unsigned char)len; }
    else {
        head[h++] = 0x80 | 127;
        for (i = 0; i < 8; i++) head[h++] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
    }
    memcpy(head + h, key, 4);
    h += 4;
    out = malloc(h + len + 1);
    memcpy(out, head, h);
    for (i = 0; i < len; i++) out[h + i] = ((const unsigned char *)data)[i] ^ key[i % 4];
    rc = http_send(fd, (const char *)out, h + len);
    free(out);
    return rc;
}

static int recv_exact(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* Reads one frame: its opcode, payload (malloc'd, NUL-terminated; free it) and length. */
int ws_recv(int fd, int *opcode, char **payload, size_t *len) {
    unsigned char h[8];
    uint64_t n;
    int i;
    *payload = NULL;
    if (recv_exact(fd, h, 2) != 0) return -1;
    *opcode = h[0] & 0x0F;
    n = h[1] & 0x7F;
    if (n == 126) {
        if (recv_exact(fd, h, 2) != 0) return -1;
        n = (uint64_t)h[0] << 8 | h[1];
    } else if (n == 127) {
        if (recv_exact(fd, h, 8) != 0) return -1;
        for (n = 0, i = 0; i < 8; i++) n = n << 8 | h[i];
    }
    *payload = malloc((size_t)n + 1);
    if (n && recv_exact(fd, *payload, (size_t)n) != 0) { free(*payload); *payload = NULL; return -1; }
    (*payload)[n] = '\0';
    *len = (size_t)n;
    return 0;
}

/* Reads frames up to a close frame; returns its code (1005 without one), -1 if none came. */
int ws_expect_close(int fd, char *reason, size_t cap) {
    int op, code = -1;
    char *p;
    size_t n;
    while (ws_recv(fd, &op, &p, &n) == 0) {
        if (op == 8) {
            code = n >= 2 ? ((unsigned char)p[0] << 8 | (unsigned char)p[1]) : 1005;
            if (reason) snprintf(reason, cap, "%.*s", n > 2 ? (int)(n - 2) : 0, n > 2 ? p + 2 : "");
            free(p);
            break;
        }
        free(p);
    }
    return code;
}

