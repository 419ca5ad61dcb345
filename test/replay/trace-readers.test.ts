import { describe, expect, it } from "vitest";
import { parseAzureTimestamp, readAzureTrace } from "../../src/replay/azure-trace.ts";
import { readLines } from "../../src/replay/line-reader.ts";
import { MOONCAKE_BLOCK_TOKENS, readMooncakeTrace } from "../../src/replay/mooncake-trace.ts";
import { applyWindow, parseSlice, UNIQUE_SEGMENT_BASE, WHOLE_TRACE } from "../../src/replay/replay-request.ts";

/** A byte stream delivering `text` in chunks of `size` bytes (splitting lines and UTF-8 sequences). */
function chunked(text: string, size: number): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, at + size));
      at += size;
    },
  });
}

const line = (o: Record<string, unknown>): string => JSON.stringify(o);

describe("line reader", () => {
  it("yields the same lines from a string and from any chunking, with LF or CRLF and no final newline", async () => {
    const text = "a\r\nbé\n\nlast";
    const fromString: string[] = [];
    for await (const l of readLines(text)) fromString.push(l.text);
    expect(fromString).toEqual(["a", "bé", "", "last"]);
    for (const size of [1, 2, 3, 64]) {
      const got: string[] = [];
      for await (const l of readLines(chunked(text, size))) got.push(`${l.number}:${l.text}`);
      expect(got).toEqual(["1:a", "2:bé", "3:", "4:last"]);
    }
  });
});

describe("Mooncake JSONL", () => {
  it("maps each hash id to a 512-token segment; the last block is partial (ceil(input/512) ids)", async () => {
    const text = [
      line({ timestamp: 0, input_length: 1100, output_length: 7, hash_ids: [5, 6, 7] }),
      line({ timestamp: 40, input_length: 512, output_length: 0, hash_ids: [5] }),
    ].join("\n");
    const t = await readMooncakeTrace(text, WHOLE_TRACE);
    expect(t.seen).toBe(2);
    expect(t.requests[0]).toEqual({
      index: 0, at: 0, inputLength: 1100, outputLength: 7,
      segments: [{ id: 5, length: 512 }, { id: 6, length: 512 }, { id: 7, length: 76 }],
    });
    expect(t.requests[1]!.segments).toEqual([{ id: 5, length: MOONCAKE_BLOCK_TOKENS }]);
    expect(t.notes).toEqual({ shortHashIds: 0, extraHashIds: 0 });
  });

  it("gives a per-request tail when ids cover fewer blocks (floor convention) and ignores extra ids", async () => {
    const text = [
      line({ timestamp: 1, input_length: 1100, output_length: 1, hash_ids: [1, 2] }),
      line({ timestamp: 2, input_length: 100, output_length: 1, hash_ids: [3, 4, 5] }),
      line({ timestamp: 3, input_length: 10, output_length: 1, hash_ids: [] }),
    ].join("\n");
    const t = await readMooncakeTrace(text, WHOLE_TRACE);
    expect(t.requests[0]!.segments).toEqual([{ id: 1, length: 512 }, { id: 2, length: 512 }, { id: UNIQUE_SEGMENT_BASE, length: 76 }]);
    expect(t.requests[1]!.segments).toEqual([{ id: 3, length: 100 }]);
    expect(t.requests[2]!.segments).toEqual([{ id: UNIQUE_SEGMENT_BASE + 8, length: 10 }]);
    expect(t.notes).toEqual({ shortHashIds: 2, extraHashIds: 1 });
  });

  it("skips blank lines, honours the window, and stops reading past its end", async () => {
    const rows = Array.from({ length: 10 }, (_, i) => line({ timestamp: i * 10, input_length: 5, output_length: 1, hash_ids: [i] }));
    const text = `${rows.slice(0, 3).join("\n")}\n\n${rows.slice(3).join("\r\n")}\n{broken`;
    const t = await readMooncakeTrace(chunked(text, 7), { start: 2, end: 6, limit: 3 });
    expect(t.requests.map((r) => r.index)).toEqual([2, 3, 4]);
    expect(t.requests.map((r) => r.at)).toEqual([20, 30, 40]);
    await expect(readMooncakeTrace(text, WHOLE_TRACE)).rejects.toThrow(/line 12: not JSON/);
  });

  it("rejects malformed records with the line number", async () => {
    const bad = async (o: unknown) => readMooncakeTrace(`${line({ timestamp: 0, input_length: 1, output_length: 1, hash_ids: [0] })}\n${JSON.stringify(o)}`, WHOLE_TRACE);
    await expect(bad({ timestamp: -1, input_length: 1, output_length: 1, hash_ids: [] })).rejects.toThrow(/line 2: timestamp/);
    await expect(bad({ timestamp: 0, input_length: 0, output_length: 1, hash_ids: [] })).rejects.toThrow(/input_length/);
    await expect(bad({ timestamp: 0, input_length: 3, output_length: 1.5, hash_ids: [1] })).rejects.toThrow(/output_length/);
    await expect(bad({ timestamp: 0, input_length: 3, output_length: 1, hash_ids: "1" })).rejects.toThrow(/hash_ids must be a list/);
    await expect(bad({ timestamp: 0, input_length: 3, output_length: 1, hash_ids: [-1] })).rejects.toThrow(/hash_ids\[0\]/);
    await expect(bad([1, 2])).rejects.toMatchObject({ code: "KVGATE_ERR_BAD_ARGUMENT" });
  });
});

describe("Azure CSV", () => {
  const csv = [
    "TIMESTAMP,ContextTokens,GeneratedTokens",
    "2023-11-16 18:15:46.6805900,374,44",
    "2023-11-16 18:15:50.9951690,396,109",
    "2023-11-16 18:15:51.0000000,879,0",
    "",
  ].join("\r\n");

  it("parses wall-clock timestamps to ms after the first row, one unique segment per request", async () => {
    const t = await readAzureTrace(chunked(csv, 5), WHOLE_TRACE);
    expect(t.requests.map((r) => r.index)).toEqual([0, 1, 2]);
    expect(t.requests[1]!.at).toBeCloseTo(4314.579, 3);
    expect(t.requests[2]).toMatchObject({ inputLength: 879, outputLength: 0 });
    const ids = new Set(t.requests.map((r) => r.segments[0]!.id));
    expect(ids.size).toBe(3);
    expect(t.requests.every((r) => r.segments[0]!.id >= UNIQUE_SEGMENT_BASE && r.segments[0]!.length === r.inputLength)).toBe(true);
  });

  it("keeps the trace's origin for a slice, reads columns by name, and reports bad rows", async () => {
    const t = await readAzureTrace(csv, { start: 1, end: Infinity, limit: 1 });
    expect(t.requests).toHaveLength(1);
    expect(t.requests[0]!.at).toBeCloseTo(4314.579, 3);
    const reordered = await readAzureTrace("\uFEFFGeneratedTokens,TIMESTAMP,ContextTokens\n5,2023-11-16 18:00:00,10\n", WHOLE_TRACE);
    expect(reordered.requests[0]).toMatchObject({ at: 0, inputLength: 10, outputLength: 5 });
    await expect(readAzureTrace("A,B\n1,2\n", WHOLE_TRACE)).rejects.toThrow(/header lacks TIMESTAMP, ContextTokens, GeneratedTokens/);
    await expect(readAzureTrace("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", WHOLE_TRACE)).rejects.toThrow(/line 2: bad TIMESTAMP/);
    await expect(readAzureTrace("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,0,1\n", WHOLE_TRACE)).rejects.toThrow(/ContextTokens/);
    await expect(readAzureTrace("", WHOLE_TRACE)).rejects.toThrow(/empty CSV/);
    expect(parseAzureTimestamp("2023-11-16T18:17:03Z")).toBe(Date.UTC(2023, 10, 16, 18, 17, 3));
  });
});

describe("slices and windows", () => {
  it("parses START:END with open ends and rejects empty or malformed ranges", () => {
    expect(parseSlice("10:20")).toEqual({ start: 10, end: 20 });
    expect(parseSlice(":5")).toEqual({ start: 0, end: 5 });
    expect(parseSlice("7:")).toEqual({ start: 7, end: Infinity });
    expect(() => parseSlice("5:5")).toThrow(/selects no requests/);
    expect(() => parseSlice("a:b")).toThrow(/START:END/);
  });

  it("orders a window by arrival, stably", () => {
    const r = (index: number, at: number) => ({ index, at, inputLength: 1, outputLength: 1, segments: [] });
    expect(applyWindow([r(0, 5), r(1, 1), r(2, 5), r(3, 0)], { start: 0, end: 3, limit: Infinity }).map((x) => x.index)).toEqual([1, 0, 2]);
  });
});
