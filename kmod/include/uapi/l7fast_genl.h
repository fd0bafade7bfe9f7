/* SPDX-License-Identifier: (GPL-2.0-only WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * Generic-netlink control interface of l7fast.ko.
 *
 * Plain C with no types of its own, so the module, the libnl client in
 * kmod/lib and C++ code in the daemon can all include it.
 *
 * Error conventions (negative errno in the netlink ack):
 *   EPERM        mutating command without CAP_NET_ADMIN in the initial
 *                user namespace (GENL_ADMIN_PERM)
 *   EINVAL       missing or malformed attribute, unknown flag
 *   ERANGE       key id >= L7FAST_MAX_KEYS
 *   EMSGSIZE     key material longer than the limit for its algorithm
 *   EOPNOTSUPP   algorithm not provided by the running kernel's crypto API
 *                (see L7FAST_ATTR_ALGS)
 *   EKEYREJECTED the crypto API refused the key material (bad DER, RSA
 *                modulus below 2048 bits, point not on the curve, ...)
 *   EEXIST       KEY_ADD on an occupied id without L7FAST_KEY_F_REPLACE
 *   ENOENT       KEY_DEL of an empty id
 */
#ifndef L7FAST_UAPI_GENL_H
#define L7FAST_UAPI_GENL_H

#define L7FAST_GENL_NAME	"l7fast"
#define L7FAST_GENL_VERSION	1

/* Version of the kfunc ABI (names, signatures, flags in l7fast_kfuncs.h). */
#define L7FAST_ABI_VERSION	1

/* Key ids index a fixed table: 0 .. L7FAST_MAX_KEYS - 1. */
#define L7FAST_MAX_KEYS		256
/* Longest accepted L7FAST_ATTR_KEY_DATA of any algorithm. */
#define L7FAST_KEY_DATA_MAX	1024
/* HMAC keys: 1 .. L7FAST_HMAC_KEY_MAX bytes. */
#define L7FAST_HMAC_KEY_MAX	256
/* ES256 public key: uncompressed SEC1 point 0x04 || X || Y. */
#define L7FAST_ES256_KEY_LEN	65
/* RS256 keys: DER RSAPublicKey (PKCS#1), modulus 2048 .. 4096 bits. */
#define L7FAST_RSA_MIN_BITS	2048

enum l7fast_cmd {
	L7FAST_CMD_UNSPEC,
	L7FAST_CMD_GET_CAPS,	/* any user; reply carries the CAPS attributes */
	L7FAST_CMD_KEY_ADD,	/* admin; KEY_ID, ALG, KEY_DATA, [KEY_FLAGS] */
	L7FAST_CMD_KEY_DEL,	/* admin; KEY_ID */
	L7FAST_CMD_KEY_FLUSH,	/* admin; removes every key */
	__L7FAST_CMD_MAX,
};
#define L7FAST_CMD_MAX (__L7FAST_CMD_MAX - 1)

enum l7fast_attr {
	L7FAST_ATTR_UNSPEC,
	L7FAST_ATTR_ABI_VERSION,	/* u32, reply */
	L7FAST_ATTR_ALGS,		/* u32, reply: bit (1 << enum l7fast_alg) */
	L7FAST_ATTR_CAPS,		/* u32, reply: L7FAST_CAP_* */
	L7FAST_ATTR_MAX_KEYS,		/* u32, reply */
	L7FAST_ATTR_KEY_DATA_MAX,	/* u32, reply */
	L7FAST_ATTR_NUM_KEYS,		/* u32, reply: keys installed now */
	L7FAST_ATTR_KEY_ID,		/* u32 */
	L7FAST_ATTR_ALG,		/* u32, enum l7fast_alg */
	L7FAST_ATTR_KEY_DATA,		/* binary */
	L7FAST_ATTR_KEY_FLAGS,		/* u32, L7FAST_KEY_F_* */
	__L7FAST_ATTR_MAX,
};
#define L7FAST_ATTR_MAX (__L7FAST_ATTR_MAX - 1)

/*
 * A key's algorithm is fixed when it is installed; the kfuncs take only a
 * key id, so a token's "alg" header can never pick a different algorithm
 * for a key (no RS256/HS256 confusion).
 */
enum l7fast_alg {
	L7FAST_ALG_NONE,
	L7FAST_ALG_SHA256,	/* keyless digest, capability bit only */
	L7FAST_ALG_HS256,
	L7FAST_ALG_HS384,
	L7FAST_ALG_HS512,
	L7FAST_ALG_RS256,
	L7FAST_ALG_ES256,
	__L7FAST_ALG_MAX,
};

/* Module kfuncs are callable from SK_MSG/SK_SKB (common kfunc hook, >= 6.2). */
#define L7FAST_CAP_SOCKET_PROGS		(1U << 0)
/* Callable from BPF_PROG_TYPE_SYSCALL programs (sleepable verify needs this). */
#define L7FAST_CAP_SYSCALL_PROGS	(1U << 1)
/* Callable from SCHED_CLS and XDP programs. */
#define L7FAST_CAP_TC_XDP_PROGS		(1U << 2)

/* KEY_ADD: replace an installed key atomically instead of failing EEXIST. */
#define L7FAST_KEY_F_REPLACE		(1U << 0)

#endif /* L7FAST_UAPI_GENL_H */
