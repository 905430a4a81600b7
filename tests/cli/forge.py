#!/usr/bin/env python3
"""Forged inputs for the tests: files that pass every checksum and digest
but hold what no tool writes, as an attacker who recomputes them would make.

    forge.py ckpt FILE key-twice|slot=N|nan-row|nan-dense
        a checkpoint (hps-train(1), CHECKPOINTS) with its first table's row 1
        given row 0's slot and key, row 0's slot set to N, row 0's first
        weight NaN, or the first dense parameter NaN; the payload recompressed
        (zstd(1)) and the header's sizes and SHA-256 recomputed
    forge.py shard DIR nan|inf
        the first training shard of DIR (hps-shard(5), version 2) with the
        first non-zero value of dense column 0 from the middle of block 0 on
        made NaN or inf;
        the block's CRC, the index, the header and manifest.json (bytes,
        checksum, its sha256) recomputed.  Prints the row it forged.
"""
import hashlib, json, struct, subprocess, sys

def zstd(data, *args):
    return subprocess.run(["zstd", "-q", "-c", *args], input=data, stdout=subprocess.PIPE, check=True).stdout

def forge_ckpt(path, what):
    f = bytearray(open(path, "rb").read())
    payload = bytearray(zstd(bytes(f[64:]), "-d"))
    # magic, model and plan digests, state; "HPS2" adds the data's digest, "HPS3" the day and its first step
    magic = struct.unpack_from("<I", payload, 0)[0]
    at = 4 + 72 + 72 + 6 * 8 + (72 if magic in (0x48505332, 0x48505333) else 0) + (16 if magic == 0x48505333 else 0)
    n_params = struct.unpack_from("<Q", payload, at)[0]
    dense = at + 8
    table = dense + 3 * 4 * n_params  # the first embedding table
    dim, rows = struct.unpack_from("<qq", payload, table)
    assert rows >= 2, "the first table needs 2 rows"
    key, slot = table + 32, table + 32 + 8 * rows
    weights = slot + 4 * rows + 8 * rows + rows
    if what == "key-twice":
        payload[key + 8:key + 16] = payload[key:key + 8]
        payload[slot + 4:slot + 8] = payload[slot:slot + 4]
    elif what.startswith("slot="):
        struct.pack_into("<i", payload, slot, int(what[5:]))
    elif what == "nan-row":
        struct.pack_into("<f", payload, weights, float("nan"))
    elif what == "nan-dense":
        struct.pack_into("<f", payload, dense, float("nan"))
    else:
        sys.exit("forge.py: unknown ckpt forgery " + what)
    frame = zstd(bytes(payload), "--check", "--stream-size=%d" % len(payload))
    head = bytearray(f[:64])
    struct.pack_into("<QQ", head, 8, len(payload), len(frame))
    head[24:56] = bytes(32)
    out = head + frame
    out[24:56] = hashlib.sha256(out).digest()
    open(path, "wb").write(out)

def crc32c(data, crc=0):
    table = getattr(crc32c, "table", None)
    if table is None:
        table = crc32c.table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF

def forge_shard(dir, what):
    mpath = dir + "/manifest.json"
    m = json.load(open(mpath))
    entry = next(s for s in m["shards"] if s.get("role", "train") == "train")
    path = dir + "/" + entry["file"]
    f = bytearray(open(path, "rb").read())
    assert struct.unpack_from("<I", f, 8)[0] == 2, "a version 2 shard"
    index_at = struct.unpack_from("<Q", f, 48)[0]
    n_blocks = struct.unpack_from("<I", f, 36)[0]
    e = index_at + 16  # block 0's entry
    off, csize, usize, rows = struct.unpack_from("<QIII", f, e)
    payload = bytearray(zstd(bytes(f[off:off + csize]), "-d"))
    assert struct.unpack_from("<I", f, 20)[0] > 0, "a shard with dense features"
    bits = rows * 4  # after the labels: dense column 0's bitmap, then its values
    is_set = [payload[bits + i // 8] >> (i % 8) & 1 for i in range(rows)]
    row = next(i for i in range(rows // 2, rows) if is_set[i])  # one in the block's middle
    struct.pack_into("<f", payload, bits + (rows + 7) // 8 + 4 * sum(is_set[:row]), float(what))
    block = zstd(bytes(payload), "--no-check")
    index = f[index_at:]
    out = f[:off] + block + f[off + csize:index_at]
    new_index_at = len(out)
    struct.pack_into("<II", index, 16 + 8, len(block), usize)
    struct.pack_into("<I", index, 16 + 24, crc32c(block))
    for b in range(1, n_blocks):  # the later blocks moved
        o = struct.unpack_from("<Q", index, 16 + 32 * b)[0]
        struct.pack_into("<Q", index, 16 + 32 * b, o + len(block) - csize)
    struct.pack_into("<I", index, len(index) - 8, crc32c(bytes(index[:-8])))
    out += index
    struct.pack_into("<Q", out, 48, new_index_at)
    struct.pack_into("<I", out, 60, crc32c(bytes(out[:60])))
    open(path, "wb").write(out)
    # the manifest: this shard's bytes and checksum (of the file after its
    # header), then its own digest with those 64 digits zeroed
    text = open(mpath).read()
    i = text.index('"file": "%s"' % entry["file"])
    j = text.index("}", i)
    part = text[i:j].replace('"bytes": %d' % entry["bytes"], '"bytes": %d' % len(out), 1)
    if "checksum" in entry:
        part = part.replace(json.dumps(entry["checksum"]), json.dumps(
            "crc32c:%08x" % crc32c(bytes(out[64:])) if isinstance(entry["checksum"], str) else crc32c(bytes(out[64:]))), 1)
    text = text[:i] + part + text[j:]
    digest = m.get("sha256")
    if digest:
        zero = "sha256:" + "0" * 64
        k = text.rindex(digest)
        text = text[:k] + zero + text[k + len(zero):]
        text = text[:k] + "sha256:" + hashlib.sha256(text.encode()).hexdigest() + text[k + len(zero):]
    open(mpath, "w").write(text)
    print(row)

if __name__ == "__main__":
    kind, target, what = sys.argv[1:4]
    (forge_ckpt if kind == "ckpt" else forge_shard)(target, what)
