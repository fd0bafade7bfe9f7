"""Names of the data plane's global counters and pool slot states, read from
the ABI header that the BPF programs and l7fastd share
(bpf/include/l7fast_abi.h: L7_COUNTER_NAMES, L7_REASON_NAMES, enum
l7_slot_state), for tools that dump the maps themselves (the end-to-end
tests and the benchmark)."""
import re
from pathlib import Path

# in the tree; or next to this file where it was copied with it (the system
# test's guest)
HEADER = Path(__file__).resolve().parents[2] / "bpf" / "include" / "l7fast_abi.h"
if not HEADER.exists():
    HEADER = Path(__file__).resolve().with_name("l7fast_abi.h")


def _names(macro):
    text = HEADER.read_text()
    m = re.search(r"^#define " + macro + r"\b((?:.*\\\n)*.*)$", text, re.M)
    if not m:
        raise RuntimeError(f"{HEADER}: no #define {macro}")
    return re.findall(r'"([a-z0-9_]+)"', m.group(1))


def _enum(name, prefix):
    text = HEADER.read_text()
    m = re.search(r"^enum " + name + r" \{(.*?)^\};", text, re.M | re.S)
    if not m:
        raise RuntimeError(f"{HEADER}: no enum {name}")
    return {int(v): n for n, v in re.findall(r"^\s*" + prefix + r"(\w+)\s*=\s*(\d+)", m.group(1), re.M)}


def _flags(name, prefix):
    text = HEADER.read_text()
    m = re.search(r"^enum " + name + r" \{(.*?)^\};", text, re.M | re.S)
    if not m:
        raise RuntimeError(f"{HEADER}: no enum {name}")
    return {n: 1 << int(b) for n, b in re.findall(r"^\s*" + prefix + r"(\w+)\s*=\s*1u\s*<<\s*(\d+)", m.group(1), re.M)}


COUNTERS = _names("L7_COUNTER_NAMES")
REASONS = _names("L7_REASON_NAMES")
SLOT_STATES = _enum("l7_slot_state", "L7_SLOT_")  # value -> name ("IDLE", ...)
SYNC_FLAGS = _flags("l7_sync_flags", "L7_SYNC_")  # name ("CLOSING", ...) -> bit


def counter_name(index):
    """The name l7fastctl stats gives counter `index` of the l7_counters map."""
    if index < len(COUNTERS):
        return COUNTERS[index]
    r = index - len(COUNTERS)
    return "to_slow_path_" + (REASONS[r] if r < len(REASONS) else str(r))
