#!/usr/bin/env python3
"""Zero the GPU code of every architecture but one in a CUDA shared library.

Usage: shrink-fatbin.py IN OUT --keep-arch 90

The GPU machine has no network, so a library such as NCCL travels with the
working tree, under a carry limit of 64 MiB shared with everything else.
libnccl.so.2 is about 190 MiB, nearly all of it device code for seven
architectures (cubins for sm_75 to sm_120 plus PTX). The GPU there is an
sm_90 part, so only the sm_90 cubins are needed: this script zeroes the
payload of every other entry (every PTX entry too, since the sm_90 cubin is
loaded instead of JIT-compiling PTX), and xz then squeezes the zeros away.

Nothing moves: every ELF section, fatbinary container header and entry
header stays where and as it was, so the file is still the same valid ELF
object and only the bytes of the dropped payloads change. The zeroed entries
keep their headers, so the CUDA driver still sees them, but it picks the
sm_90 cubin on an sm_90 GPU and never reads the others.

Fatbinary layout (little-endian), found by scanning every PROGBITS section
for the container magic (NCCL has them in .nv_fatbin and __nv_relfatbin):
  container: u32 magic 0xBA55ED50, u16 version, u16 header_size,
             u64 fat_size (bytes of entries that follow the header)
  entry:     u16 kind (1 PTX, 2 cubin), u16 version, u32 header_size,
             u64 payload_size (padded), ..., u32 arch at offset 28;
             its payload starts at entry + header_size
A candidate whose entries do not end exactly at the container's end is not
taken as a container, so a stray magic number in code or data is left alone.
"""

import argparse
import collections
import struct
import sys

MAGIC = 0xBA55ED50
MAGIC_BYTES = struct.pack("<I", MAGIC)
KIND_PTX, KIND_CUBIN = 1, 2
SHT_PROGBITS = 1


def sections(data):
    """(name, offset, size) of each PROGBITS section of a 64-bit ELF file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        sys.exit("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
               for i in range(shnum)]
    strtab_off = headers[shstrndx][4]
    for name_off, sh_type, _flags, _addr, offset, size in headers:
        if sh_type != SHT_PROGBITS:
            continue
        end = data.index(b"\0", strtab_off + name_off)
        yield data[strtab_off + name_off:end].decode(), offset, size


def entries(data, start, end):
    """The entries of the container at start, or None if it is not one."""
    if start + 16 > end:
        return None
    magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, start)
    if magic != MAGIC or header_size < 16:
        return None
    pos, stop = start + header_size, start + header_size + fat_size
    if stop > end:
        return None
    found = []
    while pos < stop:
        if pos + 32 > stop:
            return None
        kind, _v, ehs, size = struct.unpack_from("<HHIQ", data, pos)
        arch, = struct.unpack_from("<I", data, pos + 28)
        if kind not in (KIND_PTX, KIND_CUBIN) or ehs < 32:
            return None
        found.append((pos, kind, arch, pos + ehs, size))
        pos += ehs + size
    return (found, stop) if pos == stop else None


def containers(data, offset, size):
    """Yield the entry list of each container in a section."""
    pos, end = offset, offset + size
    while True:
        pos = data.find(MAGIC_BYTES, pos, end)
        if pos < 0:
            return
        parsed = entries(data, pos, end)
        if parsed is None:
            pos += 4
            continue
        found, pos = parsed
        yield found


def shrink(data, keep_arch):
    """Zero dropped payloads in place; return per-section statistics."""
    stats = {}
    for name, offset, size in sections(data):
        kept = collections.Counter()
        dropped = collections.Counter()
        zeroed = n = 0
        for found in containers(data, offset, size):
            n += 1
            for _pos, kind, arch, payload, length in found:
                label = ("ptx" if kind == KIND_PTX else "sm") + "_%d" % arch
                if kind == KIND_CUBIN and arch == keep_arch:
                    kept[label] += 1
                    continue
                dropped[label] += 1
                data[payload:payload + length] = bytes(length)
                zeroed += length
        if n:
            stats[name] = (n, kept, dropped, zeroed)
    return stats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--keep-arch", type=int, required=True,
                        help="SM architecture whose cubins are kept, e.g. 90")
    args = parser.parse_args()

    with open(args.input, "rb") as f:
        data = bytearray(f.read())
    stats = shrink(data, args.keep_arch)

    total_kept = total_zeroed = 0
    for name, (n, kept, dropped, zeroed) in stats.items():
        print("%s: %d containers; kept %s; zeroed %s (%d bytes)" % (
            name, n, dict(sorted(kept.items())), dict(sorted(dropped.items())), zeroed))
        total_kept += sum(kept.values())
        total_zeroed += zeroed
    print("kept %d sm_%d cubins, zeroed %d of %d bytes" % (
        total_kept, args.keep_arch, total_zeroed, len(data)))
    # A library with no cubin left for the GPU would load and then fail at
    # the first kernel launch, far from here: refuse to write it.
    if total_kept == 0:
        sys.exit("no sm_%d cubin found: nothing would run on the GPU" % args.keep_arch)

    with open(args.output, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
