/**
 * @module Builds the GatewayConfig from its three sources, lowest first: a JSON file (or inline JSON), `KVGATE_*`
 * variables, CLI flags — a higher source replaces a whole value. Pure: the runtime adapter passes argv, the
 * environment and a file reader in. Also renders `kvgate serve --help` from the option table.
 */
import { KvgateError } from "../core/errors.ts";
import { bad, defaultConfig, parseTokenizerFlag, parseTokenizerSource, parseWorker, setPath, type GatewayConfig } from "./config.ts";
import { CONFIG_FILE_ENV, CONFIG_FILE_FLAG, CONFIG_JSON_ENV, OPTIONS, envName, type OptionSpec } from "./config-options.ts";

export interface ConfigSources {
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  /** Reads the JSON config file; hosts without a file system omit it (then only KVGATE_CONFIG_JSON works). */
  readFile?: (path: string) => Promise<string>;
}

export type LoadedConfig = { kind: "help"; text: string } | { kind: "config"; config: GatewayConfig };

const BY_FLAG = new Map(OPTIONS.map((o) => [o.flag, o]));
const BY_KEY = new Map(OPTIONS.map((o) => [o.key, o]));

/** A value given as text (flag or env var). Repeatable kinds get one occurrence per call and accumulate. */
function fromText(o: OptionSpec, s: string, where: string, acc: unknown): unknown {
  const k = o.kind;
  const fail = (why: string): never => bad(`${where}: ${why}, got ${JSON.stringify(s)}`);
  switch (k.type) {
    case "string":
      return s;
    case "bool":
      if (/^(true|1|yes|on)$/i.test(s)) return true;
      if (/^(false|0|no|off)$/i.test(s)) return false;
      return fail("expected true or false");
    case "enum":
      return k.values.includes(s) ? s : fail(`expected one of ${k.values.join(", ")}`);
    case "int-or-off":
      if (/^(off|none|null)$/i.test(s)) return null;
      return checkNumber(o, Number(s), where, true);
    case "int":
    case "number":
      return s.trim() === "" ? fail("expected a number") : checkNumber(o, Number(s), where, k.type === "int");
    case "workers":
      return [...(acc as unknown[] ?? []), ...s.split(/[;\s]+/).filter(Boolean).map(parseWorker)];
    case "list":
      return s.split(",").map((x) => x.trim()).filter(Boolean);
    case "tokenizers":
      return { ...(acc as object ?? {}), ...Object.fromEntries(s.split(";").filter(Boolean).map(parseTokenizerFlag)) };
  }
}

function checkNumber(o: OptionSpec, n: number, where: string, integer: boolean): number {
  const k = o.kind as { min: number; max: number };
  if (!Number.isFinite(n) || (integer && !Number.isInteger(n)) || n < k.min || n > k.max) {
    const range = k.max >= Number.MAX_SAFE_INTEGER ? `>= ${k.min}` : `in ${k.min}..${k.max}`;
    bad(`${where} must be ${integer ? "an integer" : "a number"} ${range}, got ${n}`);
  }
  return n;
}

/** A value from the JSON file, already typed. */
function fromJson(o: OptionSpec, v: unknown, where: string): unknown {
  const k = o.kind;
  switch (k.type) {
    case "string":
      return typeof v === "string" ? v : bad(`${where} must be a string`);
    case "bool":
      return typeof v === "boolean" ? v : bad(`${where} must be a boolean`);
    case "enum":
      return typeof v === "string" && k.values.includes(v) ? v : bad(`${where} must be one of ${k.values.join(", ")}`);
    case "int-or-off":
      if (v === null || v === "off") return null;
      return typeof v === "number" ? checkNumber(o, v, where, true) : bad(`${where} must be an integer or "off"`);
    case "int":
    case "number":
      return typeof v === "number" ? checkNumber(o, v, where, k.type === "int") : bad(`${where} must be a number`);
    case "workers":
      return Array.isArray(v) ? v.map(parseWorker) : bad(`${where} must be a list of workers`);
    case "list":
      return Array.isArray(v) && v.every((x) => typeof x === "string" && x) ? [...v] : bad(`${where} must be a list of names`);
    case "tokenizers":
      if (v === null || typeof v !== "object" || Array.isArray(v)) bad(`${where} must map model names to tokenizer sources`);
      return Object.fromEntries(Object.entries(v as object).map(([m, s]) => [m, parseTokenizerSource(m, s)]));
  }
}

function applyJson(cfg: GatewayConfig, json: unknown, prefix = ""): void {
  if (json === null || typeof json !== "object" || Array.isArray(json)) bad(`config ${prefix || "file"} must be a JSON object`);
  for (const [name, v] of Object.entries(json as Record<string, unknown>)) {
    const key = prefix ? `${prefix}.${name}` : name;
    const o = BY_KEY.get(key);
    if (o) setPath(cfg as unknown as Record<string, unknown>, key, fromJson(o, v, `config ${key}`));
    else if ([...BY_KEY.keys()].some((k) => k.startsWith(`${key}.`))) applyJson(cfg, v, key);
    else bad(`unknown config key ${key}`);
  }
}

interface FlagUse {
  name: string;
  value: string | boolean;
}

function splitArgv(argv: readonly string[]): { uses: FlagUse[]; help: boolean } {
  const uses: FlagUse[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--help" || a === "-h" || a === "help") {
      help = true;
      continue;
    }
    if (!a.startsWith("--")) bad(`unexpected argument ${JSON.stringify(a)}`);
    const eq = a.indexOf("=");
    let name = eq < 0 ? a.slice(2) : a.slice(2, eq);
    const negated = name.startsWith("no-") && BY_FLAG.get(name.slice(3))?.kind.type === "bool";
    if (negated) name = name.slice(3);
    const o = BY_FLAG.get(name);
    if (!o && name !== CONFIG_FILE_FLAG) bad(`unknown option --${name} (kvgate serve --help lists them)`);
    if (o?.kind.type === "bool" && eq < 0) {
      uses.push({ name, value: !negated });
      continue;
    }
    const value = eq >= 0 ? a.slice(eq + 1) : argv[++i];
    if (value === undefined) bad(`option --${name} needs a value`);
    uses.push({ name, value });
  }
  return { uses, help };
}

/** Reads the sources into one validated config, or the help text when asked for. */
export async function loadGatewayConfig(src: ConfigSources): Promise<LoadedConfig> {
  const { uses, help } = splitArgv(src.argv);
  if (help) return { kind: "help", text: serveHelp() };
  const cfg = defaultConfig();
  const file = [...uses].reverse().find((u) => u.name === CONFIG_FILE_FLAG)?.value as string | undefined ?? src.env[CONFIG_FILE_ENV];
  if (file) {
    if (!src.readFile) bad(`cannot read config file ${file} on this runtime; use ${CONFIG_JSON_ENV}`);
    let text: string;
    try {
      text = await src.readFile(file);
    } catch (e) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `cannot read config file ${file}: ${(e as Error).message}`);
    }
    applyJson(cfg, parseJson(text, file));
  } else if (src.env[CONFIG_JSON_ENV]) {
    applyJson(cfg, parseJson(src.env[CONFIG_JSON_ENV]!, CONFIG_JSON_ENV));
  }
  const target = cfg as unknown as Record<string, unknown>;
  for (const o of OPTIONS) {
    const v = src.env[envName(o)];
    if (v !== undefined && v !== "") setPath(target, o.key, fromText(o, v, envName(o), undefined));
  }
  const fromFlags = new Map<string, unknown>();
  for (const u of uses) {
    if (u.name === CONFIG_FILE_FLAG) continue;
    const o = BY_FLAG.get(u.name)!;
    fromFlags.set(o.key, typeof u.value === "boolean" ? u.value : fromText(o, u.value, `--${o.flag}`, fromFlags.get(o.key)));
  }
  for (const [key, v] of fromFlags) setPath(target, key, v);
  if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(cfg.router.sessionHeader)) bad("session-header must be a lower-case header name");
  return { kind: "config", config: cfg };
}

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    return bad(`${where} is not valid JSON: ${(e as Error).message}`);
  }
}

function shownDefault(o: OptionSpec): string {
  const v = o.default;
  if (v === undefined) return "unset";
  if (v === "") return "empty";
  if (Array.isArray(v)) return "none";
  if (typeof v === "object" && v !== null) return "none";
  return String(v);
}

const GROUP_TITLES: Record<OptionSpec["group"], string> = {
  server: "server", fleet: "fleet", tokenizer: "tokenization", router: "routing", index: "KV index", upstream: "workers (upstream)",
  ops: "health checks, circuit breaking, engine load",
};

/** `kvgate serve --help`: every option with its flag, variable, default and meaning. */
export function serveHelp(): string {
  const lines = [
    "usage: kvgate serve [options]",
    "  Serves the OpenAI-compatible gateway: /v1/chat/completions, /v1/completions, /v1/models, /v1/route,",
    "  /health, /ready, /metrics and the admin API (/admin/workers, /admin/kv-events).",
    "  Sources, lowest first: a JSON config file, KVGATE_* variables, flags; a higher source replaces a whole value.",
    "",
    `  --${CONFIG_FILE_FLAG} FILE`.padEnd(34) + `JSON config file (keys as in the parentheses below) [env ${CONFIG_FILE_ENV}; inline JSON: ${CONFIG_JSON_ENV}]`,
  ];
  for (const g of Object.keys(GROUP_TITLES) as OptionSpec["group"][]) {
    lines.push("", `${GROUP_TITLES[g]}:`);
    for (const o of OPTIONS.filter((x) => x.group === g)) {
      const arg = o.kind.type === "bool" ? `--[no-]${o.flag}` : `--${o.flag} ${o.kind.type === "enum" ? o.kind.values.join("|") : "V"}`;
      lines.push(`  ${arg}`.padEnd(34) + `${o.doc} (default ${shownDefault(o)}) [${o.key}; env ${envName(o)}]`);
    }
  }
  return lines.join("\n") + "\n";
}
