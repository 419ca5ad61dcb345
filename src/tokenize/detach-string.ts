/**
 * @module A copy of a string that does not keep the string it was cut from alive, for keys of long-lived caches.
 * Engines share the characters of a slice with its parent (V8 does from 13 characters on), so a cached piece or
 * section would pin the whole prompt it came from and a cache's byte bound would not bound memory.
 */

/**
 * Padding makes a new flat string of `s.length + 1` characters, which is all the result can then pin; checked on
 * V8 and JavaScriptCore (`s + " "` is not enough on JavaScriptCore: its slice of a rope reaches through to the first
 * fiber's parent). test/tokenize/detach-string.test.ts measures both.
 */
export function detach(s: string): string {
  return s.length < 13 ? s : s.padEnd(s.length + 1).slice(0, -1);
}
