/*
 * ONC RPC peer built with rpcgen and libtirpc, over UDP or TCP. Stubs and XDR routines come from
 * peer.x through rpcgen; this file holds only what rpcgen would not do for us: fixed ports (so no
 * rpcbind is needed), pinning, timing and a server loop that stops cleanly on SIGTERM.
 *
 * Addresses: udp://IPV4:PORT or tcp://IPV4:PORT. A client given port 0 asks rpcbind instead.
 */
#include "peer_common.h"
#include "peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rpc/pmap_clnt.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Large enough for any echo that fits in one UDP datagram. */
#define ONC_UDP_BUF 65000

/* The dispatcher rpcgen generates (-m) for peer.x. */
void lowlat_peer_prog_1(struct svc_req *rqstp, SVCXPRT *transp);

static volatile sig_atomic_t stop_requested;

static void on_term(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* The procedure: answer with the argument's own bytes, encoded before rpcgen's code frees them. */
peer_bytes *echo_1_svc(peer_bytes *arg, struct svc_req *req)
{
    static peer_bytes result;
    (void)req;
    result = *arg;
    return &result;
}

struct onc_addr {
    int tcp;
    struct sockaddr_in sin;
};

static int parse_addr(const char *addr, struct onc_addr *out)
{
    const char *rest;
    char host[64];
    const char *colon;
    long port = 0;
    size_t hlen;

    memset(out, 0, sizeof(*out));
    if ((rest = peer_strip_scheme(addr, "udp")) != NULL) {
        out->tcp = 0;
    } else if ((rest = peer_strip_scheme(addr, "tcp")) != NULL) {
        out->tcp = 1;
    } else {
        return 0;
    }
    colon = strrchr(rest, ':');
    hlen = colon ? (size_t)(colon - rest) : strlen(rest);
    if (hlen == 0 || hlen >= sizeof(host))
        return 0;
    memcpy(host, rest, hlen);
    host[hlen] = '\0';
    if (colon && (port = peer_parse_count(colon + 1, 65535)) < 0)
        return 0;
    out->sin.sin_family = AF_INET;
    out->sin.sin_port = htons((unsigned short)port);
    return inet_pton(AF_INET, host, &out->sin.sin_addr) == 1;
}

/* True when an rpcbind listens on its local socket; asking it otherwise can block for a minute. */
static int rpcbind_running(void)
{
    static const char *paths[] = {"/run/rpcbind.sock", "/var/run/rpcbind.sock"};
    size_t i;
    for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        struct sockaddr_un sun;
        int fd = socket(AF_UNIX, SOCK_STREAM, 0), ok;
        if (fd < 0)
            return 0;
        memset(&sun, 0, sizeof(sun));
        sun.sun_family = AF_UNIX;
        strncpy(sun.sun_path, paths[i], sizeof(sun.sun_path) - 1);
        ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
        close(fd);
        if (ok)
            return 1;
    }
    return 0;
}

static int serve(const struct onc_addr *addr)
{
    int fd, one = 1, registered = 0, rc = 0;
    SVCXPRT *xprt;
    struct sigaction sa;
    struct pollfd *fds = NULL;
    int nfds_cap = 0;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    if (ntohs(addr->sin.sin_port) == 0) {
        fprintf(stderr, "onc_peer: the server needs a fixed port\n");
        return 2;
    }
    fd = socket(AF_INET, addr->tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
    if (fd < 0) {
        perror("socket");
        return 1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&addr->sin, sizeof(addr->sin)) != 0) {
        perror("bind");
        close(fd);
        return 1;
    }
    if (addr->tcp) {
        if (listen(fd, 64) != 0) {
            perror("listen");
            close(fd);
            return 1;
        }
        xprt = svctcp_create(fd, 0, 0);
    } else {
        xprt = svcudp_bufcreate(fd, ONC_UDP_BUF, ONC_UDP_BUF);
    }
    if (xprt == NULL) {
        fprintf(stderr, "onc_peer: cannot create the %s service\n", addr->tcp ? "tcp" : "udp");
        close(fd);
        return 1;
    }
    /* Protocol 0: register the dispatcher without asking rpcbind, which may not be running. */
    if (!svc_register(xprt, LOWLAT_PEER_PROG, LOWLAT_PEER_VERS, lowlat_peer_prog_1, 0)) {
        fprintf(stderr, "onc_peer: svc_register failed\n");
        svc_destroy(xprt);
        return 1;
    }
    if (rpcbind_running()) {
        registered = pmap_set(LOWLAT_PEER_PROG, LOWLAT_PEER_VERS,
                              addr->tcp ? IPPROTO_TCP : IPPROTO_UDP, ntohs(addr->sin.sin_port));
        if (!registered)
            fprintf(stderr, "onc_peer: rpcbind refused the registration; serving anyway\n");
    }
    peer_ready();

    /* svc_run() cannot be stopped from a signal handler, so poll with a short timeout instead. */
    while (!stop_requested) {
        int n, i;
        if (svc_max_pollfd > nfds_cap) {
            struct pollfd *grown =
                (struct pollfd *)realloc(fds, (size_t)svc_max_pollfd * sizeof(*fds));
            if (grown == NULL) {
                fprintf(stderr, "onc_peer: out of memory\n");
                rc = 1;
                break;
            }
            fds = grown;
            nfds_cap = svc_max_pollfd;
        }
        for (i = 0; i < svc_max_pollfd; i++)
            fds[i] = svc_pollfd[i];
        n = poll(fds, (nfds_t)svc_max_pollfd, 200);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("poll");
            rc = 1;
            break;
        }
        if (n > 0)
            svc_getreq_poll(fds, n);
    }
    if (registered)
        pmap_unset(LOWLAT_PEER_PROG, LOWLAT_PEER_VERS);
    svc_unregister(LOWLAT_PEER_PROG, LOWLAT_PEER_VERS);
    svc_destroy(xprt);
    free(fds);
    return rc;
}

static CLIENT *connect_client(const struct onc_addr *addr)
{
    struct sockaddr_in sin = addr->sin;
    struct timeval retry = {1, 0};
    int sock = RPC_ANYSOCK;
    char host[INET_ADDRSTRLEN];

    if (ntohs(sin.sin_port) == 0) {
        inet_ntop(AF_INET, &sin.sin_addr, host, sizeof(host));
        return clnt_create(host, LOWLAT_PEER_PROG, LOWLAT_PEER_VERS, addr->tcp ? "tcp" : "udp");
    }
    /* A nonzero port makes these skip rpcbind entirely. */
    if (addr->tcp)
        return clnttcp_create(&sin, LOWLAT_PEER_PROG, LOWLAT_PEER_VERS, &sock, 0, 0);
    return clntudp_bufcreate(&sin, LOWLAT_PEER_PROG, LOWLAT_PEER_VERS, retry, &sock, ONC_UDP_BUF,
                             ONC_UDP_BUF);
}

static int one_call(CLIENT *clnt, peer_bytes *arg)
{
    static struct timeval unused = {5, 0};
    peer_bytes *res;
    int ok;
    if (arg == NULL) {
        enum clnt_stat st =
            clnt_call(clnt, NULLPROC, (xdrproc_t)xdr_void, NULL, (xdrproc_t)xdr_void, NULL, unused);
        if (st != RPC_SUCCESS) {
            fprintf(stderr, "onc_peer: null call: %s\n", clnt_sperrno(st));
            return 0;
        }
        return 1;
    }
    res = echo_1(arg, clnt);
    if (res == NULL) {
        fprintf(stderr, "onc_peer: echo: %s\n", clnt_sperror(clnt, ""));
        return 0;
    }
    ok = res->peer_bytes_len == arg->peer_bytes_len &&
         memcmp(res->peer_bytes_val, arg->peer_bytes_val, arg->peer_bytes_len) == 0;
    if (!ok)
        fprintf(stderr, "onc_peer: echo returned %u bytes that differ from the %u sent\n",
                res->peer_bytes_len, arg->peer_bytes_len);
    xdr_free((xdrproc_t)xdr_peer_bytes, (char *)res);
    return ok;
}

static int client(const struct onc_addr *addr, const char *text, const struct peer_args *a)
{
    CLIENT *clnt = connect_client(addr);
    struct timeval total = {5, 0};
    peer_bytes arg, *argp = NULL;
    uint64_t *samples = (uint64_t *)malloc((size_t)a->calls * sizeof(uint64_t));
    uint64_t start, t0;
    long i;
    int rc = 1;

    arg.peer_bytes_len = (u_int)a->size;
    arg.peer_bytes_val = (char *)malloc((size_t)a->size + 1);
    if (clnt == NULL) {
        fprintf(stderr, "onc_peer: cannot reach %s: %s\n", text, clnt_spcreateerror(""));
        goto done;
    }
    if (samples == NULL || arg.peer_bytes_val == NULL) {
        fprintf(stderr, "onc_peer: out of memory\n");
        goto done;
    }
    for (i = 0; i < a->size; i++)
        arg.peer_bytes_val[i] = (char)('a' + i % 26);
    if (a->size > 0)
        argp = &arg;
    /* rpcgen's stubs wait 25 s; a dead server should fail the run sooner. */
    clnt_control(clnt, CLSET_TIMEOUT, (char *)&total);
    for (i = 0; i < a->warmup; i++)
        if (!one_call(clnt, argp))
            goto done;
    start = peer_now_ns();
    for (i = 0; i < a->calls; i++) {
        t0 = peer_now_ns();
        if (!one_call(clnt, argp))
            goto done;
        samples[i] = peer_now_ns() - t0;
    }
    peer_report("rpcgen", addr->tcp ? "tcp" : "udp", a, samples, peer_now_ns() - start);
    rc = 0;
done:
    if (clnt)
        clnt_destroy(clnt);
    free(arg.peer_bytes_val);
    free(samples);
    return rc;
}

int main(int argc, char **argv)
{
    struct peer_args a;
    struct onc_addr addr;
    const char *text;

    if (!peer_parse_args(argc, argv, &a))
        return 2;
    text = a.serve ? a.serve : a.connect;
    if (!parse_addr(text, &addr)) {
        fprintf(stderr, "onc_peer: address must be udp://IPV4:PORT or tcp://IPV4:PORT, got %s\n",
                text);
        return 2;
    }
    if (!peer_pin(a.cpu))
        return 1;
    return a.serve ? serve(&addr) : client(&addr, text, &a);
}
