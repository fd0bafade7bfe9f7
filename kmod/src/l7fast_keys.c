// SPDX-License-Identifier: GPL-2.0-only
/*
 * Key table.  Every transform is allocated and keyed here, in process
 * context under the genetlink handler; the kfuncs only look keys up.
 */
#include <linux/err.h>
#include <linux/mutex.h>
#include <linux/nospec.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <crypto/hash.h>
#include "l7fast_internal.h"

static struct l7f_key __rcu *l7f_keys[L7FAST_MAX_KEYS];
static DEFINE_MUTEX(l7f_keys_lock);	/* serialises writers of l7f_keys */
static u32 l7f_nkeys;			/* under l7f_keys_lock */
static u32 l7f_algs;			/* set once at init */
static struct crypto_shash *l7f_sha256_shash;
static struct workqueue_struct *l7f_free_wq;

static const char *const l7f_hmac_names[__L7FAST_ALG_MAX] = {
	[L7FAST_ALG_HS256] = "hmac(sha256)",
	[L7FAST_ALG_HS384] = "hmac(sha384)",
	[L7FAST_ALG_HS512] = "hmac(sha512)",
};

static bool l7f_alg_is_hmac(u32 alg)
{
	return alg < __L7FAST_ALG_MAX && l7f_hmac_names[alg];
}

static bool l7f_alg_is_sig(u32 alg)
{
	return alg == L7FAST_ALG_RS256 || alg == L7FAST_ALG_ES256;
}

struct crypto_shash *l7f_sha256_tfm(void)
{
	return l7f_sha256_shash;
}

u32 l7f_algs_available(void)
{
	return l7f_algs;
}

u32 l7f_keys_count(void)
{
	u32 n;

	mutex_lock(&l7f_keys_lock);
	n = l7f_nkeys;
	mutex_unlock(&l7f_keys_lock);
	return n;
}

static void l7f_key_free_work(struct work_struct *work)
{
	struct l7f_key *key = container_of(to_rcu_work(work), struct l7f_key,
					   free_work);

	if (key->hmac)
		crypto_free_shash(key->hmac);
	if (key->pk)
		l7f_sig_key_free(key);
	kfree(key);
}

void l7f_key_put(struct l7f_key *key)
{
	/*
	 * Crypto transforms are freed in process context after a grace
	 * period: packet-path readers hold no reference, only RCU.
	 */
	if (refcount_dec_and_test(&key->ref))
		queue_rcu_work(l7f_free_wq, &key->free_work);
}

struct l7f_key *l7f_key_lookup_rcu(u32 id)
{
	if (id >= L7FAST_MAX_KEYS)
		return NULL;
	id = array_index_nospec(id, L7FAST_MAX_KEYS);
	return rcu_dereference(l7f_keys[id]);
}

struct l7f_key *l7f_key_get(u32 id)
{
	struct l7f_key *key;

	rcu_read_lock();
	key = l7f_key_lookup_rcu(id);
	if (key && !refcount_inc_not_zero(&key->ref))
		key = NULL;
	rcu_read_unlock();
	return key;
}

static struct l7f_key *l7f_key_create(u32 id, u32 alg, const u8 *data,
				      u32 len)
{
	struct l7f_key *key;
	int ret;

	if (!(l7f_algs & (1U << alg)))
		return ERR_PTR(-EOPNOTSUPP);

	key = kzalloc(sizeof(*key), GFP_KERNEL);
	if (!key)
		return ERR_PTR(-ENOMEM);
	refcount_set(&key->ref, 1);
	key->id = id;
	key->alg = alg;
	INIT_RCU_WORK(&key->free_work, l7f_key_free_work);

	if (l7f_alg_is_hmac(alg)) {
		if (!len || len > L7FAST_HMAC_KEY_MAX) {
			ret = len ? -EMSGSIZE : -EINVAL;
			goto err;
		}
		key->hmac = crypto_alloc_shash(l7f_hmac_names[alg], 0, 0);
		if (IS_ERR(key->hmac)) {
			ret = PTR_ERR(key->hmac);
			key->hmac = NULL;
			goto err;
		}
		ret = crypto_shash_setkey(key->hmac, data, len);
		if (ret)
			goto err;
	} else {
		ret = l7f_sig_key_init(key, data, len);
		if (ret)
			goto err;
	}
	return key;
err:
	/* Not yet published: no reader can hold it, free directly. */
	if (key->hmac)
		crypto_free_shash(key->hmac);
	if (key->pk)
		l7f_sig_key_free(key);
	kfree(key);
	return ERR_PTR(ret);
}

int l7f_key_add(u32 id, u32 alg, const u8 *data, u32 len, u32 flags)
{
	struct l7f_key *key, *old;

	if (id >= L7FAST_MAX_KEYS)
		return -ERANGE;
	if (flags & ~L7FAST_KEY_F_REPLACE)
		return -EINVAL;
	if (!l7f_alg_is_hmac(alg) && !l7f_alg_is_sig(alg))
		return -EINVAL;
	if (len > L7FAST_KEY_DATA_MAX)
		return -EMSGSIZE;

	key = l7f_key_create(id, alg, data, len);
	if (IS_ERR(key))
		return PTR_ERR(key);

	mutex_lock(&l7f_keys_lock);
	old = rcu_dereference_protected(l7f_keys[id],
					lockdep_is_held(&l7f_keys_lock));
	if (old && !(flags & L7FAST_KEY_F_REPLACE)) {
		mutex_unlock(&l7f_keys_lock);
		l7f_key_put(key);
		return -EEXIST;
	}
	rcu_assign_pointer(l7f_keys[id], key);
	if (!old)
		l7f_nkeys++;
	mutex_unlock(&l7f_keys_lock);

	if (old)
		l7f_key_put(old);
	return 0;
}

int l7f_key_del(u32 id)
{
	struct l7f_key *old;

	if (id >= L7FAST_MAX_KEYS)
		return -ERANGE;

	mutex_lock(&l7f_keys_lock);
	old = rcu_dereference_protected(l7f_keys[id],
					lockdep_is_held(&l7f_keys_lock));
	if (old) {
		RCU_INIT_POINTER(l7f_keys[id], NULL);
		l7f_nkeys--;
	}
	mutex_unlock(&l7f_keys_lock);

	if (!old)
		return -ENOENT;
	l7f_key_put(old);
	return 0;
}

void l7f_keys_flush(void)
{
	u32 id;

	for (id = 0; id < L7FAST_MAX_KEYS; id++)
		l7f_key_del(id);
}

static void l7f_probe_algs(void)
{
	u32 alg;

	l7f_algs = 1U << L7FAST_ALG_SHA256;
	/*
	 * crypto_has_shash() loads templates and modules on demand
	 * (hmac(sha384) needs sha512_generic on Debian's 6.1).
	 */
	for (alg = 0; alg < __L7FAST_ALG_MAX; alg++) {
		if (l7f_alg_is_hmac(alg) &&
		    crypto_has_shash(l7f_hmac_names[alg], 0, 0))
			l7f_algs |= 1U << alg;
		else if (l7f_alg_is_sig(alg) && l7f_sig_alg_available(alg))
			l7f_algs |= 1U << alg;
	}
}

int l7f_keys_init(void)
{
	l7f_sha256_shash = crypto_alloc_shash("sha256", 0, 0);
	if (IS_ERR(l7f_sha256_shash))
		return PTR_ERR(l7f_sha256_shash);

	l7f_free_wq = alloc_workqueue("l7fast_keys", 0, 0);
	if (!l7f_free_wq) {
		crypto_free_shash(l7f_sha256_shash);
		return -ENOMEM;
	}
	l7f_probe_algs();
	return 0;
}

void l7f_keys_exit(void)
{
	l7f_keys_flush();
	/*
	 * queue_rcu_work() queues only after a grace period: let every
	 * pending callback queue its work, then drain the queue.
	 */
	rcu_barrier();
	destroy_workqueue(l7f_free_wq);
	crypto_free_shash(l7f_sha256_shash);
}
