/**
 * @module Both disaggregated flows in the simulated engine, over plain HTTP between engines, so kvgate's disaggregation can
 * be tested end to end (docs/disaggregation.md#the-simulated-engines).
 */
import { KvgateError } from "../core/errors.ts";
import { authority, readDisaggAsk, type BootstrapInfo, type RemotePrefillParams } from "./disagg-params.ts";
import { KvStaging, type TransferredKv } from "./disagg-staging.ts";
import type { ParsedRequest } from "./openai-request.ts";
import type { SimEngine } from "./sim-engine.ts";
import type { TransferHooks } from "./sim-generate.ts";

/** Slack on top of a long-poll's own wait before the decode gives up on the HTTP exchange itself. */
const HTTP_SLACK_MS = 5_000;

export interface PreparedRequest {
  req: ParsedRequest;
  hooks?: TransferHooks;
}

function randomHex(bytes: number): string {
  const b = new Uint8Array(bytes);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

export class SimDisagg {
  readonly staging: KvStaging;
  /** Changes with every engine start, so a decode cannot read a restarted prefill engine's blocks by id. */
  readonly engineId: string;

  constructor(readonly engine: SimEngine, private readonly fetchFn: typeof fetch = globalThis.fetch.bind(globalThis)) {
    this.staging = new KvStaging(engine, engine.options.kvTransferTimeoutMs);
    this.engineId = `${engine.options.workerId}-${randomHex(6)}`;
  }

  get role(): SimEngine["options"]["role"] {
    return this.engine.options.role;
  }

  /** Reads the body's disaggregation fields and does what comes before scheduling (the decode's read of the KV). */
  async prepare(body: Record<string, unknown>, req: ParsedRequest, requestUrl: string, signal: AbortSignal): Promise<PreparedRequest> {
    const ask = readDisaggAsk(body);
    if (ask.kind === "none" || this.role === "aggregated") return { req };
    const role = this.role;
    switch (ask.kind) {
      case "remote_decode":
        this.#expectRole("prefill", "kv_transfer_params.do_remote_decode");
        if (req.stream) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "kv_transfer_params.do_remote_decode needs stream: false (the answer carries the transfer parameters)", { param: "stream" });
        return { req, hooks: this.#keepForRemoteDecode(new URL(requestUrl)) };
      case "remote_prefill":
        this.#expectRole("decode", "kv_transfer_params.do_remote_prefill");
        return { req, hooks: { externalTokens: await this.#readRemote(ask.params, req.prompt, signal) } };
      case "bootstrap":
        if (role === "prefill") return this.#openRoom(ask.info, req);
        return { req, hooks: { externalTokens: await this.#waitRoom(ask.info, req.prompt, signal) } };
    }
  }

  #expectRole(role: "prefill" | "decode", field: string): void {
    if (this.role !== role) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `${field} needs a ${role} engine; this one is a ${this.role} engine`, { param: "kv_transfer_params" });
  }

  /** vLLM prefill: on finish, pin the prompt's blocks and answer with the parameters a decode needs to read them. */
  #keepForRemoteDecode(url: URL): TransferHooks {
    const host = url.hostname.replace(/^\[|\]$/g, "");
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    return {
      onFinish: (result, prompt) => {
        if (result.reason !== "length") return undefined;
        const kv = this.staging.stage(`req:${result.id}`, prompt);
        if (kv.blockIds.length === 0) this.staging.take(`req:${result.id}`);
        return {
          kv_transfer_params: {
            do_remote_prefill: true, do_remote_decode: false, remote_engine_id: this.engineId, remote_request_id: result.id,
            remote_block_ids: kv.blockIds, remote_host: host, remote_port: port, tp_size: 1,
          },
        };
      },
    };
  }

  /** SGLang prefill: the room is open while the request runs; its KV is staged when it ends, or the room fails. */
  #openRoom(info: BootstrapInfo, req: ParsedRequest): PreparedRequest {
    const key = `room:${info.room}`;
    this.staging.open(key);
    return {
      // A prefill server computes the prompt and samples the first token only; decoding is the decode server's job.
      req: { ...req, maxTokens: 1 },
      hooks: {
        onFinish: (result, prompt) => {
          if (result.reason === "length") this.staging.stage(key, prompt);
          else this.staging.fail(key, "the prefill request was aborted");
          return undefined;
        },
        onRefused: (e) => this.staging.fail(key, (e as Error)?.message ?? String(e)),
      },
    };
  }

  /** vLLM decode: read the blocks the prefill engine kept; returns the prompt tokens whose KV arrived. */
  async #readRemote(p: RemotePrefillParams, prompt: Uint32Array, signal: AbortSignal): Promise<number> {
    if (p.remoteBlockIds.length === 0) return 0;
    const where = authority(p.remoteHost, p.remotePort);
    const body = { remote_engine_id: p.remoteEngineId, remote_request_id: p.remoteRequestId, remote_block_ids: p.remoteBlockIds };
    const res = await this.#post(`http://${where}/kv_transfer/read`, body, this.engine.options.kvTransferTimeoutMs, signal, `prefill engine ${where}`);
    if (res.status === 404) throw new KvgateError("KVGATE_ERR_UPSTREAM", `prefill engine ${where} holds no KV for request ${p.remoteRequestId} (expired or already read)`);
    return this.#accept(res, prompt, `prefill engine ${where}`);
  }

  /** SGLang decode: wait in the bootstrap room for the prefill's KV. */
  async #waitRoom(info: BootstrapInfo, prompt: Uint32Array, signal: AbortSignal): Promise<number> {
    const where = authority(info.host, info.port);
    const waitMs = this.engine.options.bootstrapTimeoutMs;
    const res = await this.#post(`http://${where}/bootstrap/take`, { bootstrap_room: info.room, wait_ms: waitMs }, waitMs + HTTP_SLACK_MS, signal, `bootstrap server ${where}`);
    if (res.status === 404) throw new KvgateError("KVGATE_ERR_UPSTREAM_TIMEOUT", `no prefill for bootstrap room ${info.room} arrived at ${where} within ${waitMs} ms`);
    return this.#accept(res, prompt, `bootstrap server ${where}`);
  }

  async #post(url: string, body: unknown, timeoutMs: number, signal: AbortSignal, who: string): Promise<{ status: number; json: Record<string, unknown> }> {
    if (signal.aborted) throw new KvgateError("KVGATE_ERR_CANCELLED", "the client went away");
    const ctl = new AbortController();
    const onAbort = (): void => ctl.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(() => ctl.abort(), timeoutMs);
    try {
      const res = await this.fetchFn(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal: ctl.signal });
      const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
      return { status: res.status, json };
    } catch (e) {
      if (signal.aborted) throw new KvgateError("KVGATE_ERR_CANCELLED", "the client went away");
      throw new KvgateError("KVGATE_ERR_UPSTREAM", `cannot reach ${who}: ${(e as Error)?.message ?? String(e)}`);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** Checks a transfer answer against this request's prompt; returns the transferred token count. */
  #accept(res: { status: number; json: Record<string, unknown> }, prompt: Uint32Array, who: string): number {
    if (res.status !== 200) {
      const msg = (res.json.error as { message?: unknown } | undefined)?.message;
      throw new KvgateError("KVGATE_ERR_UPSTREAM", `${who} refused the KV transfer (${res.status})${typeof msg === "string" ? `: ${msg}` : ""}`);
    }
    const { block_size: bs, token_ids: tokens } = res.json;
    const own = this.engine.options.blockSize;
    if (bs !== own) throw new KvgateError("KVGATE_ERR_UPSTREAM", `${who} uses block size ${String(bs)}, this engine ${own}`);
    if (!Array.isArray(tokens) || tokens.length % own !== 0 || tokens.length > prompt.length || tokens.some((t, i) => t !== prompt[i])) {
      throw new KvgateError("KVGATE_ERR_UPSTREAM", `${who} sent KV that is not this request's prompt`);
    }
    return tokens.length;
  }

  /** The prefill engine's answer to a read: the KV under `key`, released on this side. */
  answer(taken: { kind: "taken"; kv: TransferredKv }): Record<string, unknown> {
    return { engine_id: this.engineId, block_size: this.engine.options.blockSize, token_ids: taken.kv.tokens };
  }
}
