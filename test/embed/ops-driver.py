"""Test driver: replays an operation script (test/embed/op-script.ts) against kvgate_core.Index and prints the same
result lines as ops-driver.c, so a vitest test can compare Python with C and the TypeScript reference."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "embed", "python"))
from kvgate_core import Index, KvgateError  # noqa: E402


def status(fn):
    """(0, result) or (negative status, None): the drivers print statuses where the API raises."""
    try:
        return 0, fn()
    except KvgateError as e:
        return e.status, None


def text(w: str):
    return None if w == "-" else bytes.fromhex(w).decode()


def main(path: str) -> None:
    idx = None
    out = sys.stdout
    for line in open(path):
        w = line.split()
        if not w:
            continue
        op, a = w[0], w[1:]
        n = lambda i: int(a[i])  # noqa: E731
        ent = lambda: idx.stats()["entries"]  # noqa: E731
        if op == "I":
            idx = Index(capacity=n(1), max_slots=n(0), approx_max_blocks=n(2), salt=n(3), prompt_tokens=256,
                        event_blocks=64)
            out.write("I 0\n")
        elif op == "X":
            st, h = status(lambda: idx.xxh3(bytes.fromhex(a[0]), n(1)))
            out.write(f"X {st} {h or 0}\n")
        elif op == "H":
            k = n(3)
            toks = [int(t) for t in a[4:4 + k]]
            st, r = status(lambda: idx.hash(toks, n(0), text(a[1]), text(a[2])))
            local, seq = r if r else ([], [])
            out.write(" ".join(["H", str(st), str(len(seq))] + [str(v) for v in local + seq]) + "\n")
        elif op in ("O", "W", "C"):
            fn = {"O": idx.open_slot, "W": idx.remove_worker, "C": idx.clear_slot}[op]
            st, _ = status(lambda: fn(n(0)))
            out.write(f"{op} {st} ={ent()}\n")
        elif op == "S":
            k = n(3)
            pairs = [int(v) for v in a[4:4 + 2 * k]]
            st, r = status(lambda: idx.store(n(0), n(2) if n(1) else None, pairs[0::2], pairs[1::2]))
            out.write(f"S {r if st == 0 else st} ={ent()}\n")
        elif op == "R":
            st, r = status(lambda: idx.remove(n(0), [int(v) for v in a[2:2 + n(1)]]))
            out.write(f"R {st} {r or 0} ={ent()}\n")
        elif op == "B":
            st, r = status(lambda: idx.apply_binary(bytes.fromhex(a[0])))
            out.write(f"B {st} {r or 0} ={ent()}\n")
        elif op == "T":
            st, r = status(lambda: idx.record_route(n(0), [int(v) for v in a[4:4 + n(3)]], float(a[1]), float(a[2])))
            out.write(f"T {st} {r or 0} ={ent()}\n")
        elif op == "L":
            st, r = status(lambda: idx.slot_capacity(n(0), n(1)))
            out.write(f"L {st} {r or 0} ={ent()}\n")
        elif op == "J":
            st, _ = status(lambda: idx.match_jump(n(0)))
            out.write(f"J {st}\n")
        elif op == "M":
            st, r = status(lambda: idx.find_matches_by_hashes([int(v) for v in a[1:1 + n(0)]]))
            ms = sorted(r or [])
            out.write(" ".join(["M", str(st), str(len(ms))] + [f"{m.slot}:{m.blocks}:{m.tree_size}" for m in ms]) + "\n")
        elif op == "E":
            st, r = status(lambda: idx.expire(float(a[0])))
            out.write(f"E {st} {r or 0} ={ent()}\n")
        elif op == "K":
            k = n(4)
            v = [int(x) for x in a[5:5 + 6 * k]]
            keys = ("overlap_blocks", "active_prefill_tokens", "active_decode_blocks", "active_overlap_blocks", "block_size",
                    "tree_size")
            cands = [dict(zip(keys, v[6 * i:6 * i + 6])) for i in range(k)]
            st, r = status(lambda: idx.score(cands, float(a[0]), float(a[1]), float(a[2]), float(a[3])))
            chosen, costs = r if r else (0, [])
            out.write(" ".join(["K", str(st), str(chosen)] + [struct.pack("<d", c)[::-1].hex() for c in costs]) + "\n")
        elif op == "Q":
            s = idx.stats()
            c = s["counters"]
            keys = ("applied", "parent_missing", "invalid", "capacity", "unknown_removed", "evicted", "expired", "pruned",
                    "capped")
            out.write(" ".join(["Q", "0", str(s["entries"]), str(s["ttl_entries"])] + [str(c[k]) for k in keys]) + "\n")
        elif op == "P":
            c = idx.stats()["counters"]
            out.write(f"P 0 {c['memo_reused']} {c['memo_hashed']}\n")
        else:
            raise SystemExit(f"ops-driver.py: unknown op {op}")
    idx.close()


if __name__ == "__main__":
    main(sys.argv[1])
