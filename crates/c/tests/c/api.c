/*
 * liblowlat's own interface from C, against the test's Rust server of program 0x20000099
 * version 1: ECHO (1) returns its argument, SLOW (2) sleeps 300 ms, FAIL (3) fails, MINUS (4)
 * takes two little-endian int32s.
 *
 *   api LIVE_URI DEAD_URI   check results, bad input and its codes and messages, and calls
 *                           from several threads at once; prints "ok"
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowlat.h"

#define PROGRAM 0x20000099u
#define ECHO 1u
#define SLOW 2u
#define FAIL 3u
#define MINUS 4u

#include "check.h"

/* The call failed with `code`, a message containing `text`, and may or may not have run. */
static void expect(const char *what, int rc, int code, const char *text, int may_have_executed) {
    CHECK(rc == code, "%s: %s, want %s", what, lowlat_error_name(rc), lowlat_error_name(code));
    CHECK(strstr(lowlat_last_error(), text) != NULL, "%s: message lacks '%s'", what, text);
    CHECK(lowlat_last_error_may_have_executed() == may_have_executed, "%s: may_have_executed is %d", what,
          !may_have_executed);
}

static const char *refuse(void *ctx, lowlat_out *args, int encoding) {
    (void)args;
    (void)encoding;
    return (const char *)ctx;
}

static const char *keep(void *ctx, const uint8_t *body, size_t len, int encoding) {
    (void)encoding;
    memcpy(ctx, body, len < 8 ? len : 8);
    return NULL;
}

static const char *put_hello(void *ctx, lowlat_out *args, int encoding) {
    (void)ctx;
    (void)encoding;
    uint8_t *at = lowlat_out_grow(args, 5);
    if (!at) return "no room";
    memcpy(at, "hello", 5);
    return lowlat_out_len(args) == 5 ? NULL : "wrong length";
}

struct worker {
    const lowlat_client *c;
    int id;
    int bad;
};

static void *echo_many(void *p) {
    struct worker *w = p;
    for (int i = 0; i < 300; i++) {
        char arg[32], got[32];
        size_t n = 0;
        int len = snprintf(arg, sizeof arg, "thread %d call %d", w->id, i);
        int rc = lowlat_client_call(w->c, ECHO, (const uint8_t *)arg, (size_t)len, (uint8_t *)got, sizeof got, &n);
        if (rc != LOWLAT_OK || n != (size_t)len || memcmp(got, arg, n) != 0) w->bad++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: api LIVE_URI DEAD_URI\n");
        return 2;
    }
    const char *live = argv[1], *dead = argv[2];
    lowlat_client *c = (lowlat_client *)1;

    /* lowlat's log events on standard error, once. */
    CHECK(lowlat_log_to_stderr("lowlat=warn") == LOWLAT_OK, "log to stderr: %s", lowlat_last_error());
    expect("log twice", lowlat_log_to_stderr(NULL), LOWLAT_E_INVALID_ARGUMENT, "set up already", 0);

    /* Bad arguments are errors, never crashes, and nothing is sent. */
    expect("NULL uri", lowlat_client_connect(NULL, PROGRAM, 1, &c), LOWLAT_E_INVALID_ARGUMENT, "uri is NULL", 0);
    CHECK(c == NULL, "a failed connect leaves *out NULL");
    expect("bad UTF-8", lowlat_client_connect("udp://\xff", PROGRAM, 1, &c), LOWLAT_E_INVALID_ARGUMENT,
           "uri is not valid UTF-8", 0);
    expect("bad scheme", lowlat_client_connect("bogus://x", PROGRAM, 1, &c), LOWLAT_E_INVALID_URI, "bogus://x", 0);
    expect("NULL out", lowlat_client_connect(live, PROGRAM, 1, NULL), LOWLAT_E_INVALID_ARGUMENT, "out is NULL", 0);
    expect("NULL client", lowlat_client_call(NULL, ECHO, NULL, 0, NULL, 0, NULL), LOWLAT_E_INVALID_ARGUMENT,
           "client is NULL", 0);
    lowlat_client_options bad_spin = {0};
    bad_spin.spin = 77;
    expect("bad spin", lowlat_client_connect_with(live, PROGRAM, 1, &bad_spin, &c), LOWLAT_E_INVALID_ARGUMENT,
           "spin mode 77", 0);

    /* Nobody there. */
    expect("dead server", lowlat_client_connect(dead, PROGRAM, 1, &c), LOWLAT_E_SERVER_NOT_RUNNING,
           "no server is running there", 0);
    expect("unknown program", lowlat_client_connect(live, 0x20000098u, 1, &c), LOWLAT_E_UNKNOWN_PROGRAM,
           "does not serve program", 0);

    int rc = lowlat_client_connect(live, PROGRAM, 1, &c);
    CHECK(rc == LOWLAT_OK, "connect %s: %s", live, lowlat_error_name(rc));
    if (rc != LOWLAT_OK) return 1;
    int enc = lowlat_client_encoding(c);
    CHECK(enc == LOWLAT_ENCODING_NATIVE_LITTLE || enc == LOWLAT_ENCODING_NATIVE_BIG, "encoding %d", enc);

    uint8_t result[128];
    size_t n = 0;
    rc = lowlat_client_call(c, ECHO, (const uint8_t *)"hello", 5, result, sizeof result, &n);
    CHECK(rc == LOWLAT_OK && n == 5 && memcmp(result, "hello", 5) == 0, "ECHO: %s, %zu bytes", lowlat_error_name(rc), n);
    rc = lowlat_client_call(c, ECHO, NULL, 0, NULL, 0, &n);
    CHECK(rc == LOWLAT_OK && n == 0, "ECHO of nothing into no buffer: %s", lowlat_error_name(rc));

    uint8_t hundred[100];
    memset(hundred, 7, sizeof hundred);
    n = 0;
    expect("result buffer too small", lowlat_client_call(c, ECHO, hundred, 100, result, 10, &n),
           LOWLAT_E_BUFFER_TOO_SMALL, "the result is 100 bytes, longer than the caller's buffer of 10", 1);
    CHECK(n == 100, "the needed length is reported: %zu", n);
    expect("NULL result with room", lowlat_client_call(c, ECHO, hundred, 1, NULL, 10, &n), LOWLAT_E_INVALID_ARGUMENT,
           "result is NULL but result_cap is 10", 0);
    expect("NULL args with a length", lowlat_client_call(c, ECHO, NULL, 3, result, sizeof result, &n),
           LOWLAT_E_INVALID_ARGUMENT, "args is NULL but its length is 3", 0);

    expect("unknown procedure", lowlat_client_call(c, 99, NULL, 0, result, sizeof result, &n),
           LOWLAT_E_UNKNOWN_PROCEDURE, "procedure 99 of program 0x20000099 version 1: the server has no such procedure", 0);
    expect("garbage arguments", lowlat_client_call(c, MINUS, (const uint8_t *)"abc", 3, result, sizeof result, &n),
           LOWLAT_E_GARBAGE_ARGS, "procedure 4 of program 0x20000099 version 1: the server could not decode the arguments", 0);
    expect("failing procedure", lowlat_client_call(c, FAIL, NULL, 0, result, sizeof result, &n),
           LOWLAT_E_SERVER_ERROR, "procedure 3 of program 0x20000099 version 1 failed on the server", 1);

    size_t max = lowlat_client_max_message(c);
    CHECK(max >= 1024, "max message %zu", max);
    uint8_t *big = calloc(max + 1, 1);
    expect("oversized argument", lowlat_client_call(c, ECHO, big, max + 1, result, sizeof result, &n),
           LOWLAT_E_TOO_LARGE, "exceeds this binding's maximum", 0);
    free(big);

    expect("deadline", lowlat_client_call_deadline(c, SLOW, NULL, 0, result, sizeof result, &n, 50000000ull),
           LOWLAT_E_TIMEOUT, "procedure 2 of program 0x20000099 version 1 timed out", 1);

    /* The callback interface generated stubs use. */
    uint8_t kept[8] = {0};
    rc = lowlat_client_invoke(c, ECHO, NULL, put_hello, NULL, keep, kept);
    CHECK(rc == LOWLAT_OK && memcmp(kept, "hello", 5) == 0, "invoke ECHO: %s", lowlat_error_name(rc));
    expect("a result where none was expected", lowlat_client_invoke(c, ECHO, NULL, put_hello, NULL, NULL, NULL),
           LOWLAT_E_DECODE, "expected no result, got 5 bytes", 1);
    expect("encoder refuses", lowlat_client_invoke(c, ECHO, NULL, refuse, "point.x: too big", NULL, NULL),
           LOWLAT_E_ENCODE, "procedure 1 of program 0x20000099 version 1: encoding the arguments: point.x: too big", 0);

    /* One client, several threads at once. */
    pthread_t t[4];
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){c, i, 0};
        pthread_create(&t[i], NULL, echo_many, &w[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].bad == 0, "thread %d: %d calls went wrong", i, w[i].bad);
    }

    CHECK(strcmp(lowlat_error_name(LOWLAT_E_TIMEOUT), "LOWLAT_E_TIMEOUT") == 0, "error names");
    lowlat_client_free(c);
    lowlat_client_free(NULL);
    return checks_done();
}
