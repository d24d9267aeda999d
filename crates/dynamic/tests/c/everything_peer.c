/*
 * The rpcgen/libtirpc side of lowlat's ONC RPC interop tests for idl/examples/everything.x,
 * built at test time from rpcgen's output (-N -m: stubs and dispatchers, no main).
 *
 *   everything_peer serve udp|tcp        serve versions 1 and 2 on 127.0.0.1, an ephemeral
 *                                        port printed on the first line; no rpcbind needed;
 *                                        stops when stdin closes
 *   everything_peer call udp|tcp PORT [sys]
 *                                        call every procedure of both versions of a server at
 *                                        127.0.0.1:PORT and check every field of every result;
 *                                        prints "ok" and exits 0, or says what differed; with
 *                                        "sys", every call carries AUTH_SYS credentials
 *
 * Semantics (the lowlat side implements the same): ROUNDTRIP returns its argument; ADD a + b;
 * CONCAT a then b; GREET "hello, " + who; LOOKUP(key, hint): RED -> code = strlen(key), GREEN
 * and BLUE -> label = key, anything else -> the void default arm; REVERSE reverses the list.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "everything.h"

void everything_prog_1(struct svc_req *rqstp, SVCXPRT *transp);
void everything_prog_2(struct svc_req *rqstp, SVCXPRT *transp);

/* ---- server procedures ---- */

void *ping_1_svc(struct svc_req *req) { static char dummy; (void)req; return &dummy; }
void *ping_2_svc(struct svc_req *req) { static char dummy; (void)req; return &dummy; }

everything *roundtrip_1_svc(everything arg, struct svc_req *req) {
    /* Sent before rpcgen's dispatcher frees the arguments, so a shallow copy will do. */
    static everything res;
    (void)req;
    res = arg;
    return &res;
}

int *add_1_svc(int a, int b, struct svc_req *req) { static int r; (void)req; r = a + b; return &r; }

blob *concat_1_svc(blob a, blob b, struct svc_req *req) {
    static blob r;
    static char buf[1 << 20];
    (void)req;
    if (a.blob_len + b.blob_len > sizeof buf) { r.blob_len = 0; r.blob_val = buf; return &r; }
    memcpy(buf, a.blob_val, a.blob_len);
    memcpy(buf + a.blob_len, b.blob_val, b.blob_len);
    r.blob_len = a.blob_len + b.blob_len;
    r.blob_val = buf;
    return &r;
}

text *greet_1_svc(text who, struct svc_req *req) {
    static char buf[1 << 16];
    static text r;
    (void)req;
    snprintf(buf, sizeof buf, "hello, %s", who);
    r = buf;
    return &r;
}

result *lookup_1_svc(name key, color hint, struct svc_req *req) {
    static result r;
    static char label[MAXNAME + 1];
    (void)req;
    memset(&r, 0, sizeof r);
    r.which = hint;
    if (hint == RED) {
        r.result_u.code = (int)strlen(key);
    } else if (hint == GREEN || hint == BLUE) {
        snprintf(label, sizeof label, "%s", key);
        r.result_u.label = label;
    }
    return &r;
}

node *reverse_2_svc(node arg, struct svc_req *req) {
    static node head;
    static node pool[4096];
    (void)req;
    /* Walk the list (the first node is `arg` itself) and rebuild it backwards in `pool`. */
    int n = 0;
    node *prev = NULL;
    for (node *p = &arg; p != NULL && n < 4096; p = p->next) {
        pool[n].value = p->value;
        pool[n].next = prev;
        prev = &pool[n];
        n++;
    }
    head = *prev;
    return &head;
}

int everything_prog_1_freeresult(SVCXPRT *t, xdrproc_t f, caddr_t r) { (void)t; (void)f; (void)r; return 1; }
int everything_prog_2_freeresult(SVCXPRT *t, xdrproc_t f, caddr_t r) { (void)t; (void)f; (void)r; return 1; }

static int serve(int tcp) {
    int fd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof sin) != 0) { perror("bind"); return 1; }
    if (tcp && listen(fd, 64) != 0) { perror("listen"); return 1; }
    getsockname(fd, (struct sockaddr *)&sin, &len);
    SVCXPRT *x = tcp ? svctcp_create(fd, 0, 0) : svcudp_bufcreate(fd, 65536, 65536);
    if (x == NULL) { fprintf(stderr, "everything_peer: cannot create transport\n"); return 1; }
    /* Protocol 0: do not register with rpcbind; the test gives the port directly. */
    if (!svc_register(x, EVERYTHING_PROG, EVERYTHING_V1, everything_prog_1, 0) ||
        !svc_register(x, EVERYTHING_PROG, EVERYTHING_V2, everything_prog_2, 0)) {
        fprintf(stderr, "everything_peer: svc_register failed\n");
        return 1;
    }
    printf("%d\n", ntohs(sin.sin_port));
    fflush(stdout);
    struct pollfd fds[1024];
    for (;;) {
        int n = svc_max_pollfd < 1023 ? svc_max_pollfd : 1023;
        for (int i = 0; i < n; i++) fds[i] = svc_pollfd[i];
        fds[n].fd = 0; fds[n].events = POLLIN; fds[n].revents = 0;
        int r = poll(fds, (nfds_t)n + 1, 1000);
        if (r < 0) continue;
        if (fds[n].revents) {
            char c;
            if (read(0, &c, 1) <= 0) break; /* stdin closed: the test is done */
        }
        if (r > 0) svc_getreq_poll(fds, r);
    }
    return 0;
}

/* ---- client ---- */

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static char enc_a[1 << 20], enc_b[1 << 20];

/* Byte-exact comparison through XDR: equal encodings mean every field is equal. */
static int same(xdrproc_t proc, void *a, void *b) {
    XDR xa, xb;
    xdrmem_create(&xa, enc_a, sizeof enc_a, XDR_ENCODE);
    xdrmem_create(&xb, enc_b, sizeof enc_b, XDR_ENCODE);
    if (!proc(&xa, a) || !proc(&xb, b)) return 0;
    return xdr_getpos(&xa) == xdr_getpos(&xb) && memcmp(enc_a, enc_b, xdr_getpos(&xa)) == 0;
}

static void value_a(everything *e) {
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
    memset(e, 0, sizeof *e);
    e->prim.i = -7; e->prim.u = 4000000000u; e->prim.ushort_like = 65535;
    e->prim.h = -1234567890123LL; e->prim.uh = 18000000000000000000ULL;
    e->prim.f = 1.5f; e->prim.d = -2.25; e->prim.b = TRUE; e->prim.c = INFRA;
    for (int i = 0; i < 16; i++) e->h[i] = (char)i;
    e->data.blob_len = 5; e->data.blob_val = data;
    memcpy(e->fixed_bytes, "xyz", 3);
    e->var_bytes.var_bytes_len = 2; e->var_bytes.var_bytes_val = vb;
    e->who = "alice"; e->note = "";
    e->four[0] = 1; e->four[1] = -2; e->four[2] = 3; e->four[3] = -4;
    e->many.counts_len = 3; e->many.counts_val = many;
    e->corners[0].x = 1; e->corners[0].y = 2; e->corners[1].x = 3; e->corners[1].y = 4;
    inners[0].corner.x = 5; inners[0].corner.y = 6; inners[0].kind = SQUARE;
    inners[1].corner.x = -1; inners[1].corner.y = -1; inners[1].kind = TRIANGLE;
    inners[1].tag.small_blob_len = 8; inners[1].tag.small_blob_val = tag1;
    e->inners.inners_len = 2; e->inners.inners_val = inners;
    e->maybe_point = &mp; e->list = &n1;
    e->r.which = GREEN; e->r.result_u.label = "green";
    e->bi.kind = 99; e->bi.by_int_u.raw.raw_len = 3; e->bi.by_int_u.raw.raw_val = raw;
    e->mt.present = TRUE; e->mt.maybe_text_u.t = "hello";
    e->bu.tag = 7; e->bu.by_uint_u.cs.counts_len = 2; e->bu.by_uint_u.cs.counts_val = cs;
    e->names.names_len = 2; e->names.names_val = names;
    e->hypers[0] = -1; e->hypers[1] = 1LL << 40;
    e->flags.flags_len = 3; e->flags.flags_val = flags;
}

/* The other arms: no optional data, RED code, by_int point / NEG hyper, FALSE, double. */
static void value_b(everything *e, int variant) {
    value_a(e);
    e->maybe_point = NULL; e->list = NULL;
    e->prim.b = FALSE; e->prim.c = RED; e->prim.f = -0.0f; e->prim.d = 1e300;
    e->r.which = RED; e->r.result_u.code = -42;
    if (variant == 0) { e->bi.kind = 1; e->bi.by_int_u.p.x = 11; e->bi.by_int_u.p.y = -12; }
    else { e->bi.kind = NEG; e->bi.by_int_u.big = -(1LL << 62); }
    e->mt.present = FALSE;
    e->bu.tag = 0; e->bu.by_uint_u.d = 3.25;
    e->data.blob_len = 0; e->var_bytes.var_bytes_len = 5; e->var_bytes.var_bytes_val = "12345";
    e->who = ""; e->note = "a note with spaces";
    e->names.names_len = 0; e->flags.flags_len = 0; e->many.counts_len = 0; e->inners.inners_len = 0;
}

static int call(int tcp, int port, int sys) {
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons((unsigned short)port);
    struct timeval wait = {1, 0}, total = {5, 0};
    for (int vers = 1; vers <= 2; vers++) {
        int sock = RPC_ANYSOCK;
        CLIENT *c = tcp ? clnttcp_create(&sin, EVERYTHING_PROG, vers, &sock, 0, 0)
                        : clntudp_create(&sin, EVERYTHING_PROG, vers, wait, &sock);
        if (c == NULL) { clnt_pcreateerror("everything_peer"); return 1; }
        clnt_control(c, CLSET_TIMEOUT, (char *)&total);
        if (sys) {
            auth_destroy(c->cl_auth);
            c->cl_auth = authsys_create_default();
        }
        if (vers == 1) {
            CHECK(ping_1(c) != NULL, "PING: %s", clnt_sperror(c, "v1"));
            everything e;
            for (int k = 0; k < 3; k++) {
                if (k == 0) value_a(&e); else value_b(&e, k - 1);
                everything *r = roundtrip_1(e, c);
                CHECK(r != NULL, "ROUNDTRIP %d: %s", k, clnt_sperror(c, "v1"));
                if (r == NULL) continue;
                CHECK(r->prim.i == e.prim.i && r->prim.uh == e.prim.uh && r->prim.d == e.prim.d,
                      "ROUNDTRIP %d: primitives differ", k);
                CHECK(same((xdrproc_t)xdr_everything, &e, r), "ROUNDTRIP %d: some field differs", k);
                xdr_free((xdrproc_t)xdr_everything, (char *)r);
            }
            int *sum = add_1(7, -3, c);
            CHECK(sum != NULL && *sum == 4, "ADD(7, -3) != 4");
            blob a = {2, "ab"}, b = {3, "xyz"};
            blob *cat = concat_1(a, b, c);
            CHECK(cat != NULL && cat->blob_len == 5 && memcmp(cat->blob_val, "abxyz", 5) == 0, "CONCAT");
            if (cat) xdr_free((xdrproc_t)xdr_blob, (char *)cat);
            text *g = greet_1("bob", c);
            CHECK(g != NULL && strcmp(*g, "hello, bob") == 0, "GREET: got %s", g ? *g : "(null)");
            if (g) xdr_free((xdrproc_t)xdr_text, (char *)g);
            result *l = lookup_1("key", BLUE, c);
            CHECK(l != NULL && l->which == BLUE && strcmp(l->result_u.label, "key") == 0, "LOOKUP BLUE");
            if (l) xdr_free((xdrproc_t)xdr_result, (char *)l);
            l = lookup_1("four", RED, c);
            CHECK(l != NULL && l->which == RED && l->result_u.code == 4, "LOOKUP RED");
            if (l) xdr_free((xdrproc_t)xdr_result, (char *)l);
            l = lookup_1("x", INFRA, c);
            CHECK(l != NULL && l->which == INFRA, "LOOKUP INFRA");
            if (l) xdr_free((xdrproc_t)xdr_result, (char *)l);
        } else {
            CHECK(ping_2(c) != NULL, "PING v2: %s", clnt_sperror(c, "v2"));
            node n3 = {30, NULL}, n2 = {20, &n3}, n1 = {10, &n2};
            node *r = reverse_2(n1, c);
            CHECK(r != NULL && r->value == 30 && r->next && r->next->value == 20 && r->next->next &&
                      r->next->next->value == 10 && r->next->next->next == NULL,
                  "REVERSE");
            if (r) xdr_free((xdrproc_t)xdr_node, (char *)r);
        }
        clnt_destroy(c);
    }
    if (failures) return 1;
    printf("ok\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "serve") == 0) return serve(strcmp(argv[2], "tcp") == 0);
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "call") == 0)
        return call(strcmp(argv[2], "tcp") == 0, atoi(argv[3]), argc == 5 && strcmp(argv[4], "sys") == 0);
    fprintf(stderr, "usage: everything_peer serve udp|tcp | call udp|tcp PORT [sys]\n");
    return 2;
}
