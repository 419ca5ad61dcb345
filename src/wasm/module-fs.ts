/** @module Loads the compiled core from build/ on Node, Bun and Deno (file-system runtimes); workerd uses module-workerd.ts. */
import { readFile } from "node:fs/promises";

// (func (result v128) (i8x16.splat (i32.const 0)))
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 0x60, 0, 1, 0x7b, 3, 2, 1, 0, 10, 8, 1, 6, 0, 0x41, 0, 0xfd, 0x0f, 0x0b,
]);

/** True when the runtime validates a module using SIMD128 (every supported runtime does; old ones may not). */
export function simdSupported(): boolean {
  try {
    return WebAssembly.validate(SIMD_PROBE);
  } catch {
    return false;
  }
}

const cached = new Map<string, Promise<WebAssembly.Module>>();

/** The release core, the SIMD build where the runtime supports it; each release build compiled once per process. */
export function loadCoreModule(variant: "release" | "release-simd" | "debug" = simdSupported() ? "release-simd" : "release"): Promise<WebAssembly.Module> {
  if (variant === "debug") return compile(variant);
  let m = cached.get(variant);
  if (!m) cached.set(variant, (m = compile(variant)));
  return m;
}

async function compile(variant: string): Promise<WebAssembly.Module> {
  const url = new URL(`../../build/${variant}.wasm`, import.meta.url);
  const bytes = await readFile(url);
  return WebAssembly.compile(bytes);
}
