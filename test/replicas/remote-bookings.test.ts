/** @module RemoteBookings alone: per-rank totals, the per-peer cap, heartbeat snapshots and expiry, on an injected clock. */
import { describe, expect, it } from "vitest";
import type { RemoteLoad } from "../../src/routing/rank-load.ts";
import { RemoteBookings } from "../../src/replicas/remote-bookings.ts";
import { ActivePrompts } from "../../src/routing/active-prompts.ts";
import { decodeBooking, decodeHashes, encodeBooking, encodeHashes, subjectToken, type BookingMessage } from "../../src/replicas/sync-messages.ts";

/** `n` chained-looking sequence hashes: the first `shared` from one prompt family, the rest from `tag`. */
function keys(n: number, shared: number, tag: number): Uint32Array {
  const k = new Uint32Array(2 * n);
  for (let i = 0; i < n; i++) {
    const fam = i < shared ? 1 : tag;
    k[2 * i] = (fam * 7919 + i * 104_729) >>> 0;
    k[2 * i + 1] = fam;
  }
  return k;
}

function table(maxPerPeer = 3) {
  const loads = new Map<string, RemoteLoad>();
  const rb = new RemoteBookings((w, dp, l) => loads.set(`${w}/${dp}`, l), maxPerPeer);
  return { rb, loads };
}

describe("remote bookings", () => {
  it("should sum a peer's bookings per rank, drop the prefill at its first token and free exactly once", () => {
    const { rb, loads } = table();
    expect(rb.book("a", 1, { worker: "w1", dpRank: 0, prefillTokens: 100, blocks: 6 }, 0)).toBe(true);
    expect(rb.book("a", 2, { worker: "w1", dpRank: 0, prefillTokens: 50, blocks: 3 }, 0)).toBe(true);
    expect(loads.get("w1/0")).toEqual({ requests: 2, prefillTokens: 150, blocks: 9 });
    expect(rb.prefillDone("a", 1)).toBe(true);
    expect(rb.prefillDone("a", 1)).toBe(false);
    expect(loads.get("w1/0")).toEqual({ requests: 2, prefillTokens: 50, blocks: 9 });
    expect(rb.free("a", 2)).toBe(true);
    expect(rb.free("a", 2)).toBe(false);
    expect(loads.get("w1/0")).toEqual({ requests: 1, prefillTokens: 0, blocks: 6 });
  });

  it("should cap bookings per peer, replace them from a heartbeat, and expire a silent peer", () => {
    const { rb, loads } = table(2);
    rb.book("a", 1, { worker: "w1", dpRank: 0, prefillTokens: 10, blocks: 1 }, 0);
    rb.book("a", 2, { worker: "w1", dpRank: 0, prefillTokens: 10, blocks: 1 }, 0);
    expect(rb.book("a", 3, { worker: "w1", dpRank: 0, prefillTokens: 10, blocks: 1 }, 0)).toBe(false);
    expect(rb.refused).toBe(1);
    rb.replace("a", [[2, "w1", 0, 0, 1], [4, "w2", 1, 5, 2]], 100);
    expect(rb.size).toBe(2);
    expect(loads.get("w1/0")).toEqual({ requests: 1, prefillTokens: 0, blocks: 1 });
    expect(loads.get("w2/1")).toEqual({ requests: 1, prefillTokens: 5, blocks: 2 });
    rb.book("b", 1, { worker: "w2", dpRank: 1, prefillTokens: 0, blocks: 4 }, 500);
    expect(rb.expire(400, 300)).toEqual([]);
    expect(rb.expire(401, 300)).toEqual(["a"]);
    expect(rb.size).toBe(1);
    expect(loads.get("w1/0")).toEqual({ requests: 0, prefillTokens: 0, blocks: 0 });
    expect(loads.get("w2/1")).toEqual({ requests: 1, prefillTokens: 0, blocks: 4 });
  });

  it("should count a booking's expected output blocks in the rank's remote blocks, from a message or a heartbeat", () => {
    const { rb, loads } = table();
    rb.book("a", 1, { worker: "w1", dpRank: 0, prefillTokens: 100, blocks: 6, outputBlocks: 4 }, 0);
    expect(loads.get("w1/0")).toEqual({ requests: 1, prefillTokens: 100, blocks: 10 });
    // The first token ends the prefill, not the decode the booking expects.
    rb.prefillDone("a", 1);
    expect(loads.get("w1/0")).toEqual({ requests: 1, prefillTokens: 0, blocks: 10 });
    rb.replace("a", [[1, "w1", 0, 0, 6], [2, "w1", 0, 30, 2], [3, "w1", 0, 0, 1]], 10, [4, 5, 0]);
    expect(loads.get("w1/0")).toEqual({ requests: 3, prefillTokens: 30, blocks: 18 });
    rb.free("a", 1);
    rb.free("a", 2);
    expect(loads.get("w1/0")).toEqual({ requests: 1, prefillTokens: 0, blocks: 1 });
    // A prompt that joined the rank's in-flight prompts leaves its blocks there, but its output blocks are its own.
    const prompts = new ActivePrompts();
    const joined = new RemoteBookings((w, dp, l) => loads.set(`${w}/${dp}`, l), 4, 256, (_w, _dp, k, n, add) => (add ? prompts.add(k, n) : prompts.remove(k, n), true));
    joined.book("b", 1, { worker: "w2", dpRank: 0, prefillTokens: 0, blocks: 8, outputBlocks: 3, keys: keys(8, 8, 1) }, 0);
    expect(loads.get("w2/0")).toEqual({ requests: 1, prefillTokens: 0, blocks: 3 });
    const m = { k: "book", r: "r1", id: 7, w: "w", dp: 0, p: 12, b: 3, o: 2 } as const;
    expect(decodeBooking(encodeBooking(m))).toEqual(m);
    expect(() => decodeBooking(encodeBooking({ ...m, o: -1 }))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_SYNC_MESSAGE" }));
    // In a heartbeat they are a list of their own, which a replica from before they were shared leaves unread.
    const hb = { k: "hb", r: "r1", list: [[7, "w", 0, 0, 3]], o: [2] } as const;
    expect(decodeBooking(encodeBooking(hb as unknown as BookingMessage))).toEqual(hb);
    expect(() => decodeBooking(encodeBooking({ ...hb, o: [2, 1] } as unknown as BookingMessage))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_SYNC_MESSAGE" }));
    expect(() => decodeBooking(encodeBooking({ k: "hb", r: "r1", list: [[7, "w", 0, 0, 3, 2]] } as unknown as BookingMessage))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_SYNC_MESSAGE" }));
  });

  it("should hand the router each remote prompt with hashes to refresh, and take it back however the booking ends", () => {
    const tracked = new Map<string, number>();
    let n = 0;
    const rb = new RemoteBookings(() => {}, 10, 256, undefined, (w, _dp, k, blocks) => {
      if (w === "gone") return undefined;
      const id = `${w}#${++n}:${blocks}:${k.length}`;
      tracked.set(id, blocks);
      return () => tracked.delete(id);
    });
    rb.book("a", 1, { worker: "w1", dpRank: 0, prefillTokens: 0, blocks: 4, keys: keys(4, 0, 1) }, 0);
    rb.book("a", 2, { worker: "w1", dpRank: 0, prefillTokens: 0, blocks: 3, keys: keys(3, 0, 2) }, 0);
    rb.book("a", 3, { worker: "w1", dpRank: 0, prefillTokens: 0, blocks: 3 }, 0);
    rb.book("a", 4, { worker: "gone", dpRank: 0, prefillTokens: 0, blocks: 2, keys: keys(2, 0, 3) }, 0);
    rb.book("b", 1, { worker: "w2", dpRank: 0, prefillTokens: 0, blocks: 5, keys: keys(5, 0, 4) }, 0);
    expect([...tracked.keys()].sort()).toEqual(["w1#1:4:8", "w1#2:3:6", "w2#3:5:10"]);
    rb.free("a", 1);
    rb.free("a", 4);
    expect([...tracked.keys()].sort()).toEqual(["w1#2:3:6", "w2#3:5:10"]);
    // A heartbeat that no longer lists it, and a peer that stopped beating.
    rb.replace("a", [[3, "w1", 0, 0, 3]], 50);
    expect([...tracked.keys()]).toEqual(["w2#3:5:10"]);
    rb.expire(200, 100);
    expect(tracked.size).toBe(0);
  });

  it("should round-trip booking messages and refuse malformed ones with a typed error", () => {
    const m = { k: "book", r: "r1", id: 7, w: "10.0.0.5:8000", dp: 0, p: 12, b: 3 } as const;
    expect(decodeBooking(encodeBooking(m))).toEqual(m);
    expect(decodeBooking(encodeBooking({ k: "hb", r: "r1", list: [[7, "w", 0, 0, 3]] }))).toEqual({ k: "hb", r: "r1", list: [[7, "w", 0, 0, 3]] });
    for (const bad of ["{", '{"k":"book","r":"r1","id":-1,"w":"w","dp":0,"p":0,"b":0}', '{"k":"nope","r":"r1"}', '{"k":"hb","r":"r1","list":[[1,"w"]]}']) {
      expect(() => decodeBooking(new TextEncoder().encode(bad))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_SYNC_MESSAGE" }));
    }
    expect(subjectToken("10.0.0.5:8000")).toBe("10~2e0~2e0~2e5~3a8000");
  });

  it("should count a shared prompt's blocks once beside local prompts, and by the plain sum when it came without hashes", () => {
    const prompts = new ActivePrompts();
    const loads = new Map<string, RemoteLoad>();
    const rb = new RemoteBookings((w, dp, l) => loads.set(`${w}/${dp}`, l), 10, 256, (w, _dp, k, n, add) => {
      if (w !== "w1") return false;
      if (add) prompts.add(k, n);
      else prompts.remove(k, n);
      return true;
    });
    prompts.add(keys(10, 6, 2), 10); // a local prompt: 6 shared blocks and 4 of its own
    // A peer's prompt with the same 6-block prefix and 2 more: only its 2 blocks are new here.
    const wire = decodeBooking(encodeBooking({ k: "book", r: "a", id: 1, w: "w1", dp: 0, p: 128, b: 8, h: encodeHashes(keys(8, 6, 3), 8) }));
    expect(wire.k === "book" && wire.h).toBeTruthy();
    const h = wire.k === "book" ? decodeHashes(wire.h!, wire.b) : undefined;
    expect(rb.book("a", 1, { worker: "w1", dpRank: 0, prefillTokens: 128, blocks: 8, keys: h }, 0)).toBe(true);
    expect(prompts.distinctBlocks).toBe(12);
    expect(loads.get("w1/0")).toEqual({ requests: 1, prefillTokens: 128, blocks: 0 });
    // A rank that cannot take the prompt, and a booking a heartbeat restored without hashes, count plainly.
    rb.book("a", 2, { worker: "w2", dpRank: 0, prefillTokens: 0, blocks: 5, keys: keys(5, 0, 4) }, 0);
    rb.replace("a", [[1, "w1", 0, 128, 8], [2, "w2", 0, 0, 5], [3, "w1", 0, 0, 7]], 10);
    expect(loads.get("w2/0")).toEqual({ requests: 1, prefillTokens: 0, blocks: 5 });
    expect(loads.get("w1/0")).toEqual({ requests: 2, prefillTokens: 128, blocks: 7 });
    expect(rb.free("a", 1)).toBe(true);
    expect(prompts.distinctBlocks).toBe(10);
    expect(prompts.size).toBe(1);
    rb.expire(1_000, 100);
    expect(loads.get("w1/0")).toEqual({ requests: 0, prefillTokens: 0, blocks: 0 });
    expect(prompts.distinctBlocks).toBe(10);
  });

  it("should refuse hashes that are not the booking's block count or not base64", () => {
    const good = encodeHashes(keys(3, 0, 5), 3);
    expect(Array.from(decodeHashes(good, 3))).toEqual(Array.from(keys(3, 0, 5)));
    for (const h of [encodeHashes(keys(2, 0, 5), 2), good.replace(/^./, "*"), 7]) {
      const raw = JSON.stringify({ k: "book", r: "a", id: 1, w: "w", dp: 0, p: 0, b: 3, h });
      expect(() => decodeBooking(new TextEncoder().encode(raw))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_SYNC_MESSAGE" }));
    }
    expect(() => decodeHashes(good, 4)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_SYNC_MESSAGE" }));
  });

  it("should carry several changes of one replica in one message, and refuse a batch mixing replicas or nesting", () => {
    const many: BookingMessage = { k: "many", r: "r1", list: [{ k: "book", r: "r1", id: 1, w: "w", dp: 0, p: 5, b: 1 }, { k: "prefill", r: "r1", id: 1 }, { k: "free", r: "r1", id: 0 }] };
    expect(decodeBooking(encodeBooking(many))).toEqual(many);
    for (const list of [[{ k: "free", r: "r2", id: 1 }], [{ k: "hb", r: "r1", list: [] }], [{ k: "many", r: "r1", list: [] }], [{ k: "free", r: "r1", id: -1 }], "x"]) {
      expect(() => decodeBooking(new TextEncoder().encode(JSON.stringify({ k: "many", r: "r1", list })))).toThrow(expect.objectContaining({ code: "KVGATE_ERR_SYNC_MESSAGE" }));
    }
  });
});
