"""Routes the captured vLLM prompt from Python: two workers, the real BlockStored batch applied to worker 1, then the
prompt's 25 blocks found on worker 1. Usage: route.py <batch.msgpack> <tokens.u32le>; exit 0 when all blocks match."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import kvgate_core  # noqa: E402


def main(batch_path: str, tokens_path: str) -> int:
    batch = open(batch_path, "rb").read()
    raw = open(tokens_path, "rb").read()
    tokens = list(struct.unpack(f"<{len(raw) // 4}I", raw))
    with kvgate_core.Index(capacity=4096, max_slots=2) as idx:
        idx.open_slot(0)
        idx.open_slot(1)
        print(f"batch: {idx.apply_engine_batch(1, batch, block_size=16)} records applied")
        local, seq = idx.hash(tokens, block_size=16)
        print(f"prompt: {len(tokens)} tokens, {len(seq)} blocks, first sequence hash {seq[0]}")
        blocks, matches = idx.find_matches(tokens, block_size=16)
        for m in matches:
            print(f"worker {m.slot}: {m.blocks}/{blocks} blocks (holds {m.tree_size})")
        ok = blocks == 25 and [(m.slot, m.blocks) for m in matches] == [(1, 25)]
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: route.py <batch.msgpack> <tokens.u32le>", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
