/** @module Creates a KvIndex from the core module the current runtime loads (#wasm-module picks the loader). */
import { loadCoreModule } from "#wasm-module";
import { KvIndex } from "./kv-index.ts";
import type { KvIndexOptions } from "./kv-index-options.ts";

export async function createKvIndex(options: KvIndexOptions = {}): Promise<KvIndex> {
  return new KvIndex(await loadCoreModule(), options);
}
