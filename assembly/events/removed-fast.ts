// vLLM sends one BlockRemoved per evicted block, so on a busy engine they are most of the events. This recognises
// the exact byte shapes msgspec gives such an event (one uint64 hash; medium "GPU" or none; group_idx or none; array
// or map form) by comparing against pre-encoded templates as little-endian words, as src/events/removed-fast-path.ts
// does for the host decoder; anything else goes through the general reader, which reads these shapes alike.
import { pos, end, be64 } from "./msgpack";

/** The event's hash and group_idx (-1: none) after a match. */
export let fastHash: u64 = 0;
export let fastGroup: i32 = -1;

/** "BlockRemoved" (fixstr) then the fixarray header of one hash: 14 bytes after the event's header. */
// @ts-ignore: decorator
@inline function tagAndOneHash(p: usize): bool {
  return load<u64>(p) == 0x65526b636f6c42ac && load<u32>(p, 8) == 0x65766f6d && load<u16>(p, 12) == 0x9164;
}

/** "type": "BlockRemoved", "block_hashes": then the fixarray header of one hash (32 bytes). */
// @ts-ignore: decorator
@inline function mapHead(p: usize): bool {
  return load<u64>(p) == 0x6c42ac65707974a4 && load<u64>(p, 8) == 0x766f6d65526b636f &&
    load<u64>(p, 16) == 0x6b636f6c62ac6465 && load<u64>(p, 24) == 0x917365687361685f;
}

/** "medium": "GPU" (11 bytes). */
// @ts-ignore: decorator
@inline function mediumGpu(p: usize): bool {
  return load<u64>(p) == 0xa36d756964656da6 && load<u16>(p, 8) == 0x5047 && load<u8>(p, 10) == 0x55;
}

/** "group_idx" (10 bytes; its value, a positive fixint, follows). */
// @ts-ignore: decorator
@inline function groupKey(p: usize): bool {
  return load<u64>(p) == 0x695f70756f7267a9 && load<u16>(p, 8) == 0x7864;
}

/** Reads the event at the cursor if it has one of the common BlockRemoved shapes; false (cursor unmoved) otherwise. */
export function matchRemoved(): bool {
  const p = pos;
  const room = end - p;
  if (room < 24) return false;
  const head = <u32>load<u8>(p);
  let h: usize;
  let next: usize;
  if (head - 0x92 <= 2) {
    // [tag, [h]] (v0.9), [tag, [h], "GPU"], [tag, [h], "GPU", group_idx]
    const n: usize = head == 0x92 ? 24 : head == 0x93 ? 28 : 29;
    if (room < n || !tagAndOneHash(p + 1)) return false;
    h = p + 15;
    if (head != 0x92 && load<u32>(h, 9) != 0x555047a3) return false;
    next = p + n;
  } else if (head - 0x83 <= 1) {
    const n: usize = head == 0x83 ? 53 : 64;
    if (room < n || !mapHead(p + 1)) return false;
    h = p + 33;
    if (!mediumGpu(h + 9) || (head == 0x84 && !groupKey(h + 20))) return false;
    next = p + n;
  } else {
    return false;
  }
  if (load<u8>(h) != 0xcf) return false;
  let group: i32 = -1;
  if (head == 0x94 || head == 0x84) {
    group = <i32>load<u8>(next - 1);
    if (group > 0x7f) return false;
  }
  fastHash = be64(h + 1);
  fastGroup = group;
  pos = next;
  return true;
}
