// SPDX-License-Identifier: GPL-2.0-only
/*
 * Smallest SK_MSG program that calls an l7fast kfunc.  Whether the kernel
 * loads it is the answer the daemon needs: 6.1 verifies module kfunc calls
 * only for the program types the module registered (no socket programs).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "l7fast_kfuncs.h"

char LICENSE[] SEC("license") = "GPL";

SEC("sk_msg")
int l7fast_probe_sk_msg(struct sk_msg_md *msg)
{
	__u8 buf[8] = {};

	/* Only loaded after the module's BTF was found to export it. */
	return l7f_xxh64(buf, sizeof(buf), 0) ? SK_PASS : SK_DROP;
}
