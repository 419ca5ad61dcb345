/** @module `kvgate hash`: prints a prompt's local and chained block hashes, the way engines and the index see them. */
import { KvgateError } from "../core/errors.ts";
import type { KvIndex } from "../core/kv-index.ts";
import { CacheSalts } from "../core/cache-salt.ts";
import { parseFlags } from "./flags.ts";

export const HASH_USAGE = `usage: kvgate hash --block-size N [--lora NAME] [--namespace NAME] [--cache-salt SALT] [--eagle] [--json] TOKEN...
  Tokens come from the arguments or, when none are given, from standard input (whitespace,
  commas or a JSON array). Prints one complete block per line: its local hash and its
  chained sequence hash, as unsigned decimal integers. A trailing partial block is not hashed.
  --cache-salt: a tenant's namespace as the gateway hashes it (vLLM's cache_salt, first block only).`;

/** Parses token ids: non-negative integers below 2^32. */
export function parseTokens(words: readonly string[]): Uint32Array {
  const out = new Uint32Array(words.length);
  words.forEach((w, i) => {
    if (!/^\d+$/.test(w) || Number(w) > 0xffffffff) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `token ${i} is not an integer in 0..4294967295: ${JSON.stringify(w)}`);
    }
    out[i] = Number(w);
  });
  return out;
}

export function splitTokenText(text: string): string[] {
  return text.replace(/[[\],]/g, " ").split(/\s+/).filter((w) => w.length > 0);
}

export function runHash(index: KvIndex, args: readonly string[], stdin: () => string): string {
  const { flags, positional } = parseFlags(args, { "block-size": "value", lora: "value", namespace: "value", "cache-salt": "value", eagle: "bool", json: "bool" });
  const bs = Number(flags["block-size"]);
  if (!Number.isInteger(bs) || bs <= 0) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `--block-size must be a positive integer\n${HASH_USAGE}`);
  const tokens = parseTokens(positional.length > 0 ? positional : splitTokenText(stdin()));
  const salt = flags["cache-salt"] as string | undefined;
  const opts = {
    blockSize: bs, lora: flags.lora as string | undefined, namespace: flags.namespace as string | undefined, eagle: flags.eagle === true,
    multimodal: new CacheSalts((b, seed) => index.xxh3(b, seed)).extra(salt),
  };
  const { local, seq } = index.hash(tokens, opts);
  if (flags.json) {
    return JSON.stringify({
      blockSize: bs,
      tokens: tokens.length,
      seed: index.seedFor(opts).toString(),
      lora: opts.lora ?? null,
      namespace: opts.namespace ?? null,
      cacheSalt: salt ?? null,
      eagle: opts.eagle,
      blocks: local.map((l, i) => ({ index: i, local: l.toString(), seq: seq[i]!.toString() })),
    }, null, 2) + "\n";
  }
  return local.map((l, i) => `${l} ${seq[i]}\n`).join("");
}
