/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Request/result layout shared by kfunc_test.bpf.c and kfunc_test.c.  The
 * user side fills the globals of the BPF object (req, in_buf, in2_buf),
 * triggers a program (BPF_PROG_TEST_RUN of the SYSCALL program, or a send()
 * through the SK_MSG program) and reads res/out_buf back.
 */
#ifndef L7F_KFUNC_TEST_H
#define L7F_KFUNC_TEST_H

#include <linux/types.h>
#include "l7fast_purebpf.h"

#define T_DATA_MAX	L7F_PB_MAX	/* longest input of one request */
#define T_BUF		(L7F_PB_BUF + 64)
#define T_MSG_LEN	64		/* bytes the SK_MSG data ops read */

enum t_op {
	T_OP_NOP,
	T_OP_ABI,
	T_OP_XXH32,
	T_OP_XXH64,
	T_OP_B64_DEC,
	T_OP_B64_ENC,
	T_OP_SHA256,
	T_OP_HMAC,
	T_OP_HMAC_VERIFY,	/* in = data, in2 = raw MAC */
	T_OP_JWS_HMAC,		/* in = signing input, in2 = base64url MAC */
	T_OP_SIG_VERIFY,	/* in = msg, in2 = raw signature; sleepable only */
	T_OP_JWS_SIG,		/* in = signing input, in2 = base64url sig */
	T_OP_REF_XXH64,		/* pure-BPF implementations */
	T_OP_REF_B64_DEC,
	T_OP_MSG_DATA,		/* SK_MSG only: kfuncs straight on msg->data */
	T_OP_BENCH,		/* run req.bench_op req.iters times, timed */
	__T_OP_MAX,
};

struct t_req {
	__u32 op;
	__u32 bench_op;
	__u32 key_id;
	__u32 flags;
	__u32 in_len;
	__u32 in2_len;
	__u32 out_len;
	__u32 iters;
	__u64 seed;
};

struct t_res {
	__s64 ret;
	__u64 val;		/* hash results */
	__u64 ns;		/* T_OP_BENCH: elapsed */
	__s64 msg_sha;		/* T_OP_MSG_DATA */
	__s64 msg_b64;
	__s64 msg_hmac;
	__u64 runs;		/* programs executed, to catch "never ran" */
};

#endif /* L7F_KFUNC_TEST_H */
