import { describe, expect, it } from "vitest";
import { ENGINE_DELTA_KEYS } from "../../src/core/kv-index-engine-batch.ts";
import { addDelta, deltaFromWords, emptyCounters, emptyDelta } from "../../src/events/ingest-counters.ts";

describe("batch deltas", () => {
  it("should read the core's counter words in ENGINE_DELTA_KEYS order", () => {
    const words = new Uint32Array(40);
    for (let i = 0; i < words.length; i++) words[i] = 1_000 + i;
    const d = deltaFromWords(emptyDelta(), words, 7);
    expect(Object.keys(d).sort()).toEqual([...ENGINE_DELTA_KEYS].sort());
    ENGINE_DELTA_KEYS.forEach((k, i) => expect(d[k], k).toBe(1_007 + i));
  });

  it("should add every delta counter, and only those, into a stream's counters", () => {
    const c = emptyCounters();
    c.messages = 5;
    const d = emptyDelta();
    Object.keys(d).forEach((k, i) => (d[k as keyof typeof d] = i + 1));
    addDelta(c, d);
    addDelta(c, d);
    const want = { ...emptyCounters(), messages: 5 };
    Object.keys(d).forEach((k, i) => (want[k as keyof typeof d] = 2 * (i + 1)));
    expect(c).toEqual(want);
  });
});
