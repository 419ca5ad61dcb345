"""ctypes declarations of libkvgate: the structs and prototypes of kvgate.h, and where the shared library is found."""
import ctypes as C
import os

u32, u64, i32, i64, f64, sz = C.c_uint32, C.c_uint64, C.c_int32, C.c_int64, C.c_double, C.c_size_t
P = C.POINTER
COUNTERS = 13


class Options(C.Structure):
    _fields_ = [("max_slots", u32), ("capacity", u32), ("prompt_tokens", u32), ("max_prompt_tokens", u32),
                ("event_blocks", u32), ("event_bytes", u32), ("max_multimodal", u32), ("approx_max_blocks", u32),
                ("prune_ratio", f64), ("salt", u64), ("prompt_memo_entries", u32), ("prompt_memo_bytes", u32)]


class HashOpts(C.Structure):
    _fields_ = [("block_size", u32), ("lora", C.c_char_p), ("ns", C.c_char_p), ("eagle", C.c_int)]


class Match(C.Structure):
    _fields_ = [("slot", u32), ("blocks", u32), ("tree_size", u32)]


class IngestPolicy(C.Structure):
    _fields_ = [("block_size", u32), ("kv_group", i32), ("flags", u32), ("ns", C.c_char_p)]


class BatchInfo(C.Structure):
    _fields_ = [("rank", i64), ("events", u32), ("records", u32), ("bytes", u32), ("clears", u32), ("applied", u32)]


class Candidate(C.Structure):
    _fields_ = [("overlap_blocks", f64), ("active_prefill_tokens", f64), ("active_decode_blocks", f64),
                ("active_overlap_blocks", f64), ("block_size", f64), ("tree_size", f64)]


class ScoreRequest(C.Structure):
    _fields_ = [("isl", f64), ("overlap_weight", f64), ("temperature", f64), ("rand", f64)]


class Stats(C.Structure):
    _fields_ = [("entries", u32), ("nodes", u32), ("ttl_entries", u32), ("heap_items", u32), ("memory_bytes", u64),
                ("linear_bytes", u64), ("generation", u32), ("counters", u32 * COUNTERS)]


H = C.c_void_p
PROTOTYPES = {
    "kvgate_options_init": (None, [P(Options)]),
    "kvgate_create": (C.c_int, [P(Options), P(H)]),
    "kvgate_destroy": (None, [H]),
    "kvgate_status_message": (C.c_char_p, [C.c_int]),
    "kvgate_last_error": (C.c_char_p, [H]),
    "kvgate_core_abi_version": (C.c_int, [H, P(C.c_int)]),
    "kvgate_xxh3": (C.c_int, [H, C.c_char_p, sz, u64, P(u64)]),
    "kvgate_seed": (C.c_int, [H, C.c_char_p, C.c_char_p, P(u64)]),
    "kvgate_hash_prompt": (C.c_int, [H, P(u32), sz, P(HashOpts), P(u64), P(u64), sz, P(sz)]),
    "kvgate_open_slot": (C.c_int, [H, u32]),
    "kvgate_remove_worker": (C.c_int, [H, u32]),
    "kvgate_clear_slot": (C.c_int, [H, u32]),
    "kvgate_store": (C.c_int, [H, u32, C.c_int, u64, P(u64), P(u64), sz]),
    "kvgate_remove": (C.c_int, [H, u32, P(u64), sz, P(u32)]),
    "kvgate_apply_binary": (C.c_int, [H, C.c_char_p, sz, P(u32), P(u64)]),
    "kvgate_ingest_policy_init": (None, [P(IngestPolicy), u32]),
    "kvgate_apply_engine_batch": (C.c_int, [H, u32, C.c_char_p, sz, P(IngestPolicy), P(BatchInfo)]),
    "kvgate_find_matches": (C.c_int, [H, P(u32), sz, P(HashOpts), P(Match), sz, P(sz), P(sz)]),
    "kvgate_find_matches_by_hashes": (C.c_int, [H, P(u64), sz, P(Match), sz, P(sz)]),
    "kvgate_record_route": (C.c_int, [H, u32, P(u64), sz, f64, f64, P(u32)]),
    "kvgate_slot_capacity": (C.c_int, [H, u32, u32, P(u32)]),
    "kvgate_match_jump": (C.c_int, [H, u32]),
    "kvgate_expire": (C.c_int, [H, f64, P(u32)]),
    "kvgate_score": (C.c_int, [H, P(Candidate), sz, P(ScoreRequest), P(f64), P(u32)]),
    "kvgate_tree_size": (C.c_int, [H, u32, P(u32)]),
    "kvgate_stats_get": (C.c_int, [H, P(Stats)]),
    "kvgate_debug_trap": (C.c_int, [H]),
}

_lib = None


def default_path() -> str:
    """KVGATE_LIB, else build/embed/libkvgate.so of the checkout this package sits in."""
    env = os.environ.get("KVGATE_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", "build", "embed", "libkvgate.so"))


def load(path: str | None = None) -> C.CDLL:
    """The shared library with its prototypes declared (loaded once per process)."""
    global _lib
    if _lib is None:
        lib = C.CDLL(path or default_path())
        for name, (res, args) in PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        _lib = lib
    return _lib
