import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DecisionLogFile } from "../../../src/adapter/node/decision-log-file.ts";

const dir = mkdtempSync(join(tmpdir(), "kvgate-dlog-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const line = (i: number) => JSON.stringify({ i, pad: "x".repeat(90) });

describe("DecisionLogFile", () => {
  it("appends lines, rotates before a file would pass maxBytes, and keeps only `keep` rotated files", async () => {
    const path = join(dir, "d.jsonl");
    const w = new DecisionLogFile({ path, maxBytes: 1000, keep: 2 });
    for (let i = 0; i < 50; i++) w.append(line(i));
    await w.close();
    const files = readdirSync(dir).filter((f) => f.startsWith("d.jsonl")).sort();
    expect(files).toEqual(["d.jsonl", "d.jsonl.1", "d.jsonl.2"]);
    for (const f of files) expect(readFileSync(join(dir, f)).length).toBeLessThanOrEqual(1000);
    const read = (f: string) => readFileSync(join(dir, f), "utf8").split("\n").filter((l) => l !== "").map((l) => (JSON.parse(l) as { i: number }).i);
    // Newest lines in the current file, the ones before them in .1, then .2; older files were deleted.
    const kept = [...read("d.jsonl.2"), ...read("d.jsonl.1"), ...read("d.jsonl")];
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, k) => 50 - kept.length + k));
    expect(read("d.jsonl").at(-1)).toBe(49);
    expect(w.dropped).toBe(0);
    w.append(line(99));
    expect(w.dropped).toBe(1);
  });

  it("appends to an existing file, counting its size, and with keep 0 starts the file over", async () => {
    const path = join(dir, "e.jsonl");
    writeFileSync(path, `${line(-1)}\n`.repeat(9));
    const w = new DecisionLogFile({ path, maxBytes: 1000, keep: 0 });
    w.append(line(0));
    w.append(line(1));
    await w.close();
    expect(readdirSync(dir).filter((f) => f.startsWith("e.jsonl"))).toEqual(["e.jsonl"]);
    expect(readFileSync(path, "utf8").split("\n").filter((l) => l !== "").map((l) => (JSON.parse(l) as { i: number }).i)).toEqual([0, 1]);
  });

  it("stops logging, counts what it lost and warns once when the file cannot be written", async () => {
    const warnings: string[] = [];
    const w = new DecisionLogFile({ path: join(dir, "missing-dir", "f.jsonl"), maxBytes: 1000, keep: 1 }, (m) => warnings.push(m));
    w.append(line(0));
    w.append(line(1));
    await w.flush();
    w.append(line(2));
    await w.close();
    expect(w.dropped).toBe(3);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/no more decisions are logged/);
  });
});
