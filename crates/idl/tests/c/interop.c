/*
 * The C side of lowlat's XDR interop test, built at test time against rpcgen's output for
 * idl/examples/everything.x and libtirpc.
 *
 *   interop fixed      prints framed XDR records of values built here by hand
 *   interop reencode   reads framed `everything` records, decodes each with libtirpc and
 *                      prints it re-encoded
 *
 * A frame is a 4-byte big-endian length followed by that many bytes.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "everything.h"

#define BUFSZ (1 << 20)
static char out[BUFSZ];

static void emit(xdrproc_t proc, void *value) {
    XDR x;
    xdrmem_create(&x, out, BUFSZ, XDR_ENCODE);
    if (!proc(&x, value)) {
        fprintf(stderr, "interop: encoding failed\n");
        exit(1);
    }
    uint32_t n = htonl(xdr_getpos(&x));
    fwrite(&n, 4, 1, stdout);
    fwrite(out, 1, xdr_getpos(&x), stdout);
}

static void fixed(void) {
    static char data[5] = {1, 2, 3, 4, 5};
    static char vb[2] = {(char)0xff, 0};
    static u_int many[3] = {7, 8, 9};
    static char tag1[8] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'};
    static inner inners[2];
    static point mp = {9, 10};
    static node n3 = {3, NULL}, n2 = {2, &n3}, n1 = {1, &n2};
    static char raw[3] = {1, 2, 3};
    static u_int cs[2] = {100, 200};
    static name names[2] = {"a", "bc"};
    static bool_t flags[3] = {TRUE, FALSE, TRUE};
    everything e;
    memset(&e, 0, sizeof e);
    e.prim.i = -7;
    e.prim.u = 4000000000u;
    e.prim.ushort_like = 65535;
    e.prim.h = -1234567890123LL;
    e.prim.uh = 18000000000000000000ULL;
    e.prim.f = 1.5f;
    e.prim.d = -2.25;
    e.prim.b = TRUE;
    e.prim.c = INFRA;
    for (int i = 0; i < 16; i++) e.h[i] = (char)i;
    e.data.blob_len = 5;
    e.data.blob_val = data;
    memcpy(e.fixed_bytes, "xyz", 3);
    e.var_bytes.var_bytes_len = 2;
    e.var_bytes.var_bytes_val = vb;
    e.who = "alice";
    e.note = "";
    e.four[0] = 1; e.four[1] = -2; e.four[2] = 3; e.four[3] = -4;
    e.many.counts_len = 3;
    e.many.counts_val = many;
    e.corners[0].x = 1; e.corners[0].y = 2; e.corners[1].x = 3; e.corners[1].y = 4;
    inners[0].corner.x = 5; inners[0].corner.y = 6; inners[0].kind = SQUARE;
    inners[1].corner.x = -1; inners[1].corner.y = -1; inners[1].kind = TRIANGLE;
    inners[1].tag.small_blob_len = 8; inners[1].tag.small_blob_val = tag1;
    e.inners.inners_len = 2;
    e.inners.inners_val = inners;
    e.maybe_point = &mp;
    e.list = &n1;
    e.r.which = GREEN;
    e.r.result_u.label = "green";
    e.bi.kind = 99;
    e.bi.by_int_u.raw.raw_len = 3;
    e.bi.by_int_u.raw.raw_val = raw;
    e.mt.present = TRUE;
    e.mt.maybe_text_u.t = "hello";
    e.bu.tag = 7;
    e.bu.by_uint_u.cs.counts_len = 2;
    e.bu.by_uint_u.cs.counts_val = cs;
    e.names.names_len = 2;
    e.names.names_val = names;
    e.hypers[0] = -1; e.hypers[1] = 1LL << 40;
    e.flags.flags_len = 3;
    e.flags.flags_val = flags;
    emit((xdrproc_t)xdr_everything, &e);

    add_1_argument add = {7, -3};
    emit((xdrproc_t)xdr_add_1_argument, &add);
    static char ab[2] = {'a', 'b'}, xyz[3] = {'x', 'y', 'z'};
    concat_1_argument cat;
    cat.a.blob_len = 2; cat.a.blob_val = ab;
    cat.b.blob_len = 3; cat.b.blob_val = xyz;
    emit((xdrproc_t)xdr_concat_1_argument, &cat);
    lookup_1_argument lk = {"key", BLUE};
    emit((xdrproc_t)xdr_lookup_1_argument, &lk);
}

static int read_full(void *p, size_t n) {
    return fread(p, 1, n, stdin) == n;
}

static void reencode(void) {
    static char in[BUFSZ];
    uint32_t n;
    while (read_full(&n, 4)) {
        n = ntohl(n);
        if (n > BUFSZ || !read_full(in, n)) {
            fprintf(stderr, "interop: bad frame\n");
            exit(1);
        }
        everything e;
        memset(&e, 0, sizeof e);
        XDR x;
        xdrmem_create(&x, in, n, XDR_DECODE);
        if (!xdr_everything(&x, &e)) {
            fprintf(stderr, "interop: libtirpc could not decode a record of %u bytes\n", n);
            exit(1);
        }
        if (xdr_getpos(&x) != n) {
            fprintf(stderr, "interop: decoded %u of %u bytes\n", xdr_getpos(&x), n);
            exit(1);
        }
        emit((xdrproc_t)xdr_everything, &e);
        xdr_free((xdrproc_t)xdr_everything, (char *)&e);
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "fixed") == 0) {
        fixed();
    } else if (argc == 2 && strcmp(argv[1], "reencode") == 0) {
        reencode();
    } else {
        fprintf(stderr, "usage: interop fixed|reencode\n");
        return 2;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
