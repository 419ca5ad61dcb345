/**
 * A proxy that drives kvgate through two-phase routing balances load as kvgate's own dispatch does: one script of
 * requests (shared prefixes, some held in flight past their first token) runs once through /v1/chat/completions and
 * once as commit → send to the worker itself → first_token → complete, each against a fresh gateway. The workers are
 * scripted (fake-workers.ts) so the test decides when each request's first token and end happen; the decisions, and
 * the load after every step, must be the same.
 */
import { describe, expect, it } from "vitest";
import { chatChunk, data, fakeGateway, type FakeFleet } from "./fake-workers.ts";

const PREFIX = (tag: string) => `${tag}: ${"Context that several requests share, long enough for many KV blocks. ".repeat(6)}`;
const SCRIPT: ({ start: string; prefix: string } | { finish: string })[] = [
  { start: "a1", prefix: "A" }, { start: "a2", prefix: "A" }, { start: "b1", prefix: "B" }, { start: "a3", prefix: "A" },
  { finish: "a1" }, { start: "c1", prefix: "C" }, { start: "b2", prefix: "B" }, { finish: "a2" }, { finish: "b1" },
  { start: "a4", prefix: "A" }, { start: "c2", prefix: "C" }, { start: "b3", prefix: "B" }, { finish: "a3" }, { start: "a5", prefix: "A" },
  { finish: "c1" }, { finish: "b2" }, { start: "c3", prefix: "C" }, { start: "b4", prefix: "B" },
];

const body = (id: string, prefix: string) => ({
  model: "m", stream: true, max_tokens: 12, messages: [{ role: "system", content: PREFIX(prefix) }, { role: "user", content: `${`details of ${id}, `.repeat(20)}question ${id}` }],
});

/** Reads an SSE body up to the first generated text (held), or to its end. */
class Stream {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  #buf = "";
  usage: unknown;

  constructor(res: Response) {
    this.#reader = res.body!.getReader();
  }

  async #next(): Promise<string | undefined> {
    const decoder = new TextDecoder();
    for (;;) {
      const at = this.#buf.indexOf("\n\n");
      if (at >= 0) {
        const ev = this.#buf.slice(0, at);
        this.#buf = this.#buf.slice(at + 2);
        const data = ev.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) return data;
        continue;
      }
      const { done, value } = await this.#reader.read();
      if (done) return undefined;
      this.#buf += decoder.decode(value, { stream: true });
    }
  }

  async firstText(): Promise<void> {
    for (let d = await this.#next(); d !== undefined; d = await this.#next()) {
      if (d !== "[DONE]" && JSON.parse(d).choices?.[0]?.delta?.content) return;
    }
    throw new Error("the stream ended before any text");
  }

  async end(): Promise<void> {
    for (let d = await this.#next(); d !== undefined; d = await this.#next()) {
      if (d === "[DONE]") return;
      const usage = JSON.parse(d).usage;
      if (usage) this.usage = usage;
    }
    throw new Error("the stream ended before [DONE]");
  }
}

interface Run {
  decisions: string[];
  loads: string[];
}

type Gateway = Awaited<ReturnType<typeof fakeGateway>>;

/**
 * Every worker answers a stream with its first token at once and the rest when the test lets that request end
 * (`finish(id)`): the request id is the last word of the user message.
 */
function scriptWorkers(fleet: FakeFleet): (id: string) => void {
  const gates = new Map<string, () => void>();
  const waits = new Map<string, Promise<void>>();
  const gate = (id: string) => {
    if (!waits.has(id)) waits.set(id, new Promise<void>((resolve) => gates.set(id, resolve)));
    return waits.get(id)!;
  };
  const enc = new TextEncoder();
  for (const w of ["w1", "w2", "w3"]) {
    fleet.scripts.set(w, (r) => {
      const messages = r.body.messages as { content: string }[];
      const id = messages[messages.length - 1]!.content.split(" ").pop()!;
      const usage = (r.body.stream_options as { include_usage?: boolean } | undefined)?.include_usage;
      let step = 0;
      const stream = new ReadableStream<Uint8Array>({
        async pull(c) {
          const n = step++;
          if (n === 0) c.enqueue(enc.encode(data(chatChunk(id, undefined, null, "assistant"))));
          else if (n === 1) c.enqueue(enc.encode(data(chatChunk(id, "first"))));
          else if (n === 2) {
            await gate(id);
            c.enqueue(enc.encode(data(chatChunk(id, " last", "stop"))));
          } else if (n === 3 && usage) {
            c.enqueue(enc.encode(data({ id, object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 100, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 0 } } })));
          } else if (n <= 4) {
            step = 5;
            c.enqueue(enc.encode(data("[DONE]")));
          } else c.close();
        },
      });
      return new Response(stream, { headers: { "content-type": "text/event-stream" } });
    });
  }
  return (id) => {
    void gate(id);
    gates.get(id)!();
  };
}

/**
 * The script's load was laid out for the reference overlap weight, under which held load can outweigh a cached prefix
 * (kvgate's default new-prefill factor stays: with it, a commit that ignored the request's max_tokens booked other
 * decode blocks than dispatch did, and a3 went elsewhere).
 */
const REFERENCE_WEIGHT = ["--overlap-weight", "1"];

function loadLine(g: Gateway): string {
  return g.gw.state.router.snapshot().ranks.map((r) => `${r.worker}:${r.activeRequests}/${r.activePrefillTokens}/${r.activeBlocks}`).join(" ");
}

async function builtIn(): Promise<Run> {
  const g = await fakeGateway(3, REFERENCE_WEIGHT);
  const finish = scriptWorkers(g.fleet);
  const open = new Map<string, Stream>();
  const run: Run = { decisions: [], loads: [] };
  for (const step of SCRIPT) {
    if ("start" in step) {
      const res = await g.call("/v1/chat/completions", body(step.start, step.prefix));
      expect(res.status).toBe(200);
      run.decisions.push(`${step.start}→${res.headers.get("x-kvgate-worker")}`);
      const s = new Stream(res);
      await s.firstText();
      open.set(step.start, s);
    } else {
      finish(step.finish);
      await open.get(step.finish)!.end();
      open.delete(step.finish);
    }
    run.loads.push(loadLine(g));
  }
  for (const [id, s] of open) {
    finish(id);
    await s.end();
  }
  expect(g.gw.state.router.liveBookings).toBe(0);
  return run;
}

async function proxied(): Promise<Run> {
  const g = await fakeGateway(3, REFERENCE_WEIGHT);
  const finish = scriptWorkers(g.fleet);
  const open = new Map<string, { plan: string; stream: Stream }>();
  const run: Run = { decisions: [], loads: [] };
  const report = async (plan: string, what: string, extra?: unknown) => {
    const res = await g.call(`/v1/route/${plan}/${what}`, extra ?? {});
    expect(res.status).toBe(200);
    return res.json();
  };
  for (const step of SCRIPT) {
    if ("start" in step) {
      const b = body(step.start, step.prefix);
      const picked = await g.call("/v1/route", { ...b, commit: true });
      expect(picked.status).toBe(200);
      const d = await picked.json();
      run.decisions.push(`${step.start}→${d.worker}`);
      // The proxy sends the request to the picked endpoint itself, asking for usage to report the actual hit.
      const res = await g.fleet.fetch(`http://${picked.headers.get("x-gateway-destination-endpoint")}/v1/chat/completions`, {
        method: "POST", body: JSON.stringify({ ...b, stream_options: { include_usage: true } }), signal: new AbortController().signal,
      });
      const stream = new Stream(res);
      await stream.firstText();
      expect((await report(d.plan_id, "first_token")).state).toBe("decode");
      open.set(step.start, { plan: d.plan_id, stream });
    } else {
      const o = open.get(step.finish)!;
      finish(step.finish);
      await o.stream.end();
      expect(o.stream.usage).toBeDefined();
      expect((await report(o.plan, "complete", { usage: o.stream.usage })).state).toBe("completed");
      open.delete(step.finish);
    }
    run.loads.push(loadLine(g));
  }
  for (const [id, o] of open) {
    finish(id);
    await o.stream.end();
    await report(o.plan, "complete");
  }
  expect(g.gw.state.router.liveBookings).toBe(0);
  expect(g.gw.state.metrics.actualHit.count()).toBe(SCRIPT.filter((s) => "finish" in s).length);
  // The usage each completion report carried reached the closed loop too, set against its plan's prediction.
  expect(g.gw.state.router.snapshot().predictions.reduce((n, p) => n + p.samples, 0)).toBe(SCRIPT.filter((s) => "finish" in s).length);
  expect(g.gw.state.planSignals.size).toBe(0);
  return run;
}

describe("a proxy driving kvgate by two-phase routing", () => {
  it("gets the same decisions, in the same order, and leaves the same load, as kvgate's own dispatch", async () => {
    const own = await builtIn();
    const proxy = await proxied();
    expect(proxy.decisions).toEqual(own.decisions);
    expect(proxy.loads).toEqual(own.loads);
    // The script must exercise the balancing it claims to: load is held, every worker is used, a prefix returns to its
    // worker …
    expect(own.loads.some((l) => l.split(" ").filter((r) => !r.endsWith(":0/0/0")).length === 3)).toBe(true);
    expect(new Set(own.decisions.map((d) => d.split("→")[1])).size).toBe(3);
    const workerOf = (id: string) => own.decisions.find((d) => d.startsWith(`${id}→`))!.split("→")[1];
    const family = ["a1", "a2", "a3", "a4", "a5"].map(workerOf);
    expect(family.filter((w) => w === workerOf("a1")).length).toBeGreaterThan(1);
    // … and that load, not only the prefix, decides: with enough of A in flight on its worker, one A goes elsewhere.
    expect(new Set(family).size).toBeGreaterThan(1);
  }, 60_000);
});

describe("router options from the gateway's configuration", () => {
  it("reach the router: the cost weight, the new-prefill factor and in-flight caching", async () => {
    const g = await fakeGateway(1, ["--overlap-weight", "3", "--new-prefill-factor", "2", "--no-inflight-cached"]);
    expect(g.gw.state.router.config).toMatchObject({ overlapWeight: 3, newPrefillFactor: 2, inflightCached: false });
    const d = await fakeGateway(1);
    expect(d.gw.state.router.config).toMatchObject({ overlapWeight: 16, newPrefillFactor: 1.5, inflightCached: true });
  });
});
