/** The admin / stats / route-plan token check: constant-time equality with no digest per request. */
import { Hono } from "hono";
import { afterEach, describe, expect, it, vi } from "vitest";
import { bearerToken } from "../../src/gateway/bearer-token.ts";

afterEach(() => vi.restoreAllMocks());

describe("bearerToken", () => {
  const app = new Hono();
  app.use("*", bearerToken("s3cret-token"));
  app.get("/x", (c) => c.text("ok"));
  const get = (auth?: string) => app.request("/x", auth === undefined ? {} : { headers: { authorization: auth } });

  it("should let the configured token through and refuse every other, without hashing either", async () => {
    const digest = vi.spyOn(crypto.subtle, "digest");
    expect((await get("Bearer s3cret-token")).status).toBe(200);
    for (const wrong of ["s3cret-tokem", "s3cret-toke", "s3cret-token2", "S3CRET-TOKEN", "x"]) {
      const res = await get(`Bearer ${wrong}`);
      expect(res.status, wrong).toBe(401);
      expect(res.headers.get("www-authenticate")).toContain("invalid_token");
    }
    expect((await get()).status).toBe(401);
    expect((await get("Basic s3cret-token")).status).toBe(400);
    expect(digest).not.toHaveBeenCalled();
  });
});
