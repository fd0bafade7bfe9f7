#!/usr/bin/env python3
"""l7fast.ko's generic-netlink GET_CAPS, asked directly (not through l7fastd):
what the module itself says, for checks of what the daemon installed in it.

    l7fast_genl.py            the reply as JSON: abi_version, algs, caps,
                              max_keys, key_data_max, num_keys
    l7fast_genl.py num_keys   the number of keys in the module's table

Exit status 1 with a message when the family is absent or the reply is bad.
The numbers are kmod/include/uapi/l7fast_genl.h's and the kernel's
(linux/genetlink.h, linux/netlink.h).
"""
import json
import os
import socket
import struct
import sys

NETLINK_GENERIC = 16
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2

L7FAST_GENL_NAME = b"l7fast"
L7FAST_GENL_VERSION = 1
L7FAST_CMD_GET_CAPS = 1
ATTRS = {1: "abi_version", 2: "algs", 3: "caps", 4: "max_keys", 5: "key_data_max", 6: "num_keys"}


def attrs(buf):
    out, off = {}, 0
    while off + 4 <= len(buf):
        n, t = struct.unpack_from("=HH", buf, off)
        if n < 4 or off + n > len(buf):
            raise ValueError("malformed attribute")
        out[t & 0x3FFF] = buf[off + 4:off + n]
        off += (n + 3) & ~3
    return out


def transact(sk, family, cmd, payload, seq):
    body = struct.pack("=BBH", cmd, L7FAST_GENL_VERSION, 0) + payload  # the controller is version 1 too
    sk.send(struct.pack("=IHHII", 16 + len(body), family, NLM_F_REQUEST, seq, os.getpid()) + body)
    data = sk.recv(65536)
    n, typ = struct.unpack_from("=IH", data, 0)
    if typ == NLMSG_ERROR:
        err = struct.unpack_from("=i", data, 16)[0]
        raise OSError(-err, os.strerror(-err))
    return attrs(data[20:n])


def main():
    sk = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
    sk.settimeout(5)
    name = L7FAST_GENL_NAME + b"\0"
    a = struct.pack("=HH", 4 + len(name), CTRL_ATTR_FAMILY_NAME) + name
    a += b"\0" * (-len(a) % 4)
    try:
        fam = struct.unpack("=H", transact(sk, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, a, 1)[CTRL_ATTR_FAMILY_ID][:2])[0]
    except OSError as e:
        sys.exit(f"l7fast_genl: no generic-netlink family 'l7fast' (is l7fast.ko loaded?): {e}")
    reply = transact(sk, fam, L7FAST_CMD_GET_CAPS, b"", 2)
    caps = {name: struct.unpack("=I", reply[t][:4])[0] for t, name in ATTRS.items() if t in reply}
    if "num_keys" not in caps:
        sys.exit(f"l7fast_genl: GET_CAPS reply without num_keys: {caps}")
    if sys.argv[1:] == ["num_keys"]:
        print(caps["num_keys"])
    else:
        print(json.dumps(caps, sort_keys=True))


if __name__ == "__main__":
    main()
