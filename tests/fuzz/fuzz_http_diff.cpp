// Differential: the HTTP parser and chunk framer as the kernel runs them —
// compiled with -target bpf, verified and executed by this kernel
// (bpf/fuzz_parse.bpf.c, a BPF_PROG_TYPE_SYSCALL program run with
// bpf_prog_test_run_opts) — against the same source compiled natively with
// the kernel's window (native_window.c), field by field; and that native
// build against the slow path's parser (proxy::parse_head, 64 KiB window)
// on inputs that fit the kernel's window.
//
// Input: one control byte (bit 0: response), then the message. Needs root
// (BPF); the unit-test replay does not run this target.
//
// Neither side clears its workspace between inputs, on purpose: a parser
// that read stale bytes or stale line/header entries would disagree.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#include "FuzzTarget.hpp"
#include "l7_http.h"
#include "parse_diff.h"
#include "native_window.h"
#include "proxy/Http.hpp"

// the skeleton is C; its .bss type is struct fuzz_parse_bpf__bss
#include "fuzz_parse.skel.h"

namespace l7fast::fuzz {
namespace {

struct Bpf {
    fuzz_parse_bpf* skel = nullptr;
    int prog_fd = -1;

    Bpf()
    {
        skel = fuzz_parse_bpf__open_and_load();
        if (!skel) {
            fprintf(stderr, "fuzz_http_diff: cannot load the BPF parser (%s); this target needs root and BPF\n",
                    strerror(errno));
            abort();
        }
        prog_fd = bpf_program__fd(skel->progs.fuzz_parse);
    }
    ~Bpf() { fuzz_parse_bpf__destroy(skel); }
};

Bpf& bpf()
{
    static Bpf b;
    return b;
}

#define SAME(field) FUZZ_CHECK(a.field == b.field)

void same_msg(const l7_msg& a, const l7_msg& b, int status)
{
    SAME(status);
    SAME(error);
    if (status == L7_P_MORE)
        return;  // nothing but the status is promised
    SAME(method);
    SAME(version);
    SAME(hdr_len);
    SAME(flags);
    SAME(target_off);
    SAME(target_len);
    SAME(path_off);
    SAME(path_len);
    SAME(auth_off);
    SAME(auth_len);
    SAME(auth_host_len);
    SAME(host_idx);
    SAME(host_len);
    SAME(n_lines);
    SAME(n_hdrs);
    SAME(body_kind);
    SAME(content_length);
    if (status != L7_P_OK)
        return;
    FUZZ_CHECK(a.n_lines <= L7_MAX_LINES && a.n_hdrs <= L7_MAX_HEADERS);
    for (uint32_t i = 0; i < a.n_lines; i++)
        SAME(line_end[i]);
    for (uint32_t i = 0; i < a.n_hdrs; i++) {
        SAME(hdr[i].name_off);
        SAME(hdr[i].name_len);
        SAME(hdr[i].val_off);
        SAME(hdr[i].val_len);
        SAME(hdr[i].name_hash);
    }
}

void same_frame(const fuzz_frame& a, const fuzz_frame& b, bool framed)
{
    SAME(parse_status);
    SAME(frame_error);
    SAME(frame_consumed);
    if (a.frame_error || !framed)
        return;
    SAME(body.done);
    SAME(body.phase);
    SAME(body.remaining);
    SAME(body.digits);
    SAME(body.line);
}

}  // namespace

int http_diff(const uint8_t* data, size_t size)
{
    if (size < 1)
        return 0;
    const int is_request = !(data[0] & 1);
    const uint8_t* msg = data + 1;
    const uint32_t len = static_cast<uint32_t>(std::min<size_t>(size - 1, L7_SCRATCH_SIZE));

    // the kernel
    Bpf& k = bpf();
    uint8_t* ws_mem = k.skel->bss->ws_mem;
    static_assert(offsetof(l7_ws, msg) == 0);
    memcpy(ws_mem + offsetof(l7_ws, buf), msg, len);
    fuzz_parse_args args{static_cast<__u32>(is_request), len};
    LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &args, .ctx_size_in = sizeof args);
    const int err = bpf_prog_test_run_opts(k.prog_fd, &opts);
    FUZZ_CHECK(err == 0 && opts.retval == 0);
    const fuzz_frame kernel_frame = k.skel->bss->out;
    l7_msg kernel_msg;
    memcpy(&kernel_msg, ws_mem, sizeof kernel_msg);

    // the same source, native, same window
    fuzz_frame native_frame{};
    const l7_msg& native_msg = *native_window_parse(msg, len, is_request, &native_frame);

    FUZZ_CHECK(kernel_frame.parse_status == native_frame.parse_status);
    same_msg(kernel_msg, native_msg, kernel_frame.parse_status);
    same_frame(kernel_frame, native_frame,
               native_frame.parse_status == L7_P_OK && native_msg.body_kind == L7_BODY_CHUNKED);

    // the slow path's parser agrees on every input the kernel window holds
    // whole (at L7_SCRATCH_SIZE the kernel gives up with 431: too big)
    if (size - 1 < L7_SCRATCH_SIZE) {
        l7_msg slow{};
        const int st = proxy::parse_head({reinterpret_cast<const char*>(msg), len}, is_request, &slow);
        FUZZ_CHECK(st == native_frame.parse_status);
        same_msg(slow, native_msg, st);
    }
    return 0;
}

}  // namespace l7fast::fuzz

L7FAST_FUZZ_ENTRY(http_diff)
