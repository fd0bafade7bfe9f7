// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * l7fast data plane. One object, attached as:
 *
 *   l7_sockops      cgroup sockops: adopts client sockets of l7fast listeners
 *                   and both ends of pooled upstream connections.
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
#include "lib/decide.h"

/* Load-time specialisation, set by the daemon through the skeleton. */
const volatile __u32 cfg_trace = 0;          /* decision traces to the daemon */
/* local clients' part of l7_conns, as an index mask (a smaller power of two
 * only for the daemon's test fault map-full=N) */
const volatile __u32 cfg_conns_local_mask = L7_CONNS_LOCAL - 1;
/* The benchmark's ceiling (L7FAST_TEST_FAULT=bench-raw), never a policy:
 * every request goes to an idle connection of l7_config.raw_pool and every
 * response message back, through the same sockets and redirects, with no
 * parsing, matching, framing or counting (scripts/bench: l7fast-raw). Each
 * message is one whole request or response: the benchmark's wrk and nginx
 * write them so (nginx: head and body in one writev). */
const volatile __u32 cfg_raw = 0;

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* ---- shared helpers ------------------------------------------------------ */

static __always_inline void l7_event(__u32 type, __u32 slot, __u32 conn, __u32 conn_gen)
{
	struct l7_event *e = l7_event_reserve();

	if (!e)
		return;
	e->type = type;
	e->slot = slot;
	e->conn = conn;
	e->conn_gen = conn_gen;
	e->arg[0] = 0;
	e->arg[1] = 0;
	bpf_ringbuf_submit(e, 0);
}

/* Tells the daemon to close client connection conn (counted in
 * close_events); slot is the exchange's, or 0. */
static __always_inline void l7_close_client(__u32 slot, __u32 conn, __u32 conn_gen)
{
	l7_event(L7_EV_CLOSE_CLIENT, slot, conn, conn_gen);
	l7_count(L7_C_CONN_CLOSE);
}

static __always_inline void l7_trace_ev(__u32 code, __u32 conn, __u64 a, __u64 b)
{
	struct l7_event *e = l7_event_reserve();

	if (!e)
		return;
	e->type = L7_EV_TRACE;
	e->slot = code;
	e->conn = conn;
	e->conn_gen = 0;
	e->arg[0] = a;
	e->arg[1] = b;
	bpf_ringbuf_submit(e, 0);
}

/* compiled out unless the daemon runs with --trace */
#define L7_TRACE(code, conn, a, b)                       \
	do {                                             \
		if (cfg_trace)                           \
			l7_trace_ev(code, conn, a, b);   \
	} while (0)

/*
 * SK_PASS for SK_MSG programs. Within one sendmsg the kernel re-runs the
 * program after an apply_bytes-limited redirect without clearing the
 * message's redirect target (sk_psock_map_verd(ret, msg->sk_redir)), so a
 * plain SK_PASS there would follow the earlier redirect. A redirect to the
 * socket's own egress is what SK_PASS means, and replaces that target.
 */
static __always_inline int l7_msg_pass(struct sk_msg_md *msg, void *self_map, __u32 self_idx)
{
	bpf_msg_redirect_map(msg, self_map, self_idx, 0);
	return SK_PASS;
}

/*
 * Bytes of the client's request stream go to the slow path. The first
 * hand-over since the kernel last took a request is counted with its
 * reason; later ones (the rest of the exchange, pipelined requests behind
 * it) are part of the same hand-over.
 */
static __always_inline void l7_passed(struct l7_conn *c, __u32 bytes, __u32 reason)
{
	c->pass_bytes += bytes;
	if (c->mode == L7_MODE_USER)
		return;
	c->mode = L7_MODE_USER;
	c->user_reason = reason;
	l7_count(L7_C_REQ_USER);
	l7_count(L7_C_REASON_BASE + reason);
}

/* Only the fields read here; CO-RE relocates them to the running kernel's
 * struct tcp_sock. */
struct tcp_sock___l7 {
	__u32 copied_seq;
	__u32 write_seq;
	__u32 snd_una;
	__u64 bytes_acked;
} __attribute__((preserve_access_index));

/* The fields of struct sock read here: sk_shutdown (a u8 since before
 * 5.x), and the cookie, for a program that has the socket but not
 * bpf_get_socket_cookie (SK_MSG); a socket has one once it was asked for,
 * as the daemon does before it registers one in l7_ref_by_cookie. */
struct sock_common___l7 {
	struct {
		__s64 counter;
	} skc_cookie;
} __attribute__((preserve_access_index));

struct sock___l7 {
	struct sock_common___l7 __sk_common;
	__u8 sk_shutdown;
} __attribute__((preserve_access_index));

/* Every byte ever queued on a TCP socket's send side: what is unacked or
 * unsent plus what was acked (snd_una and bytes_acked move together). */
static __always_inline __u32 l7_tcp_queued(const struct tcp_sock___l7 *tp)
{
	return tp->write_seq - tp->snd_una + (__u32)tp->bytes_acked;
}

/*
 * Whether the kernel may take the client's next request: the slow path has
 * consumed, as answered requests, every byte the kernel passed to it, and
 * its answers will reach the client before anything the kernel sends now.
 * The daemon publishes u_consumed and u_bytes before it writes the last
 * bytes of an answer, so the comparison is with the client socket's own
 * sequence numbers:
 *  - a local client reads kernel responses (socket to socket, its BPF
 *    ingress queue) before the TCP bytes the daemon wrote, whatever their
 *    order, so it must have read every byte the daemon wrote:
 *    copied_seq - rcv_start >= u_bytes;
 *  - a remote client gets both paths' bytes through the daemon's socket, in
 *    the order they are queued, so the daemon's bytes must be queued: bytes
 *    queued on that socket (write_seq - snd_una + bytes_acked) >= u_bytes
 *    plus what the kernel queued itself (k_bytes).
 * A client that does not pipeline sends its next request only after it has
 * read the answer, so it always finds this true.
 */
static __always_inline int l7_caught_up(const struct l7_conn *c, const struct l7_conn_sync *sy,
					struct bpf_sock *sk)
{
	struct tcp_sock___l7 *tp;
	__u32 done;

	if ((__u32)c->pass_bytes != sy->u_consumed)
		return 0;
	if (!sy->u_bytes)
		return 1; /* the daemon never wrote to this client */
	if (!sk)
		return 0;
	tp = (struct tcp_sock___l7 *)bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return 0;
	if (c->side == L7_SIDE_LOCAL) {
		done = tp->copied_seq - c->rcv_start;
		return (__s32)(done - sy->u_bytes) >= 0;
	}
	done = l7_tcp_queued(tp);
	return (__s32)(done - (sy->u_bytes + (__u32)c->k_bytes)) >= 0;
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

/* Marks an end of pooled connection `id` (l7_sk_refs). */
static __always_inline void l7_mark_slot_end(struct bpf_sock_ops *skops, __u32 id)
{
	struct bpf_sock *sk = skops->sk;
	struct l7_sk_ref *ref;

	if (!sk)
		return;
	ref = bpf_sk_storage_get(&l7_sk_refs, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!ref)
		return;
	ref->kind = L7_REF_SLOT;
	ref->idx = id;
	ref->gen = 0;
}

/*
 * One end of a pooled upstream connection left ESTABLISHED: the backend
 * closed it (CLOSE_WAIT on the daemon's end, FIN_WAIT1 on a local backend's
 * end, both before the closing call returns on loopback) or it was reset.
 * An idle slot is retired at once, so no request is sent into a connection
 * the backend has given up; the daemon, woken by the event, closes it. A
 * slot in use keeps L7_SF_PEER_CLOSED: l7_claim_slot does not take it again,
 * and a kernel exchange in flight is the daemon's to judge (L7_EV_SLOT_ENDED:
 * it looks at the socket and answers 502). The daemon does not watch these
 * sockets itself (see proxy/UpstreamPool.hpp): these events are how it
 * learns.
 */
static __always_inline void l7_upstream_left_established(struct bpf_sock_ops *skops,
							const struct l7_sk_ref *ref)
{
	struct l7_slot *s;
	__u64 *st;
	__u32 id;

	id = ref->idx;
	s = bpf_map_lookup_elem(&l7_slots, &id);
	st = bpf_map_lookup_elem(&l7_slot_state, &id);
	if (!s || !st)
		return;
	/* first the flag, for a slot in use now and idle later (l7_claim_slot
	 * never hands it out again) */
	__sync_fetch_and_or(&s->flags, L7_SF_PEER_CLOSED);
	if (__sync_val_compare_and_swap(st, L7_SLOT_IDLE, L7_SLOT_DEAD) == L7_SLOT_IDLE) {
		l7_event(L7_EV_SLOT_DEAD, id, L7_NO_CONN, 0);
		l7_count(L7_C_UPSTREAM_CLOSED);
	} else if (*st == L7_SLOT_KBUSY || *st == L7_SLOT_RELAY) {
		l7_event(L7_EV_SLOT_ENDED, id, L7_NO_CONN, 0);
	}
}

/* A free l7_conns entry for a local client (lower half), or L7_NO_CONN. */
static __always_inline __u32 l7_conn_alloc_local(void)
{
	__u32 start = bpf_get_prandom_u32(), i;

	for (i = 0; i < L7_CONN_PROBES; i++) {
		__u32 idx = (start + i) & cfg_conns_local_mask & (L7_CONNS_LOCAL - 1);
		struct l7_conn *c = bpf_map_lookup_elem(&l7_conns, &idx);

		if (c && c->state == L7_CONN_FREE &&
		    __sync_val_compare_and_swap(&c->state, L7_CONN_FREE, L7_CONN_USED) == L7_CONN_FREE)
			return idx;
	}
	return L7_NO_CONN;
}

/*
 * A local client's socket is established toward an l7fast listener: its
 * connection entry, its reference (sk_storage) and, last, its place in
 * l7_sk_client, which is what makes l7_req_msg run on its sends.
 */
static __always_inline void l7_adopt_client(struct bpf_sock_ops *skops, const struct l7_conn_key *k,
					    __u32 listener_id)
{
	struct bpf_sock *sk = skops->sk;
	struct l7_conn_sync *sy;
	struct l7_sk_ref *ref, r = {};
	struct l7_conn *c;
	__u32 idx;

	if (!sk)
		return;
	idx = l7_conn_alloc_local();
	if (idx == L7_NO_CONN) {
		l7_count(L7_C_REASON_BASE + L7_R_NO_CONN);
		return;
	}
	c = bpf_map_lookup_elem(&l7_conns, &idx);
	sy = bpf_map_lookup_elem(&l7_conn_sync, &idx);
	ref = bpf_sk_storage_get(&l7_sk_refs, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!c || !sy || !ref) {
		if (c)
			c->state = L7_CONN_FREE;
		return;
	}
	c->gen++;
	__builtin_memcpy(&c->key, k, sizeof(c->key));
	c->listener_id = listener_id;
	c->mode = L7_MODE_KERNEL;
	c->side = L7_SIDE_LOCAL;
	c->user_reason = 0;
	c->rcv_start = skops->rcv_nxt;
	c->last_slot = L7_NO_SLOT;
	c->k_requests = 0;
	c->pass_bytes = 0;
	c->k_bytes = 0;
	sy->u_consumed = 0;
	sy->u_bytes = 0;
	sy->k_busy = 0;
	sy->flags = 0;
	sy->k_done_ns = 0;
	sy->gen = c->gen;
	r.kind = L7_REF_CLIENT;
	r.idx = idx;
	r.gen = c->gen;
	*ref = r;
	if (bpf_map_update_elem(&l7_conn_by_tuple, k, &r, BPF_ANY) ||
	    bpf_sock_map_update(skops, &l7_sk_client, &idx, BPF_ANY)) {
		bpf_map_delete_elem(&l7_conn_by_tuple, k);
		ref->kind = L7_REF_NONE;
		c->state = L7_CONN_FREE;
		return;
	}
	l7_watch_state(skops); /* its half-close (l7_client_half_closed) */
}

#define L7_RCV_SHUTDOWN 1

/*
 * A local client's socket went from ESTABLISHED to FIN_WAIT1: it sent its
 * FIN. shutdown(SHUT_WR) sets only SEND_SHUTDOWN before the state changes,
 * close() both: a client that half-closed still reads, and its responses
 * from now on go through the daemon (L7_SYNC_HALF_CLOSED), ahead of the
 * daemon's FIN.
 */
static __always_inline void l7_client_half_closed(struct bpf_sock *sk, const struct l7_sk_ref *ref)
{
	struct l7_conn_sync *sy = 0;
	struct sock___l7 *s = (struct sock___l7 *)bpf_skc_to_tcp_sock(sk);
	struct l7_conn *c = l7_conn_of(ref, &sy);

	if (!c || !sy || !s || (s->sk_shutdown & L7_RCV_SHUTDOWN))
		return;
	__sync_fetch_and_or(&sy->flags, L7_SYNC_HALF_CLOSED);
}

SEC("sockops")
int l7_sockops(struct bpf_sock_ops *skops)
{
	struct l7_conn_key k;
	__u32 op = skops->op;

	if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB) {
		struct l7_config *cfg = l7_cfg();
		struct l7_listener *l;
		__u32 *sid;

		if (!cfg || !(cfg->flags & L7_CF_ENABLED))
			return 1;
		L7_KEY_FROM_CTX(&k, skops, 1);
		l = l7_find_listener(&k);
		if (l) {
			l7_adopt_client(skops, &k, l->id);
			return 1;
		}
		/* the daemon's own connection to an upstream (registered
		 * before connecting when it is a pool slot) */
		sid = bpf_map_lookup_elem(&l7_slot_by_tuple, &k);
		if (sid) {
			l7_mark_slot_end(skops, *sid);
			l7_watch_state(skops);
		}
	} else if (op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
		struct l7_slot *s;
		__u32 *sid, id;

		L7_KEY_FROM_CTX(&k, skops, 0);
		sid = bpf_map_lookup_elem(&l7_slot_by_tuple, &k);
		if (!sid)
			return 1;
		id = *sid;
		l7_mark_slot_end(skops, id);
		if (bpf_sock_map_update(skops, &l7_sk_backend, &id, BPF_ANY))
			return 1;
		l7_watch_state(skops);
		s = bpf_map_lookup_elem(&l7_slots, &id);
		if (s)
			__sync_fetch_and_or(&s->flags, L7_SF_BACKEND_LOCAL);
	} else if (op == BPF_SOCK_OPS_STATE_CB) {
		struct bpf_sock *sk = skops->sk;
		struct l7_sk_ref *ref;

		if (skops->args[0] != BPF_TCP_ESTABLISHED || !sk)
			return 1;
		ref = bpf_sk_storage_get(&l7_sk_refs, sk, 0, 0);
		if (ref && ref->kind == L7_REF_SLOT)
			l7_upstream_left_established(skops, ref);
		else if (ref && ref->kind == L7_REF_CLIENT && skops->args[1] == BPF_TCP_FIN_WAIT1)
			l7_client_half_closed(sk, ref);
	}
	return 1;
}

/* A claimed slot that is not used after all goes back to the pool. */
static __always_inline void l7_slot_unclaim(__u32 id)
{
	__u64 *st = bpf_map_lookup_elem(&l7_slot_state, &id);
	struct l7_slot *s = bpf_map_lookup_elem(&l7_slots, &id);

	if (!st || !s)
		return;
	*st = L7_SLOT_IDLE;
	l7_pool_mark_idle(s, id);
}

static __always_inline struct l7_slot *l7_slot_begin(struct l7_decision *d, const struct l7_sk_ref *cref,
						     __u32 local)
{
	struct l7_slot *slot = bpf_map_lookup_elem(&l7_slots, &d->slot);

	if (!slot)
		return 0;
	slot->client = cref->idx;
	slot->client_gen = cref->gen;
	slot->client_local = (__u16)local;
	slot->stats_id = d->stats_id;
	slot->req_start_ns = bpf_ktime_get_ns();
	slot->uses++;
	__builtin_memset(&slot->resp, 0, sizeof(slot->resp));
	slot->resp.req_head = (__u8)d->req_head;
	slot->resp.close_after = (__u8)d->close;
	return slot;
}

static __always_inline void l7_kernel_accounted(struct l7_conn *c, struct l7_conn_sync *sy,
						struct l7_decision *d)
{
	struct l7_route_stats *rs = l7_rstats(d->stats_id);

	sy->k_busy = 1;
	c->k_requests++;
	if (rs) {
		rs->requests_kernel++;
		rs->bytes_in += d->total;
	}
	l7_count(L7_C_REQ_KERNEL);
}

#define l7_slot_kill(id, conn)                                        \
	do {                                                          \
		L7_TRACE(L7_T_KILL, conn, id, __LINE__);              \
		l7_slot_kill_(id, conn);                              \
	} while (0)

static __always_inline void l7_slot_kill_(__u32 id, __u32 conn)
{
	__u64 *st = bpf_map_lookup_elem(&l7_slot_state, &id);

	if (st)
		*st = L7_SLOT_DEAD;
	l7_event(L7_EV_SLOT_DEAD, id, conn, 0);
}

/*
 * Sampled access log (daemon.access_log_sample = N): one kernel response or
 * answer in N per CPU, the per-CPU responses_kernel counter being the
 * sequence. The event to fill and submit, or 0 when this one is not sampled.
 */
static __always_inline struct l7_event *l7_access_sampled(void)
{
	struct l7_config *cfg = l7_cfg();
	__u32 key = L7_C_RESP_KERNEL, n;
	__u64 *seq;

	if (!cfg || !cfg->access_log_sample)
		return 0;
	n = cfg->access_log_sample;
	seq = bpf_map_lookup_elem(&l7_counters, &key);
	if (!seq || *seq % n)
		return 0;
	return l7_event_reserve();
}

/* ---- requests from local clients (SK_MSG) --------------------------------- */

/* A request the kernel answered itself: counted as a kernel exchange of its
 * route that ended as it began. */
static __always_inline void l7_answer_accounted(struct l7_conn *c, struct l7_conn_sync *sy,
						const struct l7_decision *d, const struct l7_response *r,
						__u32 sent)
{
	struct l7_route_stats *rs = l7_rstats(d->stats_id);
	__u32 code = l7_code_slot(r->status);

	c->k_requests++;
	sy->k_done_ns = bpf_ktime_get_ns();
	if (d->answer == L7_ANS_DENY) {
		if (d->rbac_rule < L7_GENS * L7_MAX_RULES) {
			__u32 k = d->rbac_rule;
			__u64 *n = bpf_map_lookup_elem(&l7_rule_denied, &k);

			if (n)
				*n += 1;
		}
		if (rs)
			rs->rbac_denied++;
	} else if (rs) {
		if (d->answer == L7_ANS_NO_TOKEN)
			rs->jwt_missing++;
		else if (d->answer == L7_ANS_BAD_TOKEN)
			rs->jwt_invalid++;
		else if (d->answer == L7_ANS_LIMITED)
			rs->rate_limited++;
		else
			rs->direct_responses++;
	}
	if (rs) {
		rs->requests_kernel++;
		rs->bytes_in += d->total;
		rs->status[l7_status_class(r->status)]++;
		if (code < L7_N_KERNEL_CODES)
			rs->codes[code]++;
		rs->bytes_out += sent;
		rs->latency[0]++; /* answered within the send: the lowest bucket */
	}
	l7_count(L7_C_REQ_KERNEL);
	l7_count(L7_C_RESP_KERNEL);
}

/* The access event of an answer the kernel sent, when sampled. */
static __always_inline void l7_answer_event(const struct l7_sk_ref *cref, const struct l7_decision *d,
					    const struct l7_response *r, __u32 sent)
{
	struct l7_event *e = l7_access_sampled();

	if (!e)
		return;
	e->type = L7_EV_ANSWER;
	e->slot = (d->stats_id & 0xffff) | ((__u32)r->status << 16);
	e->conn = cref->idx;
	e->conn_gen = cref->gen;
	e->arg[0] = sent;
	e->arg[1] = (d->answer & 0xff) | ((d->detail & 0xff) << 8) | ((__u64)d->rbac_rule << 32);
	bpf_ringbuf_submit(e, 0);
}

/* The answer to the request that is the whole of a message of `size`
 * bytes, and its length (*len: the head alone for HEAD); 0 with
 * d->reason set when the kernel does not send it. */
static __always_inline struct l7_response *l7_answer_of(struct l7_decision *d, __u32 size, __u32 *len)
{
	struct l7_response *r = bpf_map_lookup_elem(&l7_responses, &d->resp);
	__u32 n;

	if (!r) {
		d->reason = L7_R_ROUTE_USER;
		return 0;
	}
	/* one request, whole: a body still to come is not dropped here, and a
	 * pipelined request behind this one would be answered out of order */
	if (d->total != size) {
		d->reason = d->total > size ? L7_R_TOO_BIG : L7_R_PIPELINED;
		return 0;
	}
	n = d->req_head ? r->head_len : r->len;
	if (!n || n > L7_MAX_RESP_BYTES || n > r->len) {
		d->reason = L7_R_ROUTE_USER;
		return 0;
	}
	*len = n;
	return r;
}

/* A message was changed half-way: it cannot go anywhere, and the
 * client connection closes (the daemon closes it on the event). */
static __always_inline int l7_answer_broken(struct l7_conn *c, const struct l7_sk_ref *cref, __u32 size)
{
	l7_close_client(0, cref->idx, cref->gen);
	l7_passed(c, size, L7_R_REDIRECT);
	return SK_DROP;
}

#define L7_ANSWER_HALF (L7_MAX_RESP_BYTES / 2)
_Static_assert(L7_ANSWER_HALF <= L7_MUT_MAX_ADD, "l7_msg_write stores at most L7_MUT_MAX_ADD bytes");

/*
 * Makes msg, which holds `size` bytes, the first `len` bytes of r: the
 * answer is pushed in front and what was there popped behind it. 0 when
 * done; -1 when msg is untouched; 1 when it was changed half-way and can
 * go nowhere.
 */
static __always_inline int l7_msg_become(struct sk_msg_md *msg, const struct l7_response *r, __u32 len,
					 __u32 size)
{
	__u32 first = len > L7_ANSWER_HALF ? L7_ANSWER_HALF : len;

	if (bpf_msg_push_data(msg, 0, len, 0))
		return -1;
	if (l7_msg_write(msg, 0, r->bytes, 0, first, L7_MAX_RESP_BYTES - 1) ||
	    l7_msg_write(msg, first, r->bytes, first, len - first, L7_MAX_RESP_BYTES - 1))
		return bpf_msg_pop_data(msg, 0, len, 0) ? 1 : -1;
	return bpf_msg_pop_data(msg, len, size, 0) ? 1 : 0;
}

/*
 * Answers the request that is the whole of msg with l7_responses[d->resp]:
 * the message becomes the response and goes into the client socket's own
 * ingress queue, where its kernel responses go. SK_PASS when sent; -1 when
 * the message is untouched and the slow path can take it (d->reason says
 * why); SK_DROP when it was changed half-way and the connection must close.
 */
static __always_inline int l7_answer_msg(struct sk_msg_md *msg, struct l7_decision *d, struct l7_conn *c,
					 struct l7_conn_sync *sy, const struct l7_sk_ref *cref, __u32 size)
{
	struct l7_response *r;
	__u32 len;
	int b;

	r = l7_answer_of(d, size, &len);
	if (!r)
		return -1;
	b = l7_msg_become(msg, r, len, size);
	if (b < 0) {
		d->reason = L7_R_REDIRECT;
		return -1;
	}
	if (b || bpf_msg_redirect_map(msg, &l7_sk_client, cref->idx, BPF_F_INGRESS) != SK_PASS)
		return l7_answer_broken(c, cref, size);
	l7_answer_accounted(c, sy, d, r, len);
	l7_answer_event(cref, d, r, len);
	return SK_PASS;
}

/* A request from a local client, decided in s->dec. */
static __always_inline int l7_req_msg_decided(struct sk_msg_md *msg, struct l7_scratch *s,
					      struct l7_conn *c, struct l7_conn_sync *sy,
					      const struct l7_sk_ref *cref, __u32 size)
{
	struct l7_decision *d = &s->dec;
	__u32 idx = cref->idx;
	struct l7_slot *slot;
	int ingress, v;

	L7_TRACE(L7_T_REQ, idx, d->kind, d->reason);
	if (d->kind == L7_D_ANSWER) {
		v = l7_answer_msg(msg, d, c, sy, cref, size);
		if (v >= 0)
			return v;
		d->kind = L7_D_PASS;
	}
	if (d->kind == L7_D_KERNEL) {
		slot = l7_slot_begin(d, cref, 1);
		if (!slot) {
			d->kind = L7_D_PASS;
			d->reason = L7_R_REDIRECT;
			goto pass;
		}
		/* Socket to socket is all-or-nothing per message. Over TCP (a
		 * backend on another host) only a request this message holds
		 * whole: a partial push would be re-sent by the client. */
		ingress = !!(slot->flags & L7_SF_BACKEND_LOCAL);
		if (!ingress && d->total > size) {
			l7_slot_unclaim(d->slot);
			d->kind = L7_D_PASS;
			d->reason = L7_R_TOO_BIG;
		} else if ((d->route_flags & L7_RF_MUTATE) && d->total < size) {
			/* a rewritten request followed by more bytes in the same
			 * message: the slow path frames that */
			l7_slot_unclaim(d->slot);
			d->kind = L7_D_PASS;
			d->reason = L7_R_MUTATION;
		} else {
			long delta = 0;

			if (ingress)
				v = bpf_msg_redirect_map(msg, &l7_sk_backend, d->slot, BPF_F_INGRESS);
			else
				v = bpf_msg_redirect_map(msg, &l7_sk_upstream, d->slot, 0);
			L7_TRACE(L7_T_REQ_REDIRECT, idx, d->slot, ((__u64)ingress << 32) | (__u32)v);
			/* rewritten only once the redirect is certain: a request
			 * the slow path takes must reach it as the client sent it */
			if (v == SK_PASS && (d->route_flags & L7_RF_MUTATE)) {
				/* JWT: the verified token's forwarded-claim lines go
				 * here (fwd, fwd_len) once the kernel caches tokens */
				int mr = l7_req_mutate(msg, s, 0, 0, &delta);

				if (mr == L7_MUT_BROKEN) {
					/* half-rewritten: neither path may send it */
					l7_slot_unclaim(d->slot);
					l7_close_client(d->slot, idx, cref->gen);
					l7_passed(c, size, L7_R_MUTATION);
					return SK_DROP;
				}
				if (mr != L7_MUT_DONE) {
					/* untouched: the pass below replaces the redirect */
					l7_slot_unclaim(d->slot);
					d->kind = L7_D_PASS;
					d->reason = L7_R_MUTATION;
				}
			}
			if (v == SK_PASS && d->kind == L7_D_KERNEL) {
				l7_kernel_accounted(c, sy, d);
				/* the verdict covers the request as rewritten */
				if (d->total != size)
					bpf_msg_apply_bytes(msg, (__u32)((long)d->total + delta));
				return SK_PASS;
			}
			if (d->kind == L7_D_KERNEL) {
				l7_slot_kill(d->slot, idx);
				d->kind = L7_D_PASS;
				d->reason = L7_R_REDIRECT;
			}
		}
	}
pass:
	/* the whole message: the slow path frames it, and the kernel takes
	 * the connection back once the daemon has answered it all */
	l7_rate_refund(s);
	l7_passed(c, size, d->reason);
	return l7_msg_pass(msg, &l7_sk_client, idx);
}

/* cfg_raw: the request's whole message to an idle connection of the raw
 * pool, as l7_req_msg_decided sends a kernel request. */
static __always_inline int l7_req_raw(void *ctx, int is_msg, struct l7_conn *c, struct l7_conn_sync *sy,
				      const struct l7_sk_ref *cref, struct l7_config *cfg, __u32 size)
{
	struct l7_scratch *s = l7_scratch_get();
	struct l7_slot *slot;
	__u32 id;
	int v;

	if (!s)
		return -1;
	id = l7_g_claim(s, c, cfg->raw_pool);
	l7_scratch_put(s);
	slot = bpf_map_lookup_elem(&l7_slots, &id);
	if (!slot)
		return -1;
	slot->client = cref->idx;
	slot->client_gen = cref->gen;
	slot->client_local = is_msg;
	if (slot->flags & L7_SF_BACKEND_LOCAL)
		v = is_msg ? bpf_msg_redirect_map(ctx, &l7_sk_backend, id, BPF_F_INGRESS)
			   : bpf_sk_redirect_map(ctx, &l7_sk_backend, id, BPF_F_INGRESS);
	else
		v = is_msg ? bpf_msg_redirect_map(ctx, &l7_sk_upstream, id, 0)
			   : bpf_sk_redirect_map(ctx, &l7_sk_upstream, id, 0);
	if (v != SK_PASS) {
		l7_slot_unclaim(id);
		return -1;
	}
	sy->k_busy = 1;
	return SK_PASS;
}

/* cfg_raw: a response message back to the client whole, the exchange over. */
static __always_inline void l7_resp_raw_done(struct l7_slot *slot, __u64 *st, __u32 id,
					     struct l7_conn_sync *sy)
{
	sy->k_busy = 0;
	*st = L7_SLOT_IDLE;
	l7_pool_mark_idle(slot, id);
}

SEC("sk_msg")
int l7_req_msg(struct sk_msg_md *msg)
{
	struct l7_conn_sync *sy = 0;
	struct l7_sk_ref *ref;
	struct l7_scratch *s;
	struct l7_config *cfg;
	struct l7_conn *c;
	__u32 size = msg->size, idx;
	long n;
	int v;

	if (!msg->sk)
		return SK_PASS;
	ref = bpf_sk_storage_get(&l7_sk_refs, msg->sk, 0, 0);
	c = l7_conn_of(ref, &sy);
	if (!c || !ref) {
		l7_count(L7_C_REASON_BASE + L7_R_NO_CONN);
		return ref ? l7_msg_pass(msg, &l7_sk_client, ref->idx) : SK_PASS;
	}
	idx = ref->idx;
	if (sy->k_busy) {
		l7_passed(c, size, L7_R_PIPELINED);
		return l7_msg_pass(msg, &l7_sk_client, idx);
	}
	if (!l7_caught_up(c, sy, msg->sk)) {
		l7_passed(c, size, L7_R_USER_PENDING);
		return l7_msg_pass(msg, &l7_sk_client, idx);
	}
	if (c->mode == L7_MODE_USER) {
		c->mode = L7_MODE_KERNEL;
		l7_count(L7_C_HANDED_BACK);
	}
	cfg = l7_cfg();
	if (!cfg || !(cfg->flags & L7_CF_ENABLED)) {
		l7_passed(c, size, L7_R_DISABLED);
		return l7_msg_pass(msg, &l7_sk_client, idx);
	}
	if (cfg_raw) {
		v = l7_req_raw(msg, 1, c, sy, ref, cfg, size);
		if (v == SK_PASS)
			return v;
		l7_passed(c, size, L7_R_POOL_MISS);
		return l7_msg_pass(msg, &l7_sk_client, idx);
	}
	s = l7_scratch_get();
	if (!s) {
		l7_passed(c, size, L7_R_NO_SCRATCH);
		return l7_msg_pass(msg, &l7_sk_client, idx);
	}
	n = l7_copy_msg(msg, s, 0, size);
	if (n <= 0 || l7_g_decide(s, (__u32)n, c, cfg)) {
		l7_passed(c, size, L7_R_COPY_FAILED);
		v = l7_msg_pass(msg, &l7_sk_client, idx);
	} else {
		v = l7_req_msg_decided(msg, s, c, sy, ref, size);
	}
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

/* A completed response's access event (L7_EV_ACCESS), when sampled. */
static __always_inline void l7_access_event(struct l7_slot *slot, __u64 latency)
{
	struct l7_event *e = l7_access_sampled();

	if (!e)
		return;
	e->type = L7_EV_ACCESS;
	e->slot = (slot->stats_id & 0xffff) | ((__u32)slot->resp.status << 16);
	e->conn = slot->client;
	e->conn_gen = slot->client_gen;
	e->arg[0] = (slot->resp.bytes & ((1ULL << 48) - 1)) | ((__u64)slot->pool_id << 48);
	e->arg[1] = latency;
	bpf_ringbuf_submit(e, 0);
}

/* The client connection of the exchange on `slot`, if still the same. */
static __always_inline struct l7_conn *l7_slot_client(const struct l7_slot *slot,
						      struct l7_conn_sync **sy)
{
	struct l7_sk_ref r = {};

	r.kind = L7_REF_CLIENT;
	r.idx = slot->client;
	r.gen = slot->client_gen;
	return l7_conn_of(&r, sy);
}

/*
 * Passive outlier detection: the pool's run of 5xx responses (the daemon
 * adds the slow path's to the same word); the response that brings it to
 * the daemon's threshold raises one L7_EV_OUTLIER.
 */
static __always_inline void l7_pool_outlier(__u32 pool, __u32 status)
{
	struct l7_pool *p = bpf_map_lookup_elem(&l7_pools, &pool);
	__u32 limit;

	if (!p)
		return;
	limit = READ_ONCE(p->eject_5xx);
	if (!limit)
		return;
	if (status < 500 || status > 599) {
		if (READ_ONCE(p->streak_5xx))
			WRITE_ONCE(p->streak_5xx, 0);
		return;
	}
	if (__sync_add_and_fetch(&p->streak_5xx, 1) == limit)
		l7_event(L7_EV_OUTLIER, pool, 0, 0);
}

static __always_inline void l7_resp_complete(struct l7_slot *slot, __u64 *st, __u32 id,
					     struct l7_conn_sync *sy, __u32 extra)
{
	struct l7_route_stats *rs = l7_rstats(slot->stats_id);
	__u64 latency = bpf_ktime_get_ns() - slot->req_start_ns;
	__u32 bucket = l7_lat_bucket(latency) & (L7_LAT_BUCKETS - 1);
	__u32 class = l7_status_class(slot->resp.status);
	__u32 code = l7_code_slot(slot->resp.status);
	struct l7_pool_stats *ps;
	__u32 pool = slot->pool_id;

	if (sy) {
		sy->k_done_ns = latency + slot->req_start_ns;
		sy->k_busy = 0;
	}
	if (rs) {
		rs->status[class]++;
		if (code < L7_N_KERNEL_CODES)
			rs->codes[code]++;
		rs->bytes_out += slot->resp.bytes;
		rs->latency[bucket]++;
	}
	ps = bpf_map_lookup_elem(&l7_pool_stats, &pool);
	if (ps) {
		ps->responses++;
		ps->status[class]++;
		ps->bytes_out += slot->resp.bytes;
		ps->latency[bucket]++;
	}
	l7_pool_outlier(pool, slot->resp.status);
	l7_count(L7_C_RESP_KERNEL);
	l7_access_event(slot, latency);
	if (slot->resp.close_after) {
		l7_close_client(id, slot->client, slot->client_gen);
	}
	if (slot->resp.close_after || extra) {
		l7_slot_kill(id, slot->client);
	} else {
		*st = L7_SLOT_IDLE;
		l7_pool_mark_idle(slot, id);
	}
}

static __always_inline void l7_relay(struct l7_slot *slot, __u64 *st, __u32 id)
{
	if (__sync_val_compare_and_swap(st, L7_SLOT_KBUSY, L7_SLOT_RELAY) == L7_SLOT_KBUSY)
		l7_event(L7_EV_RELAY, id, slot->client, slot->client_gen);
	l7_count(L7_C_RESP_RELAY);
}

/* The step ends at `pos`: the bytes before it go on the kernel path, the
 * rest (all of it when pos is 0) to the daemon. */
static __always_inline void l7_resp_stop(struct l7_resp_step *o, long pos)
{
	o->outcome = pos ? L7_O_FORWARD : L7_O_RELAY;
	o->pos = pos;
}

/*
 * One response message on a KBUSY slot: its heads (interim ones included)
 * parsed, its body framed; `o` says what to do with it. `ctx` is the hook's
 * context: a struct __sk_buff when `is_skb` (SK_SKB: an skb cannot be split,
 * see below), else a struct sk_msg_md. Inlined into each hook with
 * `is_skb` a constant, so each gets only its own branches.
 */
static __always_inline void l7_resp_step(void *ctx, const bool is_skb, struct l7_slot *slot,
					 struct l7_scratch *s, __u32 size, __u32 budget,
					 struct l7_resp_step *o)
{
	long pos = 0;
	int it;

	o->outcome = L7_O_FORWARD;
	for (it = 0; it < 3; it++) {
		long n;
		int r;

		if (slot->resp.phase != L7_RESP_START || pos >= size)
			break;
		if (!s) {
			l7_resp_stop(o, pos);
			return;
		}
		n = is_skb ? l7_copy_skb(ctx, s, pos, size - pos) : l7_copy_msg(ctx, s, pos, size - pos);
		if (n <= 0) {
			l7_resp_stop(o, pos);
			return;
		}
		r = l7_g_parse(s, (__u32)n, 0);
		if (r != L7_P_OK) {
			l7_resp_stop(o, pos);
			return;
		}
		l7_response_body(&s->ws.msg, slot->resp.req_head);
		slot->resp.status = s->ws.msg.status;
		if (s->ws.msg.flags & L7_MF_CLOSE)
			slot->resp.close_after = 1;
		/* upgrades are never sent down the kernel path; a response
		 * after which the client connection closes is relayed, so
		 * that the daemon's FIN follows it on the same path: a
		 * redirect is delivered after the program ran, and a FIN
		 * sent meanwhile could reach the client first */
		if (s->ws.msg.status == 101 ||
		    (slot->resp.close_after && s->ws.msg.status >= 200)) {
			l7_resp_stop(o, pos);
			return;
		}
		if (s->ws.msg.status < 200) {
			pos += s->ws.msg.hdr_len;
			continue;
		}
		/* A body that ends with the connection is relayed by the
		 * daemon from its head on: after socket-to-socket data, 6.18
		 * reports the closing FIN to the reader as EFAULT, not EOF. */
		/* SK_SKB redirects are delivered later by the target's
		 * backlog worker, so bytes the daemon relays could overtake
		 * them: there the kernel takes a response whole or not at
		 * all, and only when its length is known and in budget. */
		if (s->ws.msg.body_kind == L7_BODY_UNTIL_CLOSE ||
		    (is_skb &&
		     (s->ws.msg.body_kind == L7_BODY_CHUNKED ||
		      slot->resp.bytes + pos + s->ws.msg.hdr_len +
				      s->ws.msg.content_length > budget))) {
			l7_resp_stop(o, pos);
			return;
		}
		pos += s->ws.msg.hdr_len;
		l7_body_init(&slot->resp.body, s->ws.msg.body_kind,
			     s->ws.msg.content_length);
		slot->resp.phase = L7_RESP_BODY;
	}
	if (slot->resp.phase == L7_RESP_BODY) {
		struct l7_body_state saved = slot->resp.body;

		pos = is_skb ? l7_frame_skb(ctx, s, &slot->resp.body, (__u32)pos, size)
			     : l7_frame_msg(ctx, s, &slot->resp.body, (__u32)pos, size);
		if (pos < 0) {
			o->outcome = L7_O_KILL;
			return;
		}
		if (is_skb && !slot->resp.body.done && pos < size) {
			/* an skb cannot be split: let the daemon frame it */
			slot->resp.body = saved;
			o->outcome = L7_O_RELAY;
			o->pos = 0;
			return;
		}
		o->done = slot->resp.body.done;
		if (o->done && pos < size)
			o->extra = size - (__u32)pos;
	}
	o->pos = (__u32)pos;
}


/* Socket-to-socket into a local client's ingress; to a remote client
 * through the daemon's accepted socket. */
static __always_inline int l7_resp_redirect_msg(struct sk_msg_md *msg, struct l7_slot *slot)
{
	if (!slot->client_local)
		return bpf_msg_redirect_map(msg, &l7_sk_remote, slot->client, 0);
	return bpf_msg_redirect_map(msg, &l7_sk_client, slot->client, BPF_F_INGRESS);
}

static __always_inline int l7_resp_redirect_skb(struct __sk_buff *skb, struct l7_slot *slot)
{
	if (!slot->client_local)
		return bpf_sk_redirect_map(skb, &l7_sk_remote, slot->client, 0);
	return bpf_sk_redirect_map(skb, &l7_sk_client, slot->client, BPF_F_INGRESS);
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

/* The busy slot a pooled connection's end belongs to (ref: its reference);
 * *id is its slot (L7_NO_SLOT when the socket is not pooled) even when the
 * slot is not busy. */
static __always_inline struct l7_slot *l7_slot_of(const struct l7_sk_ref *ref, __u32 *id, __u64 **st)
{
	struct l7_slot *slot;

	*id = L7_NO_SLOT;
	if (!ref || ref->kind != L7_REF_SLOT)
		return 0;
	*id = ref->idx;
	*st = bpf_map_lookup_elem(&l7_slot_state, id);
	slot = bpf_map_lookup_elem(&l7_slots, id);
	if (!slot || !*st || **st != L7_SLOT_KBUSY)
		return 0;
	return slot;
}

/* Responses from local backends (SK_MSG on the backend's socket). */
SEC("sk_msg")
int l7_resp_msg(struct sk_msg_md *msg)
{
	struct l7_conn_sync *sy = 0;
	struct l7_resp_step o = {};
	struct l7_scratch *s = 0;
	struct l7_sk_ref *ref;
	struct l7_slot *slot;
	struct l7_conn *c;
	__u32 id, size = msg->size;
	__u64 *st = 0;
	int v;

	if (!msg->sk)
		return SK_PASS;
	ref = bpf_sk_storage_get(&l7_sk_refs, msg->sk, 0, 0);
	slot = l7_slot_of(ref, &id, &st);
	if (!slot || !st)
		return id == L7_NO_SLOT ? SK_PASS : l7_msg_pass(msg, &l7_sk_backend, id);
	/*
	 * The client went to the slow path while this response is in flight
	 * (it pipelined a request the daemon now answers): the rest of the
	 * response is relayed through the daemon, which then writes its own
	 * answer behind it. Redirected bytes could overtake it otherwise: the
	 * program marks the response complete before the kernel delivers the
	 * redirect, and a local client reads its ingress queue first.
	 */
	c = l7_slot_client(slot, &sy);
	if (cfg_raw && c && sy) {
		if (l7_resp_redirect_msg(msg, slot) == SK_PASS)
			l7_resp_raw_done(slot, st, id, sy);
		return SK_PASS;
	}
	if (!c || c->mode == L7_MODE_USER || (sy && (sy->flags & (L7_SYNC_CLOSING | L7_SYNC_HALF_CLOSED))) ||
	    l7_resp_over_budget(slot, size)) {
		l7_relay(slot, st, id);
		return l7_msg_pass(msg, &l7_sk_backend, id);
	}
	if (slot->resp.phase == L7_RESP_START || slot->resp.body.kind == L7_BODY_CHUNKED)
		s = l7_scratch_get();
	l7_resp_step(msg, /* is_skb */ 0, slot, s, size, 0, &o);
	if (s)
		l7_scratch_put(s);
	L7_TRACE(L7_T_RESP, slot->client, o.outcome, o.pos | ((__u64)o.done << 32));

	switch (o.outcome) {
	case L7_O_RELAY:
		l7_relay(slot, st, id);
		return l7_msg_pass(msg, &l7_sk_backend, id);
	case L7_O_KILL:
		l7_event(L7_EV_CLOSE_CLIENT, id, slot->client, slot->client_gen);
		l7_slot_kill(id, slot->client);
		return l7_msg_pass(msg, &l7_sk_backend, id);
	}
	v = l7_resp_redirect_msg(msg, slot);
	L7_TRACE(L7_T_RESP_REDIRECT, slot->client, (__u32)v, o.pos);
	if (v != SK_PASS) {
		/* the client is gone: the daemon drains and closes this socket */
		l7_slot_kill(id, slot->client);
		return l7_msg_pass(msg, &l7_sk_backend, id);
	}
	slot->resp.bytes += o.pos;
	if (!slot->client_local)
		c->k_bytes += o.pos;
	if (o.done)
		l7_resp_complete(slot, st, id, sy, o.extra);
	if (o.pos < size)
		bpf_msg_apply_bytes(msg, o.pos);
	return SK_PASS;
}

/* The reference of one of the daemon's own sockets (l7_ref_by_cookie). */
static __always_inline struct l7_sk_ref *l7_skb_ref(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);

	return bpf_map_lookup_elem(&l7_ref_by_cookie, &cookie);
}

/* Responses arriving from the network on pooled upstream sockets. */
SEC("sk_skb")
int l7_resp_skb(struct __sk_buff *skb)
{
	struct l7_conn_sync *sy = 0;
	struct l7_resp_step o = {};
	struct l7_scratch *s = 0;
	struct l7_config *cfg;
	struct l7_slot *slot;
	struct l7_conn *c;
	__u32 id, size = skb->len;
	__u64 *st = 0;
	int v;

	slot = l7_slot_of(l7_skb_ref(skb), &id, &st);
	if (!slot || !st) {
		/* Bytes on an idle pooled connection answer no request: it is
		 * retired before a request is sent into it (the daemon, which
		 * does not watch the socket, learns from the event). */
		if (id != L7_NO_SLOT && size && st &&
		    __sync_val_compare_and_swap(st, L7_SLOT_IDLE, L7_SLOT_DEAD) == L7_SLOT_IDLE)
			l7_event(L7_EV_SLOT_DEAD, id, L7_NO_CONN, 0);
		return SK_PASS;
	}
	/* as in l7_resp_msg; here also because SK_SKB redirects are delivered
	 * later, by the target's backlog worker */
	c = l7_slot_client(slot, &sy);
	if (cfg_raw && c && sy) {
		if (l7_resp_redirect_skb(skb, slot) == SK_PASS)
			l7_resp_raw_done(slot, st, id, sy);
		return SK_PASS;
	}
	if (!c || c->mode == L7_MODE_USER || (sy && (sy->flags & (L7_SYNC_CLOSING | L7_SYNC_HALF_CLOSED)))) {
		l7_relay(slot, st, id);
		return SK_PASS;
	}
	cfg = l7_cfg();
	if (slot->resp.phase == L7_RESP_START)
		s = l7_scratch_get();
	l7_resp_step(skb, /* is_skb */ 1, slot, s, size, cfg ? cfg->ingress_budget : 0, &o);
	if (s)
		l7_scratch_put(s);

	if (o.outcome == L7_O_FORWARD && o.pos < size && !o.extra && o.pos) {
		/* 1xx followed by an incomplete head: cannot split an skb */
		o.outcome = L7_O_RELAY;
	}
	switch (o.outcome) {
	case L7_O_RELAY:
		l7_relay(slot, st, id);
		return SK_PASS;
	case L7_O_KILL:
		l7_event(L7_EV_CLOSE_CLIENT, id, slot->client, slot->client_gen);
		l7_slot_kill(id, slot->client);
		return SK_PASS;
	}
	if (o.extra && bpf_skb_change_tail(skb, o.pos, 0)) {
		l7_relay(slot, st, id);
		return SK_PASS;
	}
	v = l7_resp_redirect_skb(skb, slot);
	if (v != SK_PASS) {
		l7_slot_kill(id, slot->client);
		return SK_PASS;
	}
	slot->resp.bytes += o.pos;
	if (!slot->client_local)
		c->k_bytes += o.pos;
	if (o.done)
		l7_resp_complete(slot, st, id, sy, o.extra);
	return SK_PASS;
}

/* ---- requests from remote clients (SK_SKB on the daemon's socket) --------- */

/*
 * A remote client's answer. A verdict must not change the length of the
 * skb it redirects (ARCHITECTURE.md section 7, item 14), so the request's
 * skb, made linear so that it is sent in one piece, goes unchanged to the
 * egress of the client's own socket, and l7_remote_out_msg makes it the
 * answer on that socket's send path, where a message's length is free. The
 * connection records where those bytes start in the socket's send stream:
 * the kernel takes a request only when everything sent before it is queued
 * (l7_caught_up), so that is the count queued now. k_busy holds the slow
 * path's writes back until the answer is queued, and k_bytes counts it.
 * SK_PASS when redirected; -1 when the slow path takes the request
 * (d->reason says why).
 */
static __always_inline int l7_answer_skb(struct __sk_buff *skb, struct l7_decision *d, struct l7_conn *c,
					 struct l7_conn_sync *sy, const struct l7_sk_ref *cref, __u32 size)
{
	struct bpf_sock *sk = skb->sk;
	struct tcp_sock___l7 *tp;
	struct l7_response *r;
	__u32 len;

	r = l7_answer_of(d, size, &len);
	if (!r)
		return -1;
	tp = sk ? (struct tcp_sock___l7 *)bpf_skc_to_tcp_sock(sk) : 0;
	if (!tp || bpf_skb_pull_data(skb, size)) {
		d->reason = L7_R_ANSWER_REMOTE;
		return -1;
	}
	c->ans_at = l7_tcp_queued(tp);
	c->ans_in = size;
	c->ans_resp = d->resp;
	c->ans_len = len;
	if (bpf_sk_redirect_map(skb, &l7_sk_remote, cref->idx, 0) != SK_PASS) {
		c->ans_in = 0;
		d->reason = L7_R_REDIRECT;
		return -1;
	}
	sy->k_busy = 1;
	c->k_bytes += len;
	l7_answer_accounted(c, sy, d, r, len);
	l7_answer_event(cref, d, r, len);
	return SK_PASS;
}

/* One skb of a known remote client: its verdict (l7_req_skb). */
static __always_inline int l7_req_skb_conn(struct __sk_buff *skb, struct l7_conn *c, struct l7_conn_sync *sy,
					   const struct l7_sk_ref *ref, __u32 len)
{
	struct l7_decision *d;
	struct l7_scratch *s;
	struct l7_config *cfg;
	struct l7_slot *slot;
	__u32 idx = ref->idx;
	int ingress, v;
	long n;

	if (sy->k_busy) {
		l7_passed(c, len, L7_R_PIPELINED);
		return SK_PASS;
	}
	if (!l7_caught_up(c, sy, skb->sk)) {
		l7_passed(c, len, L7_R_USER_PENDING);
		return SK_PASS;
	}
	if (c->mode == L7_MODE_USER) {
		c->mode = L7_MODE_KERNEL;
		l7_count(L7_C_HANDED_BACK);
	}
	cfg = l7_cfg();
	if (!cfg || !(cfg->flags & L7_CF_ENABLED)) {
		l7_passed(c, len, L7_R_DISABLED);
		return SK_PASS;
	}
	if (cfg_raw) {
		v = l7_req_raw(skb, 0, c, sy, ref, cfg, len);
		if (v == SK_PASS)
			return v;
		l7_passed(c, len, L7_R_POOL_MISS);
		return SK_PASS;
	}
	s = l7_scratch_get();
	if (!s) {
		l7_passed(c, len, L7_R_NO_SCRATCH);
		return SK_PASS;
	}
	n = l7_copy_skb(skb, s, 0, len);
	if (n <= 0 || l7_g_decide(s, (__u32)n, c, cfg)) {
		l7_scratch_put(s);
		l7_passed(c, len, L7_R_COPY_FAILED);
		return SK_PASS;
	}
	d = &s->dec;
	L7_TRACE(L7_T_REQ, idx, d->kind, d->reason);
	if (d->kind == L7_D_ANSWER) {
		v = l7_answer_skb(skb, d, c, sy, ref, len);
		if (v >= 0) {
			l7_scratch_put(s);
			return v;
		}
		d->kind = L7_D_PASS;
	}
	if (d->kind == L7_D_KERNEL) {
		/* an skb is not rewritten in place here: the slow path mutates */
		if (d->route_flags & L7_RF_MUTATE) {
			d->kind = L7_D_PASS;
			d->reason = L7_R_MUTATION;
		} else if (d->total != len) {
			/* the body continues in later skbs, or the next request
			 * starts in this one: an skb cannot be split */
			d->kind = L7_D_PASS;
			d->reason = d->total > len ? L7_R_TOO_BIG : L7_R_PIPELINED;
		}
		if (d->kind != L7_D_KERNEL)
			l7_slot_unclaim(d->slot);
	}
	if (d->kind == L7_D_KERNEL) {
		slot = l7_slot_begin(d, ref, 0);
		if (slot) {
			ingress = !!(slot->flags & L7_SF_BACKEND_LOCAL);
			if (ingress)
				v = bpf_sk_redirect_map(skb, &l7_sk_backend, d->slot, BPF_F_INGRESS);
			else
				v = bpf_sk_redirect_map(skb, &l7_sk_upstream, d->slot, 0);
			L7_TRACE(L7_T_REQ_REDIRECT, idx, d->slot, ((__u64)ingress << 32) | (__u32)v);
			if (v == SK_PASS) {
				l7_kernel_accounted(c, sy, d);
				l7_scratch_put(s);
				return SK_PASS;
			}
			l7_slot_kill(d->slot, idx);
		}
		d->reason = L7_R_REDIRECT;
	}
	l7_rate_refund(s);
	l7_passed(c, len, d->reason);
	l7_scratch_put(s);
	return SK_PASS;
}

/*
 * The daemon keeps a remote client's socket out of its epoll set while it
 * waits for the client's next request (L7_SYNC_PARKED): the psock wakes a
 * socket's readers after every verdict, also for the bytes the kernel
 * answered or forwarded, which would wake the daemon once per request.
 * Bytes passed to the slow path wake it here instead. k_passed is written
 * before the flag is read and cleared (an atomic AND: a full barrier), and
 * the daemon sets the flag before it reads k_passed, so one of the two
 * always sees the other.
 */
static __always_inline void l7_wake_parked(const struct l7_conn *c, struct l7_conn_sync *sy,
					   const struct l7_sk_ref *ref)
{
	WRITE_ONCE(sy->k_passed, (__u32)c->pass_bytes);
	if (__sync_fetch_and_and(&sy->flags, ~L7_SYNC_PARKED) & L7_SYNC_PARKED)
		l7_event(L7_EV_WAKE, 0, ref->idx, ref->gen);
}

/*
 * Verdict-only: each skb gets one verdict as it arrives. (Under strparser
 * the program sees the whole segment, not the message: the message offset
 * is known only to the kernel, so framing cannot be trusted there.) An skb
 * cannot be split, so a request is taken only when one skb holds exactly
 * that request; anything else goes to the slow path, and the connection
 * comes back once the daemon has answered everything it got.
 */
SEC("sk_skb")
int l7_req_skb(struct __sk_buff *skb)
{
	struct l7_conn_sync *sy = 0;
	struct l7_sk_ref *ref;
	struct l7_conn *c;
	__u32 len = skb->len;
	__u64 passed;
	int v;

	if (!len)
		return SK_PASS; /* FIN */
	ref = l7_skb_ref(skb);
	c = l7_conn_of(ref, &sy);
	if (!c || !ref)
		return SK_PASS;
	passed = c->pass_bytes;
	v = l7_req_skb_conn(skb, c, sy, ref, len);
	if (c->pass_bytes != passed)
		l7_wake_parked(c, sy, ref);
	return v;
}

/* ---- answers to remote clients (SK_MSG on the daemon's socket) ----------- */

/*
 * Every send on a remote client's socket passes here: the daemon's writes,
 * and the kernel's SK_SKB redirects, which the psock's worker sends through
 * this socket's sendmsg. The send that starts where the connection's
 * pending answer starts, with the request's length, is the request
 * l7_answer_skb redirected: it becomes the answer. Anything else passes
 * untouched. A pending answer that cannot be made, or one TCP queued only
 * part of (the worker then sends the rest of the request's bytes, which
 * start before the answer's end), closes the connection: the request's
 * bytes never go back to the client.
 */
SEC("sk_msg")
int l7_remote_out_msg(struct sk_msg_md *msg)
{
	struct l7_conn_sync *sy = 0;
	struct tcp_sock___l7 *tp;
	struct l7_response *r;
	struct l7_sk_ref *ref;
	struct l7_conn *c;
	__u32 in, len, queued;
	__u64 cookie;

	if (!msg->sk)
		return SK_PASS;
	tp = (struct tcp_sock___l7 *)bpf_skc_to_tcp_sock(msg->sk);
	if (!tp)
		return SK_PASS;
	cookie = (__u64)((struct sock___l7 *)tp)->__sk_common.skc_cookie.counter;
	ref = bpf_map_lookup_elem(&l7_ref_by_cookie, &cookie);
	c = l7_conn_of(ref, &sy);
	if (!c || !ref || !(c->ans_in | c->ans_end))
		return SK_PASS;
	queued = l7_tcp_queued(tp);
	if (c->ans_end) {
		if ((__s32)(queued - c->ans_end) < 0)
			goto broken;
		c->ans_end = 0;
	}
	if (!c->ans_in || queued != c->ans_at)
		return SK_PASS;
	in = c->ans_in;
	len = c->ans_len;
	c->ans_in = 0;
	sy->k_busy = 0;
	r = bpf_map_lookup_elem(&l7_responses, &c->ans_resp);
	if (r && msg->size == in && len && len <= L7_MAX_RESP_BYTES && len <= r->len &&
	    !l7_msg_become(msg, r, len, in)) {
		c->ans_end = queued + len;
		return SK_PASS;
	}
broken:
	l7_close_client(0, ref->idx, ref->gen);
	return SK_DROP;
}

