/*
 * The generated C client of idl/examples/everything.x against a server with the semantics of
 * crates/dynamic/tests/c/everything_peer.c (a lowlat server in Rust, or rpcgen's):
 *
 *   everything_client URI [v1]    call every procedure of versions 1 and 2 (only 1 with "v1")
 *                                 and check every field of every result; prints "ok"
 */
#include "everything_values.h"

static const char *call_failed(int rc) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s: %s", lowlat_error_name(rc), lowlat_last_error());
    return buf;
}

static void roundtrip(const lowlat_client *c, const char *what, const everything *want) {
    everything got;
    int rc = everything_v1_roundtrip(c, NULL, want, &got);
    CHECK(rc == LOWLAT_OK, "ROUNDTRIP(%s): %s", what, call_failed(rc));
    if (rc != LOWLAT_OK) return;
    check_everything(what, &got, want);
    everything_free(&got);
}

static void lookup(const lowlat_client *c, const char *key, color hint) {
    result got;
    int rc = everything_v1_lookup(c, NULL, key, hint, &got);
    CHECK(rc == LOWLAT_OK, "LOOKUP(%s, %d): %s", key, hint, call_failed(rc));
    if (rc != LOWLAT_OK) return;
    CHECK(got.which == hint, "LOOKUP(%s, %d): which %d", key, hint, got.which);
    if (hint == RED) CHECK(got.result_u.code == (int32_t)strlen(key), "LOOKUP RED: code %d", got.result_u.code);
    if (hint == GREEN || hint == BLUE) CHECK(same_str(got.result_u.label, key), "LOOKUP: label '%s'", got.result_u.label);
    result_free(&got);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: everything_client URI [v1]\n");
        return 2;
    }
    const char *uri = argv[1];
    int v2 = !(argc > 2 && strcmp(argv[2], "v1") == 0);
    lowlat_client *c = NULL, *c2 = NULL;
    int rc = lowlat_client_connect(uri, EVERYTHING_PROG, EVERYTHING_V1, &c);
    if (rc != LOWLAT_OK) {
        fprintf(stderr, "connect %s: %s\n", uri, call_failed(rc));
        return 1;
    }

    rc = everything_v1_ping(c, NULL);
    CHECK(rc == LOWLAT_OK, "PING: %s", call_failed(rc));

    everything a = value_a(), b0 = value_b(0), b1 = value_b(1);
    roundtrip(c, "value_a", &a);
    roundtrip(c, "value_b(0)", &b0);
    roundtrip(c, "value_b(1)", &b1);

    int32_t sum = 0;
    rc = everything_v1_add(c, NULL, 7, -3, &sum);
    CHECK(rc == LOWLAT_OK && sum == 4, "ADD(7, -3) = %d: %s", sum, call_failed(rc));
    lowlat_call_options deadline = {2000000000ull};
    rc = everything_v1_add(c, &deadline, INT32_MAX, 1, &sum);
    CHECK(rc == LOWLAT_OK && sum == INT32_MIN, "ADD wraps: %d: %s", sum, call_failed(rc));

    blob x = {2, (uint8_t *)"ab"}, y = {3, (uint8_t *)"xyz"}, xy;
    rc = everything_v1_concat(c, NULL, &x, &y, &xy);
    CHECK(rc == LOWLAT_OK && same_bytes(xy.val, xy.len, (const uint8_t *)"abxyz", 5), "CONCAT: %s", call_failed(rc));
    if (rc == LOWLAT_OK) blob_free(&xy);
    blob empty = {0, NULL};
    rc = everything_v1_concat(c, NULL, &empty, &empty, &xy);
    CHECK(rc == LOWLAT_OK && xy.len == 0, "CONCAT of nothing: %u bytes: %s", xy.len, call_failed(rc));
    if (rc == LOWLAT_OK) blob_free(&xy);

    text hello = NULL;
    rc = everything_v1_greet(c, NULL, "world", &hello);
    CHECK(rc == LOWLAT_OK && same_str(hello, "hello, world"), "GREET: '%s': %s", hello ? hello : "", call_failed(rc));
    text_free(&hello);

    lookup(c, "key", RED);
    lookup(c, "green key", GREEN);
    lookup(c, "blue", BLUE);
    lookup(c, "infra", INFRA);

    /* Arguments the interface refuses never leave the client. */
    rc = everything_v1_lookup(c, NULL, "a key far longer than the thirty-two bytes a name may hold", RED, NULL);
    CHECK(rc == LOWLAT_E_ENCODE, "LOOKUP with a long key: %s", call_failed(rc));
    CHECK(strstr(lowlat_last_error(), "LOOKUP args: string<32> got 58 bytes") != NULL, "message: %s", lowlat_last_error());
    CHECK(!lowlat_last_error_may_have_executed(), "an encoding failure was never sent");
    everything bad = value_a();
    bad.prim.c = (color)42;
    rc = everything_v1_roundtrip(c, NULL, &bad, NULL);
    CHECK(rc == LOWLAT_E_ENCODE && strstr(lowlat_last_error(), "enum color: no member has value 42"), "bad enum: %s",
          call_failed(rc));

    if (v2) {
        rc = lowlat_client_connect(uri, EVERYTHING_PROG, EVERYTHING_V2, &c2);
        CHECK(rc == LOWLAT_OK, "connect to version 2: %s", call_failed(rc));
        if (rc == LOWLAT_OK) {
            rc = everything_v2_ping(c2, NULL);
            CHECK(rc == LOWLAT_OK, "v2 PING: %s", call_failed(rc));
            node rev;
            rc = everything_v2_reverse(c2, NULL, &list3[0], &rev);
            CHECK(rc == LOWLAT_OK, "REVERSE: %s", call_failed(rc));
            if (rc == LOWLAT_OK) {
                CHECK(rev.value == 3 && rev.next && rev.next->value == 2 && rev.next->next &&
                          rev.next->next->value == 1 && rev.next->next->next == NULL,
                      "REVERSE(1, 2, 3)");
                node_free(&rev);
            }
        }
    }
    lowlat_client_free(c2);
    lowlat_client_free(c);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
