// SPDX-License-Identifier: GPL-2.0-only
/*
 * RS256 / ES256 verification through the running kernel's public-key
 * crypto API.  Everything here may allocate and sleep: callers are
 * sleepable BPF programs and the genetlink handlers, never the packet path.
 */
#include <linux/err.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <crypto/akcipher.h>
#include "l7fast_internal.h"
#ifdef L7F_HAVE_CRYPTO_SIG
#include <crypto/sig.h>
#endif

#define ES256_COORD_LEN	32
#define ES256_SIG_LEN	(2 * ES256_COORD_LEN)
/* SEQUENCE { INTEGER r, INTEGER s }, each with an optional 0x00 prefix. */
#define ES256_DER_MAX	(2 + 2 * (2 + 1 + ES256_COORD_LEN))

static const char *l7f_sig_alg_name(u32 alg)
{
	switch (alg) {
	case L7FAST_ALG_RS256:
		return L7F_RS256_ALG;
	case L7FAST_ALG_ES256:
		return L7F_ES256_ALG;
	default:
		return NULL;
	}
}

#ifdef L7F_HAVE_CRYPTO_SIG
static void *l7f_pk_alloc(const char *name)
{
	return crypto_alloc_sig(name, 0, 0);
}

static void l7f_pk_free(void *tfm)
{
	crypto_free_sig(tfm);
}

static int l7f_pk_set_pub(void *tfm, const u8 *data, u32 len)
{
	return crypto_sig_set_pubkey(tfm, data, len);
}

static unsigned int l7f_pk_maxsize(void *tfm)
{
	return crypto_sig_maxsize(tfm);
}

static int l7f_pk_verify(void *tfm, const u8 *sig, u32 sig_len,
			 const u8 *digest, u32 digest_len)
{
	/* Synchronous; copies its inputs into linear memory itself. */
	return crypto_sig_verify(tfm, sig, sig_len, digest, digest_len);
}
#else
static void *l7f_pk_alloc(const char *name)
{
	return crypto_alloc_akcipher(name, 0, 0);
}

static void l7f_pk_free(void *tfm)
{
	crypto_free_akcipher(tfm);
}

static int l7f_pk_set_pub(void *tfm, const u8 *data, u32 len)
{
	return crypto_akcipher_set_pub_key(tfm, data, len);
}

static unsigned int l7f_pk_maxsize(void *tfm)
{
	return crypto_akcipher_maxsize(tfm);
}

static int l7f_pk_verify(void *tfm, const u8 *sig, u32 sig_len,
			 const u8 *digest, u32 digest_len)
{
	struct akcipher_request *req;
	struct scatterlist sg;
	DECLARE_CRYPTO_WAIT(wait);
	u8 *buf;
	int ret;

	/*
	 * akcipher takes "signature || digest" in one scatterlist (and no
	 * destination).  The caller's memory may be a vmalloc'ed map value,
	 * which a scatterlist cannot describe: copy into kmalloc memory.
	 */
	buf = kmalloc(sig_len + digest_len, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, sig, sig_len);
	memcpy(buf + sig_len, digest, digest_len);

	req = akcipher_request_alloc(tfm, GFP_KERNEL);
	if (!req) {
		kfree(buf);
		return -ENOMEM;
	}
	sg_init_one(&sg, buf, sig_len + digest_len);
	akcipher_request_set_callback(req, CRYPTO_TFM_REQ_MAY_BACKLOG |
					   CRYPTO_TFM_REQ_MAY_SLEEP,
				      crypto_req_done, &wait);
	akcipher_request_set_crypt(req, &sg, NULL, sig_len, digest_len);
	ret = crypto_wait_req(crypto_akcipher_verify(req), &wait);

	akcipher_request_free(req);
	kfree(buf);
	return ret;
}
#endif

bool l7f_sig_alg_available(u32 alg)
{
	const char *name = l7f_sig_alg_name(alg);
	void *tfm;

	if (!name)
		return false;
	tfm = l7f_pk_alloc(name);
	if (IS_ERR(tfm))
		return false;
	l7f_pk_free(tfm);
	return true;
}

int l7f_sig_key_init(struct l7f_key *key, const u8 *data, u32 len)
{
	void *tfm;
	int ret;

	if (key->alg == L7FAST_ALG_ES256 &&
	    (len != L7FAST_ES256_KEY_LEN || data[0] != 0x04))
		return -EKEYREJECTED;
	if (!len)
		return -EINVAL;

	tfm = l7f_pk_alloc(l7f_sig_alg_name(key->alg));
	if (IS_ERR(tfm))
		return PTR_ERR(tfm) == -ENOMEM ? -ENOMEM : -EOPNOTSUPP;

	ret = l7f_pk_set_pub(tfm, data, len);
	if (ret) {
		l7f_pk_free(tfm);
		return ret == -ENOMEM ? -ENOMEM : -EKEYREJECTED;
	}

	if (key->alg == L7FAST_ALG_RS256) {
		key->sig_len = l7f_pk_maxsize(tfm);
		/* RFC 7518 section 3.3: 2048 bits or larger. */
		if (key->sig_len * 8 < L7FAST_RSA_MIN_BITS) {
			l7f_pk_free(tfm);
			return -EKEYREJECTED;
		}
	} else {
		key->sig_len = ES256_SIG_LEN;
	}
	key->pk = tfm;
	return 0;
}

void l7f_sig_key_free(struct l7f_key *key)
{
	l7f_pk_free(key->pk);
	key->pk = NULL;
}

#ifndef L7F_ES256_RAW_SIG
/* One DER INTEGER from a fixed-width big-endian unsigned value. */
static u32 l7f_der_uint(u8 *out, const u8 *v, u32 n)
{
	u32 skip = 0, len, pad;

	while (skip < n - 1 && !v[skip])
		skip++;
	len = n - skip;
	pad = (v[skip] & 0x80) ? 1 : 0;
	out[0] = 0x02;
	out[1] = len + pad;
	out[2] = 0;
	memcpy(out + 2 + pad, v + skip, len);
	return 2 + pad + len;
}

/* JWS carries ECDSA as raw r || s; kernels before 6.13 want X9.62 DER. */
static u32 l7f_es256_to_der(u8 der[ES256_DER_MAX], const u8 *raw)
{
	u32 len = 2;

	len += l7f_der_uint(der + len, raw, ES256_COORD_LEN);
	len += l7f_der_uint(der + len, raw + ES256_COORD_LEN, ES256_COORD_LEN);
	der[0] = 0x30;
	der[1] = len - 2;
	return len;
}
#endif

int l7f_sig_verify_digest(struct l7f_key *key, const u8 *digest,
			  const u8 *sig, u32 sig_len)
{
#ifndef L7F_ES256_RAW_SIG
	u8 der[ES256_DER_MAX];
#endif
	int ret;

	/* RSA wants exactly the modulus size, ECDSA exactly r || s. */
	if (sig_len != key->sig_len)
		return -EKEYREJECTED;

#ifndef L7F_ES256_RAW_SIG
	if (key->alg == L7FAST_ALG_ES256) {
		sig_len = l7f_es256_to_der(der, sig);
		sig = der;
	}
#endif
	ret = l7f_pk_verify(key->pk, sig, sig_len, digest, L7F_SHA256_LEN);
	if (ret == -ENOMEM)
		return ret;
	return ret ? -EKEYREJECTED : 0;
}
