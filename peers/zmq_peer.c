/*
 * ZeroMQ REQ/REP peer over tcp:// or ipc://. The server echoes every message as it came; a null
 * call is an empty message and gets an empty reply.
 */
#include "peer_common.h"

#include <signal.h>
#include <unistd.h>
#include <zmq.h>

static volatile sig_atomic_t stop_requested;

static void on_term(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static const char *transport_of(const char *addr)
{
    if (peer_strip_scheme(addr, "tcp"))
        return "tcp";
    if (peer_strip_scheme(addr, "ipc"))
        return "ipc";
    return NULL;
}

static int serve(void *ctx, const char *addr)
{
    void *sock = zmq_socket(ctx, ZMQ_REP);
    int linger = 0;
    /* SIGTERM may land on one of zmq's own threads, leaving this one asleep in its receive:
     * it wakes to look at the flag this often. */
    int look_ms = 100;
    struct sigaction sa;
    zmq_msg_t msg;
    int rc = 0;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term; /* no SA_RESTART: zmq_msg_recv must return EINTR on SIGTERM */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    if (sock == NULL) {
        fprintf(stderr, "zmq_socket: %s\n", zmq_strerror(zmq_errno()));
        return 1;
    }
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &look_ms, sizeof(look_ms));
    if (zmq_bind(sock, addr) != 0) {
        fprintf(stderr, "zmq_bind(%s): %s\n", addr, zmq_strerror(zmq_errno()));
        zmq_close(sock);
        return 1;
    }
    peer_ready();
    zmq_msg_init(&msg);
    while (!stop_requested) {
        if (zmq_msg_recv(&msg, sock, 0) < 0) {
            if (zmq_errno() == EINTR || zmq_errno() == EAGAIN)
                continue;
            fprintf(stderr, "zmq_msg_recv: %s\n", zmq_strerror(zmq_errno()));
            rc = 1;
            break;
        }
        /* Sending the received message back moves it: no copy of the payload. */
        if (zmq_msg_send(&msg, sock, 0) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            fprintf(stderr, "zmq_msg_send: %s\n", zmq_strerror(zmq_errno()));
            rc = 1;
            break;
        }
    }
    zmq_msg_close(&msg);
    zmq_close(sock);
    return rc;
}

static int one_call(void *sock, const char *out, char *in, size_t size)
{
    int n;
    if (zmq_send(sock, out, size, 0) != (int)size) {
        fprintf(stderr, "zmq_send: %s\n", zmq_strerror(zmq_errno()));
        return 0;
    }
    n = zmq_recv(sock, in, size > 0 ? size : 1, 0);
    if (n < 0) {
        fprintf(stderr, "zmq_recv: %s\n",
                zmq_errno() == EAGAIN ? "no reply within 5 s" : zmq_strerror(zmq_errno()));
        return 0;
    }
    if ((size_t)n != size || (size > 0 && memcmp(out, in, size) != 0)) {
        fprintf(stderr, "zmq: reply of %d bytes does not match the %zu sent\n", n, size);
        return 0;
    }
    return 1;
}

static int client(void *ctx, const char *addr, const struct peer_args *a)
{
    const char *transport = transport_of(addr);
    void *sock = zmq_socket(ctx, ZMQ_REQ);
    int timeout_ms = 5000, linger = 0;
    size_t size = (size_t)a->size;
    char *out = (char *)malloc(size + 1), *in = (char *)malloc(size + 1);
    uint64_t *samples = (uint64_t *)malloc((size_t)a->calls * sizeof(uint64_t));
    uint64_t start, t0, t1;
    long i;
    int rc = 1;

    if (sock == NULL || out == NULL || in == NULL || samples == NULL) {
        fprintf(stderr, "zmq client: out of memory or no socket\n");
        goto done;
    }
    for (i = 0; i < (long)size; i++)
        out[i] = (char)('a' + i % 26);
    /* Bounded waits: a dead server fails the run instead of hanging it. */
    zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout_ms, sizeof(timeout_ms));
    zmq_setsockopt(sock, ZMQ_SNDTIMEO, &timeout_ms, sizeof(timeout_ms));
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
    if (zmq_connect(sock, addr) != 0) {
        fprintf(stderr, "zmq_connect(%s): %s\n", addr, zmq_strerror(zmq_errno()));
        goto done;
    }
    for (i = 0; i < a->warmup; i++)
        if (!one_call(sock, out, in, size))
            goto done;
    start = peer_now_ns();
    for (i = 0; i < a->calls; i++) {
        t0 = peer_now_ns();
        if (!one_call(sock, out, in, size))
            goto done;
        t1 = peer_now_ns();
        samples[i] = t1 - t0;
    }
    peer_report("zeromq", transport, a, samples, peer_now_ns() - start);
    rc = 0;
done:
    if (sock)
        zmq_close(sock);
    free(out);
    free(in);
    free(samples);
    return rc;
}

int main(int argc, char **argv)
{
    struct peer_args a;
    const char *addr;
    void *ctx;
    int rc;

    if (!peer_parse_args(argc, argv, &a))
        return 2;
    addr = a.serve ? a.serve : a.connect;
    if (transport_of(addr) == NULL) {
        fprintf(stderr, "zmq_peer: address must be tcp://HOST:PORT or ipc://PATH, got %s\n", addr);
        return 2;
    }
    if (!peer_pin(a.cpu))
        return 1;
    ctx = zmq_ctx_new();
    if (ctx == NULL) {
        fprintf(stderr, "zmq_ctx_new: %s\n", zmq_strerror(zmq_errno()));
        return 1;
    }
    rc = a.serve ? serve(ctx, addr) : client(ctx, addr, &a);
    zmq_ctx_term(ctx);
    return rc;
}
