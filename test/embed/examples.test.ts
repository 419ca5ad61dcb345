/**
 * The embedding examples route the captured real vLLM BlockStored event: 25/25 blocks on the reporting worker from
 * C and from Python. Their fixture files must still be what embed/examples/capture-fixture.ts derives.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { BATCH_FILE, TOKENS_FILE, captureFixture } from "../../embed/examples/capture-fixture.ts";
import { BIN, ROOT, buildEmbed } from "./hosts.ts";

beforeAll(buildEmbed, 120_000);

const ARGS = [BATCH_FILE, TOKENS_FILE].map((u) => u.pathname);

describe("route examples over the captured vLLM event", () => {
  it("should ship fixtures equal to what the capture script derives", () => {
    const { batch, tokens } = captureFixture();
    expect(Buffer.compare(readFileSync(BATCH_FILE), batch)).toBe(0);
    expect(Buffer.compare(readFileSync(TOKENS_FILE), tokens)).toBe(0);
    expect(tokens.length).toBe(400 * 4);
  });

  for (const [name, cmd, args] of [
    ["C", join(BIN, "route"), ARGS],
    ["Python", "python3", [join(ROOT, "embed/examples/route.py"), ...ARGS]],
  ] as const) {
    it(`should find all 25 blocks on the reporting worker from ${name}`, () => {
      const out = execFileSync(cmd, args, { encoding: "utf8" });
      expect(out).toContain("worker 1: 25/25 blocks (holds 25)");
      expect(out).not.toContain("worker 0:");
      expect(out).toMatch(/400 tokens, 25 blocks/);
    });
  }
});
