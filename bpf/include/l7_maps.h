/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Every map of the data plane, declared once. For each: who writes it and who
 * reads it. "daemon" is l7fastd (daemon/src/dataplane), "req" the request
 * programs, "resp" the response programs, "sockops" the cgroup program.
 * Sizes marked (sized) are set by the daemon before load.
 */
#ifndef L7_MAPS_H
#define L7_MAPS_H

#include "l7fast_abi.h"
#include "l7_scratch.h"

/* Every map is pinned by name under the daemon's <bpffs>/maps (the loader's
 * pin_root_path): libbpf creates the pin at load, or reuses the pin a
 * previous l7fastd left (restart without dropping connections). An object
 * loaded without that root (the tests' harness) clears each map's pin path
 * before load. */
#define L7_PINNED __uint(pinning, LIBBPF_PIN_BY_NAME)

/* daemon writes; all programs read. One entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct l7_config);
} l7_config SEC(".maps");

/* daemon writes (one entry per listening address); sockops reads to decide
 * which client sockets belong to l7fast. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	L7_PINNED;
	__uint(max_entries, L7_MAX_LISTENERS);
	__type(key, struct l7_listener_key);
	__type(value, struct l7_listener);
} l7_listeners SEC(".maps");

/* daemon (PolicyCompiler) writes; req reads. Route and rule sets,
 * L7_BMI_PER_SPACE per generation and space (L7_BMI_INDEX). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_SPACES * L7_BMI_PER_SPACE);
	__type(key, __u32);
	__type(value, struct l7_bitmap);
} l7_bitmaps SEC(".maps");

/* daemon writes; req reads. String conditions by keyed hash (sized). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	L7_PINNED;
	__uint(max_entries, 2 * L7_GENS * L7_MAX_ROUTES);
	__type(key, struct l7_match_key);
	__type(value, struct l7_match_val);
} l7_match SEC(".maps");

/* daemon writes; req reads. Index gen * L7_MAX_ROUTES + route. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_MAX_ROUTES);
	__type(key, __u32);
	__type(value, struct l7_route);
} l7_routes SEC(".maps");

/* daemon writes; req reads. Index gen * L7_MAX_CLUSTERS + cluster. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_MAX_CLUSTERS);
	__type(key, __u32);
	__type(value, struct l7_cluster);
} l7_clusters SEC(".maps");

/* daemon writes; req reads. Index gen * L7_MAX_ENDPOINTS + endpoint. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_MAX_ENDPOINTS);
	__type(key, __u32);
	__type(value, struct l7_endpoint);
} l7_endpoints SEC(".maps");

/* daemon writes; req reads. Ring-hash rings and Maglev tables of the
 * clusters kernel routes use, index gen * L7_MAX_LB_TABLES + l7_cluster.table.
 * ~640 KiB a table, allocated at load (an array): 16 entries, ~10 MiB;
 * clusters beyond L7_MAX_LB_TABLES per generation choose in user space. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_MAX_LB_TABLES);
	__type(key, __u32);
	__type(value, struct l7_lb_table);
} l7_lb_tables SEC(".maps");

/* req increments (round-robin cursor per cluster); nobody else. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_MAX_CLUSTERS);
	__type(key, __u32);
	__type(value, __u64);
} l7_rr SEC(".maps");

/* ---- upstream pool ---------------------------------------------------------- */

/* State of each pooled connection (enum l7_slot_state), changed with
 * compare-and-swap by the daemon (opens, relays, retires: mmapped), req
 * (claims IDLE), resp (completes: IDLE or DEAD) and sockops (retires an IDLE
 * connection whose peer closed). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_MAX_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} l7_slot_state SEC(".maps");

/* The exchange on each pooled connection: the daemon writes the pool fields
 * before it connects, req fills the exchange, resp frames it, sockops ORs
 * flags in; the daemon reads it (relays, failures, sweeps). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct l7_slot);
} l7_slots SEC(".maps");

/* Per upstream address (pool id): its chunks (daemon) and the idle hints
 * (daemon, req, resp). mmapped by the daemon. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_MAX_POOLS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct l7_pool);
} l7_pools SEC(".maps");

/* daemon writes before connecting a pooled socket; sockops reads it once per
 * connection end, to mark it (l7_sk_refs) and adopt a local backend's end. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	L7_PINNED;
	__uint(max_entries, L7_MAX_SLOTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct l7_conn_key);
	__type(value, __u32);
} l7_slot_by_tuple SEC(".maps");

/* ---- rate limits -------------------------------------------------------------- */

/* Token buckets of kernel routes' keyless rate limits (bpf/include/l7_bucket.h,
 * l7_route.bucket): req and the daemon (mmapped, the slow path's requests of
 * the same routes) take with compare-and-swap; the daemon allocates them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_MAX_BUCKETS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} l7_buckets SEC(".maps");

/* The buckets of kernel routes' keyed rate limits, one table per limiter at
 * its l7_buckets index: l7fastd creates each (an LRU hash of the limit's
 * max_keys entries, BPF_F_INNER_MAP-free: hash tables may differ in size)
 * and removes it with its lease. req and the slow path (l7_rate_take_user)
 * take from an entry with compare-and-swap, as from l7_buckets. Not pinned:
 * a restart starts every limiter afresh. */
struct l7_rate_keys_inner {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1);
	__type(key, struct l7_rate_key);
	__type(value, __u64);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, L7_MAX_BUCKETS);
	__type(key, __u32);
	__array(values, struct l7_rate_keys_inner);
} l7_rate_keys SEC(".maps");

/* ---- client connections ----------------------------------------------------- */

/* sockops allocates entries of local clients (lower half), the daemon those
 * of remote clients (upper half, whole-value writes of FREE entries); req
 * and resp update fields; the daemon frees entries when its session ends. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_MAX_CONNS);
	__type(key, __u32);
	__type(value, struct l7_conn);
} l7_conns SEC(".maps");

/* The hand-back counts (l7_conn_sync): the daemon writes u_*, req and resp
 * write k_busy. mmapped by the daemon. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_MAX_CONNS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct l7_conn_sync);
} l7_conn_sync SEC(".maps");

/* sockops writes (local clients), the daemon too (remote ones); the daemon
 * reads it when it accepts a connection and deletes it when it frees the
 * entry. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	L7_PINNED;
	__uint(max_entries, L7_MAX_CONNS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct l7_conn_key);
	__type(value, struct l7_sk_ref);
} l7_conn_by_tuple SEC(".maps");

/* What a local socket is to the data plane (a client, or either end of a
 * pooled connection): sockops writes; req_msg, resp_msg and sockops read. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	L7_PINNED;
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct l7_sk_ref);
} l7_sk_refs SEC(".maps");

/* The same for the daemon's own sockets, by socket cookie (SK_SKB programs
 * have no sk_storage on 6.18): accepted sockets of remote clients and pooled
 * upstream sockets. The daemon writes and deletes; req_skb and resp_skb
 * read. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	L7_PINNED;
	__uint(max_entries, L7_MAX_CONNS + L7_MAX_SLOTS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct l7_sk_ref);
} l7_ref_by_cookie SEC(".maps");

/* daemon writes (PolicyCompiler, routes with L7_RF_MUTATE); req reads.
 * Index gen * L7_MAX_ROUTES + route. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_MAX_ROUTES);
	__type(key, __u32);
	__type(value, struct l7_mutation);
} l7_mutations SEC(".maps");

/* daemon writes (PolicyCompiler: direct responses of kernel routes); req
 * reads. Index gen * L7_MAX_RESPONSES + l7_route.resp_direct. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_MAX_RESPONSES);
	__type(key, __u32);
	__type(value, struct l7_response);
} l7_responses SEC(".maps");

/* ---- sockets --------------------------------------------------------------- */

/* Client sockets on this host by l7_conns index (sockops inserts). SK_MSG
 * l7_req_msg runs on their sends; resp redirects responses into their
 * ingress. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	L7_PINNED;
	__uint(max_entries, L7_MAX_CONNS);
	__type(key, __u32);
	__type(value, __u64);
} l7_sk_client SEC(".maps");

/* The daemon's accepted sockets of remote clients by l7_conns index (daemon
 * inserts). SK_SKB verdict l7_req_skb runs on bytes arriving from the
 * network; resp redirects responses to their egress. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	L7_PINNED;
	__uint(max_entries, L7_MAX_CONNS);
	__type(key, __u32);
	__type(value, __u64);
} l7_sk_remote SEC(".maps");

/* Backends' accepted ends of pooled connections by slot (sockops inserts).
 * SK_MSG l7_resp_msg runs on the backend's sends. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	L7_PINNED;
	__uint(max_entries, L7_MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} l7_sk_backend SEC(".maps");

/* The daemon's pooled upstream sockets by slot (daemon inserts). SK_SKB
 * verdict l7_resp_skb runs on responses arriving from the network. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	L7_PINNED;
	__uint(max_entries, L7_MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} l7_sk_upstream SEC(".maps");

/* ---- telemetry ------------------------------------------------------------ */

/* req/resp add; daemon reads and sums over CPUs. Index stats_id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_MAX_ROUTES);
	__type(key, __u32);
	__type(value, struct l7_route_stats);
} l7_route_stats SEC(".maps");

/* req adds (a kernel-sent RBAC denial); daemon reads, sums over CPUs and
 * names the rule. Index gen * L7_MAX_RULES + rule bit. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_MAX_RULES);
	__type(key, __u32);
	__type(value, __u64);
} l7_rule_denied SEC(".maps");

/* l7_resp_complete adds; daemon reads and sums over CPUs. Index pool id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_MAX_POOLS);
	__type(key, __u32);
	__type(value, struct l7_pool_stats);
} l7_pool_stats SEC(".maps");

/* all programs add; daemon reads. enum l7_counter. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_C_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} l7_counters SEC(".maps");

/* resp and req write; daemon consumes. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	L7_PINNED;
	__uint(max_entries, 256 * 1024);
} l7_events SEC(".maps");

/* ---- JWT (bpf/include/l7_jwtcache.h) ------------------------------------- */

/* daemon writes (PolicyCompiler, per generation); req reads.
 * Index gen * L7_MAX_JWT_PROVIDERS + provider; max_token == 0: the provider
 * is not in the kernel. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_GENS * L7_MAX_JWT_PROVIDERS);
	__type(key, __u32);
	__type(value, struct l7_jwt_provider);
} l7_jwt_providers SEC(".maps");

/* daemon inserts after a successful reference verification (ClientSession)
 * and deletes a generation's entries before staging that generation; req
 * reads. LRU: a full cache evicts, which only costs a slow-path trip. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	L7_PINNED;
	__uint(max_entries, L7_JWT_CACHE);
	__type(key, struct l7_jwt_key);
	__type(value, struct l7_jwt_entry);
} l7_jwt_cache SEC(".maps");

/* Header segments the kernel's HS verifier recognises (l7_jwtverify.h),
 * written by the daemon after each key install (Dataplane::set_jwt_headers);
 * keyed as the token cache. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	L7_PINNED;
	__uint(max_entries, L7_JWT_HEADERS);
	__type(key, struct l7_jwt_key);
	__type(value, struct l7_jwt_hdr);
} l7_jwt_headers SEC(".maps");

/* The kids of the providers' keys, for a header the kernel scanned
 * (l7_jwtverify.h); written with l7_jwt_headers (ProxyServer::write_jwt_headers). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	L7_PINNED;
	__uint(max_entries, L7_JWT_KIDS);
	__type(key, struct l7_jwt_kid_key);
	__type(value, struct l7_jwt_kid);
} l7_jwt_kids SEC(".maps");

/* programs use (claimed with l7_scratch_get, bpf/lib/conn.h); nobody else.
 * L7_SCRATCH_SLOTS per possible CPU (sized). The header window, the parse
 * result and bitmaps, too big for the 512-byte stack. Programs can be
 * preempted (PREEMPT_DYNAMIC) and SK_SKB runs in softirq on top of SK_MSG, so
 * an entry is claimed with a compare-and-swap on `busy` rather than assumed
 * free; with none free the message takes the slow path. A plain array
 * indexed by CPU, not a per-CPU one: a per-CPU value is limited to 32 KiB,
 * less than the window. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	L7_PINNED;
	__uint(max_entries, L7_SCRATCH_SLOTS);
	__type(key, __u32);
	__type(value, struct l7_scratch);
} l7_scratch SEC(".maps");

#endif /* L7_MAPS_H */
