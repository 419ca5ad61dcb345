import { describe, it, expect } from "vitest";
import { ApproximateTokenizer } from "../../src/tokenize/approximate-tokenizer.ts";
import { FILLER_TEXT, fillerToken, renderSimChat, simChatTokens, simCompletionTokens, simDecode, simEncode } from "../../src/sim/sim-tokenizer.ts";
import { parseSimArgs, runSimCommand, SIM_USAGE } from "../../src/sim/sim-command.ts";
import { startSimServer } from "../../src/adapter/node/sim-server.ts";
import { VirtualClock } from "../../src/sim/sim-clock.ts";

describe("sim tokenizer", () => {
  it("should produce exactly the router's approximate-mode ids for chats and completions", () => {
    const router = new ApproximateTokenizer();
    const body = { messages: [{ role: "system", content: "Be brief." }, { role: "user", content: [{ type: "text", text: "héllo" }, { type: "text", text: "wörld" }] }], tools: [{ type: "function", function: { name: "f" } }] };
    expect(simChatTokens(body)).toEqual(router.tokenizeChat(body));
    expect(renderSimChat(body)).toBe(router.renderChat(body));
    expect(simCompletionTokens({ prompt: "plain text prompt" })).toEqual(router.tokenizeCompletion({ prompt: "plain text prompt" }));
    expect(simCompletionTokens({ prompt: [5, 6, 7] })).toEqual(new Uint32Array([5, 6, 7]));
  });

  it("should pack four UTF-8 bytes per id and decode back to the text", () => {
    expect(Array.from(simEncode("abcde"))).toEqual([0x64636261, 0x65]);
    for (const t of ["", "a", "hello world", "naïve café — 日本語 🙂"]) expect(simDecode(simEncode(t))).toBe(t);
  });

  it("should generate filler whose text re-tokenizes to the generated ids", () => {
    expect(new TextEncoder().encode(FILLER_TEXT).length % 4).toBe(0);
    const ids = Array.from({ length: 30 }, (_, i) => fillerToken(i));
    const text = simDecode(ids);
    expect(text.startsWith(FILLER_TEXT)).toBe(true);
    expect(Array.from(simEncode(text))).toEqual(ids);
  });
});

describe("VirtualClock", () => {
  it("should fire timers in time then creation order, including timers set by timers", () => {
    const c = new VirtualClock(0);
    const log: string[] = [];
    c.setTimer(5, () => log.push(`b@${c.now()}`));
    c.setTimer(1, () => {
      log.push(`a@${c.now()}`);
      c.setTimer(4, () => log.push(`c@${c.now()}`));
    });
    const cancel = c.setTimer(2, () => log.push("never"));
    cancel();
    c.advance(3);
    expect(log).toEqual(["a@1"]);
    expect(c.now()).toBe(3);
    expect(c.runUntilIdle()).toBe(2);
    expect(log).toEqual(["a@1", "b@5", "c@5"]);
    expect(() => c.advance(-1)).toThrow(RangeError);
  });
});

describe("kvgate sim command", () => {
  it("should parse engine, server and event options", () => {
    const c = parseSimArgs(["--port", "0", "--model", "m", "--num-gpu-blocks", "128", "--speedup", "2.5", "--no-prefix-caching",
      "--events-url", "http://r/kv", "--events-encoding", "map"], { KVGATE_EVENTS_TOKEN: "from-env" });
    expect(c).toEqual({
      host: "127.0.0.1", port: 0,
      engine: expect.objectContaining({ model: "m", numGpuBlocks: 128, speedupRatio: 2.5, enablePrefixCaching: false, blockSize: undefined }),
      events: { url: "http://r/kv", token: "from-env", encoding: "map", flushIntervalMs: undefined },
    });
    expect(parseSimArgs(["--help"])).toBe("help");
    expect(() => parseSimArgs(["--port", "x"])).toThrow(expect.objectContaining({ code: "KVGATE_ERR_BAD_ARGUMENT" }));
    expect(() => parseSimArgs(["--events-token", "t"])).toThrow(/--events-url/);
    expect(() => parseSimArgs(["--bogus"])).toThrow(/unknown option/);
  });

  it("should serve until the host says stop, printing the URL and a curl line", async () => {
    const out: string[] = [];
    let stop!: () => void;
    let url = "";
    const code = runSimCommand(["--port", "0", "--model", "cli-model", "--speedup", "100"], {
      start: async (c) => {
        const s = await startSimServer({ ...c.engine, host: c.host, port: c.port });
        url = s.url;
        return s;
      },
      write: (t) => out.push(t),
      stopped: () => new Promise<void>((r) => (stop = r)),
    });
    for (let i = 0; i < 200 && url === ""; i++) await new Promise((r) => setTimeout(r, 5));
    const res = await fetch(url + "/v1/models");
    expect((await res.json()).data[0].id).toBe("cli-model");
    stop();
    expect(await code).toBe(0);
    expect(out[0]).toContain(`serving cli-model at ${url}`);
    expect(out[1]).toContain(`curl ${url}/v1/chat/completions`);
    expect(out[out.length - 1]).toContain("stopped");
    await expect(fetch(url + "/health")).rejects.toThrow();
  });

  it("should print its usage for --help", async () => {
    const out: string[] = [];
    const code = await runSimCommand(["--help"], { start: () => Promise.reject(new Error("not started")), write: (t) => out.push(t), stopped: () => Promise.resolve() });
    expect(code).toBe(0);
    expect(out.join("")).toBe(SIM_USAGE + "\n");
  });
});
