/**
 * @module Payloads for the ZMTP socket tests, shared by the Node tests and the probe that Bun and Deno run: sizes
 * that cross the short/long frame boundary, bytes that depend on the message, and a digest to compare them by.
 */

/** A payload of `size` bytes whose content depends on `i`. */
export function payload(i: number, size: number): Uint8Array {
  const b = new Uint8Array(size);
  for (let k = 0; k < size; k++) b[k] = (i * 31 + k) & 0xff;
  return b;
}

/** Message `i`'s payload size: empty, short, the 255/256 boundary, long. */
export const sizes = (i: number): number => [0, 1, 200, 255, 256, 1000, 70_000][i % 7]!;

/** FNV-1a over the bytes: enough to tell a payload read from overwritten memory. */
export function digest(b: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i]!, 0x01000193) >>> 0;
  return h;
}
