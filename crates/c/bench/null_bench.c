/*
 * The null call from C through the stubs generated from idl/lab.x, timed as `lowlat bench`
 * times it (a monotonic clock read before and after each call, after a warm-up), so the two
 * compare in one run (scripts/measure-c.sh):
 *
 *   null_bench URI CALLS [SPIN]    SPIN: adaptive (default), forever, block, or microseconds
 *
 * prints one JSON line with `lowlat bench --json`'s latency fields.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lab.h"

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: null_bench URI CALLS [adaptive|forever|block|MICROSECONDS]\n");
        return 2;
    }
    const char *uri = argv[1];
    long calls = atol(argv[2]);
    lowlat_client_options o = {0};
    if (argc > 3 && strcmp(argv[3], "forever") == 0) {
        o.spin = LOWLAT_SPIN_FOREVER;
    } else if (argc > 3 && strcmp(argv[3], "block") == 0) {
        o.spin = LOWLAT_SPIN_BLOCK;
    } else if (argc > 3 && strcmp(argv[3], "adaptive") != 0) {
        o.spin = LOWLAT_SPIN_BUDGET;
        o.spin_us = (uint32_t)atol(argv[3]);
    }
    if (calls <= 0) {
        fprintf(stderr, "null_bench: CALLS must be positive\n");
        return 2;
    }
    lowlat_client *c;
    if (lowlat_client_connect_with(uri, LAB_PROG, LAB_VERS, &o, &c) != LOWLAT_OK) {
        fprintf(stderr, "null_bench: %s\n", lowlat_last_error());
        return 1;
    }
    uint64_t *ns = malloc((size_t)calls * sizeof *ns);
    if (!ns) return 1;
    for (int i = 0; i < 1000; i++) {
        if (lab_vers_null(c, NULL) != LOWLAT_OK) {
            fprintf(stderr, "null_bench: %s\n", lowlat_last_error());
            return 1;
        }
    }
    uint64_t sum = 0;
    long errors = 0;
    for (long i = 0; i < calls; i++) {
        uint64_t t0 = now_ns();
        errors += lab_vers_null(c, NULL) != LOWLAT_OK;
        ns[i] = now_ns() - t0;
        sum += ns[i];
    }
    qsort(ns, (size_t)calls, sizeof *ns, by_value);
#define AT(q) ns[(size_t)((double)(calls - 1) * (q))]
    char transport[32];
    snprintf(transport, sizeof transport, "%.*s", (int)(strstr(uri, "://") ? strstr(uri, "://") - uri : 0), uri);
    printf("{\"kind\":\"rpc\",\"client\":\"c\",\"transport\":\"%s\",\"proc\":\"null\",\"size\":0,\"calls\":%ld,"
           "\"threads\":1,\"p50_ns\":%llu,\"p90_ns\":%llu,\"p99_ns\":%llu,\"p999_ns\":%llu,\"max_ns\":%llu,"
           "\"mean_ns\":%.1f,\"errors\":%ld}\n",
           transport, calls, (unsigned long long)AT(0.5), (unsigned long long)AT(0.9), (unsigned long long)AT(0.99),
           (unsigned long long)AT(0.999), (unsigned long long)ns[calls - 1], (double)sum / (double)calls, errors);
    free(ns);
    lowlat_client_free(c);
    return errors ? 1 : 0;
}
