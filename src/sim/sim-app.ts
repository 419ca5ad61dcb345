/**
 * @module The simulated engine's HTTP surface as a Hono app (Web standards only, so it runs on Node, Bun, Deno and
 * Workers): vLLM's OpenAI endpoints, `/health`, `/metrics`, `/tokenize`, `/detokenize` and `/reset_prefix_cache`, plus
 * the KV-transfer endpoints of disaggregated serving (disagg-routes.ts).
 * Errors are OpenAI-style JSON (`{"error": {message, type, code}}`) with the KvgateError's status.
 */
import { Hono, type Context } from "hono";
import { KvgateError, isKvgateError } from "../core/errors.ts";
import { readJsonObject } from "../core/json-body.ts";
import type { ChatRequestBody, CompletionRequestBody } from "../tokenize/types.ts";
import { parseRequest, type EndpointKind } from "./openai-request.ts";
import { disaggRoutes } from "./disagg-routes.ts";
import { SimDisagg } from "./disagg-sim.ts";
import type { SimEngine } from "./sim-engine.ts";
import { generate } from "./sim-generate.ts";
import { unixSeconds } from "./sim-clock.ts";
import { simChatTokens, simCompletionTokens, simDecode } from "./sim-tokenizer.ts";

const PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8";

function errorResponse(e: KvgateError): Response {
  return Response.json(e.toJSON(), { status: e.status });
}

/** The adapter a request's model names (undefined for the base model); unknown names are 404, as in vLLM. */
function checkModel(engine: SimEngine, model: unknown): string | undefined {
  if (model === undefined || model === null || model === engine.options.model) return undefined;
  if (typeof model === "string" && engine.options.loraAdapters.includes(model)) return model;
  throw new KvgateError("KVGATE_ERR_UNKNOWN_MODEL", `The model \`${String(model)}\` does not exist.`, { param: "model" });
}

export function createSimApp(engine: SimEngine, opts: { fetch?: typeof fetch } = {}): Hono {
  const app = new Hono();
  const disagg = new SimDisagg(engine, opts.fetch);

  app.onError((err) => {
    if (isKvgateError(err)) return errorResponse(err);
    return errorResponse(new KvgateError("KVGATE_ERR_STATE", `internal error: ${(err as Error)?.message ?? String(err)}`));
  });
  app.notFound((c) => {
    const path = new URL(c.req.url).pathname;
    return Response.json({ error: { message: `Not Found: ${c.req.method} ${path}`, type: "not_found_error", code: "not_found" } }, { status: 404 });
  });

  app.get("/health", () => new Response(null, { status: 200 }));

  app.get("/v1/models", () => {
    const o = engine.options;
    return Response.json({
      object: "list",
      data: [
        { id: o.model, object: "model", created: Math.floor(unixSeconds(engine.clock)), owned_by: "vllm", root: o.model, parent: null, max_model_len: o.maxModelLen, permission: [] },
        // vLLM lists each LoRA adapter under its own name, its base model as parent.
        ...o.loraAdapters.map((id) => ({ id, object: "model", created: Math.floor(unixSeconds(engine.clock)), owned_by: "vllm", root: `/adapters/${id}`, parent: o.model, max_model_len: o.maxModelLen, permission: [] })),
      ],
    });
  });

  app.get("/metrics", () => new Response(engine.renderMetrics(), { headers: { "content-type": PROMETHEUS_TEXT } }));

  app.post("/tokenize", async (c) => {
    const body = await readJsonObject(c.req.raw);
    checkModel(engine, body.model);
    let tokens: Uint32Array;
    if (Array.isArray(body.messages)) {
      tokens = simChatTokens(body as unknown as ChatRequestBody);
    } else {
      if (body.prompt === undefined || body.prompt === null) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "prompt or messages is required", { param: "prompt" });
      tokens = simCompletionTokens(body as unknown as CompletionRequestBody);
    }
    const out: Record<string, unknown> = { count: tokens.length, max_model_len: engine.options.maxModelLen, tokens: Array.from(tokens) };
    if (body.return_token_strs === true) out.token_strs = Array.from(tokens, (t) => simDecode([t]));
    return Response.json(out);
  });

  app.post("/detokenize", async (c) => {
    const body = await readJsonObject(c.req.raw);
    checkModel(engine, body.model);
    const t = body.tokens;
    if (!Array.isArray(t) || !t.every((x) => typeof x === "number" && Number.isInteger(x) && x >= 0 && x <= 0xffffffff)) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "tokens must be an array of token ids", { param: "tokens" });
    }
    return Response.json({ prompt: simDecode(t as number[]) });
  });

  app.post("/reset_prefix_cache", () => {
    if (!engine.resetPrefixCache()) throw new KvgateError("KVGATE_ERR_ENGINE_BUSY", "requests are running; the prefix cache can only be reset when the engine is idle");
    return new Response(null, { status: 200 });
  });

  // Not a vLLM endpoint: a fault for replays and tests, an engine restart whose KV events never reach the router.
  app.post("/sim/fault/lose_cache", () => Response.json({ lost_blocks: engine.loseCacheSilently() }));

  const completions = (kind: EndpointKind) => async (c: Context): Promise<Response> => {
    const body = await readJsonObject(c.req.raw);
    const parsed = parseRequest(kind, body);
    parsed.lora = checkModel(engine, parsed.model);
    const { req, hooks } = await disagg.prepare(body, parsed, c.req.url, c.req.raw.signal);
    return generate({ engine, req, requestId: c.req.header("x-request-id") || undefined, signal: c.req.raw.signal, transfer: hooks });
  };
  app.post("/v1/chat/completions", completions("chat"));
  app.post("/v1/completions", completions("completion"));
  disaggRoutes(app, disagg);

  return app;
}
