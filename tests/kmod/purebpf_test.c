// SPDX-License-Identifier: GPL-2.0-only
/*
 * Host-side check of kmod/include/l7fast_purebpf.h: the same functions the
 * BPF programs use, compiled natively, against the published vectors.
 */
#include <stdio.h>
#include <string.h>
#include "l7fast_purebpf.h"
#include "vectors.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

int main(void)
{
	static uint8_t src[L7F_PB_BUF], dst[L7F_PB_DST_BUF];
	int pass = 0, fail = 0, ret;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(l7f_vec_xxh); i++) {
		const struct l7f_vec_xxh *v = &l7f_vec_xxh[i];

		memcpy(src, v->in, v->len);
		if (l7f_pb_xxh64(src, v->len, v->seed) == v->xxh64) {
			pass++;
		} else {
			fail++;
			printf("FAIL xxh64 %s\n", v->name);
		}
	}
	for (i = 0; i < ARRAY_SIZE(l7f_vec_b64); i++) {
		const struct l7f_vec_b64 *v = &l7f_vec_b64[i];
		const char *forms[] = { v->enc, v->enc_pad };
		size_t k;

		for (k = 0; k < 2; k++) {
			size_t n = strlen(forms[k]);

			memcpy(src, forms[k], n);
			ret = l7f_pb_b64url_decode(src, n, dst, sizeof(dst), 0);
			if (ret == (int)v->raw_len &&
			    !memcmp(dst, v->raw, v->raw_len)) {
				pass++;
			} else {
				fail++;
				printf("FAIL b64 decode %s (%d)\n", forms[k], ret);
			}
		}
	}
	for (i = 0; i < ARRAY_SIZE(l7f_vec_b64_bad); i++) {
		const struct l7f_vec_b64_bad *v = &l7f_vec_b64_bad[i];

		memcpy(src, v->in, v->len);
		ret = l7f_pb_b64url_decode(src, v->len, dst, sizeof(dst),
					   v->flags);
		if (ret == -L7F_PB_EINVAL) {
			pass++;
		} else {
			fail++;
			printf("FAIL b64 malformed accepted: %s (%d)\n", v->why,
			       ret);
		}
	}
	printf("purebpf: %d passed, %d failed\n", pass, fail);
	return fail != 0;
}
