/** @module Loading tokenizers by path and by URL (real fetch on loopback), one load per model, LRU bound, failure backoff. */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer, type Server } from "node:http";
import { readFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { createTokenizerRegistry } from "../../src/tokenize/tokenizer-registry.ts";
import { createTextLoader, joinSource } from "../../src/tokenize/text-loader.ts";
import { QWEN3_DIR } from "./helpers.ts";
import { TINY_TEMPLATE, tinyTokenizerConfig, tinyTokenizerJson } from "./tiny-tokenizer.ts";

const FILES: Record<string, string> = {
  "/tiny/tokenizer.json": JSON.stringify(tinyTokenizerJson()),
  "/tiny/tokenizer_config.json": JSON.stringify(tinyTokenizerConfig({ chat_template: undefined })),
  "/tiny/chat_template.json": JSON.stringify({ chat_template: TINY_TEMPLATE }),
};

/** An in-memory reader that counts reads, standing in for a runtime's file reader. */
function memoryReader(fail = false) {
  const reads: string[] = [];
  return {
    reads,
    readText: async (p: string) => {
      reads.push(p);
      await new Promise((r) => setTimeout(r, 5));
      if (fail || !(p in FILES)) throw new Error(`ENOENT ${p}`);
      return FILES[p]!;
    },
  };
}

const BODY = { messages: [{ role: "user", content: "hello world" }] };

describe("tokenizer registry", () => {
  let server: Server;
  let base = "";
  beforeAll(async () => {
    server = createServer((req, res) => {
      const body = FILES[req.url ?? ""];
      res.writeHead(body ? 200 : 404, { "content-type": "application/json" }).end(body ?? "");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("should load a model's files over HTTP with fetch, including a separate chat_template.json", async () => {
    const reg = createTokenizerRegistry({ mode: "precise", models: { tiny: { dir: `${base}/tiny/`, chatTemplate: `${base}/tiny/chat_template.json` } } });
    const tok = await reg.get("tiny");
    expect(tok.mode).toBe("precise");
    expect(tok.renderChat(BODY)).toBe("<|start|>user\nhello world<|end|>\n<|start|>assistant\n");
    expect(tok.tokenizeChat(BODY).length).toBeGreaterThan(5);
  });

  it("should answer a missing URL with KVGATE_ERR_TOKENIZER", async () => {
    const reg = createTokenizerRegistry({ mode: "precise", models: { gone: { dir: `${base}/nothing` } } });
    await expect(reg.get("gone")).rejects.toMatchObject({ code: "KVGATE_ERR_TOKENIZER", status: 503 });
  });

  it("should load from local paths through the injected file reader", async () => {
    const readText = createTextLoader({ readFile: (p) => readFile(p, "utf8") });
    const reg = createTokenizerRegistry({ mode: "precise", readText, models: { qwen: { dir: QWEN3_DIR.href } } });
    const tok = await reg.get("qwen");
    expect(Array.from(tok.tokenizeCompletion({ prompt: "Hello world" }))).toEqual([9707, 1879]);
    expect(joinSource("/models/q", "tokenizer.json")).toBe("/models/q/tokenizer.json");
    await expect(createTextLoader()("/etc/hostname")).rejects.toMatchObject({ code: "KVGATE_ERR_TOKENIZER" });
  });

  it("should load a model once however many requests wait, and serve it synchronously afterwards", async () => {
    const mem = memoryReader();
    const reg = createTokenizerRegistry({ mode: "precise", readText: mem.readText, models: { tiny: { dir: "/tiny", chatTemplate: "/tiny/chat_template.json" } } });
    expect(reg.peek("tiny")).toBeUndefined();
    const all = await Promise.all([reg.get("tiny"), reg.get("tiny"), reg.get("tiny")]);
    expect(new Set(all).size).toBe(1);
    expect(mem.reads).toHaveLength(3);
    expect(reg.peek("tiny")).toBe(all[0]);
  });

  it("should keep at most maxLoaded tokenizers, dropping the least recently used", async () => {
    const mem = memoryReader();
    const src = { dir: "/tiny", chatTemplate: "/tiny/chat_template.json" };
    const reg = createTokenizerRegistry({ mode: "precise", readText: mem.readText, maxLoaded: 2, models: { a: src, b: src, c: src } });
    await reg.get("a");
    await reg.get("b");
    reg.peek("a");
    await reg.get("c");
    expect(reg.loadedModels()).toEqual(["a", "c"]);
    expect(reg.peek("b")).toBeUndefined();
  });

  it("should repeat a failed load's error until retryAfterMs has passed", async () => {
    const mem = memoryReader(true);
    let t = 0;
    const reg = createTokenizerRegistry({ mode: "precise", readText: mem.readText, retryAfterMs: 1000, now: () => t, models: { x: { dir: "/tiny" } } });
    await expect(reg.get("x")).rejects.toMatchObject({ code: "KVGATE_ERR_TOKENIZER" });
    const reads = mem.reads.length;
    await expect(reg.get("x")).rejects.toMatchObject({ code: "KVGATE_ERR_TOKENIZER" });
    expect(mem.reads.length).toBe(reads);
    t = 1001;
    await expect(reg.get("x")).rejects.toMatchObject({ code: "KVGATE_ERR_TOKENIZER" });
    expect(mem.reads.length).toBeGreaterThan(reads);
    expect(await reg.preload()).toHaveProperty("x");
  });

  it("should hand out the approximate tokenizer for unconfigured models, or refuse when told to", async () => {
    const lenient = createTokenizerRegistry({ mode: "precise", models: {} });
    expect((await lenient.get("other")).mode).toBe("approximate");
    const strict = createTokenizerRegistry({ mode: "precise", models: {}, unknownModel: "error" });
    await expect(strict.get("other")).rejects.toMatchObject({ code: "KVGATE_ERR_TOKENIZER" });
    expect(() => strict.peek(undefined)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_TOKENIZER" }));
    const approx = createTokenizerRegistry({ mode: "approximate", blockSizeHint: 64 });
    expect(approx.peek("anything")!.blockSizeHint).toBe(64);
  });
});
