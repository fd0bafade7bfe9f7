/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Shims for kfunc macros that newer kernels provide.  Tests are on the
 * macros themselves, not on version numbers, so distribution backports
 * are picked up automatically.
 */
#ifndef L7FAST_COMPAT_H
#define L7FAST_COMPAT_H

#include <linux/version.h>
#include <linux/btf.h>
#include <linux/btf_ids.h>

/* 6.3 */
#ifndef __bpf_kfunc
#define __bpf_kfunc __used noinline
#endif

/* 6.7: kfuncs are global functions without a prototype outside BTF. */
#ifndef __bpf_kfunc_start_defs
#define __bpf_kfunc_start_defs()					\
	__diag_push();							\
	__diag_ignore_all("-Wmissing-prototypes",			\
			  "kfuncs are declared through BTF")
#define __bpf_kfunc_end_defs() __diag_pop()
#endif

/*
 * 6.9 marks kfunc sets with BTF_SET8_KFUNCS; 6.12 refuses module sets
 * without it, while 6.1 - 6.8 only know BTF_SET8_START.
 */
#ifndef BTF_KFUNCS_START
#define BTF_KFUNCS_START(name) BTF_SET8_START(name)
#define BTF_KFUNCS_END(name) BTF_SET8_END(name)
#endif

/*
 * Signature verification API: akcipher requests up to 6.4, the synchronous
 * crypto_sig API from 6.5 (a wrapper over akcipher until 6.12), and from
 * 6.13 RSA/ECDSA are sig_alg with new template names and raw ECDSA
 * signatures through the p1363 template.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 5, 0)
#define L7F_HAVE_CRYPTO_SIG 1
#endif
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
#define L7F_RS256_ALG	"pkcs1(rsa,sha256)"
#define L7F_ES256_ALG	"p1363(ecdsa-nist-p256)"
#define L7F_ES256_RAW_SIG 1
#else
#define L7F_RS256_ALG	"pkcs1pad(rsa,sha256)"
#define L7F_ES256_ALG	"ecdsa-nist-p256"
#endif

#endif /* L7FAST_COMPAT_H */
