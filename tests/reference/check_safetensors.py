#!/usr/bin/python3
"""trident's safetensors reader and writer against a reader and writer written here from the format's
description (no safetensors package): files trident writes are read here, files written here are read
by trident (through tests/reference/safetensors_tool), bad files must exit 2 with one line.
    check_safetensors.py SAFETENSORS_TOOL"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

np.seterr(all="ignore")   # inf and NaN among the values are meant
TOOL = None   # the safetensors_tool binary (main's argument)
NP_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64, "I64": np.int64,
             "I32": np.int32, "U8": np.uint8, "BOOL": np.bool_}


# --- the independent format code: u64 LE header length, JSON header, data section -------------
def write_st(path, tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, bytes)] laid out in that order."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def read_st(path):
    """(header length, metadata, {name: (dtype, shape, bytes)}), checking the layout rules."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", None)
    spans = sorted(tuple(e["data_offsets"]) for e in header.values())
    end = 0
    for b, e in spans:
        assert b == end, f"{path}: gap or overlap at {b}"
        end = e
    assert end == len(data), f"{path}: data section {len(data)} bytes, tensors end at {end}"
    return n, metadata, {k: (e["dtype"], e["shape"], data[e["data_offsets"][0]:e["data_offsets"][1]])
                         for k, e in header.items()}


def bf16_round(x):
    """bf16 bits of float32 x, rounded to nearest even, from the two neighbouring bf16 values in float64."""
    u = x.view(np.uint32)
    lo_bits = u & np.uint32(0xFFFF0000)
    lo = lo_bits.view(np.float32).astype(np.float64)
    exp = ((u >> 23) & 0xFF).astype(np.int64)
    ulp = np.ldexp(1.0, np.maximum(exp, 1) - 127 - 7)
    hi = lo + np.copysign(ulp, x.astype(np.float64))
    x64 = x.astype(np.float64)
    d_lo, d_hi = np.abs(x64 - lo), np.abs(hi - x64)
    odd = ((lo_bits >> 16) & 1) == 1
    up = (d_hi < d_lo) | ((d_hi == d_lo) & odd)
    return ((lo_bits >> 16) + up.astype(np.uint32)).astype(np.uint16)   # a carry into the exponent is right


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def tool(*args, expect_rc=0):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True)
    assert r.returncode == expect_rc, f"{args}: rc {r.returncode}\n{r.stderr}"
    return r


# --- values: random, and every rounding edge of bf16 and fp16 ------------------------------
rng = np.random.default_rng(25)
edges = np.array([0.0, -0.0, 1.0, np.inf, -np.inf, 3.4028235e38, 1e-40, -1e-45,
                  1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 65519.99, 65520.0, -65504.0, 2.0 ** -25, 1.5 * 2.0 ** -25,
                  3 * 2.0 ** -25, 6.1e-5], dtype=np.float32)
ties = np.array([0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0xBF818000, 0x7F7FFFFF, 0x00008000, 0x00018000],
                dtype=np.uint32).view(np.float32)
nans = np.array([0x7F800001, 0xFFC00000, 0x7FFFFFFF, 0x7F802000], dtype=np.uint32).view(np.float32)
values = np.concatenate([edges, ties, nans, (rng.standard_normal(4000) * np.exp(rng.uniform(-20, 20, 4000)))
                         .astype(np.float32)])


def expect_stored(dtype, x, raw):
    """raw (bytes trident wrote) holds x as dtype: F32 bit-exact, F16 as numpy casts, BF16 by bf16_round."""
    nan = np.isnan(x)
    if dtype == "F32":
        got = np.frombuffer(raw, np.float32)
        assert got.tobytes() == x.tobytes(), "F32 not bit-exact"
        return
    bits = np.frombuffer(raw, np.uint16)
    want = x.astype(np.float16).view(np.uint16) if dtype == "F16" else bf16_round(x)
    decoded = bits.view(np.float16).astype(np.float32) if dtype == "F16" else bf16_to_f32(bits)
    assert np.isnan(decoded[nan]).all(), f"{dtype}: a NaN did not stay NaN"
    assert (np.signbit(decoded[nan]) == np.signbit(x[nan])).all(), f"{dtype}: a NaN lost its sign"
    bad = np.nonzero((bits != want) & ~nan)[0]
    assert bad.size == 0, f"{dtype}: {bad.size} values rounded differently, first {x[bad[0]]!r}: " \
                          f"{bits[bad[0]]:#06x} vs {want[bad[0]]:#06x}"


def cpp_writes(tmp):
    tensors = [("model.embed.weight", "F32", [40, 5, 21]), ("layers.0.w", "BF16", [4200]),
               ("layers.0.b", "F16", [10, 420]), ("scalar", "F32", []), ("empty", "BF16", [0, 3])]
    spec = {"tensors": [], "metadata": {"format": "pt", "note": "h\u00e9llo"}}
    arrays = {}
    for i, (name, dtype, shape) in enumerate(tensors):
        n = int(np.prod(shape))
        arrays[name] = np.resize(np.roll(values, 97 * i), n).astype(np.float32)
        raw = os.path.join(tmp, f"src{i}.f32")
        arrays[name].tofile(raw)
        spec["tensors"].append({"name": name, "dtype": dtype, "shape": shape, "raw": raw})

    def check_file(path, names):
        n, metadata, got = read_st(path)
        assert (8 + n) % 8 == 0, f"{path}: data section not 8-aligned"
        text = open(path, "rb").read()[8:8 + n]
        assert text.rstrip(b" ").endswith(b"}") and len(text) - len(text.rstrip(b" ")) < 8, "padding is not spaces"
        assert metadata == spec["metadata"], metadata
        assert sorted(got) == sorted(names), (sorted(got), names)
        for name, dtype, shape in tensors:
            if name in names:
                assert got[name][0] == dtype and got[name][1] == shape, (name, got[name][:2])
                expect_stored(dtype, arrays[name], got[name][2])

    single = os.path.join(tmp, "cpp.safetensors")
    tool("write", write_spec(tmp, dict(spec, out=single)))
    check_file(single, [t[0] for t in tensors])

    out_dir = os.path.join(tmp, "cpp_sharded")
    os.makedirs(out_dir)
    tool("write", write_spec(tmp, dict(spec, out=out_dir, max_shard_bytes=9000)))
    index = json.load(open(os.path.join(out_dir, "model.safetensors.index.json")))
    sizes = {"model.embed.weight": 16800, "layers.0.w": 8400, "layers.0.b": 8400, "scalar": 4, "empty": 0}
    assert index["metadata"]["total_size"] == sum(sizes.values()), index["metadata"]
    want_map = {"model.embed.weight": "model-00001-of-00003.safetensors", "layers.0.w": "model-00002-of-00003.safetensors",
                "layers.0.b": "model-00003-of-00003.safetensors", "scalar": "model-00003-of-00003.safetensors",
                "empty": "model-00003-of-00003.safetensors"}
    assert index["weight_map"] == want_map, index["weight_map"]
    assert sorted(os.listdir(out_dir)) == sorted(set(want_map.values())) + ["model.safetensors.index.json"]
    for shard in set(want_map.values()):
        check_file(os.path.join(out_dir, shard), [k for k, v in want_map.items() if v == shard])
    print(f"ok   C++ writes -> python reads: {len(tensors)} tensors, F32/BF16/F16, one file and 3 shards")


def write_spec(tmp, spec):
    path = os.path.join(tmp, "spec.json")
    json.dump(spec, open(path, "w"))
    return path


def python_writes(tmp):
    x = values[:1200].copy()
    f16 = x.astype(np.float16)
    bf16 = bf16_round(x)
    ints = np.arange(-5, 7, dtype=np.int64)
    tensors = [("b.bf16", "BF16", [30, 40], bf16.tobytes()), ("a.f32", "F32", [1200], x.tobytes()),
               ("c.f16", "F16", [2, 600], f16.tobytes()), ("ids", "I64", [3, 4], ints.tobytes()),
               ("mask", "BOOL", [3], bytes([1, 0, 1])), ("bytes", "U8", [5], bytes(range(5))),
               ("d.f64", "F64", [2], np.array([1.5, -2], np.float64).tobytes())]
    want = {"b.bf16": bf16_to_f32(bf16), "a.f32": x, "c.f16": f16.astype(np.float32)}

    def check_dump(path, sharded, files=None):
        out = os.path.join(tmp, "dump")
        os.makedirs(out, exist_ok=True)
        tool("dump", path, out)
        d = json.load(open(os.path.join(out, "tensors.json")))
        assert d["sharded"] == sharded and d["metadata"] == {"format": "pt"}, d
        seen = {t["name"]: t for t in d["tensors"]}
        assert sorted(seen) == sorted(t[0] for t in tensors), sorted(seen)
        for name, dtype, shape, _ in tensors:
            t = seen[name]
            assert t["dtype"] == dtype and t["shape"] == shape, t
            if files:
                assert os.path.basename(t["file"]) == files[name], t
            if name in want:
                got = np.fromfile(t["raw"], np.float32)
                assert got.tobytes() == want[name].tobytes(), f"{name}: values differ"
            else:
                assert "raw" not in t, t

    # One file with an unpadded header (the data section at any alignment), dtypes in mixed order.
    single = os.path.join(tmp, "py.safetensors")
    write_st(single, tensors, metadata={"format": "pt"}, pad=False)
    check_dump(single, False)

    # Two shards and an index, tensors interleaved across them.
    model = os.path.join(tmp, "py_model")
    os.makedirs(model)
    files = {}
    for s, part in enumerate([tensors[0::2], tensors[1::2]]):
        name = f"model-{s + 1:05d}-of-00002.safetensors"
        write_st(os.path.join(model, name), part, metadata={"format": "pt"})
        files.update({t[0]: name for t in part})
    json.dump({"metadata": {"total_size": sum(len(t[3]) for t in tensors)}, "weight_map": files},
              open(os.path.join(model, "model.safetensors.index.json"), "w"))
    check_dump(model, True, files)

    # Bad files: exit 2, one line naming the file and the tensor, the file untouched.
    bad = os.path.join(tmp, "bad.safetensors")
    blob = open(single, "rb").read()
    overlapping = [("a", "F32", [2], b"\0" * 8), ("b", "F32", [2], b"\0" * 8)]
    write_st(bad, overlapping)
    over = open(bad, "rb").read().replace(b'"data_offsets": [8, 16]', b'"data_offsets": [4, 12]')
    cases = [(blob[:-3], "d.f64", "truncated"), (over, "'b'", "overlap"),
             (blob.replace(b'"BOOL"', b'"BOOX"'), "'mask'", "unknown dtype")]
    for content, tensor, what in cases:
        open(bad, "wb").write(content)
        r = tool("dump", bad, tmp, expect_rc=2)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and bad in lines[0] and tensor in lines[0] and what in lines[0], r.stderr
        assert open(bad, "rb").read() == content
    print(f"ok   python writes -> C++ reads: {len(tensors)} tensors (F32/F16/BF16 converted, I64/BOOL/U8/F64 "
          f"reported), one unpadded file and 2 shards; {len(cases)} bad files exit 2")


def main():
    global TOOL
    TOOL = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        cpp_writes(tmp)
        python_writes(tmp)


if __name__ == "__main__":
    main()
