/**
 * @module Acceptance 2: the official `openai` npm client, pointed at kvgate, completes non-streaming and streaming
 * chat requests (and a text completion) served by simulated engines behind it.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimServer } from "../../src/adapter/node/sim-server.ts";
import { FILLER_TEXT } from "../../src/sim/sim-tokenizer.ts";
import { addWorker, startSim, startTestGateway, type TestGateway } from "./helpers.ts";

const MODEL = "client-model";
let gw: TestGateway;
let sims: SimServer[];
let client: OpenAI;

beforeAll(async () => {
  gw = await startTestGateway();
  sims = await Promise.all([startSim(gw.url, { model: MODEL, workerId: "w1" }), startSim(gw.url, { model: MODEL, workerId: "w2" })]);
  for (const [i, s] of sims.entries()) expect((await addWorker(gw.url, { url: s.url, id: `w${i + 1}`, kv_events: true })).status).toBe(201);
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "not-checked", maxRetries: 0 });
});

afterAll(async () => {
  await Promise.all(sims.map((s) => s.close()));
  await gw.close();
});

describe("the official openai client through kvgate", () => {
  it("should complete a non-streaming chat", async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }], max_tokens: 6 });
    expect(r.object).toBe("chat.completion");
    expect(r.model).toBe(MODEL);
    expect(r.choices[0]!.message).toMatchObject({ role: "assistant", content: FILLER_TEXT.slice(0, 24) });
    expect(r.choices[0]!.finish_reason).toBe("length");
    expect(r.usage).toMatchObject({ completion_tokens: 6 });
  });

  it("should stream a chat chunk by chunk, with usage when asked", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL, messages: [{ role: "user", content: "Stream, please." }], max_tokens: 7, stream: true, stream_options: { include_usage: true },
    });
    let text = "";
    let chunks = 0;
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(FILLER_TEXT.slice(0, 28));
    expect(chunks).toBe(1 + 7 + 1);
    expect(usage).toMatchObject({ completion_tokens: 7, total_tokens: (usage?.prompt_tokens ?? 0) + 7 });
  });

  it("should see the worker's choice in the raw response headers", async () => {
    const { response, data } = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Who served me?" }], max_tokens: 1 }).withResponse();
    expect(["w1", "w2"]).toContain(response.headers.get("x-kvgate-worker"));
    expect(data.choices).toHaveLength(1);
  });

  it("should complete text and list models", async () => {
    const r = await client.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 3 });
    expect(r.choices[0]!.text).toBe(FILLER_TEXT.slice(0, 12));
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    expect(models).toEqual([MODEL]);
  });

  it("should surface kvgate's errors as the client's typed errors", async () => {
    const err = await client.chat.completions.create({ model: "missing-model", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).status).toBe(404);
  });
});
