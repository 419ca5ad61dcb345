/**
 * @module Which base model, LoRA adapter and cache namespace a request belongs to, read the way the engines read
 * them: vLLM names an adapter as the model (listed with a `parent`), SGLang in `lora_path`; vLLM's `cache_salt`
 * or the configured tenant header is the namespace. The router hashes the prompt with both, as the engine does.
 */
import { KvgateError } from "../core/errors.ts";
import type { GatewayState } from "./gateway-state.ts";

export interface RequestScope {
  /** The base model the router filters and hashes by (undefined: the request names none). */
  model: string | undefined;
  adapter: string | undefined;
  namespace: string | undefined;
  /** The namespace came from the tenant header: the worker must get it as cache_salt to isolate the same way. */
  saltFromHeader: boolean;
  /** Whose tokenizer and chat template render the prompt: the adapter's own when configured, else the base model's. */
  tokenizerModel: string | undefined;
}

function bad(message: string, param: string): never {
  throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", message, { param });
}

function unknownAdapter(name: string, param: string): never {
  throw new KvgateError("KVGATE_ERR_UNKNOWN_ADAPTER", `The model \`${name}\` does not exist.`, { param });
}

/** The adapter and base model named by `model` and `lora_path`; throws 404 for names the fleet does not serve. */
function adapterScope(gw: GatewayState, model: string | undefined, loraPath: unknown): { model: string | undefined; adapter: string | undefined } {
  if (loraPath !== undefined && loraPath !== null && (typeof loraPath !== "string" || loraPath.length === 0)) {
    bad("lora_path must be a non-empty string", "lora_path");
  }
  const lora = typeof loraPath === "string" ? loraPath : undefined;
  if (model !== undefined && gw.fleet.serves(model)) {
    if (lora === undefined) return { model, adapter: undefined };
    if (gw.fleet.adapters.parentOf(lora) !== model || !gw.fleet.servesAdapter(lora, model)) unknownAdapter(lora, "lora_path");
    return { model, adapter: lora };
  }
  const name = model ?? lora;
  if (name === undefined) return { model: undefined, adapter: undefined };
  const parent = gw.fleet.adapters.parentOf(name);
  if (parent === undefined) {
    if (model === undefined) unknownAdapter(name, "lora_path");
    throw new KvgateError("KVGATE_ERR_UNKNOWN_MODEL", `The model \`${name}\` does not exist.`, { param: "model" });
  }
  if (!gw.fleet.servesAdapter(name, parent)) unknownAdapter(name, model === undefined ? "lora_path" : "model");
  if (model !== undefined && lora !== undefined && lora !== model) bad("lora_path names another adapter than model", "lora_path");
  return { model: parent, adapter: name };
}

/** The request's scope; throws 400 for a malformed cache_salt or lora_path and 404 for an unknown model or adapter. */
export function requestScope(gw: GatewayState, raw: Record<string, unknown>, headers: Headers): RequestScope {
  const { model, adapter } = adapterScope(gw, typeof raw.model === "string" ? raw.model : undefined, raw.lora_path);
  const salt = raw.cache_salt;
  if (salt !== undefined && salt !== null && (typeof salt !== "string" || salt.length === 0)) bad("cache_salt must be a non-empty string", "cache_salt");
  let namespace = typeof salt === "string" ? salt : undefined;
  let saltFromHeader = false;
  const header = gw.config.router.tenantHeader;
  if (namespace === undefined && header) {
    const tenant = headers.get(header);
    if (tenant) {
      namespace = tenant;
      saltFromHeader = true;
    }
  }
  const own = adapter !== undefined && Object.hasOwn(gw.config.tokenizers, adapter);
  return { model, adapter, namespace, saltFromHeader, tokenizerModel: own ? adapter : model };
}
