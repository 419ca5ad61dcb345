import { describe, it, expect } from "vitest";
import { execFileSync, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { runCli } from "../../src/cli/main.ts";

const BIN = fileURLToPath(new URL("../../src/adapter/node/kvgate.mjs", import.meta.url));
const run = async (argv: string[], stdin = ""): Promise<{ code: number; out: string }> => {
  let out = "";
  const code = await runCli(argv, { stdin: () => stdin, write: (t) => { out += t; } });
  return { code, out };
};

describe("kvgate hash", () => {
  it("should print local and chained hashes, one block per line, from the real bin", () => {
    const out = execFileSync(process.execPath, [BIN, "hash", "--block-size", "4", ...Array.from({ length: 12 }, (_, i) => String(i + 1))], { encoding: "utf8" });
    expect(out).toBe(
      "14643705804678351452 14643705804678351452\n" +
      "16777012769546811212 4945711292740353085\n" +
      "483935686894639516 12583592247330656132\n",
    );
  });

  it("should emit JSON with decimal strings and honour --lora and --namespace", async () => {
    const { code, out } = await run(["hash", "--block-size=4", "--lora", "adapter-a", "--json", "0", "1", "2", "3"]);
    expect(code).toBe(0);
    const j = JSON.parse(out);
    expect(j.blocks).toEqual([{ index: 0, local: "6665157333201000639", seq: "6665157333201000639" }]);
    const ns = JSON.parse((await run(["hash", "--block-size", "4", "--namespace", "tenant-a", "--json", "0", "1", "2", "3"])).out);
    expect(ns.seed).toBe("1948188790972764086");
    expect(ns.blocks[0].local).toBe("17009624042690211646");
  });

  it("should hash --cache-salt into the first block only, as the gateway hashes a tenant", async () => {
    const tokens = ["0", "1", "2", "3", "4", "5", "6", "7"];
    const plain = JSON.parse((await run(["hash", "--block-size", "4", "--json", ...tokens])).out);
    const salted = JSON.parse((await run(["hash", "--block-size", "4", "--cache-salt", "tenant-a", "--json", ...tokens])).out);
    expect(salted).toMatchObject({ cacheSalt: "tenant-a", seed: plain.seed });
    expect(salted.blocks[0].local).not.toBe(plain.blocks[0].local);
    // Later blocks keep their local hash; their chained hashes differ through the first block.
    expect(salted.blocks[1].local).toBe(plain.blocks[1].local);
    expect(salted.blocks[1].seq).not.toBe(plain.blocks[1].seq);
  });

  it("should read tokens from standard input as a JSON array", async () => {
    const { out } = await run(["hash", "--block-size", "4"], "[1, 2, 3, 4, 5]");
    expect(out).toBe("14643705804678351452 14643705804678351452\n");
  });

  it("should fail with a clear message on bad input", () => {
    const r = spawnSync(process.execPath, [BIN, "hash", "--block-size", "4", "1", "x"], { encoding: "utf8" });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("token 1 is not an integer");
    const r2 = spawnSync(process.execPath, [BIN, "hash", "--bogus"], { encoding: "utf8" });
    expect(r2.status).toBe(1);
    expect(r2.stderr).toContain("unknown option --bogus");
  });

  it("should print usage for an unknown command and exit 2", async () => {
    const { code, out } = await run(["nope"]);
    expect(code).toBe(2);
    expect(out).toContain("usage: kvgate");
  });
});
