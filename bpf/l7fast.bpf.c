// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * l7fast data plane. One object, attached as:
 *
 *   l7_sockops      cgroup sockops: adopts client sockets of l7fast listeners
 *                   and backends' ends of pooled connections.
 *   l7_req_msg      SK_MSG on local client sockets: requests.
 *   l7_resp_msg     SK_MSG on local backends' sockets: responses.
 *   l7_req_skb      SK_SKB verdict on the daemon's accepted sockets of remote
 *                   clients: requests arriving from the network.
 *   l7_resp_skb     SK_SKB verdict on pooled upstream sockets: responses
 *                   arriving from the network.
 *
 * SK_MSG runs synchronously in the sender's context, SK_SKB redirects go
 * through the psock backlog worker, so SK_MSG is used wherever the sender is a
 * local socket. ARCHITECTURE.md describes the request/response state machine.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "l7_http.h"
#include "l7_maps.h"
#include "lib/conn.h"
#include "lib/frame.h"
#include "lib/match.h"
#include "lib/mutate.h"
#include "lib/rbac.h"
#include "lib/select.h"
#include "l7_jwtcache.h"

/* Load-time specialisation, set by the daemon through the skeleton. */
const volatile __u32 cfg_trace = 0;          /* decision traces to the daemon */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* ---- shared helpers ------------------------------------------------------ */

static __always_inline void l7_event(__u32 type, __u32 slot, const struct l7_conn_key *k)
{
	struct l7_event *e = bpf_ringbuf_reserve(&l7_events, sizeof(*e), 0);

	if (!e)
		return;
	e->type = type;
	e->slot = slot;
	__builtin_memcpy(&e->conn, k, sizeof(e->conn));
	e->arg[0] = 0;
	e->arg[1] = 0;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void l7_trace_ev(__u32 code, const struct l7_conn_key *k, __u64 a, __u64 b)
{
	struct l7_event *e = bpf_ringbuf_reserve(&l7_events, sizeof(*e), 0);

	if (!e)
		return;
	e->type = L7_EV_TRACE;
	e->slot = code;
	__builtin_memcpy(&e->conn, k, sizeof(e->conn));
	e->arg[0] = a;
	e->arg[1] = b;
	bpf_ringbuf_submit(e, 0);
}

/* compiled out unless the daemon runs with --trace */
#define L7_TRACE(code, key, a, b)                        \
	do {                                             \
		if (cfg_trace)                           \
			l7_trace_ev(code, key, a, b);    \
	} while (0)

static __always_inline int l7_to_user(struct l7_conn *c, __u32 reason)
{
	c->mode = L7_MODE_USER;
	c->user_reason = reason;
	l7_count(L7_C_REQ_USER);
	l7_count(L7_C_REASON_BASE + reason);
	return SK_PASS;
}

/*
 * SK_PASS for SK_MSG programs. Within one sendmsg the kernel re-runs the
 * program after an apply_bytes-limited redirect without clearing the
 * message's redirect target (sk_psock_map_verd(ret, msg->sk_redir)), so a
 * plain SK_PASS there would follow the earlier redirect. A redirect to the
 * socket's own egress is what SK_PASS means, and replaces that target.
 */
static __always_inline int l7_msg_pass(struct sk_msg_md *msg, void *self_map, const void *self_key)
{
	bpf_msg_redirect_hash(msg, self_map, (void *)self_key, 0);
	return SK_PASS;
}

static __always_inline struct l7_route_stats *l7_rstats(__u32 id)
{
	return bpf_map_lookup_elem(&l7_route_stats, &id);
}

static __always_inline struct l7_listener *l7_find_listener(const struct l7_conn_key *k)
{
	struct l7_listener_key lk = {};
	struct l7_listener *l;

	__builtin_memcpy(lk.ip, k->server_ip, sizeof(lk.ip));
	lk.port = k->server_port;
	lk.family = k->family;
	l = bpf_map_lookup_elem(&l7_listeners, &lk);
	if (l)
		return l;
	__builtin_memset(lk.ip, 0, sizeof(lk.ip));
	return bpf_map_lookup_elem(&l7_listeners, &lk);
}

/* ---- sockops --------------------------------------------------------------- */

/* Asks for BPF_SOCK_OPS_STATE_CB on this socket (one end of a pooled
 * upstream connection). */
static __always_inline void l7_watch_state(struct bpf_sock_ops *skops)
{
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags | BPF_SOCK_OPS_STATE_CB_FLAG);
}

/*
 * One end of a pooled upstream connection left ESTABLISHED: the backend
 * closed it (CLOSE_WAIT on the daemon's end, FIN_WAIT1 on a local backend's
 * end, both before the closing call returns on loopback) or it was reset.
 * An idle slot is retired at once, so no request is sent into a connection
 * the backend has given up; the daemon, woken by the event, closes it. A
 * slot in use keeps L7_SF_PEER_CLOSED: the slow path does not return it to
 * the pool and l7_claim_slot does not take it; a kernel exchange in flight
 * is the daemon's to judge (it sees the close and answers 502).
 */
static __always_inline void l7_upstream_left_established(struct bpf_sock_ops *skops)
{
	struct l7_conn_key k;
	struct l7_slot *s;
	__u32 *sid, id;

	L7_KEY_FROM_CTX(&k, skops, 1); /* the daemon's end */
	sid = bpf_map_lookup_elem(&l7_slot_by_tuple, &k);
	if (!sid) {
		L7_KEY_FROM_CTX(&k, skops, 0); /* a local backend's end */
		sid = bpf_map_lookup_elem(&l7_slot_by_tuple, &k);
		if (!sid)
			return; /* retired already: the daemon unregisters first */
	}
	id = *sid;
	s = bpf_map_lookup_elem(&l7_slots, &id);
	if (!s)
		return;
	/* first the flag, for a slot the slow path holds now and returns to the
	 * pool later (neither it nor l7_claim_slot hands it out again) */
	__sync_fetch_and_or(&s->flags, L7_SF_PEER_CLOSED);
	if (__sync_val_compare_and_swap(&s->state, L7_SLOT_IDLE, L7_SLOT_DEAD) == L7_SLOT_IDLE) {
		l7_event(L7_EV_SLOT_DEAD, id, &k);
		l7_count(L7_C_UPSTREAM_CLOSED);
	}
}

SEC("sockops")
int l7_sockops(struct bpf_sock_ops *skops)
{
	struct l7_conn_key k;
	__u32 op = skops->op;

	if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB) {
		struct l7_config *cfg = l7_cfg();
		struct l7_conn c = {};
		struct l7_listener *l;

		if (!cfg || !(cfg->flags & L7_CF_ENABLED))
			return 1;
		L7_KEY_FROM_CTX(&k, skops, 1);
		l = l7_find_listener(&k);
		if (!l) {
			/* the daemon's own connection to an upstream (registered
			 * before connecting when it is a pool slot) */
			if (bpf_map_lookup_elem(&l7_slot_by_tuple, &k))
				l7_watch_state(skops);
			return 1;
		}
		c.listener_id = l->id;
		c.mode = L7_MODE_KERNEL;
		c.side = L7_SIDE_LOCAL;
		c.rcv_start = skops->rcv_nxt;
		if (bpf_map_update_elem(&l7_conns, &k, &c, BPF_ANY))
			return 1;
		if (bpf_sock_hash_update(skops, &l7_sk_client, &k, BPF_ANY))
			bpf_map_delete_elem(&l7_conns, &k);
	} else if (op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
		struct l7_slot *s;
		__u32 *sid, id;

		L7_KEY_FROM_CTX(&k, skops, 0);
		sid = bpf_map_lookup_elem(&l7_slot_by_tuple, &k);
		if (!sid)
			return 1;
		id = *sid;
		if (bpf_sock_hash_update(skops, &l7_sk_backend, &id, BPF_ANY))
			return 1;
		l7_watch_state(skops);
		s = bpf_map_lookup_elem(&l7_slots, &id);
		if (s)
			__sync_fetch_and_or(&s->flags, L7_SF_BACKEND_LOCAL);
	} else if (op == BPF_SOCK_OPS_STATE_CB) {
		if (skops->args[0] == BPF_TCP_ESTABLISHED)
			l7_upstream_left_established(skops);
	}
	return 1;
}

/* ---- request decision (shared by SK_MSG and SK_SKB) ----------------------- */

enum l7_decision_kind {
	L7_D_KERNEL = 0,    /* forward on the slot */
	L7_D_PASS_REQ = 1,  /* this request to the slow path */
	L7_D_PASS_CONN = 2, /* this and everything after it to the slow path */
	L7_D_MORE = 3,      /* header block incomplete */
};

/*
 * Global (non-static) subprograms are verified once, on their own, instead of
 * at every call site: the parser, the matcher and the decision are most of
 * the instructions. They must not change packet data (kernels before 6.12
 * cannot track that through global calls), so the programs copy bytes into
 * scratch first.
 */
__noinline int l7_g_parse(struct l7_scratch *s, __u32 len, __u32 is_request)
{
	if (!s)
		return L7_P_ERROR;
	s->ws.len = len > L7_SCRATCH_SIZE ? L7_SCRATCH_SIZE : len;
	return l7_parse_head(&s->ws, is_request);
}

__noinline int l7_g_match(struct l7_scratch *s, struct l7_config *cfg, __u32 gen,
			  __u32 listener_id)
{
	if (!s || !cfg)
		return -1;
	return l7_match_route(s, cfg, gen & 1, listener_id);
}

/* Parses the request in scratch and decides where it goes (s->dec). */
__noinline int l7_g_decide(struct l7_scratch *s, __u32 n, struct l7_conn *c,
			   struct l7_conn_key *key, struct l7_config *cfg)
{
	struct l7_decision *d;
	struct l7_conn_user *u;
	struct l7_route *r;
	struct l7_msg *m;
	__u32 gen, rk;
	long pool;
	int r_idx, st;

	if (!s || !c || !key || !cfg)
		return -1;
	d = &s->dec;
	m = &s->ws.msg;
	__builtin_memset(d, 0, sizeof(*d));
	d->kind = L7_D_PASS_CONN;
	st = l7_g_parse(s, n, 1);
	if (st == L7_P_MORE) {
		d->kind = L7_D_MORE;
		d->reason = n >= L7_SCRATCH_SIZE ? L7_R_TOO_BIG : L7_R_INCOMPLETE;
		return 0;
	}
	if (st != L7_P_OK) {
		d->reason = L7_R_PARSE;
		return 0;
	}
	d->head_len = m->hdr_len;
	d->body_kind = m->body_kind;
	d->cl = m->content_length;
	d->req_head = m->method == L7_M_HEAD;
	d->close = !!(m->flags & L7_MF_CLOSE);
	/* chunked bodies have no length to pass the request by */
	if ((m->flags & (L7_MF_UPGRADE | L7_MF_EXPECT_OTHER)) || m->method == L7_M_CONNECT ||
	    m->body_kind == L7_BODY_CHUNKED || m->content_length > (1ULL << 30)) {
		d->reason = L7_R_UNSUPPORTED;
		return 0;
	}
	d->total = m->hdr_len + (m->body_kind == L7_BODY_LENGTH ? m->content_length : 0);

	d->kind = L7_D_PASS_REQ;
	/* Bulk uploads stream through the slow path, which has back-pressure:
	 * socket-to-socket ingress has none, and a redirect to another socket's
	 * egress can be cut short by a non-blocking sender, after which the
	 * sender re-sends bytes this program already accounted for. */
	if (d->total > cfg->ingress_budget) {
		d->reason = L7_R_TOO_BIG;
		return 0;
	}
	/* the tables match raw bytes: only a normal-form path is matched here */
	if (m->flags & L7_MF_PATH_NOT_NORMAL) {
		d->reason = L7_R_PATH;
		return 0;
	}
	u = bpf_map_lookup_elem(&l7_conn_user, key);
	if (c->u_sent != (u ? u->u_done : 0)) {
		d->reason = L7_R_USER_PENDING;
		return 0;
	}
	/* a local client reads its BPF ingress queue first: the daemon's bytes
	 * it has not read yet would come after this request's response */
	if (u && u->u_bytes && c->side == L7_SIDE_LOCAL &&
	    (!s->client_read_known || (__s32)(s->client_read - (__u32)u->u_bytes) < 0)) {
		d->reason = L7_R_USER_PENDING;
		return 0;
	}
	gen = cfg->active_gen & 1;
	r_idx = l7_g_match(s, cfg, gen, c->listener_id);
	if (r_idx == -2) {
		d->reason = L7_R_UNSUPPORTED;
		return 0;
	}
	if (r_idx < 0 || r_idx >= L7_MAX_ROUTES) {
		d->reason = L7_R_NO_ROUTE;
		return 0;
	}
	rk = gen * L7_MAX_ROUTES + (__u32)r_idx;
	r = bpf_map_lookup_elem(&l7_routes, &rk);
	if (!r || !(r->flags & L7_RF_VALID)) {
		d->reason = L7_R_NO_ROUTE;
		return 0;
	}
	d->stats_id = r->stats_id;
	d->route_key = rk;
	d->route_flags = r->flags;
	if (!(r->flags & L7_RF_KERNEL)) {
		d->reason = L7_R_ROUTE_USER;
		return 0;
	}
	if (r->flags & L7_RF_JWT) {
		st = l7_g_jwt_admit(s, cfg, gen, r->jwt_provider);
		if (st != L7_R_NONE) {
			d->reason = (__u32)st;
			return 0;
		}
	}
	/* denied (or undecidable): the slow path sends the route's denial */
	if ((r->flags & L7_RF_RBAC) &&
	    l7_g_rbac(s, cfg, gen, r->flags, r->rule_first | ((__u32)r->rule_count << 16)) != 1) {
		d->reason = L7_R_RBAC_DENY;
		return 0;
	}
	pool = l7_pick_pool(r, gen, s, key);
	if (pool < 0) {
		d->reason = L7_R_POOL_MISS;
		return 0;
	}
	d->slot = l7_claim_slot((__u32)pool);
	if (d->slot == L7_NO_SLOT) {
		d->reason = L7_R_POOL_MISS;
		return 0;
	}
	d->kind = L7_D_KERNEL;
	return 0;
}

static __always_inline struct l7_slot *l7_slot_begin(struct l7_decision *d,
						     const struct l7_conn_key *key, __u32 local)
{
	struct l7_slot *slot = bpf_map_lookup_elem(&l7_slots, &d->slot);

	if (!slot)
		return 0;
	__builtin_memcpy(&slot->client, key, sizeof(slot->client));
	slot->client_local = local;
	slot->stats_id = d->stats_id;
	slot->req_start_ns = bpf_ktime_get_ns();
	slot->uses++;
	__builtin_memset(&slot->resp, 0, sizeof(slot->resp));
	slot->resp.req_head = (__u8)d->req_head;
	slot->resp.close_after = (__u8)d->close;
	return slot;
}

static __always_inline void l7_kernel_accounted(struct l7_conn *c, struct l7_decision *d)
{
	struct l7_route_stats *rs = l7_rstats(d->stats_id);

	c->k_outstanding = 1;
	c->k_requests++;
	if (rs) {
		rs->requests_kernel++;
		rs->bytes_in += d->total;
	}
	l7_count(L7_C_REQ_KERNEL);
}

#define l7_slot_kill(slot, id, k)                                     \
	do {                                                          \
		L7_TRACE(L7_T_KILL, k, id, __LINE__);                 \
		l7_slot_kill_(slot, id, k);                           \
	} while (0)

static __always_inline void l7_slot_kill_(struct l7_slot *slot, __u32 id,
					  const struct l7_conn_key *k)
{
	slot->state = L7_SLOT_DEAD;
	l7_event(L7_EV_SLOT_DEAD, id, k);
}

/* ---- requests from local clients (SK_MSG) --------------------------------- */

/* A request from a local client, with scratch held by the caller. */
static __always_inline int l7_req_msg_decided(struct sk_msg_md *msg, struct l7_scratch *s,
					      struct l7_conn *c, const struct l7_conn_key *key,
					      struct l7_config *cfg, __u32 size)
{
	struct l7_decision *d = &s->dec;
	struct l7_slot *slot;
	int ingress, v;

	L7_TRACE(L7_T_REQ, key, d->kind, d->reason);
	/* A head split over several writes goes to the slow path. Not corked:
	 * on 6.18 a message passed after corking loses the sender's next write
	 * (the drained cork buffer stays attached and is reused). */
	if (d->kind == L7_D_MORE)
		return l7_to_user(c, d->reason), l7_msg_pass(msg, &l7_sk_client, key);

	if (d->kind == L7_D_KERNEL) {
		slot = l7_slot_begin(d, key, 1);
		if (!slot)
			return l7_to_user(c, L7_R_REDIRECT), l7_msg_pass(msg, &l7_sk_client, key);
		/* Socket to socket is all-or-nothing per message. Over TCP (a
		 * backend on another host) only a request this message holds
		 * whole: a partial push would be re-sent by the client. */
		ingress = !!(slot->flags & L7_SF_BACKEND_LOCAL);
		if (!ingress && d->total > size) {
			slot->state = L7_SLOT_IDLE;
			d->kind = L7_D_PASS_REQ;
			d->reason = L7_R_TOO_BIG;
		} else if ((d->route_flags & L7_RF_MUTATE) && d->total < size) {
			/* a rewritten request followed by more bytes in the same
			 * message: the slow path frames that */
			slot->state = L7_SLOT_IDLE;
			d->kind = L7_D_PASS_REQ;
			d->reason = L7_R_MUTATION;
		} else {
			long delta = 0;

			if (ingress)
				v = bpf_msg_redirect_hash(msg, &l7_sk_backend, &d->slot, BPF_F_INGRESS);
			else
				v = bpf_msg_redirect_hash(msg, &l7_sk_upstream, &d->slot, 0);
			L7_TRACE(L7_T_REQ_REDIRECT, key, d->slot, ((__u64)ingress << 32) | (__u32)v);
			/* rewritten only once the redirect is certain: a request
			 * the slow path takes must reach it as the client sent it */
			if (v == SK_PASS && (d->route_flags & L7_RF_MUTATE)) {
				/* JWT: the verified token's forwarded-claim lines go
				 * here (fwd, fwd_len) once the kernel caches tokens */
				int mr = l7_req_mutate(msg, s, 0, 0, &delta);

				if (mr == L7_MUT_BROKEN) {
					/* half-rewritten: neither path may send it */
					slot->state = L7_SLOT_IDLE;
					l7_event(L7_EV_CLOSE_CLIENT, d->slot, key);
					l7_count(L7_C_CONN_CLOSE);
					l7_to_user(c, L7_R_MUTATION);
					return SK_DROP;
				}
				if (mr != L7_MUT_DONE) {
					/* untouched: the pass below replaces the redirect */
					slot->state = L7_SLOT_IDLE;
					d->kind = L7_D_PASS_REQ;
					d->reason = L7_R_MUTATION;
				}
			}
			if (v == SK_PASS && d->kind == L7_D_KERNEL) {
				l7_kernel_accounted(c, d);
				/* the verdict covers the request as rewritten */
				if (d->total != size)
					bpf_msg_apply_bytes(msg, (__u32)((long)d->total + delta));
				return SK_PASS;
			}
			if (d->kind != L7_D_PASS_REQ) {
				l7_slot_kill(slot, d->slot, key);
				d->kind = L7_D_PASS_REQ;
				d->reason = L7_R_REDIRECT;
			}
		}
	}

	if (d->kind == L7_D_PASS_REQ && d->body_kind != L7_BODY_CHUNKED) {
		c->u_sent++;
		l7_count(L7_C_REQ_USER);
		l7_count(L7_C_REASON_BASE + d->reason);
		if (d->total != size)
			bpf_msg_apply_bytes(msg, (__u32)d->total);
		return l7_msg_pass(msg, &l7_sk_client, key);
	}
	return l7_to_user(c, d->reason), l7_msg_pass(msg, &l7_sk_client, key);
}

/* Only the field read here; CO-RE relocates it to the running kernel's
 * struct tcp_sock. */
struct tcp_sock___l7 {
	__u32 copied_seq;
} __attribute__((preserve_access_index));

/* How far the client has read its socket's TCP stream (the bytes the daemon
 * wrote to it), for l7_g_decide. */
static __always_inline void l7_client_read(struct sk_msg_md *msg, struct l7_conn *c,
					   struct l7_scratch *s)
{
	struct bpf_sock *sk = msg->sk;
	struct tcp_sock___l7 *tp;

	s->client_read_known = 0;
	if (!sk)
		return;
	tp = (struct tcp_sock___l7 *)bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return;
	s->client_read = tp->copied_seq - c->rcv_start;
	s->client_read_known = 1;
}

SEC("sk_msg")
int l7_req_msg(struct sk_msg_md *msg)
{
	struct l7_conn_key key;
	struct l7_scratch *s;
	struct l7_config *cfg;
	struct l7_conn *c;
	__u32 size = msg->size;
	long n;
	int v;

	L7_KEY_FROM_CTX(&key, msg, 1);
	c = bpf_map_lookup_elem(&l7_conns, &key);
	if (!c) {
		l7_count(L7_C_REASON_BASE + L7_R_NO_CONN);
		return SK_PASS; /* not ours: never redirected */
	}
	if (c->mode == L7_MODE_USER)
		return l7_msg_pass(msg, &l7_sk_client, &key);
	if (c->k_outstanding)
		return l7_to_user(c, L7_R_PIPELINED), l7_msg_pass(msg, &l7_sk_client, &key);
	cfg = l7_cfg();
	if (!cfg || !(cfg->flags & L7_CF_ENABLED))
		return l7_to_user(c, L7_R_DISABLED), l7_msg_pass(msg, &l7_sk_client, &key);
	s = l7_scratch_get();
	if (!s)
		return l7_to_user(c, L7_R_UNSUPPORTED), l7_msg_pass(msg, &l7_sk_client, &key);
	l7_client_read(msg, c, s);
	n = l7_copy_msg(msg, s, 0, size);
	if (n <= 0 || l7_g_decide(s, (__u32)n, c, &key, cfg))
		v = l7_to_user(c, L7_R_INCOMPLETE), l7_msg_pass(msg, &l7_sk_client, &key);
	else
		v = l7_req_msg_decided(msg, s, c, &key, cfg, size);
	l7_scratch_put(s);
	return v;
}

/* ---- responses ------------------------------------------------------------ */

enum l7_resp_outcome {
	L7_O_FORWARD = 0, /* forward [0, pos) to the client */
	L7_O_RELAY = 1,   /* hand the whole message to the daemon */
	L7_O_KILL = 2,    /* malformed mid-flight: drop the exchange */
};

struct l7_resp_step {
	__u32 outcome;
	__u32 pos;
	__u32 done;
	__u32 extra; /* bytes after the end of the response */
};

/*
 * Sampled access log (daemon.access_log_sample = N): one completed response
 * in N per CPU, the per-CPU responses_kernel counter being the sequence.
 */
static __always_inline void l7_access_event(struct l7_slot *slot, __u64 latency)
{
	struct l7_config *cfg = l7_cfg();
	__u32 key = L7_C_RESP_KERNEL, n;
	struct l7_event *e;
	__u64 *seq;

	if (!cfg || !cfg->access_log_sample)
		return;
	n = cfg->access_log_sample;
	seq = bpf_map_lookup_elem(&l7_counters, &key);
	if (!seq || *seq % n)
		return;
	e = bpf_ringbuf_reserve(&l7_events, sizeof(*e), 0);
	if (!e)
		return;
	e->type = L7_EV_ACCESS;
	e->slot = (slot->stats_id & 0xffff) | ((__u32)slot->resp.status << 16);
	__builtin_memcpy(&e->conn, &slot->client, sizeof(e->conn));
	e->arg[0] = slot->resp.bytes;
	e->arg[1] = latency;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void l7_resp_complete(struct l7_slot *slot, __u32 id, __u32 extra)
{
	struct l7_conn *c = bpf_map_lookup_elem(&l7_conns, &slot->client);
	struct l7_route_stats *rs = l7_rstats(slot->stats_id);
	__u64 latency = bpf_ktime_get_ns() - slot->req_start_ns;
	struct l7_pool_stats *ps;
	__u16 st = slot->resp.status;
	__u32 pool = slot->pool_id;

	if (c)
		c->k_outstanding = 0;
	if (rs) {
		rs->status[l7_status_class(st)]++;
		rs->bytes_out += slot->resp.bytes;
		rs->latency[l7_lat_bucket(latency) & (L7_LAT_BUCKETS - 1)]++;
	}
	ps = bpf_map_lookup_elem(&l7_pool_stats, &pool);
	if (ps) {
		ps->responses++;
		ps->status[l7_status_class(st)]++;
		ps->bytes_out += slot->resp.bytes;
		ps->latency[l7_lat_bucket(latency) & (L7_LAT_BUCKETS - 1)]++;
	}
	l7_count(L7_C_RESP_KERNEL);
	l7_access_event(slot, latency);
	if (slot->resp.close_after) {
		l7_event(L7_EV_CLOSE_CLIENT, id, &slot->client);
		l7_count(L7_C_CONN_CLOSE);
	}
	if (slot->resp.close_after || extra)
		l7_slot_kill(slot, id, &slot->client);
	else
		slot->state = L7_SLOT_IDLE;
}

static __always_inline void l7_relay(struct l7_slot *slot, __u32 id)
{
	if (__sync_val_compare_and_swap(&slot->state, L7_SLOT_KBUSY, L7_SLOT_RELAY) ==
	    L7_SLOT_KBUSY)
		l7_event(L7_EV_RELAY, id, &slot->client);
	l7_count(L7_C_RESP_RELAY);
}

/*
 * Frames the response bytes of one message: interim 1xx heads, the final
 * head, and as much body as the message holds. Generated for SK_MSG and
 * SK_SKB from their copy/framer functions.
 */
#define L7_DEFINE_RESP_STEP(name, ctx_t, copy, frame, can_split)                              \
	static __always_inline void name(ctx_t *ctx, struct l7_slot *slot,                    \
					 struct l7_scratch *s, __u32 size, __u32 budget,      \
					 struct l7_resp_step *o)                              \
	{                                                                                    \
		long pos = 0;                                                                \
		int it;                                                                      \
                                                                                             \
		o->outcome = L7_O_FORWARD;                                                   \
		for (it = 0; it < 3; it++) {                                                 \
			long n;                                                              \
			int r;                                                               \
                                                                                             \
			if (slot->resp.phase != L7_RESP_START || pos >= size)                \
				break;                                                       \
			if (!s) {                                                            \
				o->outcome = pos ? L7_O_FORWARD : L7_O_RELAY;                \
				o->pos = pos;                                                \
				return;                                                      \
			}                                                                    \
			n = copy(ctx, s, pos, size - pos);                                   \
			if (n <= 0) {                                                        \
				o->outcome = pos ? L7_O_FORWARD : L7_O_RELAY;                \
				o->pos = pos;                                                \
				return;                                                      \
			}                                                                    \
			r = l7_g_parse(s, (__u32)n, 0);                                      \
			if (r != L7_P_OK) {                                                  \
				if (pos)                                                     \
					o->outcome = L7_O_FORWARD;                           \
				else                                                         \
					o->outcome = L7_O_RELAY;                             \
				o->pos = pos;                                                \
				return;                                                      \
			}                                                                    \
			l7_response_body(&s->ws.msg, slot->resp.req_head);                      \
			slot->resp.status = s->ws.msg.status;                                   \
			if (s->ws.msg.flags & L7_MF_CLOSE)                                      \
				slot->resp.close_after = 1;                                  \
			if (s->ws.msg.status == 101) {                                          \
				/* upgrades are never sent down the kernel path */            \
				o->outcome = pos ? L7_O_FORWARD : L7_O_RELAY;                \
				o->pos = pos;                                                \
				return;                                                      \
			}                                                                    \
			if (s->ws.msg.status < 200) {                                       \
				pos += s->ws.msg.hdr_len;                                    \
				continue;                                                    \
			}                                                                    \
			/* A body that ends with the connection is relayed by the      \
			 * daemon from its head on: after socket-to-socket data, 6.18  \
			 * reports the closing FIN to the reader as EFAULT, not EOF. */ \
			/* SK_SKB redirects are delivered later by the target's      \
			 * backlog worker, so bytes the daemon relays could overtake  \
			 * them: there the kernel takes a response whole or not at   \
			 * all, and only when its length is known and in budget. */    \
			if (s->ws.msg.body_kind == L7_BODY_UNTIL_CLOSE ||                    \
			    (!can_split &&                                                   \
			     (s->ws.msg.body_kind == L7_BODY_CHUNKED ||                      \
			      slot->resp.bytes + pos + s->ws.msg.hdr_len +                   \
					      s->ws.msg.content_length > budget))) {         \
				o->outcome = pos ? L7_O_FORWARD : L7_O_RELAY;                \
				o->pos = pos;                                                \
				return;                                                      \
			}                                                                    \
			pos += s->ws.msg.hdr_len;                                            \
			l7_body_init(&slot->resp.body, s->ws.msg.body_kind,                     \
				     s->ws.msg.content_length);                                 \
			slot->resp.phase = L7_RESP_BODY;                                     \
		}                                                                            \
		if (slot->resp.phase == L7_RESP_BODY) {                                      \
			struct l7_body_state saved = slot->resp.body;                        \
                                                                                             \
			pos = frame(ctx, s, &slot->resp.body, (__u32)pos, size);             \
			if (pos < 0) {                                                       \
				o->outcome = L7_O_KILL;                                      \
				return;                                                      \
			}                                                                    \
			if (!can_split && !slot->resp.body.done && pos < size) {              \
				/* an skb cannot be split: let the daemon frame it */         \
				slot->resp.body = saved;                                     \
				o->outcome = L7_O_RELAY;                                     \
				o->pos = 0;                                                  \
				return;                                                      \
			}                                                                    \
			o->done = slot->resp.body.done;                                      \
			if (o->done && pos < size)                                           \
				o->extra = size - (__u32)pos;                                \
		}                                                                            \
		o->pos = (__u32)pos;                                                         \
	}

L7_DEFINE_RESP_STEP(l7_resp_step_msg, struct sk_msg_md, l7_copy_msg, l7_frame_msg, 1)
L7_DEFINE_RESP_STEP(l7_resp_step_skb, struct __sk_buff, l7_copy_skb, l7_frame_skb, 0)

/* Socket-to-socket into a local client's ingress; to a remote client
 * through the daemon's accepted socket. */
static __always_inline int l7_resp_redirect_msg(struct sk_msg_md *msg, struct l7_slot *slot)
{
	if (!slot->client_local)
		return bpf_msg_redirect_hash(msg, &l7_sk_remote, &slot->client, 0);
	return bpf_msg_redirect_hash(msg, &l7_sk_client, &slot->client, BPF_F_INGRESS);
}

static __always_inline int l7_resp_redirect_skb(struct __sk_buff *skb, struct l7_slot *slot)
{
	if (!slot->client_local)
		return bpf_sk_redirect_hash(skb, &l7_sk_remote, &slot->client, 0);
	return bpf_sk_redirect_hash(skb, &l7_sk_client, &slot->client, BPF_F_INGRESS);
}

/* A response that would outgrow the ingress budget is handed to the
 * daemon at this message boundary, with the framing state as of its first
 * byte: the rest streams with TCP's back-pressure. */
static __always_inline int l7_resp_over_budget(struct l7_slot *slot, __u32 size)
{
	struct l7_config *cfg = l7_cfg();

	if (!cfg || slot->resp.bytes + size <= cfg->ingress_budget)
		return 0;
	l7_count(L7_C_BUDGET_RELAY);
	return 1;
}

/*
 * The client's connection went to user mode while its response is in flight
 * (it pipelined a request the slow path now answers): the rest of the
 * response is relayed through the daemon, which then writes its own answer
 * behind it. Redirected bytes could overtake it otherwise: the program marks
 * the response complete before the kernel delivers the redirect, which for
 * SK_SKB happens later, in the psock backlog worker.
 */
static __always_inline int l7_client_in_user_mode(const struct l7_slot *slot)
{
	struct l7_conn *c = bpf_map_lookup_elem(&l7_conns, &slot->client);

	return c && c->mode == L7_MODE_USER;
}

/* The busy slot of a pooled connection; *id is its slot (L7_NO_SLOT when
 * the connection is not pooled) even when the slot is not busy. */
static __always_inline struct l7_slot *l7_slot_of(const struct l7_conn_key *k, __u32 *id)
{
	__u32 *sid = bpf_map_lookup_elem(&l7_slot_by_tuple, k);
	struct l7_slot *slot;

	*id = L7_NO_SLOT;
	if (!sid)
		return 0;
	*id = *sid;
	slot = bpf_map_lookup_elem(&l7_slots, id);
	if (!slot || slot->state != L7_SLOT_KBUSY)
		return 0;
	return slot;
}

/* Responses from local backends (SK_MSG on the backend's socket). */
SEC("sk_msg")
int l7_resp_msg(struct sk_msg_md *msg)
{
	struct l7_resp_step o = {};
	struct l7_scratch *s = 0;
	struct l7_conn_key key;
	struct l7_slot *slot;
	__u32 id, size = msg->size;
	int v;

	L7_KEY_FROM_CTX(&key, msg, 0);
	slot = l7_slot_of(&key, &id);
	if (!slot)
		return id == L7_NO_SLOT ? SK_PASS : l7_msg_pass(msg, &l7_sk_backend, &id);
	if (l7_resp_over_budget(slot, size) || l7_client_in_user_mode(slot)) {
		l7_relay(slot, id);
		return l7_msg_pass(msg, &l7_sk_backend, &id);
	}
	if (slot->resp.phase == L7_RESP_START || slot->resp.body.kind == L7_BODY_CHUNKED)
		s = l7_scratch_get();
	l7_resp_step_msg(msg, slot, s, size, 0, &o);
	if (s)
		l7_scratch_put(s);
	L7_TRACE(L7_T_RESP, &slot->client, o.outcome, o.pos | ((__u64)o.done << 32));

	switch (o.outcome) {
	case L7_O_RELAY:
		l7_relay(slot, id);
		return l7_msg_pass(msg, &l7_sk_backend, &id);
	case L7_O_KILL:
		l7_event(L7_EV_CLOSE_CLIENT, id, &slot->client);
		l7_slot_kill(slot, id, &slot->client);
		return l7_msg_pass(msg, &l7_sk_backend, &id);
	}
	v = l7_resp_redirect_msg(msg, slot);
	L7_TRACE(L7_T_RESP_REDIRECT, &slot->client, (__u32)v, o.pos);
	if (v != SK_PASS) {
		/* the client is gone: the daemon drains and closes this socket */
		l7_slot_kill(slot, id, &slot->client);
		return l7_msg_pass(msg, &l7_sk_backend, &id);
	}
	slot->resp.bytes += o.pos;
	if (o.done)
		l7_resp_complete(slot, id, o.extra);
	if (o.pos < size)
		bpf_msg_apply_bytes(msg, o.pos);
	return SK_PASS;
}

/* Responses arriving from the network on pooled upstream sockets. */
SEC("sk_skb")
int l7_resp_skb(struct __sk_buff *skb)
{
	struct l7_resp_step o = {};
	struct l7_scratch *s = 0;
	struct l7_config *cfg;
	struct l7_conn_key key;
	struct l7_slot *slot;
	__u32 id, size = skb->len;
	int v;

	L7_KEY_FROM_CTX(&key, skb, 1);
	slot = l7_slot_of(&key, &id);
	if (!slot)
		return SK_PASS;
	if (l7_client_in_user_mode(slot)) {
		l7_relay(slot, id);
		return SK_PASS;
	}
	cfg = l7_cfg();
	if (slot->resp.phase == L7_RESP_START)
		s = l7_scratch_get();
	l7_resp_step_skb(skb, slot, s, size, cfg ? cfg->ingress_budget : 0, &o);
	if (s)
		l7_scratch_put(s);

	if (o.outcome == L7_O_FORWARD && o.pos < size && !o.extra && o.pos) {
		/* 1xx followed by an incomplete head: cannot split an skb */
		o.outcome = L7_O_RELAY;
	}
	switch (o.outcome) {
	case L7_O_RELAY:
		l7_relay(slot, id);
		return SK_PASS;
	case L7_O_KILL:
		l7_event(L7_EV_CLOSE_CLIENT, id, &slot->client);
		l7_slot_kill(slot, id, &slot->client);
		return SK_PASS;
	}
	if (o.extra && bpf_skb_change_tail(skb, o.pos, 0)) {
		l7_relay(slot, id);
		return SK_PASS;
	}
	v = l7_resp_redirect_skb(skb, slot);
	if (v != SK_PASS) {
		l7_slot_kill(slot, id, &slot->client);
		return SK_PASS;
	}
	slot->resp.bytes += o.pos;
	if (o.done)
		l7_resp_complete(slot, id, o.extra);
	return SK_PASS;
}

/* ---- requests from remote clients (SK_SKB on the daemon's socket) --------- */

/*
 * Verdict-only: each skb gets one verdict as it arrives, framed with the
 * connection's own state. (Under strparser the program sees the whole
 * segment, not the message: the message offset is known only to the kernel,
 * so framing cannot be trusted there.) An skb cannot be split, so whatever
 * would need splitting is handed to the slow path instead: a head that is
 * incomplete or followed by more bytes, or data arriving while a response is
 * pending. The body of a request passed to the slow path is followed skb by
 * skb; an skb holding its end and the next request makes the connection the
 * slow path's.
 */
/* The rest of a slow-path request's body: the daemon's. */
static __always_inline int l7_req_body_skb(struct __sk_buff *skb, struct l7_conn *c,
					   const struct l7_conn_key *key)
{
	__u64 rem = c->req_body.remaining;
	__u32 len = skb->len;

	L7_TRACE(L7_T_BODY, key, len, rem);
	/* what follows the body in the same skb is the slow path's too */
	if (len > rem)
		return l7_to_user(c, L7_R_PIPELINED);
	c->req_body.remaining = rem - len;
	if (!c->req_body.remaining)
		c->req_phase = L7_REQ_IDLE;
	return SK_PASS;
}

static __always_inline int l7_req_skb_decided(struct __sk_buff *skb, struct l7_decision *d,
					      struct l7_conn *c, const struct l7_conn_key *key,
					      __u32 len)
{
	struct l7_slot *slot;
	int ingress, v;

	L7_TRACE(L7_T_REQ, key, d->kind, d->reason);
	if (d->kind == L7_D_MORE)
		return l7_to_user(c, d->reason);
	/* an skb is not rewritten in place here: the slow path mutates */
	if (d->kind == L7_D_KERNEL && (d->route_flags & L7_RF_MUTATE)) {
		slot = bpf_map_lookup_elem(&l7_slots, &d->slot);
		if (slot)
			slot->state = L7_SLOT_IDLE;
		d->kind = L7_D_PASS_REQ;
		d->reason = L7_R_MUTATION;
	}
	/* more bytes after this request in the same skb: cannot split */
	if (d->kind != L7_D_PASS_CONN && d->total < len) {
		if (d->kind == L7_D_KERNEL) {
			slot = bpf_map_lookup_elem(&l7_slots, &d->slot);
			if (slot)
				slot->state = L7_SLOT_IDLE;
		}
		return l7_to_user(c, L7_R_PIPELINED);
	}
	if (d->kind == L7_D_KERNEL) {
		slot = l7_slot_begin(d, key, 0);
		if (!slot)
			return l7_to_user(c, L7_R_REDIRECT);
		if (d->total > len) {
			/* the body continues in later skbs: slow path */
			slot->state = L7_SLOT_IDLE;
			d->kind = L7_D_PASS_REQ;
			d->reason = L7_R_TOO_BIG;
		} else {
			ingress = !!(slot->flags & L7_SF_BACKEND_LOCAL);
			if (ingress)
				v = bpf_sk_redirect_hash(skb, &l7_sk_backend, &d->slot, BPF_F_INGRESS);
			else
				v = bpf_sk_redirect_hash(skb, &l7_sk_upstream, &d->slot, 0);
			L7_TRACE(L7_T_REQ_REDIRECT, key, d->slot, ((__u64)ingress << 32) | (__u32)v);
			if (v == SK_PASS) {
				l7_kernel_accounted(c, d);
				return SK_PASS;
			}
			l7_slot_kill(slot, d->slot, key);
			d->kind = L7_D_PASS_REQ;
			d->reason = L7_R_REDIRECT;
		}
	}
	if (d->kind == L7_D_PASS_REQ) {
		c->u_sent++;
		l7_count(L7_C_REQ_USER);
		l7_count(L7_C_REASON_BASE + d->reason);
		if (d->total > len) {
			c->req_phase = L7_REQ_BODY;
			l7_body_init(&c->req_body, L7_BODY_LENGTH, d->total - len);
		}
		return SK_PASS;
	}
	return l7_to_user(c, d->reason);
}

SEC("sk_skb")
int l7_req_skb(struct __sk_buff *skb)
{
	struct l7_conn_key key;
	struct l7_scratch *s;
	struct l7_config *cfg;
	struct l7_conn *c;
	__u32 len = skb->len;
	long n;
	int v;

	if (!len)
		return SK_PASS; /* FIN */
	L7_KEY_FROM_CTX(&key, skb, 0);
	c = bpf_map_lookup_elem(&l7_conns, &key);
	if (!c || c->mode == L7_MODE_USER)
		return SK_PASS;
	if (c->req_phase == L7_REQ_BODY)
		return l7_req_body_skb(skb, c, &key);
	if (c->k_outstanding)
		return l7_to_user(c, L7_R_PIPELINED);
	cfg = l7_cfg();
	if (!cfg || !(cfg->flags & L7_CF_ENABLED))
		return l7_to_user(c, L7_R_DISABLED);
	s = l7_scratch_get();
	if (!s)
		return l7_to_user(c, L7_R_UNSUPPORTED);
	s->client_read_known = 0;
	n = l7_copy_skb(skb, s, 0, len);
	if (n <= 0 || l7_g_decide(s, (__u32)n, c, &key, cfg))
		v = l7_to_user(c, L7_R_INCOMPLETE);
	else
		v = l7_req_skb_decided(skb, &s->dec, c, &key, len);
	l7_scratch_put(s);
	return v;
}

/* ---- daemon control (BPF_PROG_TYPE_SYSCALL, run with BPF_PROG_TEST_RUN) ---- */

SEC("syscall")
int l7_ctl(struct l7_ctl_args *a)
{
	struct l7_conn_key key;
	struct l7_conn *c;

	/* map helpers take keys from the stack, not from the context */
	__builtin_memcpy(&key, &a->key, sizeof(key));
	c = bpf_map_lookup_elem(&l7_conns, &key);

	if (!c) {
		a->result = -2; /* ENOENT */
		return 0;
	}
	switch (a->op) {
	case L7_CTL_CLEAR_OUTSTANDING:
		c->k_outstanding = 0;
		break;
	case L7_CTL_SET_MODE_USER:
		c->mode = L7_MODE_USER;
		break;
	}
	a->result = 0;
	return 0;
}
