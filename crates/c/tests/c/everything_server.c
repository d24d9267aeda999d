/*
 * The generated C server of idl/examples/everything.x, with the semantics of
 * crates/dynamic/tests/c/everything_peer.c:
 *
 *   everything_server URI...   serve versions 1 and 2 on every URI (port 0: any free port);
 *                              print each URI served, one a line, then "ready"; stop and free
 *                              everything when stdin closes
 *
 * ROUNDTRIP returns its argument (moved, not copied); ADD a + b (wrapping); CONCAT a then b;
 * GREET "hello, " + who; LOOKUP(key, hint): RED -> code = strlen(key), GREEN and BLUE ->
 * label = key, anything else -> the void default arm; REVERSE reverses the list; any
 * procedure's "fail" argument (GREET("fail")) makes it fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "everything.h"

static int ping(void *user, const lowlat_call *call) {
    (void)user;
    (void)call;
    return LOWLAT_PROC_OK;
}

static int roundtrip(void *user, const lowlat_call *call, everything *arg, everything *result) {
    (void)user;
    (void)call;
    *result = *arg; /* moved: the dispatcher frees the result, and the argument is left empty */
    memset(arg, 0, sizeof *arg);
    return LOWLAT_PROC_OK;
}

static int add(void *user, const lowlat_call *call, int32_t a, int32_t b, int32_t *result) {
    (void)user;
    (void)call;
    *result = (int32_t)((uint32_t)a + (uint32_t)b);
    return LOWLAT_PROC_OK;
}

static int concat(void *user, const lowlat_call *call, blob *a, blob *b, blob *result) {
    (void)user;
    (void)call;
    result->len = a->len + b->len;
    result->val = result->len ? malloc(result->len) : NULL;
    if (result->len && !result->val) return LOWLAT_PROC_FAILED;
    if (a->len) memcpy(result->val, a->val, a->len);
    if (b->len) memcpy(result->val + a->len, b->val, b->len);
    return LOWLAT_PROC_OK;
}

static int greet(void *user, const lowlat_call *call, text who, text *result) {
    (void)user;
    (void)call;
    if (strcmp(who, "fail") == 0) return LOWLAT_PROC_FAILED;
    size_t n = strlen(who) + sizeof "hello, ";
    *result = malloc(n);
    if (!*result) return LOWLAT_PROC_FAILED;
    snprintf(*result, n, "hello, %s", who);
    return LOWLAT_PROC_OK;
}

static int lookup(void *user, const lowlat_call *call, name key, color hint, result *result) {
    (void)user;
    (void)call;
    result->which = hint;
    if (hint == RED) {
        result->result_u.code = (int32_t)strlen(key);
    } else if (hint == GREEN || hint == BLUE) {
        result->result_u.label = malloc(strlen(key) + 1);
        if (!result->result_u.label) return LOWLAT_PROC_FAILED;
        strcpy(result->result_u.label, key);
    }
    return LOWLAT_PROC_OK;
}

static int reverse(void *user, const lowlat_call *call, node *arg, node *result) {
    (void)user;
    (void)call;
    /* Build the reversed list from copies of the values; the first node is *result itself. */
    node *rev = NULL;
    for (const node *p = arg; p != NULL; p = p->next) {
        node *n = malloc(sizeof *n);
        if (!n) {
            node head = {0, rev};
            node_free(&head);
            return LOWLAT_PROC_FAILED;
        }
        n->value = p->value;
        n->next = rev;
        rev = n;
    }
    *result = *rev;
    free(rev);
    return LOWLAT_PROC_OK;
}

static const everything_v1_service v1 = {NULL, ping, roundtrip, add, concat, greet, lookup};
static const everything_v2_service v2 = {NULL, ping, reverse};

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: everything_server URI...\n");
        return 2;
    }
    lowlat_server *s = NULL;
    int rc = lowlat_server_new(&s);
    if (rc == LOWLAT_OK) rc = lowlat_server_set_onc_register(s, false);
    if (rc == LOWLAT_OK) rc = everything_v1_register(s, &v1);
    if (rc == LOWLAT_OK) rc = everything_v2_register(s, &v2);
    if (rc == LOWLAT_OK) rc = lowlat_server_serve(s, (const char *const *)(argv + 1), (size_t)(argc - 1));
    if (rc != LOWLAT_OK) {
        fprintf(stderr, "everything_server: %s: %s\n", lowlat_error_name(rc), lowlat_last_error());
        lowlat_server_free(s);
        return 1;
    }
    for (size_t i = 0; i < lowlat_server_uri_count(s); i++) printf("%s\n", lowlat_server_uri(s, i));
    printf("ready\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    rc = lowlat_server_stop(s);
    lowlat_server_free(s);
    return rc == LOWLAT_OK ? 0 : 1;
}
