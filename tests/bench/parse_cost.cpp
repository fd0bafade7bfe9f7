// l7fast-parse-cost: nanoseconds per head of the data plane's HTTP parser as
// the kernel runs it (tests/bench/bpf/parse_cost.bpf.c), for the heads the
// benchmark sends and receives. Needs root (BPF).
//
//   l7fast-parse-cost [ITERATIONS]     (default 5000 per batch, 15 batches)
//
// Prints, per head, ns per parse with the fast stages (what the data plane
// runs) and with the strict stages alone: the fastest batch, the one least
// disturbed by the rest of the machine (the program can be preempted).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "l7_http.h"
#include "parse_cost.skel.h"

namespace {

struct Head {
    const char* name;
    bool is_request;
    std::string bytes;
};

// The benchmark's request (scripts/bench/l7bench/scenarios.py, standard
// policy) and the benchmark backend's answer (nginx `return 200 "ok\n"`).
const Head kHeads[] = {
    {"request (bench, 5 fields)", true,
     "GET /svc0009/item HTTP/1.1\r\nHost: bench.example\r\nUser-Agent: wrk\r\nAccept: */*\r\n"
     "X-Tenant: gold\r\nX-User: alice\r\n\r\n"},
    {"request (curl, 3 fields)", true,
     "GET /api/v1/items?id=7 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: curl/7.88.1\r\n"
     "Accept: */*\r\n\r\n"},
    {"response (nginx, 5 fields)", false,
     "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Wed, 02 Dec 2026 01:52:13 GMT\r\n"
     "Content-Type: text/plain\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nok\n"},
    {"response (chunked, 3 fields)", false,
     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
     "Connection: keep-alive\r\n\r\n"},
};

double ns_per_parse(parse_cost_bpf* skel, const Head& h, bool strict, unsigned iters, int& status)
{
    std::memcpy(skel->bss->ws_mem + offsetof(l7_ws, buf), h.bytes.data(), h.bytes.size());
    struct {
        __u32 is_request, len, iters, strict;
    } args{h.is_request, static_cast<__u32>(h.bytes.size()), iters, strict};
    std::vector<double> batches;
    for (int b = 0; b < 15; b++) {
        LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &args, .ctx_size_in = sizeof args);
        if (bpf_prog_test_run_opts(bpf_program__fd(skel->progs.parse_cost), &opts) || opts.retval) {
            std::fprintf(stderr, "l7fast-parse-cost: test run failed: %s\n", std::strerror(errno));
            std::exit(1);
        }
        batches.push_back(static_cast<double>(skel->bss->elapsed_ns) / iters);
    }
    status = skel->bss->status;
    return *std::min_element(batches.begin(), batches.end());
}

}  // namespace

int main(int argc, char** argv)
{
    unsigned iters = argc > 1 ? static_cast<unsigned>(std::strtoul(argv[1], nullptr, 10)) : 5000;
    if (!iters) {
        std::fprintf(stderr, "usage: l7fast-parse-cost [ITERATIONS]\n");
        return 2;
    }
    parse_cost_bpf* skel = parse_cost_bpf__open_and_load();
    if (!skel) {
        std::fprintf(stderr, "l7fast-parse-cost: cannot load the BPF parser (%s); needs root and BPF\n",
                     std::strerror(errno));
        return 1;
    }
    std::printf("%-30s %6s %10s %10s\n", "head", "bytes", "fast ns", "strict ns");
    int rc = 0;
    for (const Head& h : kHeads) {
        int st_fast = 0, st_strict = 0;
        double fast = ns_per_parse(skel, h, false, iters, st_fast);
        double strict = ns_per_parse(skel, h, true, iters, st_strict);
        std::printf("%-30s %6zu %10.0f %10.0f\n", h.name, h.bytes.size(), fast, strict);
        if (st_fast != L7_P_OK || st_strict != L7_P_OK) {
            std::fprintf(stderr, "l7fast-parse-cost: %s did not parse (%d/%d)\n", h.name, st_fast, st_strict);
            rc = 1;
        }
    }
    parse_cost_bpf__destroy(skel);
    return rc;
}
