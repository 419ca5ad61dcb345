// vLLM sends one BlockRemoved per evicted block, so on a busy engine they are most of the events. This recognises
// the exact byte shapes msgspec gives such an event (one uint64 hash; medium "GPU" or none; group_idx or none; array
// or map form) by comparing against pre-encoded templates, as src/events/removed-fast-path.ts does for the host
// decoder; anything else goes through the general reader, which reads these shapes to the same result.
import { pos, end, be64, bytesEq } from "./msgpack";

/** "BlockRemoved" (fixstr), then the fixarray header of one hash. */
const RM_ARRAY: usize = memory.data<u8>([0xac, 0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x52, 0x65, 0x6d, 0x6f, 0x76, 0x65, 0x64, 0x91]);
/** "GPU" (fixstr). */
const GPU: usize = memory.data<u8>([0xa3, 0x47, 0x50, 0x55]);
/** "type": "BlockRemoved", "block_hashes": then the fixarray header of one hash. */
const RM_MAP: usize = memory.data<u8>([0xa4, 0x74, 0x79, 0x70, 0x65, 0xac, 0x42, 0x6c, 0x6f, 0x63, 0x6b, 0x52, 0x65, 0x6d, 0x6f, 0x76, 0x65, 0x64, 0xac, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x5f, 0x68, 0x61, 0x73, 0x68, 0x65, 0x73, 0x91]);
/** "medium": "GPU". */
const MEDIUM_GPU: usize = memory.data<u8>([0xa6, 0x6d, 0x65, 0x64, 0x69, 0x75, 0x6d, 0xa3, 0x47, 0x50, 0x55]);
/** "group_idx" (its value is a positive fixint). */
const GROUP_KEY: usize = memory.data<u8>([0xa9, 0x67, 0x72, 0x6f, 0x75, 0x70, 0x5f, 0x69, 0x64, 0x78]);

/** The event's hash and group_idx (-1: none) after a match. */
export let fastHash: u64 = 0;
export let fastGroup: i32 = -1;

/** Reads the event at the cursor if it has one of the common BlockRemoved shapes; false (cursor unmoved) otherwise. */
export function matchRemoved(): bool {
  const p = pos;
  const room = end - p;
  const head = <u32>load<u8>(p);
  let h: usize;
  let tail: usize;
  if (head >= 0x92 && head <= 0x94) {
    // [tag, [h]] (v0.9), [tag, [h], "GPU"], [tag, [h], "GPU", group_idx]
    const n: usize = head == 0x92 ? 24 : head == 0x93 ? 28 : 29;
    if (room < n || !bytesEq(p + 1, RM_ARRAY, 14)) return false;
    h = p + 15;
    tail = h + 9;
    if (head != 0x92 && !bytesEq(tail, GPU, 4)) return false;
    tail = p + n;
  } else if (head == 0x83 || head == 0x84) {
    const n: usize = head == 0x83 ? 53 : 64;
    if (room < n || !bytesEq(p + 1, RM_MAP, 32)) return false;
    h = p + 33;
    if (!bytesEq(h + 9, MEDIUM_GPU, 11) || (head == 0x84 && !bytesEq(h + 20, GROUP_KEY, 10))) return false;
    tail = p + n;
  } else {
    return false;
  }
  if (load<u8>(h) != 0xcf) return false;
  let group: i32 = -1;
  if (head == 0x94 || head == 0x84) {
    group = <i32>load<u8>(tail - 1);
    if (group > 0x7f) return false;
  }
  fastHash = be64(h + 1);
  fastGroup = group;
  pos = tail;
  return true;
}
