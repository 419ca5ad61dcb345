import { describe, expect, it } from "vitest";
import { OutputLengthPredictor } from "../../src/routing/output-length.ts";

describe("OutputLengthPredictor", () => {
  it("knows nothing at first, then trusts max_tokens when there is no history", () => {
    const p = new OutputLengthPredictor();
    expect(p.expect(undefined, undefined)).toBe(0);
    expect(p.expect("s", 300)).toBe(300);
  });

  it("follows a session's answers, capped by its max_tokens", () => {
    const p = new OutputLengthPredictor();
    p.observe("s", 100);
    expect(p.expect("s", undefined)).toBe(100);
    p.observe("s", 200);
    expect(p.expect("s", undefined)).toBe(150);
    expect(p.expect("s", 120)).toBe(120);
    expect(p.expect("other", 500)).toBe(500);
  });

  it("falls back to the fleet's recent 90th percentile without history or max_tokens", () => {
    const p = new OutputLengthPredictor({ window: 100 });
    for (let i = 1; i <= 100; i++) p.observe(undefined, i);
    expect(p.expect(undefined, undefined)).toBe(91);
    // The window slides: old answers leave it.
    for (let i = 0; i < 100; i++) p.observe(undefined, 1000);
    expect(p.expect("new", undefined)).toBe(1000);
  });

  it("bounds the sessions it remembers, forgetting the least recently answered", () => {
    const p = new OutputLengthPredictor({ maxSessions: 2 });
    p.observe("a", 10);
    p.observe("b", 20);
    p.observe("a", 10);
    p.observe("c", 30);
    expect(p.sessions).toBe(2);
    expect(p.expect("b", undefined)).not.toBe(20);
    expect(p.expect("a", undefined)).toBe(10);
    expect(p.expect("c", undefined)).toBe(30);
  });

  it("ignores impossible counts", () => {
    const p = new OutputLengthPredictor();
    p.observe("s", -1);
    p.observe("s", Number.NaN);
    expect(p.sessions).toBe(0);
  });
});
