/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef L7FAST_INTERNAL_H
#define L7FAST_INTERNAL_H

#include <linux/types.h>
#include <linux/refcount.h>
#include <linux/workqueue.h>
#include "l7fast_compat.h"
#include "l7fast_kfuncs.h"

struct crypto_shash;

/*
 * An installed key.  The table slot holds one reference; sleepable users
 * (signature verification) take their own.  Packet-path HMAC users take no
 * reference and rely on RCU instead: the last put defers the free past a
 * grace period, so a reader inside rcu_read_lock() never sees it freed.
 */
struct l7f_key {
	refcount_t ref;
	u32 id;
	u32 alg;			/* enum l7fast_alg */
	struct crypto_shash *hmac;	/* HS256/384/512 */
	void *pk;			/* RS256/ES256: backend transform */
	u32 sig_len;			/* RS256: modulus bytes; ES256: 64 */
	struct rcu_work free_work;
};

/* l7fast_keys.c */
int l7f_keys_init(void);
void l7f_keys_exit(void);
u32 l7f_algs_available(void);
u32 l7f_keys_count(void);
int l7f_key_add(u32 id, u32 alg, const u8 *data, u32 len, u32 flags);
int l7f_key_del(u32 id);
void l7f_keys_flush(void);
struct l7f_key *l7f_key_get(u32 id);
void l7f_key_put(struct l7f_key *key);
struct l7f_key *l7f_key_lookup_rcu(u32 id);
struct crypto_shash *l7f_sha256_tfm(void);

/* l7fast_sig.c: backend of RS256/ES256 keys */
bool l7f_sig_alg_available(u32 alg);
int l7f_sig_key_init(struct l7f_key *key, const u8 *data, u32 len);
void l7f_sig_key_free(struct l7f_key *key);
int l7f_sig_verify_digest(struct l7f_key *key, const u8 *digest,
			  const u8 *sig, u32 sig_len);

/* l7fast_b64.c */
int l7f_b64url_decode_buf(const u8 *src, u32 slen, u8 *dst, u32 dlen,
			  u32 flags);
int l7f_b64url_encode_buf(const u8 *src, u32 slen, u8 *dst, u32 dlen,
			  u32 flags);

/* l7fast_kfuncs.c */
int l7f_kfuncs_register(u32 *caps);

/* l7fast_genl.c */
int l7f_genl_init(u32 caps);
void l7f_genl_exit(void);
u32 l7f_caps(void);

#endif /* L7FAST_INTERNAL_H */
