// SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR BSD-2-Clause
#include "l7fast_kmodctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <netlink/netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

/* A reply is one message plus an ACK; more rounds mean a confused peer. */
#define L7K_MAX_RECV_ROUNDS 16

struct l7fast_kmodctl {
	struct nl_sock *sk;
	int family;
	char errmsg[256];
};

struct l7k_call {
	struct l7fast_kmodctl *ctl;
	struct l7fast_kmod_caps *caps;
	int err;
	int done;
};

const char *l7fast_kmodctl_last_error(const struct l7fast_kmodctl *ctl)
{
	return ctl->errmsg;
}

static int l7k_errno_from_nl(int nlerr)
{
	switch (-nlerr) {
	case NLE_NOMEM:
		return -ENOMEM;
	case NLE_PERM:
		return -EPERM;
	case NLE_OBJ_NOTFOUND:
		return -ENOENT;
	default:
		return -EIO;
	}
}

int l7fast_kmodctl_open(struct l7fast_kmodctl **out)
{
	struct l7fast_kmodctl *ctl;
	int one = 1, ret;

	*out = NULL;
	ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->sk = nl_socket_alloc();
	if (!ctl->sk) {
		free(ctl);
		return -ENOMEM;
	}
	ret = genl_connect(ctl->sk);
	if (ret < 0) {
		ret = l7k_errno_from_nl(ret);
		goto err;
	}
	/* Ask for the kernel's error strings, and headers-only echoes. */
	setsockopt(nl_socket_get_fd(ctl->sk), SOL_NETLINK, NETLINK_EXT_ACK,
		   &one, sizeof(one));
	setsockopt(nl_socket_get_fd(ctl->sk), SOL_NETLINK, NETLINK_CAP_ACK,
		   &one, sizeof(one));
	ctl->family = genl_ctrl_resolve(ctl->sk, L7FAST_GENL_NAME);
	if (ctl->family < 0) {
		ret = ctl->family == -NLE_OBJ_NOTFOUND ? -ENOENT :
			l7k_errno_from_nl(ctl->family);
		goto err;
	}
	*out = ctl;
	return 0;
err:
	nl_socket_free(ctl->sk);
	free(ctl);
	return ret;
}

void l7fast_kmodctl_close(struct l7fast_kmodctl *ctl)
{
	if (!ctl)
		return;
	nl_socket_free(ctl->sk);
	free(ctl);
}

static void l7k_copy_extack(struct l7fast_kmodctl *ctl, struct nlmsgerr *err)
{
	struct nlmsghdr *nlh = (struct nlmsghdr *)((char *)err - NLMSG_HDRLEN);
	size_t off = NLMSG_HDRLEN + sizeof(*err), len = nlh->nlmsg_len;
	int rounds;

	/* With NETLINK_CAP_ACK the echoed request is its header only. */
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return;
	for (rounds = 0; rounds < 16 && off + NLA_HDRLEN <= len; rounds++) {
		struct nlattr *a = (struct nlattr *)((char *)nlh + off);

		if (a->nla_len < NLA_HDRLEN || off + a->nla_len > len)
			return;
		if ((a->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG) {
			size_t n = a->nla_len - NLA_HDRLEN;

			if (n >= sizeof(ctl->errmsg))
				n = sizeof(ctl->errmsg) - 1;
			memcpy(ctl->errmsg, (char *)a + NLA_HDRLEN, n);
			ctl->errmsg[n] = '\0';
			return;
		}
		off += NLA_ALIGN(a->nla_len);
	}
}

static int l7k_on_error(struct sockaddr_nl *who, struct nlmsgerr *err,
			void *arg)
{
	struct l7k_call *call = arg;

	(void)who;
	call->err = err->error;
	call->done = 1;
	if (err->error)
		l7k_copy_extack(call->ctl, err);
	return NL_STOP;
}

static int l7k_on_ack(struct nl_msg *msg, void *arg)
{
	struct l7k_call *call = arg;

	(void)msg;
	call->done = 1;
	return NL_STOP;
}

static int l7k_get_u32(struct nlattr *a, uint32_t *v)
{
	if (!a)
		return 0;
	if (nla_len(a) < (int)sizeof(uint32_t))
		return -EINVAL;
	*v = nla_get_u32(a);
	return 0;
}

static int l7k_on_valid(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[L7FAST_ATTR_MAX + 1];
	struct l7k_call *call = arg;
	struct l7fast_kmod_caps *c = call->caps;
	int ret;

	if (!c)
		return NL_SKIP;
	ret = genlmsg_parse(nlmsg_hdr(msg), 0, tb, L7FAST_ATTR_MAX, NULL);
	if (ret < 0 ||
	    l7k_get_u32(tb[L7FAST_ATTR_ABI_VERSION], &c->abi_version) ||
	    l7k_get_u32(tb[L7FAST_ATTR_ALGS], &c->algs) ||
	    l7k_get_u32(tb[L7FAST_ATTR_CAPS], &c->caps) ||
	    l7k_get_u32(tb[L7FAST_ATTR_MAX_KEYS], &c->max_keys) ||
	    l7k_get_u32(tb[L7FAST_ATTR_KEY_DATA_MAX], &c->key_data_max) ||
	    l7k_get_u32(tb[L7FAST_ATTR_NUM_KEYS], &c->num_keys))
		call->err = -EPROTO;
	return NL_OK;
}

/* Sends msg (consumed) and waits for the ACK or error. */
static int l7k_transact(struct l7fast_kmodctl *ctl, struct nl_msg *msg,
			struct l7fast_kmod_caps *caps)
{
	struct l7k_call call = { .ctl = ctl, .caps = caps };
	struct nl_cb *cb;
	int ret, rounds;

	ctl->errmsg[0] = '\0';
	cb = nl_cb_alloc(NL_CB_DEFAULT);
	if (!cb) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	nl_cb_err(cb, NL_CB_CUSTOM, l7k_on_error, &call);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, l7k_on_ack, &call);
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, l7k_on_valid, &call);

	ret = nl_send_auto(ctl->sk, msg);
	nlmsg_free(msg);
	if (ret < 0) {
		ret = l7k_errno_from_nl(ret);
		goto out;
	}
	ret = 0;
	for (rounds = 0; !call.done && rounds < L7K_MAX_RECV_ROUNDS; rounds++) {
		ret = nl_recvmsgs(ctl->sk, cb);
		if (ret < 0 && !call.done) {
			ret = l7k_errno_from_nl(ret);
			goto out;
		}
	}
	ret = call.done ? call.err : -EPROTO;
out:
	nl_cb_put(cb);
	return ret;
}

static struct nl_msg *l7k_msg(struct l7fast_kmodctl *ctl, uint8_t cmd)
{
	struct nl_msg *msg = nlmsg_alloc();

	if (!msg)
		return NULL;
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, ctl->family, 0, 0,
			 cmd, L7FAST_GENL_VERSION)) {
		nlmsg_free(msg);
		return NULL;
	}
	return msg;
}

int l7fast_kmodctl_get_caps(struct l7fast_kmodctl *ctl,
			    struct l7fast_kmod_caps *caps)
{
	struct nl_msg *msg = l7k_msg(ctl, L7FAST_CMD_GET_CAPS);

	memset(caps, 0, sizeof(*caps));
	if (!msg)
		return -ENOMEM;
	return l7k_transact(ctl, msg, caps);
}

int l7fast_kmodctl_add_key(struct l7fast_kmodctl *ctl, uint32_t key_id,
			   uint32_t alg, const void *data, size_t len,
			   uint32_t flags)
{
	struct nl_msg *msg;

	if (len > L7FAST_KEY_DATA_MAX)
		return -EMSGSIZE;
	msg = l7k_msg(ctl, L7FAST_CMD_KEY_ADD);
	if (!msg)
		return -ENOMEM;
	if (nla_put_u32(msg, L7FAST_ATTR_KEY_ID, key_id) ||
	    nla_put_u32(msg, L7FAST_ATTR_ALG, alg) ||
	    nla_put(msg, L7FAST_ATTR_KEY_DATA, (int)len, data) ||
	    (flags && nla_put_u32(msg, L7FAST_ATTR_KEY_FLAGS, flags))) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	return l7k_transact(ctl, msg, NULL);
}

int l7fast_kmodctl_add_hmac_key(struct l7fast_kmodctl *ctl, uint32_t key_id,
				uint32_t alg, const void *key, size_t len,
				uint32_t flags)
{
	if (alg != L7FAST_ALG_HS256 && alg != L7FAST_ALG_HS384 &&
	    alg != L7FAST_ALG_HS512)
		return -EINVAL;
	return l7fast_kmodctl_add_key(ctl, key_id, alg, key, len, flags);
}

static size_t l7k_der_len(uint8_t *out, size_t len)
{
	if (len < 0x80) {
		out[0] = (uint8_t)len;
		return 1;
	}
	if (len <= 0xff) {
		out[0] = 0x81;
		out[1] = (uint8_t)len;
		return 2;
	}
	out[0] = 0x82;
	out[1] = (uint8_t)(len >> 8);
	out[2] = (uint8_t)len;
	return 3;
}

/* INTEGER body size of an unsigned big-endian magnitude, 0 if none. */
static size_t l7k_der_uint_size(const uint8_t **v, size_t *len)
{
	while (*len > 1 && !**v) {
		(*v)++;
		(*len)--;
	}
	if (!*len)
		return 0;
	return *len + ((**v & 0x80) ? 1 : 0);
}

static size_t l7k_der_put_uint(uint8_t *out, const uint8_t *v, size_t len,
			       size_t body)
{
	size_t o = 0;

	out[o++] = 0x02;
	o += l7k_der_len(out + o, body);
	if (body > len)
		out[o++] = 0;
	memcpy(out + o, v, len);
	return o + len;
}

int l7fast_rsa_pubkey_der(const uint8_t *n, size_t n_len, const uint8_t *e,
			  size_t e_len, uint8_t *out, size_t out_len)
{
	size_t nb, eb, seq, total, o = 0;

	nb = l7k_der_uint_size(&n, &n_len);
	eb = l7k_der_uint_size(&e, &e_len);
	if (!nb || !eb || n_len > 1024 || e_len > 64)
		return -EINVAL;
	/* Each INTEGER: tag, up to 3 length bytes, body. */
	seq = 1 + (nb < 0x80 ? 1 : nb <= 0xff ? 2 : 3) + nb +
	      1 + (eb < 0x80 ? 1 : 2) + eb;
	total = 1 + (seq < 0x80 ? 1 : seq <= 0xff ? 2 : 3) + seq;
	if (total > out_len || total > L7FAST_KEY_DATA_MAX)
		return -EMSGSIZE;
	out[o++] = 0x30;
	o += l7k_der_len(out + o, seq);
	o += l7k_der_put_uint(out + o, n, n_len, nb);
	o += l7k_der_put_uint(out + o, e, e_len, eb);
	return (int)o;
}

int l7fast_kmodctl_add_rsa_key(struct l7fast_kmodctl *ctl, uint32_t key_id,
			       const uint8_t *n, size_t n_len,
			       const uint8_t *e, size_t e_len, uint32_t flags)
{
	uint8_t der[L7FAST_KEY_DATA_MAX];
	int len;

	len = l7fast_rsa_pubkey_der(n, n_len, e, e_len, der, sizeof(der));
	if (len < 0)
		return len;
	return l7fast_kmodctl_add_key(ctl, key_id, L7FAST_ALG_RS256, der,
				      (size_t)len, flags);
}

int l7fast_kmodctl_add_p256_key(struct l7fast_kmodctl *ctl, uint32_t key_id,
				const uint8_t x[32], const uint8_t y[32],
				uint32_t flags)
{
	uint8_t point[L7FAST_ES256_KEY_LEN];

	point[0] = 0x04;
	memcpy(point + 1, x, 32);
	memcpy(point + 33, y, 32);
	return l7fast_kmodctl_add_key(ctl, key_id, L7FAST_ALG_ES256, point,
				      sizeof(point), flags);
}

int l7fast_kmodctl_del_key(struct l7fast_kmodctl *ctl, uint32_t key_id)
{
	struct nl_msg *msg = l7k_msg(ctl, L7FAST_CMD_KEY_DEL);

	if (!msg)
		return -ENOMEM;
	if (nla_put_u32(msg, L7FAST_ATTR_KEY_ID, key_id)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	return l7k_transact(ctl, msg, NULL);
}

int l7fast_kmodctl_flush_keys(struct l7fast_kmodctl *ctl)
{
	struct nl_msg *msg = l7k_msg(ctl, L7FAST_CMD_KEY_FLUSH);

	if (!msg)
		return -ENOMEM;
	return l7k_transact(ctl, msg, NULL);
}
