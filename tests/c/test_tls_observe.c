/* TLS listeners, the access log and the metrics through the C ABI: argument checks, errors
 * that name the file, listener indexes, reload, the metrics buffer contract. The TLS
 * handshakes themselves are tested with real TLS clients in tests/tls.rs and the conformance
 * suite; a self-signed certificate is embedded here because these tests also run under Wine,
 * where no openssl command is at hand. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

/* Throwaway: a self-signed EC P-256 certificate for localhost, its key, and another key. */
static const char CERT[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBfzCCASWgAwIBAgIUeDAx1UAC488B/a7nloc3OWbNT6wwCgYIKoZIzj0EAwIw\n"
    "FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTIwMzA5Mjc0MVoYDzIxMjYxMTA5\n"
    "MDkyNzQxWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO\n"
    "PQMBBwNCAATFlLwppqNSWsCmQjroWA5Ev0y/EZRDVFxbM7pi9FU2i5s1mAkc/RHh\n"
    "WMuiwP6uuwOEFV16yoqx4UPICLvUAtflo1MwUTAdBgNVHQ4EFgQUkLyCKVKB+oWy\n"
    "Cv3CE/UsrqAx+2EwHwYDVR0jBBgwFoAUkLyCKVKB+oWyCv3CE/UsrqAx+2EwDwYD\n"
    "VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiAgne05MJQr8PcmvauUzm4y\n"
    "xHakCHTnPtlds4gXnwyOlAIhAOvX06OJNXdWvcD1bvbb8E9Y89scGcBDFmmrP2Eb\n"
    "2vKc\n"
    "-----END CERTIFICATE-----\n";
static const char KEY[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgqWDtRteq0RGcuI/E\n"
    "kCsFNtm2HppSBZVaDASjkgMaDbihRANCAATFlLwppqNSWsCmQjroWA5Ev0y/EZRD\n"
    "VFxbM7pi9FU2i5s1mAkc/RHhWMuiwP6uuwOEFV16yoqx4UPICLvUAtfl\n"
    "-----END PRIVATE KEY-----\n";
static const char OTHER_KEY[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgdiddPLnVBq0lEt3o\n"
    "WEPE1VLSboTDWiMM4DxR+G57SFWhRANCAARt4mU06ykn5dm+HvIPhHIr5BBSedWQ\n"
    "Tjc2YtTfyd0381DTovJ65Rbz66eK79uLl9v0UAVEMHg4d6rfqjxuc6eM\n"
    "-----END PRIVATE KEY-----\n";

static char cert_path[64], key_path[64], log_path[64], rotated_path[64];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite(text, 1, strlen(text), f);
    fclose(f);
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t n;
    if (!f) return NULL;
    buf = calloc(1, 1 << 16);
    n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}

static int last_error_has(const char *needle) {
    return strstr(ember_last_error(), needle) != NULL;
}

static void test_tls_config_checks_its_arguments(void) {
    ember_tls_config *c = NULL;
    ember_server *s = new_server();
    CHECK_RC(ember_tls_config_new(NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_tls_config_new(&c), EMBER_OK);
    CHECK_RC(ember_tls_config_add_cert_pem(NULL, NULL, CERT, strlen(CERT), KEY, strlen(KEY)), EMBER_ERR_NULL);
    CHECK_RC(ember_tls_config_add_cert_pem(c, NULL, NULL, 5, KEY, strlen(KEY)), EMBER_ERR_NULL);
    CHECK_RC(ember_tls_config_add_cert_pem(c, NULL, "junk", 4, KEY, strlen(KEY)), EMBER_ERR_INVALID_ARG);
    CHECK(last_error_has("holds no certificate"));
    CHECK_RC(ember_tls_config_add_cert_pem(c, NULL, CERT, strlen(CERT), OTHER_KEY, strlen(OTHER_KEY)), EMBER_ERR_INVALID_ARG);
    CHECK(last_error_has("does not belong to the certificate"));
    CHECK_RC(ember_tls_config_add_cert_pem(c, "not a name", CERT, strlen(CERT), KEY, strlen(KEY)), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_tls_config_add_cert_files(c, NULL, "/no/such/dir/cert.pem", key_path), EMBER_ERR_INVALID_ARG);
    CHECK(last_error_has("/no/such/dir/cert.pem"));
    CHECK_RC(ember_tls_config_add_cert_files(c, NULL, cert_path, "/no/such/key.pem"), EMBER_ERR_INVALID_ARG);
    CHECK(last_error_has("/no/such/key.pem"));
    CHECK_RC(ember_tls_config_add_cert_files(c, NULL, cert_path, NULL), EMBER_ERR_NULL);
    /* Nothing was added so far: a listener needs a certificate. */
    CHECK_RC(ember_server_listen_tls(s, "127.0.0.1:0", 0, c), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_tls_config_add_cert_pem(c, "Example.COM", CERT, strlen(CERT), KEY, strlen(KEY)), EMBER_OK);
    CHECK_RC(ember_tls_config_add_cert_files(c, NULL, cert_path, key_path), EMBER_OK);
    CHECK_RC(ember_server_listen_tls(s, "127.0.0.1:0", 0x80, c), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_listen_tls(s, "nowhere", 0, c), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_listen_tls(s, "127.0.0.1:0", 0, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_listen_tls(NULL, "127.0.0.1:0", 0, c), EMBER_ERR_NULL);
    CHECK_RC(ember_server_listen_tls(s, "127.0.0.1:0", EMBER_LISTEN_REUSE_PORT, c), EMBER_OK);
    CHECK_RC(ember_tls_config_free(c), EMBER_OK);
    CHECK_RC(ember_tls_config_free(NULL), EMBER_OK);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static void hello(void *ud, ember_request req, const ember_request_info *info) {
    char body[32];
    (void)ud;
    snprintf(body, sizeof body, "flags=%u", (unsigned)info->flags);
    ember_request_respond(req, 200, NULL, 0, body, strlen(body));
}

static void test_tls_listener_indexes_reload_and_set(void) {
    ember_server *s = new_server();   /* listener 0: plain */
    ember_tls_config *c = NULL, *mem = NULL;
    http_resp r;
    uint16_t plain, secure = 0;
    CHECK_RC(ember_tls_config_new(&c), EMBER_OK);
    CHECK_RC(ember_tls_config_add_cert_files(c, NULL, cert_path, key_path), EMBER_OK);
    CHECK_RC(ember_server_listen_tls(s, "127.0.0.1:0", 0, c), EMBER_OK);
    CHECK_RC(ember_tls_config_free(c), EMBER_OK); /* the listener has its own copy */
    CHECK_RC(ember_server_tls_reload(s), EMBER_OK); /* before start: checks the files */
    CHECK_RC(ember_server_route(s, "GET", "/", hello, NULL, NULL), EMBER_OK);
    plain = start_server(s);
    CHECK_RC(ember_server_port(s, 1, &secure), EMBER_OK);
    CHECK(secure != 0 && secure != plain);
    CHECK(http_get(plain, "/", &r) == 0 && r.status == 200);
    CHECK_STR(r.body, r.body_len, "flags=0");
    http_free(&r);
    /* Plain HTTP on the TLS port gets no HTTP answer: the handshake fails and it closes. */
    CHECK(http_get(secure, "/", &r) != 0);
    http_free(&r);

    CHECK_RC(ember_server_tls_reload(s), EMBER_OK);
    write_file(key_path, "garbage");
    CHECK_RC(ember_server_tls_reload(s), EMBER_ERR_INVALID_ARG);
    CHECK(last_error_has(key_path));
    write_file(key_path, KEY);
    CHECK_RC(ember_server_tls_reload(s), EMBER_OK);

    CHECK_RC(ember_tls_config_new(&mem), EMBER_OK);
    CHECK_RC(ember_server_tls_set(s, 1, mem), EMBER_ERR_INVALID_ARG); /* no certificate yet */
    CHECK_RC(ember_tls_config_add_cert_pem(mem, NULL, CERT, strlen(CERT), KEY, strlen(KEY)), EMBER_OK);
    CHECK_RC(ember_server_tls_set(s, 0, mem), EMBER_ERR_INVALID_ARG); /* listener 0 is plain */
    CHECK(last_error_has("not a TLS listener"));
    CHECK_RC(ember_server_tls_set(s, 2, mem), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_tls_set(s, 1, NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_tls_set(s, 1, mem), EMBER_OK);
    CHECK_RC(ember_tls_config_free(mem), EMBER_OK);
    CHECK_RC(ember_server_tls_reload(NULL), EMBER_ERR_NULL);
    CHECK_RC(ember_server_stop(s, 1000), EMBER_OK);
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

static struct {
    volatile int access_lines;
    char last[512];
} seen;

static void capture_log(void *ud, int32_t level, const char *msg, size_t len) {
    (void)ud;
    if (level != EMBER_LOG_ACCESS) return;
    if (len >= sizeof seen.last) len = sizeof seen.last - 1;
    memcpy(seen.last, msg, len);
    seen.last[len] = 0;
    atomic_inc(&seen.access_lines);
}

static void test_access_log_and_metrics(void) {
    ember_server *s = new_server();
    http_resp r;
    uint16_t port;
    size_t need = 0;
    char *text, *logged;
    CHECK_RC(ember_server_set_access_log(s, 7, log_path), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_set_access_log(s, EMBER_ACCESS_LOG_COMBINED, ""), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_set_access_log(s, EMBER_ACCESS_LOG_COMBINED, log_path), EMBER_OK);
    CHECK_RC(ember_server_reopen_access_log(s), EMBER_ERR_STATE); /* not running */
    CHECK_RC(ember_server_set_metrics(s, "metrics"), EMBER_ERR_INVALID_ARG);
    CHECK_RC(ember_server_set_metrics(s, "/metrics"), EMBER_OK);
    CHECK_RC(ember_server_metrics(s, NULL, 0, &need), EMBER_ERR_STATE);
    CHECK_RC(ember_server_route(s, "GET", "/", hello, NULL, NULL), EMBER_OK);
    port = start_server(s);
    CHECK_RC(ember_server_set_metrics(s, NULL), EMBER_ERR_STATE); /* before start only */
    CHECK_RC(ember_server_set_access_log(s, EMBER_ACCESS_LOG_OFF, NULL), EMBER_ERR_STATE);
    CHECK(http_get(port, "/", &r) == 0 && r.status == 200);
    http_free(&r);
    CHECK(http_get(port, "/metrics", &r) == 0 && r.status == 200);
    CHECK(r.body && strstr(r.body, "ember_responses_total{code=\"200\"} 1\n") != NULL);
    CHECK(strcmp(http_header(&r, "content-type"), "text/plain; version=0.0.4; charset=utf-8") == 0);
    http_free(&r);
    /* Too small: nothing copied, the length told. */
    CHECK_RC(ember_server_metrics(s, NULL, 0, &need), EMBER_ERR_BUFFER_TOO_SMALL);
    CHECK(need > 100);
    text = malloc(need + 256);
    CHECK(text != NULL);
    if (text) {
        memset(text, 'x', need + 256);
        CHECK_RC(ember_server_metrics(s, text, 10, NULL), EMBER_ERR_BUFFER_TOO_SMALL);
        CHECK(text[0] == 'x');
        CHECK_RC(ember_server_metrics(s, text, need + 256, &need), EMBER_OK);
        CHECK(strlen(text) == need && strncmp(text, "# HELP ember_requests_total", 27) == 0);
        free(text);
    }
    /* logrotate: move the file, reopen, and the next line starts the new file. */
    CHECK(rename(log_path, rotated_path) == 0);
    CHECK_RC(ember_server_reopen_access_log(s), EMBER_OK);
    CHECK(http_get(port, "/?after", &r) == 0 && r.status == 200);
    http_free(&r);
    CHECK_RC(ember_server_stop(s, 1000), EMBER_OK); /* every line is written once stop returns */
    logged = read_file(rotated_path);
    CHECK(logged && strstr(logged, "\"GET / HTTP/1.1\" 200 7 \"-\" \"-\"") != NULL);
    CHECK(logged && strstr(logged, "\"GET /metrics HTTP/1.1\" 200 ") != NULL);
    free(logged);
    logged = read_file(log_path);
    CHECK(logged && strstr(logged, "\"GET /?after HTTP/1.1\" 200 7 ") != NULL && !strstr(logged, "/metrics"));
    free(logged);
    CHECK_RC(ember_server_free(s), EMBER_OK);
    remove(log_path);
    remove(rotated_path);

    /* JSON lines to the log callback, whatever its level. */
    s = new_server();
    memset(&seen, 0, sizeof seen);
    CHECK_RC(ember_server_set_log(s, capture_log, NULL, EMBER_LOG_ERROR), EMBER_OK);
    CHECK_RC(ember_server_set_access_log(s, EMBER_ACCESS_LOG_JSON, NULL), EMBER_OK);
    port = start_server(s);
    CHECK(http_get(port, "/nothing", &r) == 0 && r.status == 404);
    http_free(&r);
    CHECK(wait_for(&seen.access_lines, 1, 5000));
    CHECK(strstr(seen.last, "\"target\":\"/nothing\",\"version\":\"HTTP/1.1\",\"status\":404,") != NULL);
    CHECK_RC(ember_server_reopen_access_log(s), EMBER_OK); /* nothing to reopen: fine */
    CHECK_RC(ember_server_free(s), EMBER_OK);
}

int main(void) {
    unsigned tag = (unsigned)time(NULL) ^ (unsigned)clock();
    snprintf(cert_path, sizeof cert_path, "ember_c_tls_%u_cert.pem", tag);
    snprintf(key_path, sizeof key_path, "ember_c_tls_%u_key.pem", tag);
    snprintf(log_path, sizeof log_path, "ember_c_tls_%u_access.log", tag);
    snprintf(rotated_path, sizeof rotated_path, "ember_c_tls_%u_access.log.1", tag);
    write_file(cert_path, CERT);
    write_file(key_path, KEY);
    h_run("TLS configurations check their arguments and name bad files", test_tls_config_checks_its_arguments);
    h_run("TLS listener indexes, reload and set", test_tls_listener_indexes_reload_and_set);
    h_run("access log file with reopen, JSON lines to the log callback, metrics", test_access_log_and_metrics);
    remove(cert_path);
    remove(key_path);
    return h_finish();
}
