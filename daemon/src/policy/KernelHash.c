#include "policy/KernelHash.h"

#include <stdlib.h>
#include <string.h>

#include "l7_http.h"

uint64_t l7fast_match_hash(uint64_t seed, const void *bytes, uint32_t len, int lower)
{
	return l7_hash_str(seed, bytes, len, lower);
}

uint32_t l7fast_header_name_hash(const void *name, uint32_t len)
{
	const uint8_t *b = name;
	uint32_t h = L7_NAME_HASH_INIT;
	uint32_t i;

	for (i = 0; i < len; i++)
		h = l7_name_hash_step(h, l7_lower(b[i]));
	return h;
}

/* The native window has L7_WS_BUF + L7_WINDOW_SLACK addressable bytes: word
 * loads near the end read into the slack, exactly as in l7_ws. */
static uint8_t *window_copy(const void *window, uint32_t window_len)
{
	uint8_t *buf;

	if (window_len > L7_WS_BUF)
		return NULL;
	buf = calloc(1, L7_WS_BUF + L7_WINDOW_SLACK);
	if (buf)
		memcpy(buf, window, window_len);
	return buf;
}

static int window_range_ok(uint32_t window_len, uint32_t off, uint32_t len)
{
	return len <= L7_MAX_MATCH_STR && off <= window_len && len <= window_len - off;
}

uint64_t l7fast_window_hash(const void *window, uint32_t window_len, uint32_t off, uint32_t len,
			    uint64_t seed, int lower)
{
	struct l7_window w;
	uint8_t *buf;
	uint64_t h;

	if (!window_range_ok(window_len, off, len))
		return 0;
	buf = window_copy(window, window_len);
	if (!buf)
		return 0;
	w.buf = buf;
	w.len = window_len;
	w.pad = 0;
	h = l7_hash_window(&w, off, len, seed, lower);
	free(buf);
	return h;
}

int l7fast_window_eq(const void *window, uint32_t window_len, uint32_t off, uint32_t len,
		     const uint8_t *str, int lower)
{
	struct l7_window w;
	uint8_t *buf;
	int eq;

	if (!window_range_ok(window_len, off, len))
		return 0;
	buf = window_copy(window, window_len);
	if (!buf)
		return 0;
	w.buf = buf;
	w.len = window_len;
	w.pad = 0;
	eq = l7_window_eq(&w, off, len, str, lower);
	free(buf);
	return eq;
}
