/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The data plane's shared types: every map key and value that both the BPF
 * programs (bpf/l7fast.bpf.c) and l7fastd (daemon/) read or write is defined
 * here and nowhere else. The daemon pins the sizes with static_asserts
 * (daemon/src/dataplane/Abi.cpp), so a layout change that would make the two
 * sides disagree fails the build instead of corrupting a map.
 *
 * Conventions
 *  - Fixed-width types only, explicit padding, no bitfields.
 *  - A "connection key" always names the TCP connection from the point of
 *    view of its active opener: `client` is the side that called connect(),
 *    `server` the side that accepted. Both ends of one connection therefore
 *    compute the same key.
 *  - Policy tables are double-buffered by generation (0/1): the daemon writes
 *    the inactive generation, then flips l7_config.active_gen; a program reads
 *    the generation once per message, so every request sees one whole policy.
 */
#ifndef L7FAST_ABI_H
#define L7FAST_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Bump whenever a map's layout or meaning changes: a daemon never adopts
 * pinned maps of another ABI version (it starts clean instead). */
#define L7_ABI_VERSION 28

/* Sizes of the tables. Route sets are bitmaps of L7_MAX_ROUTES bits. */
#define L7_GENS 2
#define L7_MAX_LISTENERS 64
#define L7_MAX_ROUTES 1024
#define L7_BM_WORDS (L7_MAX_ROUTES / 64)
#define L7_MAX_CLUSTERS 256
#define L7_MAX_ENDPOINTS 1024
#define L7_MAX_TARGETS 8          /* weighted clusters of one route */
#define L7_MAX_POOLS 256          /* distinct upstream addresses */
/* Pooled upstream connections: one table of L7_MAX_SLOTS for every pool,
 * handed to pools by the daemon in chunks of L7_SLOT_CHUNK as they grow, at
 * most L7_POOL_MAX_CHUNKS chunks (daemon.pool_max <= L7_POOL_MAX) each. */
#define L7_MAX_SLOTS 32768
#define L7_SLOT_CHUNK 64
#define L7_SLOT_CHUNKS (L7_MAX_SLOTS / L7_SLOT_CHUNK)
#define L7_POOL_MAX_CHUNKS 16
#define L7_POOL_MAX (L7_POOL_MAX_CHUNKS * L7_SLOT_CHUNK)
#define L7_NO_SLOT 0xffffffffu
#define L7_NO_CHUNK 0xffffu
#define L7_MAX_PREFIX_LENS 16     /* distinct path-prefix lengths in one policy */
#define L7_MAX_MATCH_HDRS 16      /* distinct header names routes match on */
#define L7_MAX_MATCH_STR 256      /* longest host/path/value a kernel rule compares */
#define L7_MAX_HDR_NAME 64        /* longest header name a kernel rule compares */
#define L7_MAX_HEADERS 64         /* header lines per message in the header vector */
/* Client connections the data plane tracks: indexes of l7_conns. The lower
 * half is allocated by sockops (local clients), the upper half by the daemon
 * (remote clients), so neither needs the other's lock. */
#define L7_MAX_CONNS 65536
#define L7_CONNS_LOCAL (L7_MAX_CONNS / 2)
#define L7_CONN_PROBES 8          /* entries sockops tries for a free one */
#define L7_NO_CONN 0xffffffffu
#define L7_MAX_RULES 1024         /* RBAC rules per generation (bitmap space 1) */
#define L7_SPACES 2               /* bitmap spaces: 0 routes, 1 RBAC rules */
#define L7_SPACE_ROUTES 0
#define L7_SPACE_RULES 1
#define L7_MAX_RESPONSES 512      /* responses the kernel sends itself, per generation */
#define L7_MAX_RESP_BYTES 1024    /* longest such response */
#define L7_MUT_MAX_REMOVE 8       /* header names one request mutation removes */
#define L7_MUT_MAX_ADD 512        /* bytes of header lines one mutation adds */
#define L7_MAX_JWT_PROVIDERS 16   /* per generation */
#define L7_JWT_MAX_TOKEN 1536     /* longest token the kernel's token cache holds */
/* Rate-limit buckets the kernel shares with the daemon (l7_buckets): one
 * per kernel route with a keyless rate limit, two generations' worth. */
#define L7_MAX_BUCKETS (L7_GENS * L7_MAX_ROUTES)
/* Keyed rate limits: a key value the kernel keeps a bucket for is at most
 * this long (RateLimiter::kMaxKeyBytes; a longer one is the slow path's) */
#define L7_RATE_KEY_MAX 64
#define L7_JWT_MAX_FWD 256        /* forwarded-claim header lines of one token */
#define L7_JWT_CACHE 4096         /* verified tokens cached for the kernel */
#define L7_JWT_CACHE_TTL_S 300    /* longest a cached token is admitted without a fresh check */
/* HS256/384/512 verified in the kernel with l7fast.ko (l7_jwtverify.h) */
#define L7_JWT_MAX_HDR 128        /* longest header segment (base64url) it recognises */
#define L7_JWT_HDR_KEYS 4         /* module keys tried for one header (same kid and alg) */
#define L7_JWT_HEADERS 2048       /* recognised header segments, both generations */
#define L7_JWT_MAX_KID 64         /* longest kid the kernel looks up (l7_jwt_kids) */
#define L7_JWT_KIDS 1024          /* kid entries, both generations */
#define L7_JWT_MAX_CLAIM 64       /* longest issuer or audience the kernel compares */
#define L7_JWT_MAX_AUDS 4         /* audiences the kernel compares */
#define L7_JWT_MAX_MEMBERS 16     /* payload members the kernel's scan takes */
#define L7_JWT_PAYLOAD_BUF 2048   /* decoded payload (>= L7_JWT_MAX_TOKEN * 3 / 4) */
#define L7_MAX_LB_TABLES 8        /* ring-hash / Maglev tables per generation */

/* Header blocks up to this size are parsed in the kernel; larger ones go to
 * the slow path, which accepts up to L7_USER_MAX_HDR_BLOCK (then 431). */
#define L7_SCRATCH_SIZE 32768
#define L7_SCRATCH_SLOTS 4 /* scratch entries per possible CPU (l7_scratch, bpf/include/l7_maps.h) */
#define L7_USER_MAX_HDR_BLOCK 65536

enum l7_method {
	L7_M_GET = 0,
	L7_M_HEAD,
	L7_M_POST,
	L7_M_PUT,
	L7_M_DELETE,
	L7_M_PATCH,
	L7_M_OPTIONS,
	L7_M_CONNECT,
	L7_M_TRACE,
	L7_M_OTHER,
	L7_M_COUNT,
};

/* ---- connection identity ------------------------------------------------ */

struct l7_conn_key {
	__u32 client_ip[4];  /* IPv4 in client_ip[0], network byte order */
	__u32 server_ip[4];
	__u16 client_port;   /* host byte order */
	__u16 server_port;
	__u16 family;        /* AF_INET or AF_INET6 */
	__u16 pad;
};

struct l7_listener_key {
	__u32 ip[4];         /* all zero: wildcard address */
	__u16 port;          /* host byte order */
	__u16 family;
};

struct l7_listener {
	__u32 id;
	__u32 flags;
};

/* ---- policy tables (written by the daemon's PolicyCompiler) -------------- */

struct l7_bitmap {
	__u64 w[L7_BM_WORDS];
};

/*
 * Index of a set in l7_bitmaps within one generation and space:
 * (gen * L7_SPACES + space) * L7_BMI_PER_SPACE + L7_BMI_*. Space 0 holds
 * route sets, space 1 RBAC rule sets (every route's rules, in route order);
 * the same condition kinds build both.
 */
#define L7_BMI_LISTENER(id) (id)
#define L7_BMI_METHOD(m) (L7_MAX_LISTENERS + (m))
#define L7_BMI_HOST_ANY (L7_MAX_LISTENERS + L7_M_COUNT)
#define L7_BMI_PATH_ANY (L7_BMI_HOST_ANY + 1)
/* routes that do not look at match header h (absent or present, any value) */
#define L7_BMI_HDR_ANY(h) (L7_BMI_PATH_ANY + 1 + (h))
/* routes that only require match header h to be present */
#define L7_BMI_HDR_PRESENT(h) (L7_BMI_HDR_ANY(L7_MAX_MATCH_HDRS) + (h))
/* rules that deny (space 1 only) */
#define L7_BMI_DENY (L7_BMI_HDR_PRESENT(L7_MAX_MATCH_HDRS))
#define L7_BMI_PER_SPACE (L7_BMI_DENY + 1)
#define L7_BMI_INDEX(gen, space, idx) \
	((((gen) & 1) * L7_SPACES + ((space) & 1)) * L7_BMI_PER_SPACE + (idx))

enum l7_match_kind {
	L7_MK_HOST_EXACT = 1,  /* aux = 0 */
	L7_MK_PATH_EXACT = 2,  /* aux = 0 */
	L7_MK_PATH_PREFIX = 3, /* aux = prefix length */
	L7_MK_HDR_EXACT = 4,   /* aux = match header index */
};

/* A string condition, looked up by keyed hash and verified byte for byte
 * (a hash alone would let a crafted request collide with a protected rule). */
struct l7_match_key {
	__u64 hash;
	__u16 kind;
	__u16 aux;
	__u16 gen;
	__u16 space;  /* L7_SPACE_ROUTES or L7_SPACE_RULES */
};

struct l7_match_val {
	struct l7_bitmap routes;
	__u16 len;
	__u8 pad[6];
	__u8 str[L7_MAX_MATCH_STR];
};

/* Route placement (KERNEL) and the actions the kernel runs for a route, in
 * the pipeline's order: JWT, RBAC, rate limit, then the direct response or
 * forwarding with the request mutation. */
enum l7_route_flags {
	L7_RF_VALID = 1u << 0,
	L7_RF_KERNEL = 1u << 1,             /* action runs in the kernel; else slow path */
	L7_RF_JWT = 1u << 2,                /* a valid token of jwt_provider is required */
	L7_RF_RBAC = 1u << 3,               /* RBAC rules [rule_first, rule_first + rule_count) */
	L7_RF_RBAC_DENY_OVERRIDES = 1u << 4,
	L7_RF_RBAC_DEFAULT_DENY = 1u << 5,
	L7_RF_DIRECT = 1u << 6,             /* answer with l7_responses[resp_direct] */
	L7_RF_MUTATE = 1u << 7,             /* l7_mutations[gen * L7_MAX_ROUTES + route] */
	L7_RF_RATE = 1u << 8,               /* one token of l7_buckets[bucket] per request
					     * (rate, burst: bpf/include/l7_bucket.h) */
	L7_RF_RATE_KEYED = 1u << 9,         /* with L7_RF_RATE: a request with the key
					     * (rate_key) takes from its key's bucket in
					     * l7_rate_keys[bucket]; one without it from
					     * l7_buckets[bucket] */
};

/* l7_route.rate_key: the key of a keyed rate limit is the client's address
 * (policy::request_key's bytes: 4 for IPv4 and IPv4-mapped IPv6, else 16),
 * or else the value of the match header with this index */
#define L7_RATE_KEY_SOURCE 0xffff

/* A key's bucket in a keyed rate limit's table (l7_rate_keys): the key's
 * bytes exactly (no hash: a crafted value must not share a bucket with
 * another client's), zero after len. */
struct l7_rate_key {
	__u64 word[L7_RATE_KEY_MAX / 8];
	__u32 len;
	__u32 pad;
};

/* What l7fastd's slow path hands l7_rate_take_user (BPF_PROG_RUN; the
 * kernel writes wait back): one token from the bucket of `key` in
 * l7_rate_keys[bucket], created full if absent. */
struct l7_rate_take_args {
	__u32 bucket;
	__u32 rate;
	__u32 burst;
	__u32 pad;
	__u64 wait;   /* out: l7_bucket_decide()'s answer (0: taken) */
	struct l7_rate_key key;
};

/* l7_responses index (per generation) of a route's response; the kernel
 * sends only the keep-alive form: an answer that closes the connection is
 * the slow path's (L7_R_ANSWER_CLOSE). */
#define L7_RESP_NONE 0xffffffffu

struct l7_route {
	__u32 flags;
	__u16 n_targets;
	__u16 total_weight;
	__u16 cluster[L7_MAX_TARGETS];
	__u16 cum_weight[L7_MAX_TARGETS]; /* cumulative, last == total_weight */
	__u32 stats_id;                   /* index in l7_route_stats */
	__u16 rule_first;                 /* RBAC rules of this route (space 1) */
	__u16 rule_count;
	__u16 jwt_provider;               /* index into this generation's providers */
	__u16 rate_key;                   /* L7_RF_RATE_KEYED: match header index, or
					   * L7_RATE_KEY_SOURCE */
	__u32 resp_direct;                /* L7_RF_DIRECT: the response */
	__u32 resp_deny;                  /* L7_RF_RBAC: the keep-alive denial (deny_status,
					   * deny_body); L7_RESP_NONE: the slow path answers */
	__u32 resp_no_token;              /* L7_RF_JWT: the 401 to a request without a token
					   * (Jwt.hpp Status::Missing), keep-alive form */
	__u32 resp_bad_token;             /* L7_RF_JWT: the 401 to an empty or too large one
					   * (error="invalid_token"), keep-alive form */
	__u32 resp_limited;               /* L7_RF_RATE: the 429 (retry-after: 1; a wait is
					   * at most 1 s at rate >= 1), keep-alive form */
	__u32 bucket;                     /* L7_RF_RATE: index in l7_buckets (and, keyed,
					   * in l7_rate_keys) */
	__u32 rate;                       /* L7_RF_RATE: tokens per second */
	__u32 burst;                      /* L7_RF_RATE: bucket size in tokens */
	__u32 pad2;
};

enum l7_lb {
	L7_LB_ROUND_ROBIN = 0,
	L7_LB_WEIGHTED = 1,
	L7_LB_RING_HASH = 2,
	L7_LB_MAGLEV = 3,
};

enum l7_lb_key {
	L7_LBK_HEADER = 0,    /* value of match header key_hdr */
	L7_LBK_SOURCE_IP = 1, /* the client's address bytes */
};

struct l7_cluster {
	__u16 lb;
	__u16 n_endpoints;
	__u32 first_endpoint; /* index into this generation's l7_endpoints */
	__u32 total_weight;
	__u16 key_kind;       /* ring hash / Maglev: enum l7_lb_key */
	__u16 key_hdr;        /* match header index of an L7_LBK_HEADER key */
	__u32 table;          /* this generation's table: l7_lb_tables[gen * L7_MAX_LB_TABLES + table] */
	__u32 table_size;     /* ring points, or Maglev table size */
};

/* A ring-hash ring (hash ascending, ep: endpoint index in the cluster) or a
 * Maglev table (ep only), in the layout bpf/include/l7_lb.h searches. */
#define L7_LB_TABLE_RING 65536u
#define L7_LB_TABLE_EP 65544u /* >= the Maglev maximum (65537), 8-aligned */
struct l7_lb_table {
	__u64 hash[L7_LB_TABLE_RING];
	__u16 ep[L7_LB_TABLE_EP];
};

/* A response the kernel sends itself (direct responses so far): the exact
 * keep-alive bytes semantics/Responses.hpp makes. l7_responses, index
 * gen * L7_MAX_RESPONSES + l7_route.resp_direct. */
struct l7_response {
	__u32 len;       /* bytes[0, len): head and body */
	__u16 status;
	__u16 head_len;  /* bytes[0, head_len): the head, the answer to HEAD */
	__u8 bytes[L7_MAX_RESP_BYTES];
};

/* A request header mutation (semantics/Mutation.hpp, byte for byte): field
 * lines whose lower-cased name is one of remove_name[] go, then the lines
 * add[0, set_len), the token's forwarded-claim lines, and add[set_len,
 * add_len) are inserted before the head's final CRLF. */
struct l7_mutation {
	__u16 n_remove;
	__u16 set_len;
	__u16 add_len;
	__u16 pad;
	__u32 remove_hash[L7_MUT_MAX_REMOVE]; /* as the parser's l7_hdr.name_hash */
	__u16 remove_len[L7_MUT_MAX_REMOVE];
	__u8 remove_name[L7_MUT_MAX_REMOVE][L7_MAX_HDR_NAME];
	__u8 add[L7_MUT_MAX_ADD];
};

/* Where a JWT provider's token is: the value of match header `hdr` after a
 * scheme prefix compared case-insensitively. (Cookie tokens: user space.) */
struct l7_jwt_provider {
	__u16 hdr;
	__u16 prefix_len;
	__u16 max_token;      /* longest token the verified-token cache holds */
	__u16 max_bytes;      /* the provider's max_token_bytes (0xffff when more):
			       * a longer token is refused (Reason::TooLarge) */
	__u8 prefix[16];      /* lower-cased, e.g. "bearer " */
	/* HS tokens verified in the kernel (L7_JP_VERIFY; l7_jwtverify.h) */
	__u32 flags;          /* enum l7_jwt_provider_flags */
	__u32 skew_s;         /* clock_skew, seconds */
	__u16 iss_len;        /* L7_JP_ISSUER: the issuer, iss[0, iss_len) */
	__u16 n_aud;          /* audiences; 0: aud is not checked */
	__u16 aud_len[L7_JWT_MAX_AUDS];
	__u8 algs;            /* the algorithms it accepts: bit 1 << L7_JA_* */
	__u8 pad[3];
	__u8 iss[L7_JWT_MAX_CLAIM];
	__u8 aud[L7_JWT_MAX_AUDS][L7_JWT_MAX_CLAIM];
};

enum l7_jwt_provider_flags {
	L7_JP_VERIFY = 1u << 0,      /* the kernel verifies HS tokens it recognises the header of */
	L7_JP_REQUIRE_EXP = 1u << 1, /* require_exp */
	L7_JP_ISSUER = 1u << 2,      /* issuer is set */
};

/* JWS algorithms l7fast knows (auth::Alg, in its order); a bit each in
 * l7_jwt_provider.algs */
enum l7_jwt_alg {
	L7_JA_HS256 = 0,
	L7_JA_HS384,
	L7_JA_HS512,
	L7_JA_RS256,
	L7_JA_ES256,
	L7_JA_N,
};

/* A header the kernel does not recognise by its segment (l7_jwt_headers)
 * is decoded and scanned (l7_jwtscan.h); its kid is then looked up here,
 * per generation and provider: the key is the kid's bytes zero-padded, and
 * its length (len L7_JWT_KIDS_ALL: the entry that says every kid of the
 * provider's keys is in the map, so a kid not found is unknown). */
#define L7_JWT_KIDS_ALL 0xffff
struct l7_jwt_kid_key {
	__u64 word[L7_JWT_MAX_KID / 8];
	__u16 gen;
	__u16 provider;
	__u16 len;
	__u16 pad;
};

/* what the kernel does with a token of a known kid and an accepted alg */
enum l7_jwt_kid_verdict {
	L7_JK_USER = 0,     /* the slow path verifies (RS256, ES256; a key the module lacks) */
	L7_JK_VERIFY = 1,   /* by the module keys in l7_jwt_kid.hs[alg] */
	L7_JK_MISMATCH = 2, /* no key of this kid has this alg: 401 (Reason::AlgMismatch) */
};

/* Module keys of one (kid, HS alg): every key of the provider with them. */
struct l7_jwt_keyset {
	__u8 mac_len;         /* 32, 48 or 64 */
	__u8 n_keys;          /* 1 .. L7_JWT_HDR_KEYS */
	__u8 pad[2];
	__u32 key_id[L7_JWT_HDR_KEYS];
};

struct l7_jwt_kid {
	__u32 epoch;                   /* the module key epoch key ids belong to (l7_config.key_epoch) */
	__u8 verdict[L7_JA_N];         /* per alg: enum l7_jwt_kid_verdict */
	__u8 pad[3];
	struct l7_jwt_keyset hs[3];    /* L7_JA_HS256 .. HS512 with L7_JK_VERIFY */
};

/* A JWS header segment (base64url, as sent) the kernel recognises, keyed
 * like the token cache (struct l7_jwt_key: its hash, generation slot,
 * provider and length). The daemon writes one for every header it has
 * checked with the reference (auth::check_header): alg an HMAC the
 * provider accepts, every key of that kid and alg in l7fast.ko. */
struct l7_jwt_hdr {
	__u32 epoch;          /* the module key epoch key_id[] belong to (l7_config.key_epoch) */
	__u16 len;
	__u8 mac_len;         /* 32, 48 or 64 */
	__u8 n_keys;          /* 1 .. L7_JWT_HDR_KEYS */
	__u32 key_id[L7_JWT_HDR_KEYS];
	__u8 seg[L7_JWT_MAX_HDR];
};

/* The verified-token cache: the slow path verifies a token once (any
 * algorithm, OpenSSL) and stores it here, and so does the kernel's HS
 * verifier (l7_jwtverify.h); the kernel admits later requests carrying the
 * very same bytes (compared in full: the keyed hash only finds the entry)
 * until exp, for at most L7_JWT_CACHE_TTL_S. Keyed per generation and
 * provider, and admitted only under the l7_config.cache_tag it was verified
 * under, so a reload or a key change never admits a token the new policy
 * and keys have not verified, even one a program stored late. */
struct l7_jwt_key {
	__u64 hash;           /* l7_hash_window of the token, seed meta.seed */
	__u16 gen;
	__u16 provider;
	__u32 len;
};

struct l7_jwt_entry {
	__u64 exp_ns;         /* bpf_ktime_get_boot_ns() from which the token is expired; 0: never */
	__u64 nbf_ns;         /* before which it is not yet valid; 0: no nbf */
	__u64 tag;            /* l7_config.cache_tag when the token was verified */
	__u16 token_len;
	__u16 fwd_len;        /* forwarded-claim header lines for the mutation */
	__u32 pad;
	__u8 token[L7_JWT_MAX_TOKEN];
	__u8 fwd[L7_JWT_MAX_FWD];
};

struct l7_endpoint {
	__u32 pool_id;    /* stable across reloads for the same address */
	__u32 weight;
	__u32 cum_weight; /* cumulative within the cluster */
	__u32 pad;
};

/* Per-generation facts the matcher needs before it touches the tables. */
struct l7_gen_meta {
	__u64 seed;                               /* keyed hash seed */
	__u32 n_routes;
	__u32 n_prefix_lens;
	__u16 prefix_lens[L7_MAX_PREFIX_LENS];    /* ascending */
	__u32 n_match_hdrs;
	__u32 flags;                              /* enum l7_gen_meta_flags */
	__u64 hdr_name_hash[L7_MAX_MATCH_HDRS];   /* l7_name_hash of lowercase names */
	__u8 hdr_name[L7_MAX_MATCH_HDRS][L7_MAX_HDR_NAME];
	__u16 hdr_name_len[L7_MAX_MATCH_HDRS];
};

enum l7_gen_meta_flags {
	L7_GMF_HOST = 1u << 0, /* some route has a host condition */
	L7_GMF_PATH = 1u << 1, /* some route has a path condition */
	L7_GMF_RULE_PATH = 1u << 2, /* some kernel RBAC rule has a path condition */
	L7_GMF_PATH_EXACT = 1u << 3, /* some route has an exact path (else no lookup of one) */
};

enum l7_config_flags {
	L7_CF_ENABLED = 1u << 0,        /* policy loaded; otherwise pass everything */
	L7_CF_REMOTE_CLIENTS = 1u << 1, /* offload requests arriving from the network */
};

struct l7_config {
	__u32 active_gen;
	__u32 flags;
	__u64 generation;          /* policy generation number, for telemetry */
	__u32 ingress_budget;      /* max bytes of one message sent socket-to-socket */
	__u32 abi_version;         /* L7_ABI_VERSION of the daemon that created the maps:
				    * a restarted daemon adopts pinned maps only when equal */
	__u32 access_log_sample;   /* daemon.access_log_sample: L7_EV_ACCESS for one kernel
				    * response in N per CPU; 0: none */
	__u32 raw_pool;            /* benchmark ceiling only (cfg_raw): the pool every
				    * request goes to */
	__u32 key_epoch;           /* l7fast.ko key epoch: a header entry (l7_jwt_hdr)
				    * of another epoch verifies nothing; set before a
				    * new epoch's keys go in */
	__u32 pad;
	__s64 wall_off_ns;         /* CLOCK_REALTIME - CLOCK_BOOTTIME, kept by the daemon:
				    * JWT exp and nbf in the kernel */
	__u64 cache_tag;           /* the verified-token cache admits only entries of
				    * this tag (l7_jwt_entry.tag); a new one, never
				    * used before, on every activation and every new
				    * key epoch */
	struct l7_gen_meta meta[L7_GENS];
};

/* ---- upstream connection pool --------------------------------------------- */

/* l7_slot_state[id], a __u64 (mmapped by the daemon; compare-and-swap on both sides) */
enum l7_slot_state {
	L7_SLOT_EMPTY = 0,      /* no connection; the daemon may open one */
	L7_SLOT_CONNECTING = 1, /* the daemon is opening it */
	L7_SLOT_IDLE = 2,       /* in the pool; a kernel request may claim it */
	L7_SLOT_KBUSY = 3,      /* a kernel-path request is in flight */
	L7_SLOT_RELAY = 5,      /* response handed to the daemon mid-flight */
	L7_SLOT_DEAD = 6,       /* unusable; the daemon closes and empties it */
};

enum l7_slot_flags {
	L7_SF_BACKEND_LOCAL = 1u << 0, /* backend's socket is in l7_sk_backend */
	L7_SF_PEER_CLOSED = 1u << 1,   /* a pool connection's end left ESTABLISHED (sockops) */
};

/* Body framing shared by requests and responses; advanced by l7_body_step(). */
enum l7_body_kind {
	L7_BODY_NONE = 0,
	L7_BODY_LENGTH = 1,
	L7_BODY_CHUNKED = 2,
	L7_BODY_UNTIL_CLOSE = 3,
};

enum l7_chunk_phase {
	L7_CH_SIZE = 0,     /* hex digits of a chunk size */
	L7_CH_EXT,          /* chunk extension up to CR */
	L7_CH_SIZE_LF,      /* LF after the size line */
	L7_CH_DATA,         /* `remaining` bytes of chunk data */
	L7_CH_DATA_CR,
	L7_CH_DATA_LF,
	L7_CH_TRAILER,      /* start of a trailer line, or the final CRLF */
	L7_CH_TRAILER_NAME, /* trailer field name, up to ':' */
	L7_CH_TRAILER_LINE, /* trailer field value */
	L7_CH_TRAILER_LF,
	L7_CH_END_LF,       /* LF of the final empty line */
	L7_CH_DONE,
};

struct l7_body_state {
	__u64 remaining;
	__u8 kind;
	__u8 phase;
	__u8 digits;  /* hex digits seen in the current size line */
	__u8 done;    /* body complete */
	__u16 line;   /* bytes in the current size/extension/trailer line */
	__u16 pad;
};

enum l7_resp_phase {
	L7_RESP_START = 0, /* next bytes are a status line */
	L7_RESP_BODY = 1,
};

struct l7_resp_state {
	__u8 phase;
	__u8 req_head;     /* request was HEAD: no body whatever the headers say */
	__u8 close_after;  /* response or request asked to close the connection */
	__u8 pad0;
	__u16 status;
	__u16 pad1;
	__u64 bytes;       /* bytes of this response forwarded so far */
	struct l7_body_state body;
};

/* l7_slots[id]: the exchange on a pooled connection. The daemon writes the
 * first fields when it opens the connection (state CONNECTING, before the
 * data plane can see it); the request program fills the exchange, the
 * response programs frame it. */
struct l7_slot {
	__u32 pool_id;
	__u16 pool_chunk;   /* index of this slot's chunk in l7_pools[pool_id].chunk */
	__u16 client_local; /* the exchange's client is a local socket (l7_sk_client) */
	__u32 flags;        /* enum l7_slot_flags (sockops ORs them in) */
	__u32 uses;         /* exchanges started on this connection */
	__u32 client;       /* l7_conns index of the exchange's client */
	__u32 client_gen;   /* and its l7_conn.gen */
	__u32 stats_id;     /* route stats of the request in flight */
	__u32 pad;
	__u64 req_start_ns;
	struct l7_resp_state resp;
};

/* l7_pools[pool id] (mmapped by the daemon): the slots of one upstream
 * address. `idle` is a hint kept by whoever makes a slot IDLE (set) or
 * claims it (clear); a claim is the compare-and-swap on the slot's state,
 * so a stale bit costs one failed attempt, never a wrong claim. */
struct l7_pool {
	__u64 idle[L7_POOL_MAX_CHUNKS];  /* bit b of word c: slot chunk[c] * 64 + b may be IDLE */
	__u16 chunk[L7_POOL_MAX_CHUNKS]; /* daemon: chunks of this pool, n_chunks of them */
	__u32 n_chunks;
	__u32 miss;                      /* kernel sets it (0 -> 1, with L7_EV_POOL_MISS) when a claim
					  * found no idle slot; the daemon clears it once it grew the pool */
	__u32 slots;                     /* daemon: connections open or opening (telemetry) */
	__u32 down;                      /* daemon: nonzero (enum l7_pool_down bits) while the
					  * endpoint takes no new request: req picks another
					  * endpoint or hands the request to the slow path */
	__u32 streak_5xx;                /* consecutive 5xx responses from this address, on either
					  * plane (resp and the daemon add; another status resets) */
	__u32 eject_5xx;                 /* daemon: the streak that raises L7_EV_OUTLIER; 0: off */
};

/* Why an endpoint is out (l7_pool.down); the kernel only tests for nonzero. */
enum l7_pool_down {
	L7_DOWN_DRAINED = 1,   /* l7fastctl drain */
	L7_DOWN_UNHEALTHY = 2, /* failing its cluster's active health check */
	L7_DOWN_EJECTED = 4,   /* ejected by outlier detection, for a while */
};

/* ---- per client connection ------------------------------------------------ */

enum l7_conn_state {
	L7_CONN_FREE = 0,
	L7_CONN_USED = 1,   /* allocated with compare-and-swap from FREE */
};

enum l7_conn_mode {
	L7_MODE_KERNEL = 0,
	L7_MODE_USER = 1,   /* handed to the slow path; back once the daemon caught up */
};

enum l7_conn_side {
	L7_SIDE_LOCAL = 0,  /* the client's own socket is in l7_sk_client */
	L7_SIDE_REMOTE = 1, /* only the daemon's accepted socket is known (l7_sk_remote) */
};

/*
 * l7_conns[idx]: what the data plane keeps of one client connection. Local
 * clients get theirs from sockops when their socket is established, remote
 * ones from the daemon when it accepts them; the daemon frees both when its
 * session ends. A socket names its entry by (idx, gen) (l7_sk_ref), so an
 * entry freed and reused is never mistaken for the old connection.
 *
 * The hand-back between the two paths is counted in bytes of the client's
 * request stream and of its response stream (l7_conn_sync): the kernel
 * takes a request only when the daemon has consumed, as answered requests,
 * every byte the kernel passed to it (pass_bytes == u_consumed), and the
 * bytes the daemon wrote are ahead of anything the kernel would send (see
 * ARCHITECTURE.md "Ordering between the two paths").
 */
struct l7_conn {
	__u32 state;          /* enum l7_conn_state */
	__u32 gen;            /* bumped at every allocation */
	struct l7_conn_key key;
	__u32 listener_id;
	__u8 mode;            /* enum l7_conn_mode: counting only, see above */
	__u8 side;            /* enum l7_conn_side */
	__u16 pad;
	__u32 user_reason;    /* enum l7_reason of the last hand-over */
	__u32 rcv_start;      /* local client: its socket's rcv_nxt when established */
	__u32 last_slot;      /* the pool slot of its last kernel exchange (tried first) */
	__u32 pad2;
	__u64 k_requests;
	__u64 pass_bytes;     /* bytes of the request stream passed to the slow path */
	__u64 k_bytes;        /* remote client: response bytes the kernel queued on the daemon's socket */
	/* remote client: the answer the kernel is sending. l7_req_skb
	 * redirects the request's skb, its length unchanged, to the egress of
	 * the client's own socket; l7_remote_out_msg, on that socket's send
	 * path, makes those bytes the answer (ARCHITECTURE.md section 3,
	 * "Answers the kernel sends"). */
	__u32 ans_at;         /* the socket's queued-byte count where the request's bytes start */
	__u32 ans_in;         /* the request's length; 0: no answer pending */
	__u32 ans_resp;       /* the answer's key in l7_responses */
	__u32 ans_len;        /* the answer's length (its head alone for HEAD) */
	__u32 ans_end;        /* once made: the queued-byte count its last byte ends at, until
			       * a send starts there; a send before it would follow a part */
	__u32 pad3;
};

/*
 * l7_conn_sync[idx] (mmapped by the daemon: no system call per request).
 * u_consumed and u_bytes are written only by the daemon, *before* it writes
 * the last bytes of an answer, and count modulo 2^32 (the kernel compares
 * them with 32-bit sequence numbers; far less than 4 GiB is ever pending).
 */
struct l7_conn_sync {
	__u32 u_consumed; /* bytes of the passed request stream consumed as answered requests */
	__u32 u_bytes;    /* bytes the daemon has written, or is about to write, to the client */
	__u32 k_busy;     /* kernel: 1 while a kernel response to this client is in flight; the
			   * response program or the daemon (relay, failure) sets it back to 0 */
	__u32 gen;        /* l7_conn.gen of the connection these counts belong to */
	__u32 flags;      /* enum l7_sync_flags (atomic OR/AND, both sides) */
	__u32 k_passed;   /* kernel: l7_conn.pass_bytes (low 32 bits), written before it
			   * clears L7_SYNC_PARKED */
	__u64 k_done_ns;  /* kernel: bpf_ktime_get_ns() when its last response to this client
			   * was complete (CLOCK_MONOTONIC) */
};

/*
 * Ending a client connection while kernel responses may be on their way.
 * A response the kernel has not started yet is relayed through the daemon
 * when either flag is set, so that it reaches the client before the
 * daemon's FIN on the same path. One the kernel already delivered is the
 * daemon's to wait for (ClientSession::drain_kernel_before_close): a
 * redirect lands after its program ran, and what a local client has not
 * read yet from its socket's BPF ingress queue is freed when that socket
 * leaves the sockmap, which a half-closed client's socket does when the
 * daemon's FIN arrives (FIN_WAIT2 -> CLOSE unhashes it).
 */
enum l7_sync_flags {
	L7_SYNC_CLOSING = 1u << 0,     /* daemon: it will close the connection (client EOF) */
	L7_SYNC_HALF_CLOSED = 1u << 1, /* sockops: the local client shut down its sending side
					* (ESTABLISHED -> FIN_WAIT1 without RCV_SHUTDOWN) */
	L7_SYNC_PARKED = 1u << 2,      /* daemon: a remote client's socket is out of its epoll
					* set; the kernel clears it (atomic AND) when it passes
					* bytes to the slow path and, if it was set, sends
					* L7_EV_WAKE (see ClientSession::park) */
};

/* What a socket is to the data plane: its sk_storage (sockets of local
 * processes, set by sockops) or, for the daemon's own sockets, the entry of
 * its socket cookie in l7_ref_by_cookie (SK_SKB has no sk_storage). */
enum l7_ref_kind {
	L7_REF_NONE = 0,
	L7_REF_CLIENT = 1,    /* idx, gen: l7_conns entry */
	L7_REF_SLOT = 2,      /* idx: pool slot (either end of a pooled connection) */
};

struct l7_sk_ref {
	__u32 kind;
	__u32 idx;
	__u32 gen;
	__u32 pad;
};

/* ---- telemetry ----------------------------------------------------------- */

/* Latency histogram: bucket i counts latencies in [2^(i+10), 2^(i+11)) ns,
 * bucket 0 everything below 2 us, the last one everything from 33.5 ms
 * (l7_lat_bucket in l7_common.h). */
#define L7_LAT_BUCKETS 16
/* Response status classes (l7_status_class in l7_common.h): [0] other (no
 * valid status), [1..5] 1xx..5xx. */
#define L7_STATUS_CLASSES 6
/* The status codes the data plane counts one by one, besides their class
 * (l7_route_stats.codes[i], i as listed; l7_code_slot in l7_common.h): the
 * Prometheus `code` label of kernel responses. Another code is known by its
 * class only. X(index, code); the indexes count from 0 without gaps. */
#define L7_KERNEL_CODES(X)                                                     \
	X(0, 200) X(1, 201) X(2, 204) X(3, 206) X(4, 301) X(5, 302) X(6, 304) \
	X(7, 400) X(8, 401) X(9, 403) X(10, 404) X(11, 429) X(12, 500)        \
	X(13, 502) X(14, 503) X(15, 504)
#define L7_N_KERNEL_CODES 16

struct l7_route_stats {
	__u64 requests_kernel;
	__u64 requests_user;
	__u64 status[L7_STATUS_CLASSES];
	__u64 codes[L7_N_KERNEL_CODES]; /* of status[]: L7_KERNEL_CODES */
	__u64 bytes_in;
	__u64 bytes_out;
	__u64 latency[L7_LAT_BUCKETS];
	__u64 direct_responses;         /* of requests_kernel: answered with resp_direct */
	__u64 rbac_denied;              /* of requests_kernel: answered with resp_deny */
	__u64 jwt_missing;              /* of requests_kernel: answered with resp_no_token */
	__u64 jwt_invalid;              /* of requests_kernel: answered with resp_bad_token */
	__u64 rate_limited;             /* of requests_kernel: answered with resp_limited */
};

/* What the kernel answers a request with itself (l7_decision.answer; the
 * route's counter in l7_route_stats). */
enum l7_answer_kind {
	L7_ANS_DIRECT = 0,    /* the route's direct response (direct_responses) */
	L7_ANS_DENY = 1,      /* the route's RBAC denial (rbac_denied) */
	L7_ANS_NO_TOKEN = 2,  /* 401 without a token (jwt_missing) */
	L7_ANS_BAD_TOKEN = 3, /* 401 invalid_token: an empty or too large token (jwt_invalid) */
	L7_ANS_LIMITED = 4,   /* 429: no token in the route's bucket (rate_limited) */
};

/* l7_decision.detail of an L7_ANS_BAD_TOKEN answer: the reference's reason */
#define L7_ANS_DETAIL_EMPTY 0     /* Reason::Malformed: nothing after the prefix */
#define L7_ANS_DETAIL_TOO_LARGE 1 /* Reason::TooLarge: over max_token_bytes */
/* the kernel's verifier (l7_jwtverify.h) */
#define L7_ANS_DETAIL_BAD_SIGNATURE 2 /* Reason::BadSignature */
#define L7_ANS_DETAIL_EXPIRED 3       /* Reason::Expired */
#define L7_ANS_DETAIL_NOT_YET_VALID 4 /* Reason::NotYetValid */
#define L7_ANS_DETAIL_BAD_ISSUER 5    /* Reason::BadIssuer */
#define L7_ANS_DETAIL_BAD_AUDIENCE 6  /* Reason::BadAudience */
#define L7_ANS_DETAIL_MISSING_EXP 7   /* Reason::MissingExp */
#define L7_ANS_DETAIL_MALFORMED 8     /* Reason::Malformed: not three parts, or a part
				       * that is not canonical base64url */
#define L7_ANS_DETAIL_ALG_NOT_ALLOWED 9 /* Reason::AlgNotAllowed: the scanned header's alg */
#define L7_ANS_DETAIL_UNKNOWN_KID 10   /* Reason::UnknownKid (l7_jwt_kids) */
#define L7_ANS_DETAIL_ALG_MISMATCH 11  /* Reason::AlgMismatch (L7_JK_MISMATCH) */

/* l7_rule_denied: the kernel's RBAC denials by deciding rule, index gen *
 * L7_MAX_RULES + the rule's bit (l7_route.rule_first + its position); a
 * denial by the route's default action is counted in rbac_denied only. */
#define L7_NO_RULE 0xffffffffu

/* Per upstream address (pool id, l7_pool_stats): the kernel exchanges the
 * data plane completed with that endpoint. The request's size is not kept
 * in the slot, so only response figures; relayed or failed exchanges are
 * counted by the daemon. */
struct l7_pool_stats {
	__u64 responses;
	__u64 status[L7_STATUS_CLASSES];
	__u64 bytes_out;
	__u64 latency[L7_LAT_BUCKETS];
};

/* Why the data plane handed something to the slow path (global counters). */
enum l7_reason {
	L7_R_NONE = 0,
	L7_R_NO_CONN,          /* connection unknown to the data plane */
	L7_R_USER_MODE,        /* connection already in user mode */
	L7_R_INCOMPLETE,       /* header block never completed in the kernel */
	L7_R_TOO_BIG,          /* header block larger than L7_SCRATCH_SIZE */
	L7_R_PARSE,            /* malformed or ambiguous: the slow path answers */
	L7_R_UNSUPPORTED,      /* valid but not handled in the kernel (upgrade, expect...) */
	L7_R_NO_ROUTE,
	L7_R_ROUTE_USER,       /* route placed in user space */
	L7_R_POOL_MISS,
	L7_R_PIPELINED,
	L7_R_REDIRECT,         /* target socket gone */
	L7_R_USER_PENDING,     /* an earlier request is still in the slow path, or
	                        * the client has not read the daemon's answer yet */
	L7_R_DISABLED,
	L7_R_PATH,             /* path not in normal form: the slow path normalises it */
	L7_R_RBAC_DENY,        /* a kernel route's RBAC rules deny: the slow path answers */
	L7_R_JWT_NONE,         /* JWT route: no token where its provider looks (401) */
	L7_R_JWT_MISS,         /* JWT route: token not in the verified-token cache */
	L7_R_JWT_EXPIRED,      /* JWT route: cached token past exp (or before nbf) */
	L7_R_JWT_OTHER,        /* JWT route: a token shape the slow path reads (the
				* scheme alone, spaces after it, longer than the
				* cache holds), odd tables */
	L7_R_MUTATION,         /* route mutates the head and the kernel cannot here */
	L7_R_NO_SCRATCH,       /* the per-CPU scratch was in use (a nested run) */
	L7_R_COPY_FAILED,      /* the head could not be copied out of the message */
	L7_R_ENDPOINT_DOWN,    /* the endpoint chosen is out (drained, unhealthy, ejected)
				* and the kernel found no other: the slow path chooses */
	L7_R_ABSOLUTE_FORM,    /* absolute-form target: the slow path routes by its authority */
	L7_R_ANSWER_CLOSE,     /* the route's own answer to this request closes the
				* connection (the request asks to): the slow path sends it */
	L7_R_ANSWER_REMOTE,    /* a remote client's answer the kernel could not stage (l7_answer_skb) */
	L7_R_JWT_BAD,          /* JWT route: an empty or too large token (401 invalid_token) */
	L7_R_RATE_LIMITED,     /* rate-limited route: no token, and the kernel does not
				* send this 429 (a request that asks to close, or
				* no room for it in the generation's answers) */
	L7_R_RATE_BUSY,        /* rate-limited route: every compare-and-swap on its
				* bucket lost a race (L7_BUCKET_TRIES) */
	L7_R_JWT_HEADER,       /* JWT route, kernel verifier: a header segment the
				* kernel does not recognise, or of another key epoch */
	L7_R_JWT_SHAPE,        /* JWT route, kernel verifier: a token the kernel does
				* not decide exactly (its parts, a payload outside
				* the scan's JSON subset, a claim out of range) */
	L7_R_JWT_MODULE,       /* JWT route, kernel verifier: an l7fast.ko call failed
				* (a key gone), or the key epoch changed meanwhile */
	L7_R_RATE_KEY,         /* keyed rate limit: a key longer than L7_RATE_KEY_MAX
				* (the slow path keeps its bucket), or its table
				* is missing or full */
	L7_R_COUNT,
};

enum l7_counter {
	L7_C_REQ_KERNEL = 0,
	L7_C_REQ_USER,
	L7_C_RESP_KERNEL,
	L7_C_RESP_RELAY,     /* responses handed to the daemon */
	L7_C_BUDGET_RELAY,   /* responses relayed because they outgrew the budget */
	L7_C_SCRATCH_BUSY,   /* nested invocation found the per-CPU scratch in use */
	L7_C_CONN_CLOSE,     /* close events sent to the daemon */
	L7_C_UPSTREAM_CLOSED, /* idle pooled upstream connections retired as they closed */
	L7_C_HANDED_BACK,    /* connections the kernel took back from the slow path */
	L7_C_EVENTS_LOST,    /* events the full ring could not take (l7_event_reserve) */
	L7_C_REASON_BASE,    /* + enum l7_reason */
	L7_C_COUNT = L7_C_REASON_BASE + L7_R_COUNT,
};

/* The names l7fastctl stats shows, in enum order: counters as they are,
 * reasons as "to_slow_path_<name>". The one list of them: l7fastd builds
 * its tables from these, the tests and the benchmark read them from this
 * header. Keep one quoted name per enum entry, on #define lines. */
#define L7_COUNTER_NAMES "requests_kernel", "requests_user", "responses_kernel", \
	"responses_relayed", "budget_relay", "scratch_busy", "close_events", "upstream_closed", \
	"handed_back", "events_lost"
#define L7_REASON_NAMES "none", "no_conn", "user_mode", "incomplete", "too_big", "parse", \
	"unsupported", "no_route", "route_user", "pool_miss", "pipelined", "redirect", \
	"user_pending", "disabled", "path_not_normal", "rbac_deny", "jwt_none", "jwt_miss", \
	"jwt_expired", "jwt_other", "mutation", "no_scratch", "copy_failed", \
	"endpoint_down", "absolute_form", "answer_close", "answer_remote", "jwt_bad", \
	"rate_limited", "rate_busy", "jwt_header", "jwt_shape", "jwt_module", \
	"rate_key"

/* ---- events to the daemon (l7_events ring buffer) ------------------------ */

/* conn/conn_gen name the client connection (l7_conns) where one is meant */
enum l7_event_type {
	L7_EV_CLOSE_CLIENT = 1, /* response complete and the connection must close */
	L7_EV_RELAY = 2,        /* a response was handed to the daemon (slot) */
	L7_EV_SLOT_DEAD = 3,    /* a pooled connection died or was retired (slot) */
	L7_EV_TRACE = 4,        /* decision trace (cfg_trace): code, args */
	L7_EV_ACCESS = 5,       /* sampled access log: a kernel response completed;
				 * slot = route stats id | status << 16, conn = the
				 * client, arg[0] = response bytes (bits 0..47) | the
				 * slot's pool id << 48, arg[1] = latency in ns. The
				 * request's method, target and size are not kept in
				 * the slot, so not reported. */
	L7_EV_POOL_MISS = 6,    /* a kernel request found no idle connection: slot = pool id */
	L7_EV_SLOT_ENDED = 7,   /* an end of a pooled connection in use (KBUSY, RELAY) left
				 * ESTABLISHED (slot); idle ones are retired (L7_EV_SLOT_DEAD) */
	L7_EV_OUTLIER = 8,      /* a pool's run of 5xx responses reached its eject_5xx
				 * (slot = pool id) */
	L7_EV_ANSWER = 9,       /* sampled access log: the kernel sent a route's own
				 * answer; slot = route stats id | status << 16, conn =
				 * the client, arg[0] = response bytes, arg[1] = enum
				 * l7_answer_kind | L7_ANS_DETAIL_* << 8 | the deciding
				 * rule (l7_rule_denied index, L7_NO_RULE for the
				 * default action; RBAC denials) << 32 */
	L7_EV_WAKE = 10,        /* the kernel passed bytes of a parked remote client
				 * (L7_SYNC_PARKED) to the slow path: conn, conn_gen */
};

/* trace points (L7_EV_TRACE: slot = code, arg[0..1] as listed) */
enum l7_trace_code {
	L7_T_REQ = 1,          /* request decided: decision kind, reason */
	L7_T_REQ_REDIRECT = 2, /* request redirected: slot, ingress */
	L7_T_RESP = 3,         /* response step: outcome, pos | done << 32 */
	L7_T_RESP_REDIRECT = 4,/* response redirect: verdict, bytes */
	L7_T_KILL = 5,         /* slot killed: slot, reason line */
	L7_T_BODY = 6,         /* body piece (SK_SKB): bytes, remaining before */
};

struct l7_event {
	__u32 type;
	__u32 slot;
	__u32 conn;
	__u32 conn_gen;
	__u64 arg[2];
};

#endif /* L7FAST_ABI_H */
