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

/* daemon writes; all programs read. One entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct l7_config);
} l7_config SEC(".maps");

/* daemon writes (one entry per listening address); sockops reads to decide
 * which client sockets belong to l7fast. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, L7_MAX_LISTENERS);
	__type(key, struct l7_listener_key);
	__type(value, struct l7_listener);
} l7_listeners SEC(".maps");

/* daemon (PolicyCompiler) writes; req reads. Route and rule sets,
 * L7_BMI_PER_SPACE per generation and space (L7_BMI_INDEX). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, L7_GENS * L7_SPACES * L7_BMI_PER_SPACE);
	__type(key, __u32);
	__type(value, struct l7_bitmap);
} l7_bitmaps SEC(".maps");

/* daemon writes; req reads. String conditions by keyed hash (sized). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * L7_GENS * L7_MAX_ROUTES);
	__type(key, struct l7_match_key);
	__type(value, struct l7_match_val);
} l7_match SEC(".maps");

/* daemon writes; req reads. Index gen * L7_MAX_ROUTES + route. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, L7_GENS * L7_MAX_ROUTES);
	__type(key, __u32);
	__type(value, struct l7_route);
} l7_routes SEC(".maps");

/* daemon writes; req reads. Index gen * L7_MAX_CLUSTERS + cluster. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, L7_GENS * L7_MAX_CLUSTERS);
	__type(key, __u32);
	__type(value, struct l7_cluster);
} l7_clusters SEC(".maps");

/* daemon writes; req reads. Index gen * L7_MAX_ENDPOINTS + endpoint. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
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
	__uint(max_entries, L7_GENS * L7_MAX_LB_TABLES);
	__type(key, __u32);
	__type(value, struct l7_lb_table);
} l7_lb_tables SEC(".maps");

/* req increments (round-robin cursor per cluster); nobody else. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, L7_GENS * L7_MAX_CLUSTERS);
	__type(key, __u32);
	__type(value, __u64);
} l7_rr SEC(".maps");

/* The upstream pool. daemon creates/destroys slots (mmap + CAS), req claims
 * IDLE slots, resp completes them; state changes are compare-and-swap. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, L7_MAX_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct l7_slot);
} l7_slots SEC(".maps");

/* daemon writes before connecting a pooled socket; sockops reads it to adopt
 * the backend's end of that connection; resp reads it to find its slot. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, L7_MAX_SLOTS);
	__type(key, struct l7_conn_key);
	__type(value, __u32);
} l7_slot_by_tuple SEC(".maps");

/* sockops creates (local clients) or daemon creates (remote clients); req and
 * resp update; daemon deletes when its accepted socket closes. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, L7_MAX_CONNS);
	__type(key, struct l7_conn_key);
	__type(value, struct l7_conn);
} l7_conns SEC(".maps");

/* daemon writes (slow-path requests answered); req reads. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, L7_MAX_CONNS);
	__type(key, struct l7_conn_key);
	__type(value, struct l7_conn_user);
} l7_conn_user SEC(".maps");

/* daemon writes (PolicyCompiler, routes with L7_RF_MUTATE); req reads.
 * Index gen * L7_MAX_ROUTES + route. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, L7_GENS * L7_MAX_ROUTES);
	__type(key, __u32);
	__type(value, struct l7_mutation);
} l7_mutations SEC(".maps");

/* ---- sockets -------------------------------------------------------------- */

/* Client sockets on this host (sockops inserts). SK_MSG l7_req_msg runs on
 * their sends; resp redirects responses into their ingress. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, L7_MAX_CONNS);
	__type(key, struct l7_conn_key);
	__type(value, __u64);
} l7_sk_client SEC(".maps");

/* The daemon's accepted sockets of remote clients (daemon inserts). SK_SKB
 * verdict l7_req_skb runs on bytes arriving from the network. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, L7_MAX_CONNS);
	__type(key, struct l7_conn_key);
	__type(value, __u64);
} l7_sk_remote SEC(".maps");

/* Backends' accepted ends of pooled connections (sockops inserts, key slot).
 * SK_MSG l7_resp_msg runs on the backend's sends. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, L7_MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} l7_sk_backend SEC(".maps");

/* The daemon's pooled upstream sockets (daemon inserts, key slot). SK_SKB
 * verdict l7_resp_skb runs on responses arriving from the network. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, L7_MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} l7_sk_upstream SEC(".maps");

/* ---- telemetry ------------------------------------------------------------ */

/* req/resp add; daemon reads and sums over CPUs. Index stats_id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, L7_GENS * L7_MAX_ROUTES);
	__type(key, __u32);
	__type(value, struct l7_route_stats);
} l7_route_stats SEC(".maps");

/* l7_resp_complete adds; daemon reads and sums over CPUs. Index pool id. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, L7_MAX_POOLS);
	__type(key, __u32);
	__type(value, struct l7_pool_stats);
} l7_pool_stats SEC(".maps");

/* all programs add; daemon reads. enum l7_counter. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, L7_C_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} l7_counters SEC(".maps");

/* resp and req write; daemon consumes. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} l7_events SEC(".maps");

#endif /* L7_MAPS_H */
