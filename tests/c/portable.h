/* The few OS calls the C tests make (sockets, close, a watchdog), for POSIX and for
 * Windows. The Windows build (mingw-w64, run under Wine by scripts/windows.sh) uses
 * Winsock and winpthreads; everything else in the tests is plain C99. */
#ifndef EMBER_TEST_PORTABLE_H
#define EMBER_TEST_PORTABLE_H

#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
/* Test code closes only sockets with close(); Winsock needs closesocket. */
#define close(fd) closesocket(fd)
#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* Windows has no SIGPIPE */
#endif
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#endif

#endif
