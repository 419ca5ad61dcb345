// Status codes and the ABI version shared with src/wasm/abi.ts; negative returns are errors, never exceptions.

export const ABI_VERSION: i32 = 3;

export const OK: i32 = 0;
export const E_STATE: i32 = -1;
export const E_NO_MEMORY: i32 = -2;
export const E_BAD_ARG: i32 = -3;
export const E_BAD_SLOT: i32 = -4;
export const E_CAPACITY: i32 = -5;
export const E_PARENT_NOT_FOUND: i32 = -6;
export const E_INVALID_SEQUENCE: i32 = -7;
export const E_CORRUPT: i32 = -8;
export const E_TOO_LONG: i32 = -9;

// Counter indices in the COUNTERS region (u32 each), cumulative since creation.
export const C_APPLIED: i32 = 0;
export const C_PARENT_MISSING: i32 = 1;
export const C_INVALID: i32 = 2;
export const C_CAPACITY: i32 = 3;
export const C_UNKNOWN_REMOVED: i32 = 4;
export const C_BAD_SLOT: i32 = 5;
export const C_CORRUPT: i32 = 6;
export const C_EVICTED: i32 = 7;
export const C_EXPIRED: i32 = 8;
export const C_PRUNED: i32 = 9;
export const C_CAPPED: i32 = 10;
// Prompt memo: blocks whose hashes a remembered prompt supplied, and blocks hashed while the memo was consulted.
export const C_MEMO_REUSED: i32 = 11;
export const C_MEMO_HASHED: i32 = 12;
export const COUNTERS: i32 = 16;
