/** @module A small argv parser for kvgate's subcommands (--name value, --name=value, boolean flags, positionals). */
import { KvgateError } from "../core/errors.ts";

export type FlagSpec = Record<string, "value" | "bool">;

export function parseFlags(args: readonly string[], spec: FlagSpec): { flags: Record<string, string | boolean>; positional: string[] } {
  const flags: Record<string, string | boolean> = {};
  const positional: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") {
      positional.push(...args.slice(i + 1));
      break;
    }
    if (!a.startsWith("--")) {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf("=");
    const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
    const kind = spec[name];
    if (!kind) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `unknown option --${name}`);
    if (kind === "bool") {
      flags[name] = true;
    } else if (eq >= 0) {
      flags[name] = a.slice(eq + 1);
    } else {
      const v = args[++i];
      if (v === undefined) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `option --${name} needs a value`);
      flags[name] = v;
    }
  }
  return { flags, positional };
}
