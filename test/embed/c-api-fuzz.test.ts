/**
 * Bad input from a host gets a status code, never a crash or a corrupted index: the seeded fuzz driver over the C
 * API (test/embed/fuzz-driver.c) and the same refusals through the Python package.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { BIN, FIXTURES, ROOT, buildEmbed } from "./hosts.ts";

beforeAll(buildEmbed, 120_000);

interface Summary {
  calls: number;
  probes: number;
  violations: number;
  generation: number;
  statuses: Record<string, number>;
}

describe("C API fuzz", () => {
  for (const seed of [1, 2, 3]) {
    it(`should answer 30,000 hostile calls with statuses and keep the index exact (seed ${seed})`, () => {
      const out = execFileSync(join(BIN, "fuzz-driver"), [String(seed), "30000", join(FIXTURES, "kv_event_base.batch.msgpack")], { encoding: "utf8" });
      const s = JSON.parse(out) as Summary;
      expect(s.violations).toBe(0);
      expect(s.calls).toBe(30_000);
      expect(s.probes).toBe(301);
      // Every kind of refusal happened: NULL, bad argument, bad slot, too long, corrupt, buffer; the injected trap once.
      for (const code of ["-30", "-3", "-4", "-9", "-8", "-31", "0"]) expect(s.statuses[code], `status ${code}`).toBeGreaterThan(100);
      expect(s.statuses["-32"]).toBe(1);
      expect(s.generation).toBe(1);
    }, 120_000);
  }
});

describe("bad input through the Python package", () => {
  it("should raise KvgateError with the status and leave the index usable", () => {
    const script = `
import sys, ctypes
sys.path.insert(0, ${JSON.stringify(join(ROOT, "embed/python"))})
from kvgate_core import Index, KvgateError
idx = Index(capacity=64, max_slots=2, salt=1)
idx.open_slot(0)
print(idx._lib.kvgate_store(idx._h, 0, 0, 0, None, None, 3))
for call in (lambda: idx.apply_binary(b"\\x01" + b"\\xff" * 40), lambda: idx.open_slot(7), lambda: idx.hash([1] * 32, 0),
             lambda: idx.apply_binary(bytes(2 << 20))):
    try:
        call()
        print("no error")
    except KvgateError as e:
        print(e.name, getattr(e, "corrupt_at", ""))
print(idx.store(0, None, [1, 2], [3, 4]), idx.find_matches_by_hashes([3]), idx.stats()["entries"])
`;
    const out = execFileSync("python3", ["-c", script], { encoding: "utf8" }).trim().split("\n");
    expect(out).toEqual(["-30", "CORRUPT 0", "BAD_SLOT ", "BAD_ARG ", "BAD_ARG ", "0 [Match(slot=0, blocks=1, tree_size=2)] 2"]);
  });
});
