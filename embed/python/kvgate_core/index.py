"""kvgate_core.Index: one libkvgate index; bytes and lists of ints in, ints out, negative statuses raised as KvgateError."""
import ctypes as C
from typing import NamedTuple, Sequence

from . import native as N
from .errors import KvgateError, STATUS

COUNTER_NAMES = ("applied", "parent_missing", "invalid", "capacity", "unknown_removed", "bad_slot", "corrupt",
                 "evicted", "expired", "pruned", "capped", "memo_reused", "memo_hashed")
# Stored outcomes returned (not raised) by Index.store, as the JS KvIndex.stored returns them.
STORE_OUTCOMES = (STATUS["OK"], STATUS["PARENT_NOT_FOUND"], STATUS["INVALID_SEQUENCE"], STATUS["CAPACITY"])


class Match(NamedTuple):
    slot: int
    blocks: int
    tree_size: int


def _u64s(values: Sequence[int]):
    return (N.u64 * max(1, len(values)))(*[v & 0xFFFFFFFFFFFFFFFF for v in values])


def _u32s(values: Sequence[int]):
    return (N.u32 * max(1, len(values)))(*values)


def _text(s: str | None) -> bytes | None:
    return s.encode() if s else None


class Index:
    """A KV-cache block index over `max_slots` worker slots holding at most `capacity` (slot, block) entries."""

    def __init__(self, capacity: int = 1 << 20, max_slots: int = 64, salt: int | None = None, *,
                 prompt_tokens: int | None = None, event_blocks: int | None = None, event_bytes: int | None = None,
                 approx_max_blocks: int | None = None, prune_ratio: float | None = None,
                 prompt_memo_entries: int | None = None, prompt_memo_bytes: int | None = None, lib_path: str | None = None):
        self._h = None
        self._lib = N.load(lib_path)
        o = N.Options()
        self._lib.kvgate_options_init(C.byref(o))
        o.capacity, o.max_slots = capacity, max_slots
        for name, v in (("salt", salt), ("prompt_tokens", prompt_tokens), ("event_blocks", event_blocks),
                        ("event_bytes", event_bytes), ("approx_max_blocks", approx_max_blocks),
                        ("prune_ratio", prune_ratio), ("prompt_memo_entries", prompt_memo_entries),
                        ("prompt_memo_bytes", prompt_memo_bytes)):
            if v is not None:
                setattr(o, name, v)
        h = N.H()
        st = self._lib.kvgate_create(C.byref(o), C.byref(h))
        if st != 0:
            raise KvgateError(st, "create: " + self._lib.kvgate_status_message(st).decode())
        self._h = h
        self.max_slots = max_slots
        self._matches = (N.Match * max_slots)()

    def close(self) -> None:
        if getattr(self, "_h", None):
            self._lib.kvgate_destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        self.close()

    def _check(self, st: int, allowed: Sequence[int] = (0,)) -> int:
        if st in allowed:
            return st
        raise KvgateError(st, self._lib.kvgate_last_error(self._h).decode())

    def _handle(self):
        if not self._h:
            raise KvgateError(STATUS["STATE"], "index closed")
        return self._h

    # ---- hashing ----------------------------------------------------------------------------------------------
    def xxh3(self, data: bytes, seed: int = 0) -> int:
        out = N.u64()
        self._check(self._lib.kvgate_xxh3(self._handle(), data, len(data), seed & 0xFFFFFFFFFFFFFFFF, C.byref(out)))
        return out.value

    def seed(self, lora: str | None = None, namespace: str | None = None) -> int:
        out = N.u64()
        self._check(self._lib.kvgate_seed(self._handle(), _text(lora), _text(namespace), C.byref(out)))
        return out.value

    def hash(self, tokens: Sequence[int], block_size: int, lora: str | None = None, namespace: str | None = None,
             eagle: bool = False) -> tuple[list[int], list[int]]:
        """(local, sequence) hashes of the prompt's complete blocks."""
        opts = N.HashOpts(block_size, _text(lora), _text(namespace), 1 if eagle else 0)
        cap = len(tokens) // max(1, block_size) + 1
        local, seq, n = (N.u64 * cap)(), (N.u64 * cap)(), N.sz()
        self._check(self._lib.kvgate_hash_prompt(self._handle(), _u32s(tokens), len(tokens), C.byref(opts), local, seq,
                                                 cap, C.byref(n)))
        return list(local[: n.value]), list(seq[: n.value])

    # ---- workers and events -----------------------------------------------------------------------------------
    def open_slot(self, slot: int) -> None:
        self._check(self._lib.kvgate_open_slot(self._handle(), slot))

    def remove_worker(self, slot: int) -> None:
        self._check(self._lib.kvgate_remove_worker(self._handle(), slot))

    def clear_slot(self, slot: int) -> None:
        self._check(self._lib.kvgate_clear_slot(self._handle(), slot))

    def store(self, slot: int, parent: int | None, hashes: Sequence[int], locals_: Sequence[int]) -> int:
        """A Stored event; 0 when applied, else the outcome status (PARENT_NOT_FOUND, INVALID_SEQUENCE, CAPACITY)."""
        if len(hashes) != len(locals_):
            raise KvgateError(STATUS["BAD_ARG"], "hashes and locals differ in length")
        p = 0 if parent is None else parent & 0xFFFFFFFFFFFFFFFF
        st = self._lib.kvgate_store(self._handle(), slot, 0 if parent is None else 1, p, _u64s(hashes), _u64s(locals_),
                                    len(hashes))
        return self._check(st, STORE_OUTCOMES)

    def remove(self, slot: int, hashes: Sequence[int]) -> int:
        """A Removed event; returns how many hashes the slot did not hold."""
        unknown = N.u32()
        self._check(self._lib.kvgate_remove(self._handle(), slot, _u64s(hashes), len(hashes), C.byref(unknown)))
        return unknown.value

    def apply_binary(self, batch: bytes) -> int:
        """A binary record batch (docs/abi.md); returns records applied. Corrupt: KvgateError with `corrupt_at`."""
        records, at = N.u32(), N.u64()
        st = self._lib.kvgate_apply_binary(self._handle(), batch, len(batch), C.byref(records), C.byref(at))
        if st == STATUS["CORRUPT"]:
            err = KvgateError(st, self._lib.kvgate_last_error(self._h).decode())
            err.corrupt_at = at.value
            raise err
        self._check(st)
        return records.value

    def apply_engine_batch(self, slot: int, payload: bytes, block_size: int, namespace: str | None = None,
                           kv_group: int = -1) -> int:
        """A vLLM/SGLang msgpack KVEventBatch applied to `slot` under the default ingest policy; records applied."""
        p = N.IngestPolicy()
        self._lib.kvgate_ingest_policy_init(C.byref(p), block_size)
        p.kv_group, p.ns = kv_group, _text(namespace)
        info = N.BatchInfo()
        self._check(self._lib.kvgate_apply_engine_batch(self._handle(), slot, payload, len(payload), C.byref(p),
                                                        C.byref(info)))
        return info.applied

    # ---- queries ----------------------------------------------------------------------------------------------
    def _collect(self, n: N.sz) -> list[Match]:
        return [Match(m.slot, m.blocks, m.tree_size) for m in self._matches[: n.value]]

    def find_matches(self, tokens: Sequence[int], block_size: int, lora: str | None = None,
                     namespace: str | None = None) -> tuple[int, list[Match]]:
        """(prompt blocks, matches) for a prompt."""
        opts = N.HashOpts(block_size, _text(lora), _text(namespace), 0)
        n, blocks = N.sz(), N.sz()
        self._check(self._lib.kvgate_find_matches(self._handle(), _u32s(tokens), len(tokens), C.byref(opts),
                                                  self._matches, self.max_slots, C.byref(n), C.byref(blocks)))
        return blocks.value, self._collect(n)

    def find_matches_by_hashes(self, seq: Sequence[int]) -> list[Match]:
        n = N.sz()
        self._check(self._lib.kvgate_find_matches_by_hashes(self._handle(), _u64s(seq), len(seq), self._matches,
                                                            self.max_slots, C.byref(n)))
        return self._collect(n)

    def record_route(self, slot: int, seq: Sequence[int], now: float, ttl: float) -> int:
        out = N.u32()
        self._check(self._lib.kvgate_record_route(self._handle(), slot, _u64s(seq), len(seq), now, ttl, C.byref(out)))
        return out.value

    def slot_capacity(self, slot: int, capacity: int) -> int:
        """Approximate mode: `slot` keeps at most `capacity` routed blocks (0: TTLs only); returns blocks dropped now."""
        out = N.u32()
        self._check(self._lib.kvgate_slot_capacity(self._handle(), slot, capacity, C.byref(out)))
        return out.value

    def match_jump(self, jump: int) -> None:
        """Matching probes every `jump`-th block (1..1024; 1 probes every block) while no matched slot drops out;
        exact for slots whose blocks are prefix-closed, as engines' LRU eviction keeps them."""
        self._check(self._lib.kvgate_match_jump(self._handle(), jump))

    def expire(self, now: float) -> int:
        out = N.u32()
        self._check(self._lib.kvgate_expire(self._handle(), now, C.byref(out)))
        return out.value

    def score(self, candidates: Sequence[dict], isl: float, overlap_weight: float = 1.0, temperature: float = 0.0,
              rand: float = 0.0) -> tuple[int, list[float]]:
        """(chosen index, costs); each candidate has kvgate_candidate's fields (active_overlap_blocks optional)."""
        arr = (N.Candidate * max(1, len(candidates)))()
        for i, c in enumerate(candidates):
            arr[i] = N.Candidate(c["overlap_blocks"], c["active_prefill_tokens"], c["active_decode_blocks"],
                                 c.get("active_overlap_blocks", 0), c["block_size"], c["tree_size"])
        costs, chosen = (N.f64 * max(1, len(candidates)))(), N.u32()
        req = N.ScoreRequest(isl, overlap_weight, temperature, rand)
        self._check(self._lib.kvgate_score(self._handle(), arr, len(candidates), C.byref(req), costs, C.byref(chosen)))
        return chosen.value, list(costs[: len(candidates)])

    def tree_size(self, slot: int) -> int:
        out = N.u32()
        self._check(self._lib.kvgate_tree_size(self._handle(), slot, C.byref(out)))
        return out.value

    def stats(self) -> dict:
        s = N.Stats()
        self._check(self._lib.kvgate_stats_get(self._handle(), C.byref(s)))
        return {"entries": s.entries, "nodes": s.nodes, "ttl_entries": s.ttl_entries, "heap_items": s.heap_items,
                "memory_bytes": s.memory_bytes, "linear_bytes": s.linear_bytes, "generation": s.generation,
                "counters": dict(zip(COUNTER_NAMES, s.counters))}
