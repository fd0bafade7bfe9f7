// SPDX-License-Identifier: GPL-2.0-only
/*
 * l7fast.ko: kfuncs for the l7fast eBPF data plane (xxhash, base64url,
 * SHA-256, keyed HMAC, RS256/ES256 verification) and the control interface
 * the daemon uses to install keys.
 *
 * Read-only capability flags are mirrored in /sys/kernel/l7fast/ so that
 * shell tools and the daemon's probes do not need netlink.
 */
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/sysfs.h>
#include "l7fast_internal.h"

static struct kobject *l7f_kobj;

static const char *const l7f_alg_names[__L7FAST_ALG_MAX] = {
	[L7FAST_ALG_SHA256] = "sha256",
	[L7FAST_ALG_HS256] = "hs256",
	[L7FAST_ALG_HS384] = "hs384",
	[L7FAST_ALG_HS512] = "hs512",
	[L7FAST_ALG_RS256] = "rs256",
	[L7FAST_ALG_ES256] = "es256",
};

static ssize_t abi_version_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", L7FAST_ABI_VERSION);
}

static ssize_t algorithms_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	u32 algs = l7f_algs_available();
	ssize_t len = 0;
	u32 alg;

	for (alg = 0; alg < __L7FAST_ALG_MAX; alg++)
		if (l7f_alg_names[alg] && (algs & (1U << alg)))
			len += sysfs_emit_at(buf, len, "%s%s", len ? " " : "",
					     l7f_alg_names[alg]);
	len += sysfs_emit_at(buf, len, "\n");
	return len;
}

static ssize_t socket_progs_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  !!(l7f_caps() & L7FAST_CAP_SOCKET_PROGS));
}

static ssize_t prog_types_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%s\n",
			  (l7f_caps() & L7FAST_CAP_SOCKET_PROGS) ?
			  "all" : "syscall sched_cls xdp");
}

static ssize_t keys_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%u\n", l7f_keys_count());
}

static struct kobj_attribute l7f_attr_abi = __ATTR_RO(abi_version);
static struct kobj_attribute l7f_attr_algs = __ATTR_RO(algorithms);
static struct kobj_attribute l7f_attr_sock = __ATTR_RO(socket_progs);
static struct kobj_attribute l7f_attr_types = __ATTR_RO(prog_types);
static struct kobj_attribute l7f_attr_keys = __ATTR_RO(keys);

static struct attribute *l7f_attrs[] = {
	&l7f_attr_abi.attr,
	&l7f_attr_algs.attr,
	&l7f_attr_sock.attr,
	&l7f_attr_types.attr,
	&l7f_attr_keys.attr,
	NULL,
};

static const struct attribute_group l7f_attr_group = {
	.attrs = l7f_attrs,
};

static int __init l7f_init(void)
{
	u32 caps = 0;
	int ret;

	ret = l7f_keys_init();
	if (ret)
		return ret;

	ret = l7f_kfuncs_register(&caps);
	if (ret)
		goto err_keys;

	ret = l7f_genl_init(caps);
	if (ret)
		goto err_keys;

	l7f_kobj = kobject_create_and_add("l7fast", kernel_kobj);
	if (!l7f_kobj) {
		ret = -ENOMEM;
		goto err_genl;
	}
	ret = sysfs_create_group(l7f_kobj, &l7f_attr_group);
	if (ret)
		goto err_kobj;

	pr_info("l7fast: abi %u, algorithms 0x%x, kfuncs for %s programs\n",
		L7FAST_ABI_VERSION, l7f_algs_available(),
		(caps & L7FAST_CAP_SOCKET_PROGS) ? "all" :
		"syscall/sched_cls/xdp (no socket)");
	return 0;

err_kobj:
	kobject_put(l7f_kobj);
err_genl:
	l7f_genl_exit();
err_keys:
	l7f_keys_exit();
	return ret;
}

/*
 * Every BPF program that references a kfunc of this module holds a module
 * reference, so exit runs only once no program can call in; what is left
 * to wait for are deferred key frees, which l7f_keys_exit() drains.
 */
static void __exit l7f_exit(void)
{
	sysfs_remove_group(l7f_kobj, &l7f_attr_group);
	kobject_put(l7f_kobj);
	l7f_genl_exit();
	l7f_keys_exit();
}

module_init(l7f_init);
module_exit(l7f_exit);

/*
 * The generic C SHA-2 code is built in on Debian; the SIMD drivers are
 * modules that nothing else loads, and the transforms allocated at init
 * bind to whatever is registered by then.
 */
MODULE_SOFTDEP("pre: sha256_ssse3 sha512_ssse3");
MODULE_DESCRIPTION("l7fast: kfuncs for the l7fast eBPF data plane");
MODULE_AUTHOR("l7fast developers");
MODULE_LICENSE("GPL");
MODULE_VERSION("0.1.0");
