#!/usr/bin/env python3
"""Writes bpf/include/vmlinux.h: the kernel types the data plane uses, trimmed
from a BTF dump to their transitive closure (by value; types reached only
through pointers are forward-declared).

    scripts/gen-vmlinux-h.py [/sys/kernel/btf/vmlinux] > bpf/include/vmlinux.h

The data plane touches kernel memory only through UAPI contexts and CO-RE
relocations, so the dump's kernel version does not bind the build: it is
pinned only so that builds are reproducible.
"""
import platform
import re
import subprocess
import sys

ROOT_TYPES = [
    "struct sk_msg_md", "struct __sk_buff", "struct bpf_sock_ops", "struct bpf_sock",
    "enum sk_action", "enum bpf_map_type", "enum bpf_func_id",
]
ROOT_ENUMERATORS = [
    "BPF_F_INGRESS", "BPF_ANY", "BPF_NOEXIST", "BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB",
    "BPF_SOCK_OPS_STATE_CB_FLAG", "BPF_TCP_CLOSE", "BPF_F_MMAPABLE", "BPF_F_NO_PREALLOC",
    "BPF_RB_FORCE_WAKEUP", "BPF_SK_STORAGE_GET_F_CREATE",
]
FIXED_TYPEDEFS = ["__u8", "__u16", "__u32", "__u64", "__s8", "__s16", "__s32", "__s64",
                  "__be16", "__be32", "__wsum", "u8", "u16", "u32", "u64", "s32", "s64", "bool"]


def blocks(text):
    """Top-level declarations of a bpftool C dump, as (name, body)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("struct ", "union ", "enum ")) and line.endswith("{"):
            j = i
            while lines[j] != "};":
                j += 1
            head = line[:-1].strip()
            yield head, "\n".join(lines[i:j + 1])
            i = j + 1
            continue
        if line.startswith("typedef "):
            m = re.search(r"(\w+)(\)\(.*\))?;$", line)
            m2 = re.search(r"\(\*(\w+)\)", line)
            name = m2.group(1) if m2 else (m.group(1) if m else None)
            yield "typedef " + (name or line), line
        i += 1


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/sys/kernel/btf/vmlinux"
    dump = subprocess.run(["bpftool", "btf", "dump", "file", path, "format", "c"],
                          check=True, capture_output=True, text=True).stdout
    decls = {}
    order = []
    anon_enums = []
    for head, body in blocks(dump):
        if head == "enum":
            anon_enums.append(body)
            continue
        if head not in decls:
            decls[head] = body
            order.append(head)
    wanted, forward = set(), set()
    todo = list(ROOT_TYPES) + ["typedef " + t for t in FIXED_TYPEDEFS if "typedef " + t in decls]
    for body in anon_enums:
        if any(re.search(r"\b%s\b" % e, body) for e in ROOT_ENUMERATORS):
            wanted.add(body)
    while todo:
        name = todo.pop()
        if name in wanted or name not in decls:
            continue
        wanted.add(name)
        body = decls[name]
        inner = body.split("\n", 1)[1] if "\n" in body else body.replace(name.split()[-1] + ";", "")
        for kind, ref, ptr in re.findall(r"\b(struct|union|enum) (\w+)(\s*\*)?", inner):
            key = "%s %s" % (kind, ref)
            if ptr and kind != "enum":
                forward.add(key)
            else:
                todo.append(key)
        for ref in re.findall(r"\b(\w+)\b", inner):
            if "typedef " + ref in decls:
                todo.append("typedef " + ref)
    out = ["/* Trimmed BTF type dump of Linux %s (%s), written by scripts/gen-vmlinux-h.py;"
           % (platform.release().split("-")[0], platform.machine()),
           " * do not edit. The data plane reads kernel memory only through UAPI",
           " * contexts and CO-RE relocations, so this does not bind the build to a kernel. */",
           "#ifndef __VMLINUX_H__", "#define __VMLINUX_H__", "",
           "#ifndef BPF_NO_PRESERVE_ACCESS_INDEX",
           "#pragma clang attribute push (__attribute__((preserve_access_index)), apply_to = record)",
           "#endif", ""]
    for f in sorted(forward - wanted):
        out.append(f + ";")
    out.append("")
    for name in order:
        if name in wanted:
            out.append(decls[name])
            out.append("")
    for body in anon_enums:
        if body in wanted:
            out.append(body)
            out.append("")
    out += ["#ifndef BPF_NO_PRESERVE_ACCESS_INDEX", "#pragma clang attribute pop", "#endif", "",
            "#endif /* __VMLINUX_H__ */"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
