/* The C tests' checks: a failed one says where, what, and this thread's last lowlat error. */
#ifndef LOWLAT_TEST_CHECK_H
#define LOWLAT_TEST_CHECK_H

#include <stdio.h>

#include "lowlat.h"

static int failures;
#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, " [last error: %s]\n", lowlat_last_error());  \
        }                                                                  \
    } while (0)

/* The end of main: "ok" and 0 when every check passed, else how many failed and 1. */
static inline int checks_done(void) {
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}

#endif
