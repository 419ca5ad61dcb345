/**
 * @module One place the gateway asks for a model's tokenizer: loads precise tokenizers on first use (one load per
 * model however many requests wait), keeps at most `maxLoaded` of them, and backs off after a failed load.
 */
import { KvgateError, isKvgateError } from "../core/errors.ts";
import { ApproximateTokenizer } from "./approximate-tokenizer.ts";
import { loadPreciseTokenizer, type ModelTokenizerSource } from "./precise-tokenizer.ts";
import { createTextLoader, type ReadText } from "./text-loader.ts";
import type { PromptTokenizer, TokenizerMode } from "./types.ts";

export interface TokenizerRegistryOptions {
  mode: TokenizerMode;
  /** The router's block size (tokens); passed to every tokenizer. Default 16, vLLM's default. */
  blockSizeHint?: number;
  /** Precise mode: where each served model's tokenizer lives, by model name as clients send it. */
  models?: Record<string, ModelTokenizerSource>;
  /** Reads a path or URL; default: `fetch` for http(s) URLs only (the runtime adapter adds a file reader). */
  readText?: ReadText;
  /** Tokenizers kept in memory (a large vocabulary costs tens of MB each). Default 4. */
  maxLoaded?: number;
  /** Per-model cache of BPE pieces (two generations of this many entries). Default 65,536. */
  pieceCacheSize?: number;
  /**
   * Precise mode, a model with no configured source: "approximate" (default) hands out the approximate
   * tokenizer, whose `mode` says so; "error" throws KVGATE_ERR_TOKENIZER.
   */
  unknownModel?: "approximate" | "error";
  /** After a failed load, answer with the same error for this long before trying again. Default 30 s. */
  retryAfterMs?: number;
  now?: () => number;
}

export interface TokenizerRegistry {
  readonly mode: TokenizerMode;
  /** The tokenizer for `model`, loading it on first use. Rejects with a KvgateError (KVGATE_ERR_TOKENIZER). */
  get(model: string | undefined): Promise<PromptTokenizer>;
  /** The tokenizer if it is ready now, without starting a load: lets the hot path stay synchronous. */
  peek(model: string | undefined): PromptTokenizer | undefined;
  /** Loads every configured model; resolves to the failures by model (one failure does not stop the rest). */
  preload(): Promise<Record<string, KvgateError>>;
  /** Models whose precise tokenizer is in memory, least recently used first. */
  loadedModels(): string[];
}

export function createTokenizerRegistry(opts: TokenizerRegistryOptions): TokenizerRegistry {
  const blockSizeHint = opts.blockSizeHint ?? 16;
  const approximate = new ApproximateTokenizer({ blockSizeHint });
  const models = opts.models ?? {};
  const readText = opts.readText ?? createTextLoader();
  const maxLoaded = Math.max(1, opts.maxLoaded ?? 4);
  const retryAfterMs = opts.retryAfterMs ?? 30_000;
  const now = opts.now ?? Date.now;
  const loaded = new Map<string, PromptTokenizer>();
  const loading = new Map<string, Promise<PromptTokenizer>>();
  const failed = new Map<string, { error: KvgateError; until: number }>();

  function noSource(model: string | undefined): PromptTokenizer {
    if ((opts.unknownModel ?? "approximate") === "approximate") return approximate;
    throw new KvgateError("KVGATE_ERR_TOKENIZER", `no tokenizer configured for model ${model ?? "(none)"}`, { model });
  }

  function remember(model: string, tok: PromptTokenizer): void {
    loaded.delete(model);
    loaded.set(model, tok);
    // Map order is insertion order, so the first key is the least recently used.
    while (loaded.size > maxLoaded) loaded.delete(loaded.keys().next().value!);
  }

  function peek(model: string | undefined): PromptTokenizer | undefined {
    if (opts.mode === "approximate") return approximate;
    if (model === undefined || !Object.hasOwn(models, model)) return noSource(model);
    const tok = loaded.get(model);
    if (tok) remember(model, tok);
    return tok;
  }

  function get(model: string | undefined): Promise<PromptTokenizer> {
    try {
      const ready = peek(model);
      if (ready) return Promise.resolve(ready);
    } catch (e) {
      return Promise.reject(e);
    }
    const name = model!;
    const pending = loading.get(name);
    if (pending) return pending;
    const f = failed.get(name);
    if (f && now() < f.until) return Promise.reject(f.error);
    const p = loadPreciseTokenizer(name, models[name]!, readText, { blockSizeHint, pieceCacheSize: opts.pieceCacheSize }).then(
      (tok) => {
        loading.delete(name);
        failed.delete(name);
        remember(name, tok);
        return tok;
      },
      (e: unknown) => {
        loading.delete(name);
        const error = isKvgateError(e)
          ? e
          : new KvgateError("KVGATE_ERR_TOKENIZER", `tokenizer for ${name} failed to load: ${(e as Error)?.message ?? e}`, { model: name }, { cause: e });
        failed.set(name, { error, until: now() + retryAfterMs });
        throw error;
      },
    );
    loading.set(name, p);
    return p;
  }

  async function preload(): Promise<Record<string, KvgateError>> {
    const errors: Record<string, KvgateError> = {};
    if (opts.mode === "approximate") return errors;
    // One at a time: each parse holds a large JSON document in memory at once.
    for (const name of Object.keys(models)) {
      try {
        await get(name);
      } catch (e) {
        errors[name] = e as KvgateError;
      }
    }
    return errors;
  }

  return { mode: opts.mode, get, peek, preload, loadedModels: () => [...loaded.keys()] };
}
