/** @module Compiles the core from what a host hands over (a Module, bytes, a Response or a URL): kvgate/core's loader, no runtime APIs. */
import { KvgateError } from "../core/errors.ts";

/** A compiled module (the only form workerd accepts), the .wasm bytes, a fetch Response, or a URL to fetch. */
export type CoreSource = WebAssembly.Module | ArrayBuffer | ArrayBufferView | Response | URL | string;

/** Where the release core sits beside this module once built (build/release*.wasm), for hosts that fetch it. */
export function defaultCoreUrl(variant: "release" | "release-simd" = "release-simd"): URL {
  return new URL(`../../build/${variant}.wasm`, import.meta.url);
}

export async function compileCore(source: CoreSource): Promise<WebAssembly.Module> {
  if (source instanceof WebAssembly.Module) return source;
  if (source instanceof ArrayBuffer) return WebAssembly.compile(source);
  if (ArrayBuffer.isView(source)) {
    return WebAssembly.compile(new Uint8Array(source.buffer, source.byteOffset, source.byteLength).slice());
  }
  const res = source instanceof Response ? source : await fetch(source);
  if (!res.ok) throw new KvgateError("KVGATE_ERR_WASM_ABI", `WASM core not loaded: HTTP ${res.status} for ${res.url || String(source)}`);
  return WebAssembly.compile(await res.arrayBuffer());
}
