/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * The kfunc ABI of l7fast.ko, shared by the module (__KERNEL__) and the BPF
 * programs that call it (weak __ksym externs, so an object still loads when
 * the module is absent; see below for how to branch on its presence).
 *
 * Memory arguments come in (ptr, ptr__sz) pairs: the verifier checks the
 * whole range against the caller's memory before the call.  On 6.1 the
 * verifier checks every such range for both read and write access, so pass
 * writable memory (stack, map values, packet) even for inputs.
 *
 * Return conventions: hashes return the hash; everything else returns a
 * length (>= 0) or 0 for "valid", and a negative errno otherwise.  Treat
 * every non-zero result of a verify call as "not verified".
 */
#ifndef L7FAST_KFUNCS_H
#define L7FAST_KFUNCS_H

#include "uapi/l7fast_genl.h"

/*
 * Longest input of the digest, HMAC, base64url and signature kfuncs
 * (-E2BIG above).  They may run with preemption disabled on the packet
 * path, so their cost stays bounded.
 */
#define L7F_DATA_MAX		65536U

#define L7F_SHA256_LEN		32U
#define L7F_HMAC_MAX_LEN	64U	/* HMAC-SHA512 */

/* l7f_b64url_decode() flags; 0 accepts canonical padded and unpadded input. */
#define L7F_B64_PAD_REQUIRED	(1U << 0)
#define L7F_B64_PAD_FORBIDDEN	(1U << 1)	/* JWS compact serialization */
/* l7f_b64url_encode() flags */
#define L7F_B64_PAD		(1U << 0)

/* Output size of base64url encoding of n bytes, with and without padding. */
#define L7F_B64_ENC_LEN_PAD(n)		((((n) + 2U) / 3U) * 4U)
#define L7F_B64_ENC_LEN_NOPAD(n)	(((n) * 4U + 2U) / 3U)
/* Upper bound of the decoded size of n base64url characters. */
#define L7F_B64_DEC_LEN_MAX(n)		((((n) + 3U) / 4U) * 3U)

#ifdef __KERNEL__
#include <linux/types.h>
#define L7F_KFUNC_DECL(ret, name, ...) ret name(__VA_ARGS__)
#else
#ifndef __ksym
#define __ksym __attribute__((section(".ksyms")))
#endif
#ifndef __weak
#define __weak __attribute__((weak))
#endif
/*
 * bpf_ksym_exists() on a kfunc needs libbpf >= 1.2: libbpf 1.1 (Debian 12)
 * turns the address-of into a BTF-id load the kernel refuses.  With libbpf
 * 1.1 guard kfunc calls with a const volatile (rodata) switch that the
 * loader sets from l7fast_probe_socket_kfuncs(): the verifier then drops
 * the call on kernels without the module, and libbpf's poisoned call for
 * an unresolved weak kfunc is never reached.
 */
#define L7F_KFUNC_DECL(ret, name, ...) extern ret name(__VA_ARGS__) __ksym __weak
#endif

/* L7FAST_ABI_VERSION of the loaded module. */
L7F_KFUNC_DECL(__u32, l7f_abi_version, void);

/* The kernel's lib/xxhash over the whole range (bounded by the verifier). */
L7F_KFUNC_DECL(__u32, l7f_xxh32, const void *data, __u32 data__sz, __u32 seed);
L7F_KFUNC_DECL(__u64, l7f_xxh64, const void *data, __u32 data__sz, __u64 seed);

/*
 * RFC 4648 section 5 alphabet.  Decoding rejects any byte outside the
 * alphabet (including '+', '/', whitespace), misplaced or wrong padding and
 * non-zero trailing bits.  Returns bytes written, -EINVAL for malformed
 * input or flags, -ENOSPC if dst is too small, -E2BIG above L7F_DATA_MAX.
 * dst is unspecified after an error.
 */
L7F_KFUNC_DECL(int, l7f_b64url_decode, const __u8 *src, __u32 src__sz,
	       __u8 *dst, __u32 dst__sz, __u32 flags);
L7F_KFUNC_DECL(int, l7f_b64url_encode, const __u8 *src, __u32 src__sz,
	       __u8 *dst, __u32 dst__sz, __u32 flags);

/* Returns L7F_SHA256_LEN, -ENOSPC, -E2BIG. */
L7F_KFUNC_DECL(int, l7f_sha256, const void *data, __u32 data__sz,
	       __u8 *out, __u32 out__sz);

/*
 * HMAC with the pre-keyed transform installed under key_id (HS256/384/512).
 * Never sleeps.  Returns the MAC length, -ENOKEY (no HMAC key there),
 * -ENOSPC, -E2BIG.
 */
L7F_KFUNC_DECL(int, l7f_hmac, __u32 key_id, const void *data, __u32 data__sz,
	       __u8 *out, __u32 out__sz);
/*
 * Constant-time comparison of mac against the full-length HMAC of data.
 * Returns 0 when it matches, -EBADMSG when not, -ENOKEY, -E2BIG.
 */
L7F_KFUNC_DECL(int, l7f_hmac_verify, __u32 key_id, const void *data,
	       __u32 data__sz, const __u8 *mac, __u32 mac__sz);

/*
 * RS256 / ES256 (JWS raw r||s) verification of SHA-256(msg) with the public
 * key installed under key_id.  Sleeps (KF_SLEEPABLE): only sleepable
 * programs such as BPF_PROG_TYPE_SYSCALL may call it.  Returns 0 when the
 * signature is valid, -EKEYREJECTED when it is not (any length or encoding
 * mismatch included), -ENOKEY, -E2BIG, -ENOMEM.
 */
L7F_KFUNC_DECL(int, l7f_sig_verify, __u32 key_id, const void *msg,
	       __u32 msg__sz, const __u8 *sig, __u32 sig__sz);

#endif /* L7FAST_KFUNCS_H */
