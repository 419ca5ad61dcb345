/** @module Loads the compiled core on Cloudflare Workers: workerd refuses to compile WASM from bytes, so it is imported. */
import wasm from "../../build/release-simd.wasm";

export function simdSupported(): boolean {
  return true;
}

export function loadCoreModule(): Promise<WebAssembly.Module> {
  return Promise.resolve(wasm);
}
