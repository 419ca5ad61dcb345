// Record moves as word loads and stores. V8 compiles memory.copy and memory.fill to a call into the runtime (a
// wrapper with its own checks), far dearer than the two to four moves a 16- or 32-byte table record needs.

/** Copies the 32 bytes at `src` to `dst` (records never overlap partially: they are 32-byte aligned slots). */
// @ts-ignore: decorator
@inline export function copy32(dst: usize, src: usize): void {
  const a = load<u64>(src), b = load<u64>(src, 8), c = load<u64>(src, 16), d = load<u64>(src, 24);
  store<u64>(dst, a);
  store<u64>(dst, b, 8);
  store<u64>(dst, c, 16);
  store<u64>(dst, d, 24);
}

// @ts-ignore: decorator
@inline export function zero32(dst: usize): void {
  store<u64>(dst, 0);
  store<u64>(dst, 0, 8);
  store<u64>(dst, 0, 16);
  store<u64>(dst, 0, 24);
}

/** Copies `words` u64 words (a node record: its key and mask words); the two-word record is the common case. */
// @ts-ignore: decorator
@inline export function copyWords(dst: usize, src: usize, words: i32): void {
  if (words == 2) {
    const a = load<u64>(src), b = load<u64>(src, 8);
    store<u64>(dst, a);
    store<u64>(dst, b, 8);
    return;
  }
  for (let w = 0; w < words; w++) store<u64>(dst + (<usize>w << 3), load<u64>(src + (<usize>w << 3)));
}

// @ts-ignore: decorator
@inline export function zeroWords(dst: usize, words: i32): void {
  for (let w = 0; w < words; w++) store<u64>(dst + (<usize>w << 3), 0);
}
