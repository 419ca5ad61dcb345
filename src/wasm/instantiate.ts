/** @module Instantiates the core from a compiled module (the only form workerd accepts) and checks the ABI. */
import { instantiateSync } from "@assemblyscript/loader";
import { ABI_VERSION, EXPORT_NAMES, type CoreExports } from "./abi.ts";
import { KvgateError } from "../core/errors.ts";

/** A fresh instance; its `abort` (debug builds only) throws with the AssemblyScript message decoded by the loader. */
export function instantiateCore(module: WebAssembly.Module): CoreExports {
  const { exports } = instantiateSync<Record<string, unknown>>(module, {});
  for (const name of EXPORT_NAMES) {
    if (!(name in exports)) throw new KvgateError("KVGATE_ERR_WASM_ABI", `WASM core lacks export "${name}"`);
  }
  const core = exports as unknown as CoreExports;
  const version = core.abi_version();
  if (version !== ABI_VERSION) {
    throw new KvgateError("KVGATE_ERR_WASM_ABI", `WASM core ABI ${version}, expected ${ABI_VERSION}: rebuild with npm run build:wasm`);
  }
  return core;
}
