import { describe, expect, it } from "vitest";
import { parseRoutingExtension, sessionIdFrom } from "../../src/routing/index.ts";
import { fixture, prompt, worker } from "./helpers.ts";

describe("request extension field", () => {
  it("reads kvgate fields, falls back to Dynamo agent hints, and lets kvgate win", () => {
    expect(parseRoutingExtension({ model: "m" })).toEqual({});
    expect(parseRoutingExtension({
      kvgate: { overlap_weight: 0.5, temperature: 0.2, priority: 3, worker_id: "w", dp_rank: 1, exclude_workers: ["x"], query_only: true },
    })).toEqual({ overrides: { overlapWeight: 0.5, temperature: 0.2 }, priority: 3, target: { worker: "w", dpRank: 1 }, exclude: ["x"], queryOnly: true });
    expect(parseRoutingExtension({ nvext: { agent_hints: { kv_overlap_score_weight: 2, priority: 1 } } })).toEqual({ overrides: { overlapWeight: 2 }, priority: 1 });
    expect(parseRoutingExtension({ kvgate: { overlap_weight: 0 }, nvext: { agent_hints: { kv_overlap_score_weight: 2 } } })).toEqual({ overrides: { overlapWeight: 0 } });
  });

  it("rejects malformed fields with a 400", () => {
    for (const body of [
      { kvgate: 3 }, { kvgate: { overlap_weight: -1 } }, { kvgate: { temperature: "hot" } }, { kvgate: { dp_rank: 1 } },
      { kvgate: { worker_id: "w", dp_rank: 1.5 } }, { kvgate: { exclude_workers: "w" } }, { kvgate: { query_only: 1 } },
      { nvext: { agent_hints: { priority: Infinity } } },
    ]) {
      expect(() => parseRoutingExtension(body), JSON.stringify(body)).toThrow(expect.objectContaining({ code: "KVGATE_ERR_BAD_ARGUMENT", status: 400 }));
    }
  });

  it("reads the session id from the configured header and feeds a route request", async () => {
    const f = await fixture({}, [worker("a"), worker("b")]);
    const headers = new Headers({ [f.router.config.sessionHeader]: "  abc  " });
    expect(f.router.config.sessionHeader).toBe("x-session-id");
    expect(sessionIdFrom(headers, "x-session-id")).toBe("abc");
    expect(sessionIdFrom(new Headers({ "x-session-id": " " }), "x-session-id")).toBeUndefined();
    const ext = parseRoutingExtension({ kvgate: { worker_id: "b" } });
    const out = await f.router.route({ requestId: "r", tokens: prompt(1, 64, 1), model: "m", sessionId: sessionIdFrom(headers, "x-session-id"), ...ext });
    expect(out.kind === "routed" && out.signals.worker).toBe("b");
    expect(f.router.session("abc")?.target?.worker).toBe("b");
  });
});
