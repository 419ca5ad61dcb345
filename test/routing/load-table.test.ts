import { describe, expect, it } from "vitest";
import { LOAD_ROW, LoadCol, LoadTable } from "../../src/routing/load-table.ts";
import { createPrng, randomInt } from "../../src/routing/prng.ts";
import { RankLoad, type RemoteLoad } from "../../src/routing/rank-load.ts";
import { BS, chainKeys } from "./helpers.ts";

/** What the test did to one rank, kept plainly: the row selection reads must follow from it. */
interface Model {
  bookings: { prefill: number; prefillDone: boolean; blocks: number; output: number; keys?: Uint32Array }[];
  peerPrompts: { keys: Uint32Array; n: number }[];
  engineBlocks: number;
  remote: RemoteLoad;
}

function keyList(keys: Uint32Array, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${keys[2 * i]}:${keys[2 * i + 1]}`);
}

function expectedRow(m: Model, reuse: boolean): number[] {
  const live = m.bookings;
  const blocks = reuse
    ? new Set([...live.flatMap((b) => keyList(b.keys!, b.blocks)), ...m.peerPrompts.flatMap((p) => keyList(p.keys, p.n))]).size
    : live.reduce((s, b) => s + b.blocks, 0);
  const own = blocks + live.reduce((s, b) => s + b.output, 0) + m.remote.blocks;
  return [
    live.reduce((s, b) => s + (b.prefillDone ? 0 : b.prefill), 0) + m.remote.prefillTokens,
    Math.max(m.engineBlocks, own),
    live.length > 0 || m.remote.requests > 0 ? 1 : 0,
  ];
}

function row(t: LoadTable, slot: number): number[] {
  const o = slot * LOAD_ROW;
  return [t.rows[o + LoadCol.prefill]!, t.rows[o + LoadCol.decode]!, t.rows[o + LoadCol.active]!];
}

describe("load table", () => {
  it("mirrors every rank's load after each random booking, prefill, free, peer prompt, engine and peer report", () => {
    for (const reuse of [true, false]) {
      const rand = createPrng(reuse ? 7 : 8);
      const table = new LoadTable(8);
      const slots = [1, 4, 6];
      const loads = slots.map((s) => {
        table.claim(s, { key: 100 + s, blockSize: BS, eagle: false, kvEvents: true });
        return new RankLoad(reuse, table, s);
      });
      const models: Model[] = slots.map(() => ({ bookings: [], peerPrompts: [], engineBlocks: 0, remote: { requests: 0, prefillTokens: 0, blocks: 0 } }));
      let uniq = 0;
      for (let step = 0; step < 3000; step++) {
        const i = randomInt(rand, slots.length), load = loads[i]!, m = models[i]!;
        const op = rand();
        if (op < 0.3) {
          const blocks = randomInt(rand, 12);
          const keys = reuse ? chainKeys(randomInt(rand, 3), uniq++, blocks, randomInt(rand, blocks + 1)) : undefined;
          const b = { prefill: randomInt(rand, 500), prefillDone: false, blocks, output: randomInt(rand, 4), keys };
          load.book(b.prefill, b.blocks, b.output, keys);
          m.bookings.push(b);
        } else if (op < 0.42 && m.bookings.length > 0) {
          const b = m.bookings[randomInt(rand, m.bookings.length)]!;
          if (!b.prefillDone) {
            load.prefillDone(b.prefill);
            b.prefillDone = true;
          }
        } else if (op < 0.65 && m.bookings.length > 0) {
          const [b] = m.bookings.splice(randomInt(rand, m.bookings.length), 1);
          if (b!.keys) expect(load.removePrompt(b!.keys, b!.blocks)).toBe(true);
          load.release(b!.prefillDone ? 0 : b!.prefill, b!.blocks, b!.output);
        } else if (op < 0.75 && reuse) {
          if (rand() < 0.5 || m.peerPrompts.length === 0) {
            const n = 1 + randomInt(rand, 10);
            const p = { keys: chainKeys(randomInt(rand, 3), uniq++, n, randomInt(rand, n + 1)), n };
            load.addPrompt(p.keys, p.n);
            m.peerPrompts.push(p);
          } else {
            const [p] = m.peerPrompts.splice(randomInt(rand, m.peerPrompts.length), 1);
            expect(load.removePrompt(p!.keys, p!.n)).toBe(true);
          }
        } else if (op < 0.87) {
          m.engineBlocks = rand() < 0.3 ? 0 : randomInt(rand, 60);
          load.setEngine({ running: 1, waiting: 0, kvUsage: 0.5, stale: false }, m.engineBlocks);
        } else {
          m.remote = { requests: randomInt(rand, 3), prefillTokens: randomInt(rand, 800), blocks: randomInt(rand, 30) };
          load.setRemote(m.remote);
        }
        for (let j = 0; j < slots.length; j++) expect(row(table, slots[j]!), `step ${step}, slot ${slots[j]}`).toEqual(expectedRow(models[j]!, reuse));
      }
      // Something happened on every path (a generator that never reached a branch would prove nothing).
      expect(models.some((m) => m.bookings.some((b) => b.prefillDone))).toBe(true);
      expect(models.some((m) => m.remote.requests > 0 && m.engineBlocks > 0)).toBe(true);
      // Identity columns are untouched by load changes.
      expect(table.rows[4 * LOAD_ROW + LoadCol.key]).toBe(104);
    }
  });

  it("a detached load never writes the slot a newer rank took", () => {
    const table = new LoadTable(4);
    table.claim(2, { key: 1, blockSize: BS, eagle: false, kvEvents: true });
    const old = new RankLoad(false, table, 2);
    old.book(300, 5, 0, undefined);
    old.detach();
    table.release(2);
    table.claim(2, { key: 9, blockSize: BS, eagle: true, kvEvents: false });
    const fresh = new RankLoad(false, table, 2);
    fresh.book(40, 2, 1, undefined);
    old.release(300, 5, 0);
    old.setRemote({ requests: 1, prefillTokens: 7, blocks: 7 });
    expect(row(table, 2)).toEqual([40, 3, 1]);
    expect([table.rows[2 * LOAD_ROW + LoadCol.key], table.rows[2 * LOAD_ROW + LoadCol.eagle], table.rows[2 * LOAD_ROW + LoadCol.kvEvents]]).toEqual([9, 1, 0]);
  });
});
