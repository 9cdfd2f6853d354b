/* A raw WebSocket client for the C tests. */
#ifndef EMBER_TEST_WSCLIENT_H
#define EMBER_TEST_WSCLIENT_H

#include <stddef.h>
#include <stdint.h>

/* Connects, upgrades with the RFC's sample key; returns the fd or -1; *status gets the
 * HTTP status of the answer (101 on success, -101 for a wrong Sec-WebSocket-Accept).
 * `rcvbuf` > 0 shrinks the receive buffer. */
int ws_connect(uint16_t port, const char *path, int rcvbuf, int *status);
/* Sends one final, masked frame. 0 on success. */
int ws_send(int fd, int opcode, const void *data, size_t len);
/* Reads one frame: its opcode, payload (malloc'd, NUL-terminated; free it) and length. */
int ws_recv(int fd, int *opcode, char **payload, size_t *len);
/* Reads frames up to a close frame; returns its code (1005 without one), -1 if none came;
 * the reason goes to `reason` (NULL is fine). */
int ws_expect_close(int fd, char *reason, size_t cap);

#endif
