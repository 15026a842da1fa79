#!/usr/bin/env python3
"""A standalone implementation of merkle/TREE.md (sections 1-4), written from
the document alone, with its own Keccak-256: checks testdata/vectors.json.

    python3 merkle/testdata/tree_reference.py [path/to/vectors.json]
"""
import json
import os
import sys

# --- Keccak-256 (original padding 0x01), from the Keccak reference ---
_RC = [
    0x0000000000000001, 0x0000000000008082, 0x800000000000808A, 0x8000000080008000,
    0x000000000000808B, 0x0000000080000001, 0x8000000080008081, 0x8000000000008009,
    0x000000000000008A, 0x0000000000000088, 0x0000000080008009, 0x000000008000000A,
    0x000000008000808B, 0x800000000000008B, 0x8000000000008089, 0x8000000000008003,
    0x8000000000008002, 0x8000000000000080, 0x000000000000800A, 0x800000008000000A,
    0x8000000080008081, 0x8000000000008080, 0x0000000080000001, 0x8000000080008008,
]
_ROT = [[0, 36, 3, 41, 18], [1, 44, 10, 45, 2], [62, 6, 43, 15, 61],
        [28, 55, 25, 21, 56], [27, 20, 39, 8, 14]]
_M = (1 << 64) - 1


def _rol(x, n):
    return ((x << n) | (x >> (64 - n))) & _M if n else x


def _keccak_f(a):  # a[x][y]
    for rc in _RC:
        c = [a[x][0] ^ a[x][1] ^ a[x][2] ^ a[x][3] ^ a[x][4] for x in range(5)]
        d = [c[(x - 1) % 5] ^ _rol(c[(x + 1) % 5], 1) for x in range(5)]
        a = [[a[x][y] ^ d[x] for y in range(5)] for x in range(5)]
        b = [[0] * 5 for _ in range(5)]
        for x in range(5):
            for y in range(5):
                b[y][(2 * x + 3 * y) % 5] = _rol(a[x][y], _ROT[x][y])
        a = [[b[x][y] ^ ((~b[(x + 1) % 5][y]) & b[(x + 2) % 5][y]) for y in range(5)] for x in range(5)]
        a[0][0] ^= rc
    return a


def keccak256(data: bytes) -> bytes:
    rate = 136
    msg = bytearray(data) + b"\x01"
    msg += b"\x00" * ((-len(msg)) % rate)
    msg[-1] |= 0x80
    a = [[0] * 5 for _ in range(5)]
    for off in range(0, len(msg), rate):
        block = msg[off:off + rate]
        for i in range(rate // 8):
            x, y = i % 5, i // 5
            a[x][y] ^= int.from_bytes(block[8 * i:8 * i + 8], "little")
        a = _keccak_f(a)
    out = b"".join(a[i % 5][i // 5].to_bytes(8, "little") for i in range(4))
    return out


assert keccak256(b"").hex() == "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"

# --- TREE.md section 1-2: the root of a set ---


def bit(k: bytes, i: int) -> int:
    return (k[i // 8] >> (7 - i % 8)) & 1


def leaf_hash(k, v):
    return keccak256(b"\x00" + k + v)


def internal_hash(b, left, right):
    return keccak256(b"\x01" + bytes([b]) + left + right)


def H(pairs):  # pairs: non-empty list of (key, value)
    if len(pairs) == 1:
        return leaf_hash(*pairs[0])
    b = 0
    while len({bit(k, b) for k, _ in pairs}) == 1:
        b += 1
    s0 = [p for p in pairs if bit(p[0], b) == 0]
    s1 = [p for p in pairs if bit(p[0], b) == 1]
    return internal_hash(b, H(s0), H(s1))


def root(pairs):
    return bytes(32) if not pairs else H(pairs)

# --- section 3: producing and verifying proofs; section 4: encoding ---


def prove(pairs, k):
    """The encoded proof for k (section 3, producing; section 4)."""
    if not pairs:
        return bytes([1, 2, 0, 0])
    steps = []
    while len(pairs) > 1:
        b = 0
        while len({bit(x, b) for x, _ in pairs}) == 1:
            b += 1
        d = bit(k, b)
        steps.append((b, H([p for p in pairs if bit(p[0], b) != d])))
        pairs = [p for p in pairs if bit(p[0], b) == d]
    lk, lv = pairs[0]
    kind = 0 if lk == k else 1
    out = bytes([1, kind]) + len(steps).to_bytes(2, "big")
    out += b"".join(bytes([b]) + s for b, s in steps)
    if kind == 1:
        out += lk + lv
    return out


def decode(enc):
    if len(enc) < 4 or enc[0] != 1 or enc[1] > 2:
        return None
    kind, depth = enc[1], int.from_bytes(enc[2:4], "big")
    if depth > 256 or (kind == 2 and depth != 0):
        return None
    if len(enc) != 4 + 33 * depth + (64 if kind == 1 else 0):
        return None
    steps = [(enc[4 + 33 * i], enc[5 + 33 * i:37 + 33 * i]) for i in range(depth)]
    leaf = None
    if kind == 1:
        o = 4 + 33 * depth
        leaf = (enc[o:o + 32], enc[o + 32:o + 64])
    return kind, steps, leaf


def verify(rt, k, v, enc):
    d = decode(enc)
    if d is None:
        return False
    kind, steps, leaf = d
    if any(steps[i][0] <= steps[i - 1][0] for i in range(1, len(steps))):
        return False
    if kind == 2:
        return v is None and not steps and rt == bytes(32)
    if kind == 0:
        if v is None:
            return False
        h = leaf_hash(k, v)
    else:
        lk, lv = leaf
        if v is not None or lk == k or any(bit(lk, b) != bit(k, b) for b, _ in steps):
            return False
        h = leaf_hash(lk, lv)
    for b, s in reversed(steps):
        h = internal_hash(b, h, s) if bit(k, b) == 0 else internal_hash(b, s, h)
    return h == rt


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "vectors.json")
    with open(path) as f:
        vec = json.load(f)
    hx = lambda s: bytes.fromhex(s[2:])
    n = 0
    for l in vec["leaf_hashes"]:
        assert leaf_hash(hx(l["key"]), hx(l["value"])) == hx(l["hash"]), l
        n += 1
    for i in vec["internal_hashes"]:
        assert internal_hash(i["bit"], hx(i["left"]), hx(i["right"])) == hx(i["hash"]), i
        n += 1
    trees = {}
    for t in vec["trees"]:
        pairs = [(hx(e["key"]), hx(e["value"])) for e in t["entries"]]
        assert root(pairs) == hx(t["root"]), t["name"]
        trees[t["name"]] = pairs
        n += 1
    for p in vec["proofs"]:
        pairs = trees[p["tree"]]
        k = hx(p["key"])
        v = None if p["value"] is None else hx(p["value"])
        assert verify(root(pairs), k, v, hx(p["proof"])) == p["valid"], p["name"]
        if p["valid"]:
            assert prove(pairs, k) == hx(p["proof"]), p["name"]
        n += 1
    print(f"ok: {n} vectors")


if __name__ == "__main__":
    main()
