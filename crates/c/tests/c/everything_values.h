/*
 * The values of idl/examples/everything.x the C tests send (the same as value_a and value_b in
 * crates/dynamic/tests/support/mod.rs), and a field-by-field comparison written by hand, so a
 * codec that dropped or mangled a field cannot agree with itself.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "everything.h"

#include "check.h"

static node list3[3];
static inner inners_a[2];
static uint8_t data_a[] = {1, 2, 3, 4, 5};
static uint8_t var_bytes_a[] = {0xff, 0};
static uint8_t tag_b[] = "abcdefgh";
static uint32_t many_a[] = {7, 8, 9};
static point maybe_point_a = {9, 10};
static uint8_t raw_a[] = {1, 2, 3};
static uint32_t cs_a[] = {100, 200};
static char *names_a[] = {"a", "bc"};
static bool flags_a[] = {true, false, true};

/* value_a: every optional present, the first arm of each union. */
static everything value_a(void) {
    everything e;
    memset(&e, 0, sizeof e);
    e.prim.i = -7;
    e.prim.u = 4000000000u;
    e.prim.ushort_like = 65535;
    e.prim.h = -1234567890123LL;
    e.prim.uh = 18000000000000000000ULL;
    e.prim.f = 1.5f;
    e.prim.d = -2.25;
    e.prim.b = true;
    e.prim.c = INFRA;
    for (int i = 0; i < 16; i++) e.h[i] = (uint8_t)i;
    e.data.len = 5;
    e.data.val = data_a;
    memcpy(e.fixed_bytes, "xyz", 3);
    e.var_bytes.len = 2;
    e.var_bytes.val = var_bytes_a;
    e.who = "alice";
    e.note = "";
    e.four[0] = 1; e.four[1] = -2; e.four[2] = 3; e.four[3] = -4;
    e.many.len = 3;
    e.many.val = many_a;
    e.corners[0] = (point){1, 2};
    e.corners[1] = (point){3, 4};
    inners_a[0] = (inner){{5, 6}, SQUARE, {0, NULL}};
    inners_a[1] = (inner){{-1, -1}, TRIANGLE, {8, tag_b}};
    e.inners.len = 2;
    e.inners.val = inners_a;
    e.maybe_point = &maybe_point_a;
    list3[0] = (node){1, &list3[1]};
    list3[1] = (node){2, &list3[2]};
    list3[2] = (node){3, NULL};
    e.list = &list3[0];
    e.r.which = GREEN;
    e.r.result_u.label = "green";
    e.bi.kind = 99;
    e.bi.by_int_u.raw.len = 3;
    e.bi.by_int_u.raw.val = raw_a;
    e.mt.present = true;
    e.mt.maybe_text_u.t = "hello";
    e.bu.tag = 7;
    e.bu.by_uint_u.cs.len = 2;
    e.bu.by_uint_u.cs.val = cs_a;
    e.names.len = 2;
    e.names.val = names_a;
    e.hypers[0] = -1;
    e.hypers[1] = 1LL << 40;
    e.flags.len = 3;
    e.flags.val = flags_a;
    return e;
}

/* value_b(variant): the other union arms, no optional data, empty arrays and opaque data. */
static everything value_b(int variant) {
    everything e = value_a();
    e.maybe_point = NULL;
    e.list = NULL;
    e.prim.b = false;
    e.prim.c = RED;
    e.prim.f = -0.0f;
    e.prim.d = 1e300;
    e.r.which = RED;
    e.r.result_u.code = -42;
    if (variant == 0) {
        e.bi.kind = 1;
        e.bi.by_int_u.p = (point){11, -12};
    } else {
        e.bi.kind = NEG;
        e.bi.by_int_u.big = -(1LL << 62);
    }
    e.mt.present = false;
    e.bu.tag = 0;
    e.bu.by_uint_u.d = 3.25;
    e.data.len = 0;
    e.data.val = NULL;
    e.var_bytes.len = 5;
    e.var_bytes.val = (uint8_t *)"12345";
    e.who = "";
    e.note = "a note with spaces";
    e.names.len = 0;
    e.names.val = NULL;
    e.flags.len = 0;
    e.flags.val = NULL;
    e.many.len = 0;
    e.many.val = NULL;
    e.inners.len = 0;
    e.inners.val = NULL;
    return e;
}

static int same_bytes(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen) {
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static int same_str(const char *a, const char *b) {
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static void check_point(const char *what, point got, point want) {
    CHECK(got.x == want.x && got.y == want.y, "%s: (%d, %d), want (%d, %d)", what, got.x, got.y, want.x, want.y);
}

/* Every field of `got` against `want`. */
static void check_everything(const char *ctx, const everything *got, const everything *want) {
    const primitives *g = &got->prim, *w = &want->prim;
    CHECK(g->i == w->i, "%s: prim.i %d", ctx, g->i);
    CHECK(g->u == w->u, "%s: prim.u %u", ctx, g->u);
    CHECK(g->ushort_like == w->ushort_like, "%s: prim.ushort_like %u", ctx, g->ushort_like);
    CHECK(g->h == w->h, "%s: prim.h %lld", ctx, (long long)g->h);
    CHECK(g->uh == w->uh, "%s: prim.uh %llu", ctx, (unsigned long long)g->uh);
    CHECK(memcmp(&g->f, &w->f, sizeof g->f) == 0, "%s: prim.f %g", ctx, g->f);
    CHECK(memcmp(&g->d, &w->d, sizeof g->d) == 0, "%s: prim.d %g", ctx, g->d);
    CHECK(g->b == w->b, "%s: prim.b %d", ctx, g->b);
    CHECK(g->c == w->c, "%s: prim.c %d", ctx, g->c);
    CHECK(memcmp(got->h, want->h, 16) == 0, "%s: h", ctx);
    CHECK(same_bytes(got->data.val, got->data.len, want->data.val, want->data.len), "%s: data (%u bytes)", ctx, got->data.len);
    CHECK(memcmp(got->fixed_bytes, want->fixed_bytes, 3) == 0, "%s: fixed_bytes", ctx);
    CHECK(same_bytes(got->var_bytes.val, got->var_bytes.len, want->var_bytes.val, want->var_bytes.len), "%s: var_bytes", ctx);
    CHECK(same_str(got->who, want->who), "%s: who '%s'", ctx, got->who ? got->who : "(null)");
    CHECK(same_str(got->note, want->note), "%s: note '%s'", ctx, got->note ? got->note : "(null)");
    for (int i = 0; i < 4; i++) CHECK(got->four[i] == want->four[i], "%s: four[%d] %d", ctx, i, got->four[i]);
    CHECK(got->many.len == want->many.len, "%s: many.len %u", ctx, got->many.len);
    for (uint32_t i = 0; i < got->many.len && i < want->many.len; i++)
        CHECK(got->many.val[i] == want->many.val[i], "%s: many[%u] %u", ctx, i, got->many.val[i]);
    check_point("corners[0]", got->corners[0], want->corners[0]);
    check_point("corners[1]", got->corners[1], want->corners[1]);
    CHECK(got->inners.len == want->inners.len, "%s: inners.len %u", ctx, got->inners.len);
    for (uint32_t i = 0; i < got->inners.len && i < want->inners.len; i++) {
        const inner *gi = &got->inners.val[i], *wi = &want->inners.val[i];
        check_point("inners[].corner", gi->corner, wi->corner);
        CHECK(gi->kind == wi->kind, "%s: inners[%u].kind %d", ctx, i, gi->kind);
        CHECK(same_bytes(gi->tag.val, gi->tag.len, wi->tag.val, wi->tag.len), "%s: inners[%u].tag", ctx, i);
    }
    CHECK((got->maybe_point == NULL) == (want->maybe_point == NULL), "%s: maybe_point presence", ctx);
    if (got->maybe_point && want->maybe_point) check_point("maybe_point", *got->maybe_point, *want->maybe_point);
    const node *gn = got->list, *wn = want->list;
    for (int i = 0; gn || wn; i++) {
        CHECK(gn && wn, "%s: list length differs at node %d", ctx, i);
        if (!gn || !wn) break;
        CHECK(gn->value == wn->value, "%s: list[%d] %d", ctx, i, gn->value);
        gn = gn->next;
        wn = wn->next;
    }
    CHECK(got->r.which == want->r.which, "%s: r.which %d", ctx, got->r.which);
    if (got->r.which == RED && want->r.which == RED)
        CHECK(got->r.result_u.code == want->r.result_u.code, "%s: r.code %d", ctx, got->r.result_u.code);
    if ((got->r.which == GREEN || got->r.which == BLUE) && got->r.which == want->r.which)
        CHECK(same_str(got->r.result_u.label, want->r.result_u.label), "%s: r.label", ctx);
    CHECK(got->bi.kind == want->bi.kind, "%s: bi.kind %d", ctx, got->bi.kind);
    if (got->bi.kind == want->bi.kind) {
        if (got->bi.kind == 1) check_point("bi.p", got->bi.by_int_u.p, want->bi.by_int_u.p);
        else if (got->bi.kind == NEG) CHECK(got->bi.by_int_u.big == want->bi.by_int_u.big, "%s: bi.big", ctx);
        else if (got->bi.kind != 2)
            CHECK(same_bytes(got->bi.by_int_u.raw.val, got->bi.by_int_u.raw.len, want->bi.by_int_u.raw.val, want->bi.by_int_u.raw.len),
                  "%s: bi.raw", ctx);
    }
    CHECK(got->mt.present == want->mt.present, "%s: mt.present", ctx);
    if (got->mt.present && want->mt.present) CHECK(same_str(got->mt.maybe_text_u.t, want->mt.maybe_text_u.t), "%s: mt.t", ctx);
    CHECK(got->bu.tag == want->bu.tag, "%s: bu.tag %u", ctx, got->bu.tag);
    if (got->bu.tag == 0 && want->bu.tag == 0) CHECK(got->bu.by_uint_u.d == want->bu.by_uint_u.d, "%s: bu.d", ctx);
    if (got->bu.tag == 7 && want->bu.tag == 7) {
        CHECK(got->bu.by_uint_u.cs.len == want->bu.by_uint_u.cs.len, "%s: bu.cs.len", ctx);
        for (uint32_t i = 0; i < got->bu.by_uint_u.cs.len && i < want->bu.by_uint_u.cs.len; i++)
            CHECK(got->bu.by_uint_u.cs.val[i] == want->bu.by_uint_u.cs.val[i], "%s: bu.cs[%u]", ctx, i);
    }
    CHECK(got->names.len == want->names.len, "%s: names.len %u", ctx, got->names.len);
    for (uint32_t i = 0; i < got->names.len && i < want->names.len; i++)
        CHECK(same_str(got->names.val[i], want->names.val[i]), "%s: names[%u]", ctx, i);
    CHECK(got->hypers[0] == want->hypers[0] && got->hypers[1] == want->hypers[1], "%s: hypers", ctx);
    CHECK(got->flags.len == want->flags.len, "%s: flags.len %u", ctx, got->flags.len);
    for (uint32_t i = 0; i < got->flags.len && i < want->flags.len; i++)
        CHECK(got->flags.val[i] == want->flags.val[i], "%s: flags[%u]", ctx, i);
}
