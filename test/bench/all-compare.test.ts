import { describe, expect, it } from "vitest";
import { comparison, figures } from "../../bench/all.ts";

describe("bench all --compare", () => {
  it("reads every summary figure by path, leaving out long sample arrays and the environment", () => {
    const f = figures({ environment: { date: 1 }, index: { results: { p99: 40.8, samples: Array.from({ length: 100 }, (_, i) => i), rows: [1, 2] } } });
    expect([...f]).toEqual([["index.results.p99", 40.8], ["index.results.rows[0]", 1], ["index.results.rows[1]", 2]]);
  });

  it("prints the ratio of each figure that changed, and nothing for one that did not or is new", () => {
    const lines = comparison({ a: { p99: 40, rate: 5 } }, { a: { p99: 10, rate: 5, extra: 3 } });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^a\.p99\s+40 ->\s+10\s+0\.250x$/);
  });
});
