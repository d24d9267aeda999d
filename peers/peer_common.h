/*
 * Shared by every peer program: command-line parsing, CPU pinning, round-trip timing and the one
 * JSON line a client prints. Header-only so each peer builds from a single compiler command, and
 * valid as both C and C++ because the gRPC peer is C++ while the others are C.
 *
 * Command line (every peer):
 *   PEER --serve ADDR [--cpu C]
 *   PEER --connect ADDR --calls N --size B [--warmup W] [--cpu C]
 * Size 0 means the null call; any other size is an echo of that many bytes.
 */
#ifndef LOWLAT_PEER_COMMON_H
#define LOWLAT_PEER_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Echo payloads larger than this are refused: every peer's transport handles it in one message. */
#define PEER_MAX_SIZE (1u << 20)

struct peer_args {
    const char *serve;   /* server mode when set */
    const char *connect; /* client mode when set */
    long calls;
    long warmup;
    long size;
    int cpu; /* -1: not pinned */
};

static void peer_usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s --serve ADDR [--cpu C]\n"
            "       %s --connect ADDR --calls N --size B [--warmup W] [--cpu C]\n"
            "  size 0 = null call, otherwise echo of B bytes (at most %u)\n",
            prog, prog, PEER_MAX_SIZE);
}

/* Parses a non-negative decimal integer no larger than max; returns -1 on anything else. */
static long peer_parse_count(const char *s, long max)
{
    char *end = NULL;
    long v;
    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > max)
        return -1;
    return v;
}

/* Fills args from argv; prints the problem and returns 0 when the command line is unusable. */
static int peer_parse_args(int argc, char **argv, struct peer_args *a)
{
    int i;
    a->serve = NULL;
    a->connect = NULL;
    a->calls = 10000;
    a->warmup = -1;
    a->size = 0;
    a->cpu = -1;
    for (i = 1; i < argc; i++) {
        const char *opt = argv[i];
        const char *val = (i + 1 < argc) ? argv[i + 1] : NULL;
        long v;
        if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
            peer_usage(argv[0]);
            exit(0);
        }
        if (val == NULL) {
            fprintf(stderr, "%s: %s needs a value\n", argv[0], opt);
            return 0;
        }
        i++;
        if (strcmp(opt, "--serve") == 0) {
            a->serve = val;
        } else if (strcmp(opt, "--connect") == 0) {
            a->connect = val;
        } else if (strcmp(opt, "--calls") == 0) {
            if ((v = peer_parse_count(val, 100000000L)) <= 0) {
                fprintf(stderr, "%s: --calls wants a positive count, got %s\n", argv[0], val);
                return 0;
            }
            a->calls = v;
        } else if (strcmp(opt, "--warmup") == 0) {
            if ((v = peer_parse_count(val, 100000000L)) < 0) {
                fprintf(stderr, "%s: --warmup wants a count, got %s\n", argv[0], val);
                return 0;
            }
            a->warmup = v;
        } else if (strcmp(opt, "--size") == 0) {
            if ((v = peer_parse_count(val, PEER_MAX_SIZE)) < 0) {
                fprintf(stderr, "%s: --size wants 0..%u bytes, got %s\n", argv[0], PEER_MAX_SIZE,
                        val);
                return 0;
            }
            a->size = v;
        } else if (strcmp(opt, "--cpu") == 0) {
            if ((v = peer_parse_count(val, CPU_SETSIZE - 1)) < 0) {
                fprintf(stderr, "%s: --cpu wants a CPU number, got %s\n", argv[0], val);
                return 0;
            }
            a->cpu = (int)v;
        } else {
            fprintf(stderr, "%s: unknown option %s\n", argv[0], opt);
            peer_usage(argv[0]);
            return 0;
        }
    }
    if ((a->serve == NULL) == (a->connect == NULL)) {
        fprintf(stderr, "%s: give exactly one of --serve ADDR and --connect ADDR\n", argv[0]);
        peer_usage(argv[0]);
        return 0;
    }
    if (a->warmup < 0) /* default: a tenth of the run, enough to fill caches and the JIT-free paths */
        a->warmup = a->calls / 10 < 1000 ? a->calls / 10 : 1000;
    return 1;
}

/* Pins the calling thread (and the threads it creates later) to one CPU. */
static int peer_pin(int cpu)
{
    cpu_set_t set;
    if (cpu < 0)
        return 1;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        fprintf(stderr, "sched_setaffinity(cpu %d): %s\n", cpu, strerror(errno));
        return 0;
    }
    return 1;
}

static inline uint64_t peer_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int peer_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted samples: the smallest value with at least q of them at or
 * below it. */
static uint64_t peer_percentile(const uint64_t *sorted, long n, double q)
{
    long rank = (long)(q * (double)n + 0.999999999);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

/* Prints the result line the lab parses; samples are sorted in place. */
static void peer_report(const char *system, const char *transport, const struct peer_args *a,
                        uint64_t *samples, uint64_t elapsed_ns)
{
    long n = a->calls, i;
    double sum = 0.0;
    qsort(samples, (size_t)n, sizeof(samples[0]), peer_cmp_u64);
    for (i = 0; i < n; i++)
        sum += (double)samples[i];
    printf("{\"kind\":\"rpc\",\"system\":\"%s\",\"transport\":\"%s\",\"proc\":\"%s\","
           "\"size\":%ld,\"calls\":%ld,\"threads\":1,\"p50_ns\":%llu,\"p90_ns\":%llu,"
           "\"p99_ns\":%llu,\"p999_ns\":%llu,\"max_ns\":%llu,\"mean_ns\":%.1f,"
           "\"calls_per_s\":%.1f}\n",
           system, transport, a->size == 0 ? "null" : "echo", a->size, n,
           (unsigned long long)peer_percentile(samples, n, 0.50),
           (unsigned long long)peer_percentile(samples, n, 0.90),
           (unsigned long long)peer_percentile(samples, n, 0.99),
           (unsigned long long)peer_percentile(samples, n, 0.999),
           (unsigned long long)samples[n - 1], sum / (double)n,
           elapsed_ns > 0 ? (double)n * 1e9 / (double)elapsed_ns : 0.0);
    fflush(stdout);
}

/* Says the server listens; the lab waits for exactly this line. */
static void peer_ready(void)
{
    printf("ready\n");
    fflush(stdout);
}

/* Splits "scheme://rest"; returns rest when the scheme matches, else NULL. */
static const char *peer_strip_scheme(const char *addr, const char *scheme)
{
    size_t n = strlen(scheme);
    if (strncmp(addr, scheme, n) == 0 && strncmp(addr + n, "://", 3) == 0)
        return addr + n + 3;
    return NULL;
}

#endif
