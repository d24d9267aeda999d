/*
 * Many calls in flight from one thread: lowlat_batch_submit and lowlat_batch_poll, against the
 * test's Rust server of program 0x20000099 version 1: ECHO (1) returns its argument, SLOW (2)
 * sleeps 300 ms, FAIL (3) fails, MINUS (4) takes two little-endian int32s, NAP (5) sleeps 50 ms
 * on the server's worker pool (4 workers).
 *
 *   batch URI [timed]   64 calls in flight at once, each result checked against its request; a
 *                       failure per call; calls that overlap (timed: 1, the default; 0 under
 *                       valgrind, whose slowness says nothing); misuse answered with codes;
 *                       prints "ok"
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lowlat.h"

#define PROGRAM 0x20000099u
#define ECHO 1u
#define SLOW 2u
#define FAIL 3u
#define MINUS 4u
#define NAP 5u
#define CALLS 64

#include "check.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Messages of the completions `collect` returned (a completion's lives until the next poll). */
static char messages[CALLS][256];

/* Polls `b` until `want` (at most CALLS) completions have come, for 20 s at most; returns how
 * many came, into `got`, their messages copied. */
static int collect(lowlat_batch *b, lowlat_completion *got, int want) {
    int n = 0;
    double until = now_ms() + 20000;
    while (n < want && now_ms() < until) {
        /* Fewer places than calls: the rest wait in the batch for the next poll. */
        lowlat_completion some[16];
        int k = lowlat_batch_poll(b, 2000000, some, 16);
        CHECK(k >= 0, "poll: %s", lowlat_error_name(k));
        if (k < 0) break;
        for (int i = 0; i < k && n < want; i++, n++) {
            got[n] = some[i];
            if (some[i].message) {
                snprintf(messages[n], sizeof messages[n], "%s", some[i].message);
                got[n].message = messages[n];
            }
        }
    }
    return n;
}

/* 64 MINUS calls, all submitted before any is polled, from one argument buffer reused for
 * each; every result is its own request's. */
static void sixty_four_in_flight(lowlat_client *c) {
    lowlat_batch *b = NULL;
    CHECK(lowlat_batch_new(c, CALLS, &b) == LOWLAT_OK, "batch_new");
    int32_t results[CALLS];
    memset(results, 0, sizeof results);
    for (int i = 0; i < CALLS; i++) {
        int32_t args[2] = {1000 * i, i};
        int rc = lowlat_batch_submit(b, MINUS, (const uint8_t *)args, sizeof args, (uint8_t *)&results[i],
                                     sizeof results[i], (uint64_t)i + 100, NULL);
        CHECK(rc == LOWLAT_OK, "submit %d: %s", i, lowlat_error_name(rc));
        memset(args, 0xff, sizeof args); /* copied at submission: scribbling changes nothing */
    }
    CHECK(lowlat_batch_pending(b) == CALLS, "pending %d", lowlat_batch_pending(b));
    int32_t more[2] = {1, 2}, spare = 0;
    int rc = lowlat_batch_submit(b, MINUS, (const uint8_t *)more, sizeof more, (uint8_t *)&spare, sizeof spare, 0,
                                 NULL);
    CHECK(rc == LOWLAT_E_BATCH_FULL, "a 65th call: %s", lowlat_error_name(rc));
    CHECK(strstr(lowlat_last_error(), "full") != NULL, "the full batch's message: %s", lowlat_last_error());
    CHECK(!lowlat_last_error_may_have_executed(), "a refused submission did not run");

    lowlat_completion got[CALLS];
    int n = collect(b, got, CALLS);
    CHECK(n == CALLS, "%d of %d calls completed", n, CALLS);
    int seen[CALLS] = {0};
    for (int k = 0; k < n; k++) {
        uint64_t i = got[k].user_tag - 100;
        CHECK(i < CALLS, "tag %llu", (unsigned long long)got[k].user_tag);
        if (i >= CALLS) continue;
        seen[i]++;
        CHECK(got[k].status == LOWLAT_OK, "call %llu: %s %s", (unsigned long long)i, lowlat_error_name(got[k].status),
              got[k].message ? got[k].message : "");
        CHECK(got[k].message == NULL, "call %llu has a message", (unsigned long long)i);
        CHECK(got[k].result_len == sizeof(int32_t), "call %llu: %zu bytes", (unsigned long long)i, got[k].result_len);
        CHECK(results[i] == 999 * (int32_t)i, "call %llu: %d, want %d", (unsigned long long)i, results[i],
              999 * (int)i);
    }
    for (int i = 0; i < CALLS; i++) CHECK(seen[i] == 1, "call %d completed %d times", i, seen[i]);
    CHECK(lowlat_batch_pending(b) == 0, "pending after all: %d", lowlat_batch_pending(b));
    /* Nothing in flight: a poll returns at once, with nothing. */
    double t0 = now_ms();
    CHECK(lowlat_batch_poll(b, -1, got, CALLS) == 0, "an empty batch's poll");
    CHECK(now_ms() - t0 < 100, "an empty batch's poll took %.0f ms", now_ms() - t0);

    /* The batch is reused: a second round, submitted as the first completes. */
    int done = 0, submitted = 0;
    double until = now_ms() + 20000;
    while (done < 2 * CALLS && now_ms() < until) {
        while (submitted < 2 * CALLS && lowlat_batch_pending(b) < 8) {
            int32_t args[2] = {submitted, -submitted};
            rc = lowlat_batch_submit(b, MINUS, (const uint8_t *)args, sizeof args, (uint8_t *)&results[submitted % CALLS],
                                     sizeof(int32_t), (uint64_t)submitted, NULL);
            CHECK(rc == LOWLAT_OK, "resubmit: %s", lowlat_error_name(rc));
            submitted++;
        }
        int k = lowlat_batch_poll(b, 1000000, got, CALLS);
        CHECK(k >= 0, "poll: %s", lowlat_error_name(k));
        for (int j = 0; j < k; j++) {
            int i = (int)got[j].user_tag;
            CHECK(got[j].status == LOWLAT_OK && results[i % CALLS] == 2 * i, "call %d of the window: %s %s, %d", i,
                  lowlat_error_name(got[j].status), got[j].message ? got[j].message : "", results[i % CALLS]);
        }
        done += k > 0 ? k : 0;
    }
    CHECK(done == 2 * CALLS, "a window of 8: %d of %d completed", done, 2 * CALLS);
    lowlat_batch_free(b);
}

/* Each call's failure is its own: a result too long for its buffer, a procedure that fails, an
 * unknown procedure, between calls that succeed. */
static void failures_per_call(lowlat_client *c) {
    lowlat_batch *b = NULL;
    CHECK(lowlat_batch_new(c, 8, &b) == LOWLAT_OK, "batch_new");
    char small[4], big[32], unknown[8], after[32];
    const char *hello = "hello, batch";
    size_t len = strlen(hello);
    CHECK(lowlat_batch_submit(b, ECHO, (const uint8_t *)hello, len, (uint8_t *)small, sizeof small, 1, NULL) ==
              LOWLAT_OK,
          "submit ECHO (small)");
    CHECK(lowlat_batch_submit(b, FAIL, NULL, 0, NULL, 0, 2, NULL) == LOWLAT_OK, "submit FAIL");
    CHECK(lowlat_batch_submit(b, 99, NULL, 0, (uint8_t *)unknown, sizeof unknown, 3, NULL) == LOWLAT_OK,
          "submit 99");
    CHECK(lowlat_batch_submit(b, ECHO, (const uint8_t *)hello, len, (uint8_t *)big, sizeof big, 4, NULL) == LOWLAT_OK,
          "submit ECHO");
    lowlat_call_options quick = {.deadline_ns = 50000000}; /* 50 ms, for a 300 ms procedure */
    CHECK(lowlat_batch_submit(b, SLOW, NULL, 0, NULL, 0, 5, &quick) == LOWLAT_OK, "submit SLOW");
    CHECK(lowlat_batch_submit(b, ECHO, (const uint8_t *)"after", 5, (uint8_t *)after, sizeof after, 6, NULL) ==
              LOWLAT_OK,
          "submit ECHO after");
    lowlat_completion got[6];
    int n = collect(b, got, 6);
    CHECK(n == 6, "%d of 6 completed", n);
    for (int k = 0; k < n; k++) {
        const lowlat_completion *g = &got[k];
        const char *m = g->message ? g->message : "";
        switch (g->user_tag) {
        case 1:
            CHECK(g->status == LOWLAT_E_BUFFER_TOO_SMALL && g->result_len == len, "small buffer: %s, %zu",
                  lowlat_error_name(g->status), g->result_len);
            CHECK(g->may_have_executed && strstr(m, "buffer") != NULL, "small buffer: %s", m);
            break;
        case 2:
            CHECK(g->status == LOWLAT_E_SERVER_ERROR && g->message != NULL, "FAIL: %s", lowlat_error_name(g->status));
            break;
        case 3:
            CHECK(g->status == LOWLAT_E_UNKNOWN_PROCEDURE, "99: %s", lowlat_error_name(g->status));
            CHECK(!g->may_have_executed && strstr(m, "no such procedure") != NULL, "99: %s", m);
            break;
        case 4:
            CHECK(g->status == LOWLAT_OK && g->result_len == len && memcmp(big, hello, len) == 0, "ECHO: %s",
                  lowlat_error_name(g->status));
            break;
        case 5:
            CHECK(g->status == LOWLAT_E_TIMEOUT && strstr(m, "timed out") != NULL, "SLOW by 50 ms: %s %s",
                  lowlat_error_name(g->status), m);
            break;
        case 6:
            CHECK(g->status == LOWLAT_OK && g->result_len == 5 && memcmp(after, "after", 5) == 0, "ECHO after: %s",
                  lowlat_error_name(g->status));
            break;
        default:
            CHECK(0, "tag %llu", (unsigned long long)g->user_tag);
        }
    }
    lowlat_batch_free(b);
}

/* Eight calls of 50 ms on the server's four workers overlap: about 100 ms, not 400. */
static void calls_overlap(lowlat_client *c, int timed) {
    lowlat_batch *b = NULL;
    CHECK(lowlat_batch_new(c, 8, &b) == LOWLAT_OK, "batch_new");
    double t0 = now_ms();
    for (uint64_t i = 0; i < 8; i++) CHECK(lowlat_batch_submit(b, NAP, NULL, 0, NULL, 0, i, NULL) == LOWLAT_OK, "NAP");
    lowlat_completion got[8];
    int n = collect(b, got, 8);
    double took = now_ms() - t0;
    CHECK(n == 8, "%d of 8 naps", n);
    for (int k = 0; k < n; k++) CHECK(got[k].status == LOWLAT_OK, "nap: %s", lowlat_error_name(got[k].status));
    CHECK(!timed || took < 300, "8 naps of 50 ms took %.0f ms: they did not overlap", took);
    lowlat_batch_free(b);
}

struct stranger {
    lowlat_batch *b;
    int submit, poll;
};

static void *use_from_another_thread(void *p) {
    struct stranger *s = p;
    lowlat_completion one;
    s->submit = lowlat_batch_submit(s->b, ECHO, NULL, 0, NULL, 0, 0, NULL);
    s->poll = lowlat_batch_poll(s->b, 0, &one, 1);
    return NULL;
}

/* Bad input and misuse: codes and messages, never a crash. */
static void misuse(lowlat_client *c) {
    lowlat_batch *b = (lowlat_batch *)1;
    CHECK(lowlat_batch_new(NULL, 8, &b) == LOWLAT_E_INVALID_ARGUMENT && b == NULL, "NULL client");
    CHECK(lowlat_batch_new(c, 8, NULL) == LOWLAT_E_INVALID_ARGUMENT, "NULL out");
    CHECK(lowlat_batch_new(c, 0, &b) == LOWLAT_E_INVALID_ARGUMENT, "capacity 0");
    CHECK(strstr(lowlat_last_error(), "capacity") != NULL, "capacity 0: %s", lowlat_last_error());
    CHECK(lowlat_batch_new(c, 65537, &b) == LOWLAT_E_INVALID_ARGUMENT, "capacity 65537");
    CHECK(lowlat_batch_new(c, 4, &b) == LOWLAT_OK, "batch_new");
    lowlat_completion one;
    uint8_t r[4];
    CHECK(lowlat_batch_submit(NULL, ECHO, NULL, 0, NULL, 0, 0, NULL) == LOWLAT_E_INVALID_ARGUMENT, "NULL batch");
    CHECK(lowlat_batch_submit(b, ECHO, NULL, 3, r, 4, 0, NULL) == LOWLAT_E_INVALID_ARGUMENT, "NULL args");
    CHECK(lowlat_batch_submit(b, ECHO, r, 1, NULL, 4, 0, NULL) == LOWLAT_E_INVALID_ARGUMENT, "NULL result");
    CHECK(strstr(lowlat_last_error(), "result_cap") != NULL, "NULL result: %s", lowlat_last_error());
    CHECK(lowlat_batch_poll(NULL, 0, &one, 1) == LOWLAT_E_INVALID_ARGUMENT, "poll NULL batch");
    CHECK(lowlat_batch_poll(b, 0, NULL, 1) == LOWLAT_E_INVALID_ARGUMENT, "poll NULL completions");
    CHECK(lowlat_batch_poll(b, 0, &one, 0) == LOWLAT_E_INVALID_ARGUMENT, "poll max 0");
    CHECK(lowlat_batch_pending(NULL) == LOWLAT_E_INVALID_ARGUMENT, "pending NULL");
    CHECK(lowlat_batch_pending(b) == 0, "nothing was submitted by the bad calls");

    struct stranger s = {b, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, use_from_another_thread, &s);
    pthread_join(t, NULL);
    CHECK(s.submit == LOWLAT_E_INVALID_ARGUMENT && s.poll == LOWLAT_E_INVALID_ARGUMENT,
          "another thread: submit %s, poll %s", lowlat_error_name(s.submit), lowlat_error_name(s.poll));

    /* Freed with calls in flight: abandoned, their buffers no longer written; the client goes on. */
    static uint8_t late[4][32];
    for (uint64_t i = 0; i < 4; i++)
        CHECK(lowlat_batch_submit(b, SLOW, NULL, 0, late[i], sizeof late[i], i, NULL) == LOWLAT_OK, "SLOW");
    lowlat_batch_free(b);
    lowlat_batch_free(NULL);
    int32_t args[2] = {5, 7}, r2 = 0;
    size_t n = 0;
    CHECK(lowlat_client_call(c, MINUS, (const uint8_t *)args, sizeof args, (uint8_t *)&r2, sizeof r2, &n) == LOWLAT_OK &&
              r2 == -2,
          "a call after freeing a busy batch");
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: batch URI [timed]\n");
        return 2;
    }
    lowlat_client_options o = {0};
    o.slots = 64; /* all 64 calls on the wire at once */
    lowlat_client *c = NULL;
    CHECK(lowlat_client_connect_with(argv[1], PROGRAM, 1, &o, &c) == LOWLAT_OK, "connect %s", argv[1]);
    if (!c) return 1;
    sixty_four_in_flight(c);
    calls_overlap(c, argc == 3 ? atoi(argv[2]) : 1);
    failures_per_call(c); /* its SLOW call keeps a serving thread busy for 300 ms */
    misuse(c);
    lowlat_client_free(c);
    return checks_done();
}
