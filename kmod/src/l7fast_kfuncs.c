// SPDX-License-Identifier: GPL-2.0-only
/*
 * The kfuncs.  All but l7f_sig_verify() run on the packet path (SK_MSG in
 * the sender's context, SK_SKB in softirq): they never sleep, never
 * allocate, and bound their work by L7F_DATA_MAX.
 */
#include <linux/bpf.h>
#include <linux/errno.h>
#include <linux/rcupdate.h>
#include <linux/xxhash.h>
#include <crypto/algapi.h>
#include <crypto/hash.h>
#include "l7fast_internal.h"

__bpf_kfunc_start_defs();

__bpf_kfunc u32 l7f_abi_version(void)
{
	return L7FAST_ABI_VERSION;
}

/*
 * No length cap: the verifier already bounds data__sz by the caller's
 * memory, and a hash has no error value to report one with.
 */
__bpf_kfunc u32 l7f_xxh32(const void *data, u32 data__sz, u32 seed)
{
	return xxh32(data, data__sz, seed);
}

__bpf_kfunc u64 l7f_xxh64(const void *data, u32 data__sz, u64 seed)
{
	return xxh64(data, data__sz, seed);
}

__bpf_kfunc int l7f_b64url_decode(const u8 *src, u32 src__sz, u8 *dst,
				  u32 dst__sz, u32 flags)
{
	return l7f_b64url_decode_buf(src, src__sz, dst, dst__sz, flags);
}

__bpf_kfunc int l7f_b64url_encode(const u8 *src, u32 src__sz, u8 *dst,
				  u32 dst__sz, u32 flags)
{
	return l7f_b64url_encode_buf(src, src__sz, dst, dst__sz, flags);
}

__bpf_kfunc int l7f_sha256(const void *data, u32 data__sz, u8 *out,
			   u32 out__sz)
{
	int ret;

	if (data__sz > L7F_DATA_MAX)
		return -E2BIG;
	if (out__sz < L7F_SHA256_LEN)
		return -ENOSPC;
	ret = crypto_shash_tfm_digest(l7f_sha256_tfm(), data, data__sz, out);
	return ret ?: L7F_SHA256_LEN;
}

/* Caller holds rcu_read_lock(); the transform stays valid until unlock. */
static int l7f_hmac_rcu(u32 key_id, const void *data, u32 len, u8 *out,
			u32 out_len)
{
	struct l7f_key *key = l7f_key_lookup_rcu(key_id);
	u32 dlen;
	int ret;

	if (!key || !key->hmac)
		return -ENOKEY;
	dlen = crypto_shash_digestsize(key->hmac);
	if (out_len < dlen)
		return -ENOSPC;
	ret = crypto_shash_tfm_digest(key->hmac, data, len, out);
	return ret ?: dlen;
}

__bpf_kfunc int l7f_hmac(u32 key_id, const void *data, u32 data__sz,
			 u8 *out, u32 out__sz)
{
	int ret;

	if (data__sz > L7F_DATA_MAX)
		return -E2BIG;
	rcu_read_lock();
	ret = l7f_hmac_rcu(key_id, data, data__sz, out, out__sz);
	rcu_read_unlock();
	return ret;
}

__bpf_kfunc int l7f_hmac_verify(u32 key_id, const void *data, u32 data__sz,
				const u8 *mac, u32 mac__sz)
{
	u8 want[L7F_HMAC_MAX_LEN];
	int ret;

	if (data__sz > L7F_DATA_MAX)
		return -E2BIG;
	rcu_read_lock();
	ret = l7f_hmac_rcu(key_id, data, data__sz, want, sizeof(want));
	rcu_read_unlock();
	if (ret < 0)
		goto out;
	/* Truncated MACs are not accepted: JWS uses the full length. */
	if (mac__sz != ret || crypto_memneq(want, mac, ret))
		ret = -EBADMSG;
	else
		ret = 0;
out:
	memzero_explicit(want, sizeof(want));
	return ret;
}

__bpf_kfunc int l7f_sig_verify(u32 key_id, const void *msg, u32 msg__sz,
			       const u8 *sig, u32 sig__sz)
{
	u8 digest[L7F_SHA256_LEN];
	struct l7f_key *key;
	int ret;

	might_sleep();
	if (msg__sz > L7F_DATA_MAX || sig__sz > L7F_DATA_MAX)
		return -E2BIG;
	key = l7f_key_get(key_id);
	if (!key)
		return -ENOKEY;
	if (!key->pk) {
		ret = -ENOKEY;
		goto out;
	}
	ret = crypto_shash_tfm_digest(l7f_sha256_tfm(), msg, msg__sz, digest);
	if (!ret)
		ret = l7f_sig_verify_digest(key, digest, sig, sig__sz);
out:
	l7f_key_put(key);
	return ret;
}

__bpf_kfunc_end_defs();

BTF_KFUNCS_START(l7f_kfunc_ids)
BTF_ID_FLAGS(func, l7f_abi_version)
BTF_ID_FLAGS(func, l7f_xxh32)
BTF_ID_FLAGS(func, l7f_xxh64)
BTF_ID_FLAGS(func, l7f_b64url_decode)
BTF_ID_FLAGS(func, l7f_b64url_encode)
BTF_ID_FLAGS(func, l7f_sha256)
BTF_ID_FLAGS(func, l7f_hmac)
BTF_ID_FLAGS(func, l7f_hmac_verify)
BTF_ID_FLAGS(func, l7f_sig_verify, KF_SLEEPABLE)
BTF_KFUNCS_END(l7f_kfunc_ids)

static const struct btf_kfunc_id_set l7f_kfunc_set = {
	.owner = THIS_MODULE,
	.set = &l7f_kfunc_ids,
};

/*
 * Kernels >= 6.2 have a common hook (BPF_PROG_TYPE_UNSPEC) that makes the
 * set callable from every program type, socket programs included.  6.1
 * answers -EINVAL before touching any state; then register for the types
 * it has hooks for, and report that socket programs cannot use the set.
 * There is no unregister: the sets live and die with the module's BTF.
 */
int l7f_kfuncs_register(u32 *caps)
{
	int ret;

	/*
	 * 6.1 logs a warning and reports success when a module without BTF
	 * registers kfuncs; nothing could call them.  Refuse to load instead
	 * (kbuild skips module BTF when the headers lack vmlinux).
	 */
#ifdef CONFIG_DEBUG_INFO_BTF_MODULES
	if (!THIS_MODULE->btf_data_size) {
		pr_err("l7fast: built without BTF (no vmlinux in the kernel headers), kfuncs unusable\n");
		return -ENOENT;
	}
#else
	pr_err("l7fast: kernel lacks CONFIG_DEBUG_INFO_BTF_MODULES, kfuncs unusable\n");
	return -EOPNOTSUPP;
#endif

	ret = register_btf_kfunc_id_set(BPF_PROG_TYPE_UNSPEC, &l7f_kfunc_set);
	if (!ret) {
		*caps = L7FAST_CAP_SOCKET_PROGS | L7FAST_CAP_SYSCALL_PROGS |
			L7FAST_CAP_TC_XDP_PROGS;
		return 0;
	}
	if (ret != -EINVAL)
		return ret;

	ret = register_btf_kfunc_id_set(BPF_PROG_TYPE_SYSCALL, &l7f_kfunc_set);
	ret = ret ?: register_btf_kfunc_id_set(BPF_PROG_TYPE_SCHED_CLS,
					       &l7f_kfunc_set);
	ret = ret ?: register_btf_kfunc_id_set(BPF_PROG_TYPE_XDP,
					       &l7f_kfunc_set);
	if (ret)
		return ret;
	*caps = L7FAST_CAP_SYSCALL_PROGS | L7FAST_CAP_TC_XDP_PROGS;
	return 0;
}
