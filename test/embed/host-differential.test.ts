/**
 * The C and Python hosts against the JS side: Dynamo's published hash vectors, 1,000 seeded random prompts and
 * 50,000 seeded index operations, every result line equal to the TypeScript reference (and the JS KvIndex).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { KvIndex } from "../../src/core/kv-index.ts";
import { loadCoreModule } from "../../src/wasm/module-fs.ts";
import { buildEmbed, runDriver, tempFile } from "./hosts.ts";
import { scoreCandidates } from "../../src/core/score-kernel.ts";
import { chooseReference, costReference } from "../../src/reference/score-reference.ts";
import { seededRandom } from "../../src/core/seeded-random.ts";
import { hashOp, indexOps, randomPrompts, randomScores, scoreLine, scoreOp, type Script } from "./op-script.ts";

let js: KvIndex;
// The release (scalar) build: the one libkvgate compiles.
const jsModule = await loadCoreModule("release");
beforeAll(async () => {
  buildEmbed();
  js = new KvIndex(jsModule, { capacity: 1024, maxSlots: 16 });
}, 120_000);

const HOSTS = ["c", "py"] as const;
const withInit = (s: Script): Script => ({ ops: ["I 16 1024 100 1", ...s.ops], expected: ["I 0", ...s.expected] });
const write = (s: Script): string => tempFile("ops.txt", s.ops.join("\n") + "\n");

/** The JS KvIndex's answer to an H op, in the drivers' line format. */
function jsHashLine(op: string): string {
  const [, bs, lora, ns, n, ...rest] = op.split(" ");
  const text = (w: string): string | undefined => (w === "-" ? undefined : Buffer.from(w, "hex").toString("utf8"));
  const tokens = rest.slice(0, Number(n)).map(Number);
  const { local, seq } = js.hash(tokens, { blockSize: Number(bs), lora: text(lora!), namespace: text(ns!) });
  return ["H", 0, seq.length, ...local, ...seq].join(" ");
}

describe("published Dynamo vectors (dynamo-kv-router.md §1.4) from C and Python", () => {
  const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);
  const cases: [string, string][] = [
    hashOp(range(1, 13), 4),
    hashOp(range(0, 4), 4),
    hashOp(range(0, 4), 4, "adapter-a"),
    hashOp(range(0, 4), 4, undefined, "tenant-a"),
    hashOp(range(0, 16), 16),
  ];
  const published = [
    "H 0 3 14643705804678351452 16777012769546811212 483935686894639516 14643705804678351452 4945711292740353085 12583592247330656132",
    "H 0 1 9143094415614847814 9143094415614847814",
    "H 0 1 6665157333201000639 6665157333201000639",
    "H 0 1 17009624042690211646 17009624042690211646",
    "H 0 1 15310707395893867146 15310707395893867146",
  ];
  const script = withInit({
    ops: [`X ${Buffer.from("test data").toString("hex")} 1337`, ...cases.map((c) => c[0])],
    expected: ["X 0 13226331709069118873", ...published],
  });

  it("should agree with the reference model and the JS core on the vectors themselves", () => {
    expect(cases.map((c) => c[1])).toEqual(published);
    expect(cases.map((c) => jsHashLine(c[0]))).toEqual(published);
  });

  for (const host of HOSTS) {
    it(`should reproduce them from ${host === "c" ? "C" : "Python"}`, () => {
      expect(runDriver(host, write(script))).toEqual(script.expected);
    });
  }
});

describe("1,000 seeded random prompts (block sizes 16/32/64, LoRA, namespace)", () => {
  const prompts = randomPrompts(20_260_702, 1000);
  const script = withInit(prompts);

  it("should be hashed by the JS core exactly as the reference model predicts", () => {
    expect(prompts.ops.map(jsHashLine)).toEqual(prompts.expected);
    expect(new Set(prompts.ops.map((op) => op.split(" ").slice(1, 4).join(" "))).size).toBeGreaterThan(30);
  });

  for (const host of HOSTS) {
    it(`should hash every prompt identically from ${host === "c" ? "C" : "Python"}`, () => {
      expect(runDriver(host, write(script))).toEqual(script.expected);
    });
  }
});

describe("a conversation's prompts through the prompt memo (on by default in every host)", () => {
  // Turns that repeat and extend each other, salted or not: the memo reuses earlier turns' hashes, and every host
  // must still give the reference hashes and count the same reused and hashed blocks as the JS core.
  const rnd = seededRandom(4242);
  const ops: string[] = [], expected: string[] = [];
  const mem = new KvIndex(jsModule, { capacity: 1024, maxSlots: 16, promptTokens: 256, eventBlocks: 64 });
  let history: number[] = Array.from({ length: 40 }, () => rnd.int(152_000));
  for (let turn = 0; turn < 40; turn++) {
    history = rnd.next() < 0.2 ? history.slice(0, 40 + rnd.int(history.length - 39)) : [...history, ...Array.from({ length: 1 + rnd.int(50) }, () => rnd.int(152_000))];
    const bs = [16, 32][turn % 2]!, lora = turn % 5 === 0 ? "adapter-a" : undefined;
    for (let again = 0; again < 2; again++) {
      const [op, want] = hashOp(history, bs, lora);
      ops.push(op);
      expected.push(want);
      mem.hash(history, { blockSize: bs, lora });
    }
  }
  const c = mem.counters();
  ops.push("P");
  expected.push(`P 0 ${c.memoReused} ${c.memoHashed}`);
  const script = withInit({ ops, expected });

  it("should reuse most blocks in the JS core", () => {
    expect(c.memoReused).toBeGreaterThan(c.memoHashed);
  });

  for (const host of HOSTS) {
    it(`should hash them as the reference and count reuse as the JS core from ${host === "c" ? "C" : "Python"}`, () => {
      expect(runDriver(host, write(script))).toEqual(script.expected);
    });
  }
});

describe("2,000 seeded scoring requests", () => {
  const cases = randomScores(15, 2000);
  const expected = (): string[] => cases.map((c) => {
    const r = scoreCandidates(js, c.candidates, c.req);
    return scoreLine(r.chosen, r.costs);
  });

  it("should be scored by the JS core as the reference model chooses", () => {
    for (const c of cases) {
      const r = scoreCandidates(js, c.candidates, c.req);
      expect(r.chosen).toBe(chooseReference(c.candidates, c.req));
      c.candidates.forEach((cand, i) => expect(r.costs[i]).toBeCloseTo(costReference(cand, c.req.isl, c.req.overlapWeight), 9));
    }
    expect(new Set(cases.map((c) => scoreCandidates(js, c.candidates, c.req).chosen)).size).toBeGreaterThan(8);
  });

  for (const host of HOSTS) {
    it(`should give the JS core's choice and costs, bit for bit, from ${host === "c" ? "C" : "Python"}`, () => {
      const script = withInit({ ops: cases.map(scoreOp), expected: expected() });
      expect(runDriver(host, write(script))).toEqual(script.expected);
    });
  }
});

describe("50,000 seeded index operations against the reference model", () => {
  const { script, ref, jumpDiffers } = indexOps({ seed: 11, ops: 50_000, slots: 8, capacity: 100, approxMax: 60, universe: 400 });
  const file = write(script);

  it("should exercise every outcome the model counts", () => {
    expect(script.ops.length).toBeGreaterThanOrEqual(50_000);
    const c = ref.counters;
    for (const k of ["applied", "parentMissing", "invalid", "capacity", "unknownRemoved", "evicted", "expired", "pruned", "capped"] as const) {
      expect(c[k], k).toBeGreaterThan(0);
    }
    expect(script.ops.filter((op) => op.startsWith("M ")).length).toBeGreaterThan(5_000);
    // Match jumps (kvgate_match_jump), invalid ones too, and matches where a jump skips a hole.
    expect(script.ops.filter((op) => op.startsWith("J ")).length).toBeGreaterThan(100);
    expect(jumpDiffers).toBeGreaterThan(0);
  });

  for (const host of HOSTS) {
    it(`should give the model's result after every operation from ${host === "c" ? "C" : "Python"}`, () => {
      const got = runDriver(host, file);
      expect(got.length).toBe(script.expected.length);
      const firstDiff = got.findIndex((line, i) => line !== script.expected[i]);
      expect(firstDiff === -1 ? null : { op: script.ops[firstDiff]!.slice(0, 200), got: got[firstDiff], want: script.expected[firstDiff] }).toBeNull();
    }, 120_000);
  }
});
