/*
 * The generated encoders and decoders of idl/examples/everything.x on their own, built with
 * AddressSanitizer and UndefinedBehaviorSanitizer by the tests:
 *
 *   codec encode            the values of everything_values.h in XDR, native little- and
 *                           big-endian: one line each, "NAME ENCODING HEX"
 *   codec reencode ENC      read framed values (a 4-byte big-endian length, then the bytes) in
 *                           encoding ENC (xdr, le, be) from stdin, decode each and write its
 *                           re-encoding, framed, to stdout
 *   codec hostile           every truncation of every encoding refused, corrupted bytes and
 *                           hostile counts, lengths, depths and strings refused or decoded
 *                           without reading out of bounds or leaking; prints "ok"
 */
#include <stdlib.h>

#include "everything_values.h"

static const int encodings[3] = {LOWLAT_ENCODING_XDR, LOWLAT_ENCODING_NATIVE_LITTLE, LOWLAT_ENCODING_NATIVE_BIG};
static const char *encoding_names[3] = {"xdr", "le", "be"};

/* The encoding of `v`, malloc'd; its length in *n. */
static uint8_t *encode(const everything *v, int encoding, size_t *n) {
    lowlat_writer w;
    lowlat_writer_init(&w, NULL, 0, encoding);
    if (everything_encode(&w, v)) {
        fprintf(stderr, "encode: %s\n", w.why);
        exit(1);
    }
    uint8_t *buf = malloc(w.len ? w.len : 1);
    size_t len = w.len;
    lowlat_writer_init(&w, buf, len, encoding);
    if (everything_encode(&w, v) || w.len != len) {
        fprintf(stderr, "encode again: %s\n", w.why);
        exit(1);
    }
    *n = len;
    return buf;
}

/* Decodes `n` bytes as one whole value: 0, or -1 with the reason in `why`. */
static int decode(const uint8_t *b, size_t n, int encoding, everything *v, char why[LOWLAT_WHY_LEN]) {
    lowlat_reader r;
    lowlat_reader_init(&r, b, n, encoding);
    if (everything_decode(&r, v) == 0 && lowlat_finish(&r) == 0) return 0;
    if (r.why[0] == '\0') snprintf(r.why, sizeof r.why, "failed without a reason");
    memcpy(why, r.why, LOWLAT_WHY_LEN);
    everything_free(v);
    return -1;
}

static int encode_all(void) {
    everything values[3] = {value_a(), value_b(0), value_b(1)};
    const char *names[3] = {"a", "b0", "b1"};
    for (int i = 0; i < 3; i++) {
        for (int e = 0; e < 3; e++) {
            size_t n;
            uint8_t *b = encode(&values[i], encodings[e], &n);
            printf("%s %s ", names[i], encoding_names[e]);
            for (size_t k = 0; k < n; k++) printf("%02x", b[k]);
            printf("\n");
            free(b);
        }
    }
    return 0;
}

static int reencode(int encoding) {
    uint8_t head[4];
    while (fread(head, 1, 4, stdin) == 4) {
        size_t n = (size_t)head[0] << 24 | (size_t)head[1] << 16 | (size_t)head[2] << 8 | head[3];
        uint8_t *b = malloc(n ? n : 1);
        if (fread(b, 1, n, stdin) != n) return 1;
        everything v;
        char why[LOWLAT_WHY_LEN];
        if (decode(b, n, encoding, &v, why)) {
            fprintf(stderr, "decode: %s\n", why);
            return 1;
        }
        size_t m;
        uint8_t *out = encode(&v, encoding, &m);
        uint8_t mh[4] = {(uint8_t)(m >> 24), (uint8_t)(m >> 16), (uint8_t)(m >> 8), (uint8_t)m};
        fwrite(mh, 1, 4, stdout);
        fwrite(out, 1, m, stdout);
        free(out);
        free(b);
        everything_free(&v);
    }
    return 0;
}

/* `n` bytes, copied to a buffer of exactly that size, so a read past the end is caught. */
static int decode_exact(const uint8_t *b, size_t n, int encoding, char why[LOWLAT_WHY_LEN]) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, b, n);
    everything v;
    int rc = decode(copy, n, encoding, &v, why);
    if (rc == 0) everything_free(&v);
    free(copy);
    return rc;
}

static uint32_t lcg = 12345;
static uint32_t next_random(void) {
    lcg = lcg * 1103515245u + 12345u;
    return lcg >> 8;
}

static int hostile(void) {
    everything values[3] = {value_a(), value_b(0), value_b(1)};
    char why[LOWLAT_WHY_LEN];
    for (int i = 0; i < 3; i++) {
        for (int e = 0; e < 3; e++) {
            size_t n;
            uint8_t *b = encode(&values[i], encodings[e], &n);
            everything back;
            CHECK(decode(b, n, encodings[e], &back, why) == 0, "value %d %s: %s", i, encoding_names[e], why);
            check_everything(encoding_names[e], &back, &values[i]);
            everything_free(&back);
            for (size_t k = 0; k < n; k++) {
                CHECK(decode_exact(b, k, encodings[e], why) != 0, "value %d %s: %zu of %zu bytes accepted", i,
                      encoding_names[e], k, n);
            }
            /* A trailing byte is refused. */
            uint8_t *longer = malloc(n + 1);
            memcpy(longer, b, n);
            longer[n] = 0;
            CHECK(decode_exact(longer, n + 1, encodings[e], why) != 0 && strstr(why, "left over"), "trailing byte: %s", why);
            free(longer);
            /* Corruption: decoded or refused, never out of bounds (the sanitizers watch). */
            for (int round = 0; round < 2000; round++) {
                uint8_t *c = malloc(n);
                memcpy(c, b, n);
                int flips = 1 + (int)(next_random() % 3);
                for (int f = 0; f < flips; f++) {
                    static const uint8_t pick[] = {0x00, 0xff, 0x80, 0x7f, 0x01, 0x02};
                    size_t at = next_random() % n;
                    c[at] = next_random() % 2 ? pick[next_random() % sizeof pick] : (uint8_t)next_random();
                }
                (void)decode_exact(c, n, encodings[e], why);
                free(c);
            }
            free(b);
        }
    }

    /* Hand-made hostile messages: each refused with its reason. */
    struct {
        const char *what;
        uint8_t bytes[16];
        size_t n;
        const char *reason;
    } bad[] = {
        {"a count above the maximum", {0xff, 0xff, 0xff, 0xf0}, 4, "counts got 4294967280 elements"},
        {"a count beyond the input", {0x00, 0x00, 0x00, 0x10}, 4, "truncated: needed 64 bytes"},
        {"an opaque length beyond the input", {0x00, 0x10, 0x00, 0x00, 1, 2}, 6, "truncated"},
        {"a bool that is 2", {0, 0, 0, 2}, 4, "not 0 or 1"},
        {"invalid UTF-8", {0, 0, 0, 2, 0xc3, 0x28, 0, 0}, 8, "not valid UTF-8"},
        {"a NUL in a string", {0, 0, 0, 2, 'a', 0, 0, 0}, 8, "NUL"},
        {"an enum value no member has", {0, 0, 0, 9}, 4, "no member has value 9"},
        {"a discriminant no arm has", {0, 0, 0, 5, 0, 0, 0, 0}, 8, "no arm for discriminant 5"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        lowlat_reader r;
        lowlat_reader_init(&r, bad[k].bytes, bad[k].n, LOWLAT_ENCODING_XDR);
        int rc = -1;
        switch (k) {
        case 0: { uint32_t c; rc = lowlat_get_count(&r, 64, "counts", &c); break; }
        case 1: { uint32_t c; rc = lowlat_get_count(&r, UINT32_MAX, "counts", &c); break; }
        case 2: { blob x; rc = lowlat_get_opaque(&r, UINT32_MAX, "blob", &x.len, &x.val); if (!rc) blob_free(&x); break; }
        case 3: { bool x; rc = lowlat_get_bool(&r, &x); break; }
        case 4:
        case 5: { text t; rc = lowlat_get_string(&r, UINT32_MAX, "text", &t); if (!rc) text_free(&t); break; }
        case 6: { shape s; rc = shape_decode(&r, &s); break; }
        case 7: { by_uint u; rc = by_uint_decode(&r, &u); if (!rc) by_uint_free(&u); break; }
        }
        CHECK(rc != 0 && strstr(r.why, bad[k].reason) != NULL, "%s: rc %d, why '%s'", bad[k].what, rc, r.why);
    }

    /* A list nested deeper than the reader allows is refused, not followed off the stack. */
    size_t depth = LOWLAT_MAX_DEPTH + 5, n = depth * 8;
    uint8_t *deep = calloc(n, 1);
    for (size_t k = 0; k < depth; k++) deep[k * 8 + 7] = k + 1 < depth ? 1 : 0;
    lowlat_reader r;
    lowlat_reader_init(&r, deep, n, LOWLAT_ENCODING_XDR);
    node list;
    CHECK(node_decode(&r, &list) != 0 && strstr(r.why, "nested deeper than 1000"), "deep list: %s", r.why);
    free(deep);

    /* The encoders refuse what the interface forbids. */
    everything e = value_a();
    e.var_bytes.len = 6;
    lowlat_writer w;
    lowlat_writer_init(&w, NULL, 0, LOWLAT_ENCODING_XDR);
    CHECK(everything_encode(&w, &e) != 0 && strstr(w.why, "everything.var_bytes: opaque<5> got 6 bytes"), "%s", w.why);
    e = value_a();
    e.who = "\xff";
    lowlat_writer_init(&w, NULL, 0, LOWLAT_ENCODING_XDR);
    CHECK(everything_encode(&w, &e) != 0 && strstr(w.why, "not valid UTF-8"), "%s", w.why);
    e = value_a();
    e.bu.tag = 3;
    lowlat_writer_init(&w, NULL, 0, LOWLAT_ENCODING_NATIVE_LITTLE);
    CHECK(everything_encode(&w, &e) != 0 && strstr(w.why, "union by_uint: no arm for discriminant 3"), "%s", w.why);
    e = value_a();
    e.many.val = NULL;
    lowlat_writer_init(&w, NULL, 0, LOWLAT_ENCODING_XDR);
    CHECK(everything_encode(&w, &e) != 0 && strstr(w.why, "NULL elements"), "%s", w.why);

    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "encode") == 0) return encode_all();
    if (argc == 2 && strcmp(argv[1], "hostile") == 0) return hostile();
    if (argc == 3 && strcmp(argv[1], "reencode") == 0) {
        for (int e = 0; e < 3; e++)
            if (strcmp(argv[2], encoding_names[e]) == 0) return reencode(encodings[e]);
    }
    fprintf(stderr, "usage: codec encode | reencode xdr|le|be | hostile\n");
    return 2;
}
