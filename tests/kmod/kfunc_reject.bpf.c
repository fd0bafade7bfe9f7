// SPDX-License-Identifier: GPL-2.0-only
/*
 * Must NOT load: a non-sleepable program (TC, so the check runs on 6.1 as
 * well) calling the sleepable signature kfunc.  kfunc_test expects the
 * verifier to refuse it, which is what keeps RSA/ECDSA off the packet path.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "l7fast_kfuncs.h"

char LICENSE[] SEC("license") = "GPL";

SEC("tc")
int l7f_reject_sleepable_in_tc(struct __sk_buff *skb)
{
	__u8 msg[8] = {}, sig[64] = {};

	if (l7f_sig_verify(0, msg, sizeof(msg), sig, sizeof(sig)))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}
