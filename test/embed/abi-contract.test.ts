/**
 * docs/abi.md is the contract: it names every export the built core has, and the version and status codes agree
 * across assembly/abi.ts, src/wasm/abi.ts, embed/c/kvgate.h and the Python package.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ABI_VERSION, EXPORT_NAMES, IngestStatus, Status } from "../../src/wasm/abi.ts";
import { ROOT } from "./hosts.ts";

const read = (p: string): string => readFileSync(join(ROOT, p), "utf8");
const doc = read("docs/abi.md");
const header = read("embed/c/kvgate.h");

describe("the ABI contract", () => {
  it("should carry one version everywhere, documented", () => {
    expect(Number(/ABI_VERSION: i32 = (\d+)/.exec(read("assembly/abi.ts"))![1])).toBe(ABI_VERSION);
    expect(Number(/#define KVGATE_ABI_VERSION (\d+)/.exec(header)![1])).toBe(ABI_VERSION);
    expect(doc).toContain(`# The kvgate core ABI (version ${ABI_VERSION})`);
    expect(doc).toContain(`currently **${ABI_VERSION}**`);
  });

  it("should document every export of the built core, and the JS host should require them all", async () => {
    const mod = await WebAssembly.compile(readFileSync(join(ROOT, "build/release.wasm")));
    const built = WebAssembly.Module.exports(mod).map((e) => e.name);
    const functions = WebAssembly.Module.exports(mod).filter((e) => e.kind === "function" || e.kind === "memory").map((e) => e.name);
    expect([...functions].sort()).toEqual([...EXPORT_NAMES].sort());
    const missing = built.filter((n) => !doc.includes(`\`${n}\``) && !new RegExp(`[\`, ]${n}[(,\`]`).test(doc));
    expect(missing).toEqual([]);
  });

  it("should give the same status codes in the core, the JS mirror, kvgate.h and Python", () => {
    const asm = Object.fromEntries([...read("assembly/abi.ts").matchAll(/export const E_(\w+): i32 = (-\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
    const js = { ...Object.fromEntries(Object.entries(Status).filter(([k]) => k !== "OK")), INGEST_FALLBACK: IngestStatus.FALLBACK, INGEST_FULL: IngestStatus.FULL };
    expect(asm).toEqual(Object.fromEntries(Object.entries(js).filter(([k]) => !k.startsWith("INGEST"))));
    const c = Object.fromEntries([...header.matchAll(/#define KVGATE_E_(\w+) \((-\d+)\)/g)].map((m) => [m[1]!, Number(m[2])]));
    for (const [k, v] of Object.entries(js)) expect(c[k], k).toBe(v);
    const py = Object.fromEntries([...read("embed/python/kvgate_core/errors.py").matchAll(/"(\w+)": (-?\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
    expect(py).toEqual({ OK: 0, ...c });
    for (const [k, v] of Object.entries(c)) expect(doc, `KVGATE_E_${k}`).toMatch(new RegExp(`\\(${v}\\b|\\| ${v} \\|`));
  });
});
