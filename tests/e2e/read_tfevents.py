#!/usr/bin/python3
"""An independent reader of TensorBoard event files for the tests: parses the TFRecord framing,
checks both masked CRC-32Cs of every record, and decodes the Event / Summary / Summary.Value
protocol-buffer fields by hand (no tensorboard or protobuf package).

    read_tfevents.py EVENTS_FILE METRICS_JSONL
checks that every metrics row's measured values are in the file at its step under their tags."""
import json
import math
import struct
import sys


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(blob):
    at = 0
    while at < len(blob):
        head = blob[at:at + 8]
        (length,) = struct.unpack("<Q", head)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        assert length_crc == masked(head), f"record at byte {at}: length CRC mismatch"
        data = blob[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        assert len(data) == length and data_crc == masked(data), f"record at byte {at}: data CRC mismatch"
        yield data
        at += 16 + length


def fields(msg):
    """(field number, wire type, value) of a protocol-buffer message."""
    at = 0

    def varint():
        nonlocal at
        v = shift = 0
        while True:
            b = msg[at]
            at += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while at < len(msg):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, varint()
        elif wire == 1:
            yield number, wire, msg[at:at + 8]
            at += 8
        elif wire == 2:
            n = varint()
            yield number, wire, msg[at:at + n]
            at += n
        elif wire == 5:
            yield number, wire, msg[at:at + 4]
            at += 4
        else:
            raise AssertionError(f"unexpected wire type {wire}")


def events(path):
    out = []
    for data in records(open(path, "rb").read()):
        e = {"step": 0, "scalars": {}}
        for number, wire, v in fields(data):
            if number == 1 and wire == 1:
                e["wall_time"] = struct.unpack("<d", v)[0]
            elif number == 2 and wire == 0:
                e["step"] = v
            elif number == 3 and wire == 2:
                e["file_version"] = v.decode()
            elif number == 5 and wire == 2:
                for n, w, value in fields(v):
                    assert (n, w) == (1, 2), f"Summary field {n}/{w}"
                    tag = simple = None
                    for vn, vw, vv in fields(value):
                        if (vn, vw) == (1, 2):
                            tag = vv.decode()
                        elif (vn, vw) == (2, 5):
                            simple = struct.unpack("<f", vv)[0]
                    e["scalars"][tag] = simple
        out.append(e)
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    evs = events(sys.argv[1])
    assert evs[0].get("file_version") == "brain.Event:2", f"first event: {evs[0]}"
    by_step = {e["step"]: e["scalars"] for e in evs[1:]}
    tags = {"loss": "train/loss", "lr": "train/lr", "grad_norm": "train/grad_norm", "skipped_steps": "train/skipped_steps",
            "val_loss": "val/loss", "val_ppl": "val/ppl", "tokens_per_s": "perf/tokens_per_s", "step_ms": "perf/step_ms",
            "mfu": "perf/mfu", "peak_mem_gib": "perf/peak_mem_gib", "comm_wait": "perf/comm_wait"}
    rows = [json.loads(line) for line in open(sys.argv[2])]
    checked = 0
    for r in rows:
        got = by_step.get(r["step"])
        assert got is not None, f"no event for step {r['step']}"
        for key, tag in tags.items():
            if r.get(key) is None:
                assert tag not in got, f"step {r['step']}: {tag} written but not measured"
                continue
            assert tag in got, f"step {r['step']}: no {tag}"
            want = f32(r[key])
            assert got[tag] == want or math.isclose(got[tag], want, rel_tol=1e-6), \
                f"step {r['step']} {tag}: {got[tag]} != {want}"
            checked += 1
    assert len(by_step) == len(rows), f"{len(by_step)} scalar events for {len(rows)} metrics rows"
    print(f"ok: {len(evs)} records, CRCs valid, {checked} scalars equal the metrics rows")


if __name__ == "__main__":
    main()
