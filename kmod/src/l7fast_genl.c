// SPDX-License-Identifier: GPL-2.0-only
/*
 * Generic-netlink control interface: capabilities for anyone, key
 * management for CAP_NET_ADMIN in the initial user namespace.  Keys are
 * global to the host, so the family exists in the initial netns only.
 */
#include <linux/module.h>
#include <net/genetlink.h>
#include "l7fast_internal.h"

static const struct nla_policy l7f_genl_policy[L7FAST_ATTR_MAX + 1] = {
	[L7FAST_ATTR_KEY_ID]	= NLA_POLICY_MAX(NLA_U32, L7FAST_MAX_KEYS - 1),
	[L7FAST_ATTR_ALG]	= NLA_POLICY_MAX(NLA_U32, __L7FAST_ALG_MAX - 1),
	[L7FAST_ATTR_KEY_DATA]	= { .type = NLA_BINARY,
				    .len = L7FAST_KEY_DATA_MAX },
	[L7FAST_ATTR_KEY_FLAGS]	= NLA_POLICY_MASK(NLA_U32,
						  L7FAST_KEY_F_REPLACE),
};

static struct genl_family l7f_genl_family;
static u32 l7f_caps_flags;

u32 l7f_caps(void)
{
	return l7f_caps_flags;
}

static int l7f_genl_get_caps(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &l7f_genl_family, 0,
				L7FAST_CMD_GET_CAPS);
	if (!hdr)
		goto nospace;
	if (nla_put_u32(msg, L7FAST_ATTR_ABI_VERSION, L7FAST_ABI_VERSION) ||
	    nla_put_u32(msg, L7FAST_ATTR_ALGS, l7f_algs_available()) ||
	    nla_put_u32(msg, L7FAST_ATTR_CAPS, l7f_caps_flags) ||
	    nla_put_u32(msg, L7FAST_ATTR_MAX_KEYS, L7FAST_MAX_KEYS) ||
	    nla_put_u32(msg, L7FAST_ATTR_KEY_DATA_MAX, L7FAST_KEY_DATA_MAX) ||
	    nla_put_u32(msg, L7FAST_ATTR_NUM_KEYS, l7f_keys_count()))
		goto nospace;
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
nospace:
	nlmsg_free(msg);
	return -EMSGSIZE;
}

static int l7f_genl_key_add(struct sk_buff *skb, struct genl_info *info)
{
	struct nlattr *data = info->attrs[L7FAST_ATTR_KEY_DATA];
	u32 flags = 0;
	int ret;

	if (GENL_REQ_ATTR_CHECK(info, L7FAST_ATTR_KEY_ID) ||
	    GENL_REQ_ATTR_CHECK(info, L7FAST_ATTR_ALG) ||
	    GENL_REQ_ATTR_CHECK(info, L7FAST_ATTR_KEY_DATA))
		return -EINVAL;
	if (info->attrs[L7FAST_ATTR_KEY_FLAGS])
		flags = nla_get_u32(info->attrs[L7FAST_ATTR_KEY_FLAGS]);

	ret = l7f_key_add(nla_get_u32(info->attrs[L7FAST_ATTR_KEY_ID]),
			  nla_get_u32(info->attrs[L7FAST_ATTR_ALG]),
			  nla_data(data), nla_len(data), flags);
	if (ret == -EOPNOTSUPP)
		NL_SET_ERR_MSG_ATTR(info->extack,
				    info->attrs[L7FAST_ATTR_ALG],
				    "algorithm not available on this kernel");
	else if (ret == -EKEYREJECTED)
		NL_SET_ERR_MSG_ATTR(info->extack, data,
				    "key material rejected by the crypto API");
	else if (ret == -EEXIST)
		NL_SET_ERR_MSG_ATTR(info->extack,
				    info->attrs[L7FAST_ATTR_KEY_ID],
				    "key id in use; set L7FAST_KEY_F_REPLACE");
	return ret;
}

static int l7f_genl_key_del(struct sk_buff *skb, struct genl_info *info)
{
	if (GENL_REQ_ATTR_CHECK(info, L7FAST_ATTR_KEY_ID))
		return -EINVAL;
	return l7f_key_del(nla_get_u32(info->attrs[L7FAST_ATTR_KEY_ID]));
}

static int l7f_genl_key_flush(struct sk_buff *skb, struct genl_info *info)
{
	l7f_keys_flush();
	return 0;
}

static const struct genl_small_ops l7f_genl_ops[] = {
	{
		.cmd	= L7FAST_CMD_GET_CAPS,
		.doit	= l7f_genl_get_caps,
	},
	{
		.cmd	= L7FAST_CMD_KEY_ADD,
		.doit	= l7f_genl_key_add,
		.flags	= GENL_ADMIN_PERM,
	},
	{
		.cmd	= L7FAST_CMD_KEY_DEL,
		.doit	= l7f_genl_key_del,
		.flags	= GENL_ADMIN_PERM,
	},
	{
		.cmd	= L7FAST_CMD_KEY_FLUSH,
		.doit	= l7f_genl_key_flush,
		.flags	= GENL_ADMIN_PERM,
	},
};

static struct genl_family l7f_genl_family __ro_after_init = {
	.name		= L7FAST_GENL_NAME,
	.version	= L7FAST_GENL_VERSION,
	.maxattr	= L7FAST_ATTR_MAX,
	.policy		= l7f_genl_policy,
	.module		= THIS_MODULE,
	.small_ops	= l7f_genl_ops,
	.n_small_ops	= ARRAY_SIZE(l7f_genl_ops),
	/* Strict validation of header and attributes for every command. */
	.resv_start_op	= __L7FAST_CMD_MAX,
};

int l7f_genl_init(u32 caps)
{
	l7f_caps_flags = caps;
	return genl_register_family(&l7f_genl_family);
}

void l7f_genl_exit(void)
{
	genl_unregister_family(&l7f_genl_family);
}
