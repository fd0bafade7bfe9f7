// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test programs for l7fast.ko's kfuncs.  One dispatcher, instantiated in a
 * sleepable SYSCALL program (every kfunc, run through BPF_PROG_TEST_RUN)
 * and in an SK_MSG program (packet-path kfuncs, run by send() on a real
 * socket), so both contexts are checked with the same vectors.
 */
#include <linux/bpf.h>
#include <linux/errno.h>
#include <bpf/bpf_helpers.h>
#include "l7fast_kfuncs.h"
#include "kfunc_test.h"

char LICENSE[] SEC("license") = "GPL";

struct t_req req;
struct t_res res;
__u8 in_buf[T_BUF];
__u8 in2_buf[T_BUF];
__u8 out_buf[T_BUF];
__u8 scratch[T_BUF];

struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} t_socks SEC(".maps");

/* Decodes in2 (base64url, no padding as in JWS) into scratch. */
static __always_inline long t_decode_sig(__u32 len2)
{
	return l7f_b64url_decode(in2_buf, len2, scratch, T_DATA_MAX,
				 L7F_B64_PAD_FORBIDDEN);
}

static __always_inline long t_dispatch(__u32 op, const int sleepable)
{
	__u32 len = req.in_len, len2 = req.in2_len, olen = req.out_len;
	long n;

	if (len > T_DATA_MAX || len2 > T_DATA_MAX || olen > T_DATA_MAX)
		return -E2BIG;

	switch (op) {
	case T_OP_NOP:
		return 0;
	case T_OP_ABI:
		return l7f_abi_version();
	case T_OP_XXH32:
		res.val = l7f_xxh32(in_buf, len, (__u32)req.seed);
		return 0;
	case T_OP_XXH64:
		res.val = l7f_xxh64(in_buf, len, req.seed);
		return 0;
	case T_OP_B64_DEC:
		return l7f_b64url_decode(in_buf, len, out_buf, olen, req.flags);
	case T_OP_B64_ENC:
		return l7f_b64url_encode(in_buf, len, out_buf, olen, req.flags);
	case T_OP_SHA256:
		return l7f_sha256(in_buf, len, out_buf, olen);
	case T_OP_HMAC:
		return l7f_hmac(req.key_id, in_buf, len, out_buf, olen);
	case T_OP_HMAC_VERIFY:
		return l7f_hmac_verify(req.key_id, in_buf, len, in2_buf, len2);
	case T_OP_JWS_HMAC:
		n = t_decode_sig(len2);
		if (n < 0)
			return n;
		if (n > T_DATA_MAX)
			return -E2BIG;
		return l7f_hmac_verify(req.key_id, in_buf, len, scratch, n);
	case T_OP_REF_XXH64:
		res.val = l7f_pb_xxh64(in_buf, len, req.seed);
		return 0;
	case T_OP_REF_B64_DEC:
		return l7f_pb_b64url_decode(in_buf, len, out_buf,
					    olen < L7F_PB_DST_BUF ? olen :
					    L7F_PB_DST_BUF, req.flags);
	}
	if (sleepable) {
		switch (op) {
		case T_OP_SIG_VERIFY:
			return l7f_sig_verify(req.key_id, in_buf, len, in2_buf,
					      len2);
		case T_OP_JWS_SIG:
			n = t_decode_sig(len2);
			if (n < 0)
				return n;
			if (n > T_DATA_MAX)
				return -E2BIG;
			return l7f_sig_verify(req.key_id, in_buf, len, scratch,
					      n);
		}
	}
	return -EOPNOTSUPP;
}

static long t_bench_cb(__u32 i, void *ctx)
{
	long ret = t_dispatch(req.bench_op, 1);

	if (ret < 0) {
		res.ret = ret;
		return 1;
	}
	return 0;
}

SEC("syscall")
int l7f_test_syscall(void *ctx)
{
	__u64 t0;

	res.runs++;
	if (req.op != T_OP_BENCH) {
		res.ret = t_dispatch(req.op, 1);
		return 0;
	}
	res.ret = 0;
	t0 = bpf_ktime_get_ns();
	bpf_loop(req.iters, t_bench_cb, NULL, 0);
	res.ns = bpf_ktime_get_ns() - t0;
	return 0;
}

SEC("sk_msg")
int l7f_test_msg(struct sk_msg_md *msg)
{
	void *data, *end;

	res.runs++;
	if (req.op != T_OP_MSG_DATA) {
		res.ret = t_dispatch(req.op, 0);
		return SK_PASS;
	}
	/* msg->data covers only the first scatterlist entry. */
	if (bpf_msg_pull_data(msg, 0, T_MSG_LEN, 0)) {
		res.ret = -EFAULT;
		return SK_PASS;
	}
	data = msg->data;
	end = msg->data_end;
	if (data + T_MSG_LEN > end) {
		res.ret = -EFAULT;
		return SK_PASS;
	}
	res.val = l7f_xxh64(data, T_MSG_LEN, req.seed);
	res.msg_sha = l7f_sha256(data, T_MSG_LEN, out_buf, L7F_SHA256_LEN);
	res.msg_hmac = l7f_hmac(req.key_id, data, T_MSG_LEN, out_buf + 32,
				L7F_HMAC_MAX_LEN);
	res.msg_b64 = l7f_b64url_decode(data, T_MSG_LEN, scratch, T_MSG_LEN,
					L7F_B64_PAD_FORBIDDEN);
	res.ret = 0;
	return SK_PASS;
}
