/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * User-space client of l7fast.ko's generic-netlink control interface
 * (libnl-genl-3).  No global state: every call works on the handle it is
 * given; one handle must not be used by two threads at once.
 *
 * Every function returns 0 or a negative errno as described in
 * uapi/l7fast_genl.h; -ENOENT from open means the module is not loaded.
 * Build: cc -c l7fast_kmodctl.c $(pkg-config --cflags libnl-genl-3.0)
 *        -I<kmod/include>; link $(pkg-config --libs libnl-genl-3.0).
 */
#ifndef L7FAST_KMODCTL_H
#define L7FAST_KMODCTL_H

#include <stddef.h>
#include <stdint.h>
#include "uapi/l7fast_genl.h"

#ifdef __cplusplus
extern "C" {
#endif

struct l7fast_kmodctl;

struct l7fast_kmod_caps {
	uint32_t abi_version;	/* L7FAST_ABI_VERSION of the module */
	uint32_t algs;		/* 1 << enum l7fast_alg, available on this kernel */
	uint32_t caps;		/* L7FAST_CAP_* */
	uint32_t max_keys;
	uint32_t key_data_max;
	uint32_t num_keys;
};

int l7fast_kmodctl_open(struct l7fast_kmodctl **ctl);
void l7fast_kmodctl_close(struct l7fast_kmodctl *ctl);

/* Kernel's explanation of the last failure (netlink extack), or "". */
const char *l7fast_kmodctl_last_error(const struct l7fast_kmodctl *ctl);

int l7fast_kmodctl_get_caps(struct l7fast_kmodctl *ctl,
			    struct l7fast_kmod_caps *caps);

/* Raw form: data as documented per algorithm in uapi/l7fast_genl.h. */
int l7fast_kmodctl_add_key(struct l7fast_kmodctl *ctl, uint32_t key_id,
			   uint32_t alg, const void *data, size_t len,
			   uint32_t flags);
/* HS256/HS384/HS512 secret (JWK "k" after base64url decoding). */
int l7fast_kmodctl_add_hmac_key(struct l7fast_kmodctl *ctl, uint32_t key_id,
				uint32_t alg, const void *key, size_t len,
				uint32_t flags);
/* RS256 key from JWK "n" and "e" (big-endian magnitudes). */
int l7fast_kmodctl_add_rsa_key(struct l7fast_kmodctl *ctl, uint32_t key_id,
			       const uint8_t *n, size_t n_len,
			       const uint8_t *e, size_t e_len, uint32_t flags);
/* ES256 key from JWK "x" and "y" (32 bytes each). */
int l7fast_kmodctl_add_p256_key(struct l7fast_kmodctl *ctl, uint32_t key_id,
				const uint8_t x[32], const uint8_t y[32],
				uint32_t flags);
int l7fast_kmodctl_del_key(struct l7fast_kmodctl *ctl, uint32_t key_id);
int l7fast_kmodctl_flush_keys(struct l7fast_kmodctl *ctl);

/*
 * DER RSAPublicKey (PKCS#1) from n and e; returns its length, or -EINVAL /
 * -EMSGSIZE.  Exposed for callers that keep keys in the raw form.
 */
int l7fast_rsa_pubkey_der(const uint8_t *n, size_t n_len, const uint8_t *e,
			  size_t e_len, uint8_t *out, size_t out_len);

#ifdef __cplusplus
}
#endif

#endif /* L7FAST_KMODCTL_H */
