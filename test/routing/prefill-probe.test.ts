/** The prefill busy probe (disaggregated serving asks it before sending a prompt to the prefill pool). */
import { describe, expect, it } from "vitest";
import { fixture, prompt, worker } from "./helpers.ts";

describe("prefill busy probe", () => {
  it("answers whether the chosen prefill worker is loaded above t × its batch capacity", async () => {
    const f = await fixture({ queueThreshold: null }, [
      worker("p1", { role: "prefill", maxBatchedTokens: 1000 }), worker("p2", { role: "prefill", maxBatchedTokens: 1000 }), worker("d", { role: "decode" }),
    ]);
    const req = { requestId: "x", tokens: prompt(1, 160, 1), model: "m" };
    expect(await f.router.prefillBusy(req, 0.5)).toMatchObject({ busy: false, reason: "idle", activePrefillTokens: 0, capacity: 1000 });
    for (const [id, w] of [["l1", "p1"], ["l2", "p2"]] as const) {
      await f.router.route({ requestId: id, tokens: prompt(9, 640, id.length + (w === "p2" ? 7 : 3)), model: "m", phase: "prefill", target: { worker: w } });
    }
    expect(await f.router.prefillBusy(req, 0.5)).toMatchObject({ busy: true, reason: "load", activePrefillTokens: 640 });
    expect(await f.router.prefillBusy(req, 0.7)).toMatchObject({ busy: false, reason: "idle" });
    expect(f.router.liveBookings).toBe(2);
    f.router.setBusyThresholds({ activePrefillTokens: 600 });
    expect(await f.router.prefillBusy(req, 0.9)).toEqual({ busy: true, reason: "all_busy" });
  });

  it("counts a saturated pool (requests would queue) as busy", async () => {
    const f = await fixture({ queueThreshold: 0.5 }, [worker("p", { role: "prefill", maxBatchedTokens: 1000 })]);
    await f.router.route({ requestId: "l", tokens: prompt(9, 640, 9), model: "m", phase: "prefill" });
    expect(await f.router.prefillBusy({ requestId: "x", tokens: prompt(1, 64, 1), model: "m" }, 10)).toEqual({ busy: true, reason: "saturated" });
  });
});
