// gRPC C++ peer: unary Null and Echo over TCP loopback with the synchronous API, the way most
// services use gRPC. Address: tcp://HOST:PORT (or plain HOST:PORT).
#include "peer_common.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "peer.grpc.pb.h"

namespace {

class PeerService final : public lowlat::peer::Peer::Service {
    grpc::Status Null(grpc::ServerContext *, const lowlat::peer::Empty *,
                      lowlat::peer::Empty *) override
    {
        return grpc::Status::OK;
    }
    grpc::Status Echo(grpc::ServerContext *, const lowlat::peer::Bytes *req,
                      lowlat::peer::Bytes *resp) override
    {
        resp->set_data(req->data());
        return grpc::Status::OK;
    }
};

std::string target_of(const char *addr)
{
    const char *rest = peer_strip_scheme(addr, "tcp");
    return rest ? rest : addr;
}

int serve(const std::string &target)
{
    // Block the stop signals before gRPC starts its threads, so that they all inherit the mask
    // and only sigwait below ever sees SIGTERM.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);

    PeerService service;
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(target, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || port == 0) {
        fprintf(stderr, "grpc_peer: cannot listen on %s\n", target.c_str());
        return 1;
    }
    peer_ready();
    int sig = 0;
    sigwait(&stop, &sig);
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    return 0;
}

// Per-call deadline: a dead server fails the run instead of hanging it.
constexpr std::chrono::seconds kCallTimeout(5);

bool one_call(lowlat::peer::Peer::Stub &stub, size_t size, const lowlat::peer::Bytes &req,
              lowlat::peer::Bytes &resp)
{
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    grpc::Status st;
    if (size == 0) {
        lowlat::peer::Empty in, out;
        st = stub.Null(&ctx, in, &out);
    } else {
        st = stub.Echo(&ctx, req, &resp);
    }
    if (!st.ok()) {
        fprintf(stderr, "grpc_peer: call failed: %s\n", st.error_message().c_str());
        return false;
    }
    if (size > 0 && resp.data() != req.data()) {
        fprintf(stderr, "grpc_peer: echo returned %zu bytes that differ from the %zu sent\n",
                resp.data().size(), size);
        return false;
    }
    return true;
}

int client(const std::string &target, const peer_args &a)
{
    auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + kCallTimeout)) {
        fprintf(stderr, "grpc_peer: cannot connect to %s within 5 s\n", target.c_str());
        return 1;
    }
    auto stub = lowlat::peer::Peer::NewStub(channel);
    size_t size = static_cast<size_t>(a.size);
    lowlat::peer::Bytes req, resp;
    std::string payload(size, '\0');
    for (size_t i = 0; i < size; i++)
        payload[i] = static_cast<char>('a' + i % 26);
    req.set_data(payload);

    std::vector<uint64_t> samples(static_cast<size_t>(a.calls));
    for (long i = 0; i < a.warmup; i++)
        if (!one_call(*stub, size, req, resp))
            return 1;
    uint64_t start = peer_now_ns();
    for (long i = 0; i < a.calls; i++) {
        uint64_t t0 = peer_now_ns();
        if (!one_call(*stub, size, req, resp))
            return 1;
        samples[static_cast<size_t>(i)] = peer_now_ns() - t0;
    }
    peer_report("grpc", "tcp", &a, samples.data(), peer_now_ns() - start);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    peer_args a;
    if (!peer_parse_args(argc, argv, &a))
        return 2;
    if (!peer_pin(a.cpu))
        return 1;
    return a.serve ? serve(target_of(a.serve)) : client(target_of(a.connect), a);
}
