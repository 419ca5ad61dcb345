import { describe, expect, it } from "vitest";
import { LazyBodyResponse } from "../../../src/adapter/node/lazy-body-response.ts";

const enc = new TextEncoder();

/** A LazyBodyResponse over `text`, counting how often its stream is built. */
function lazy(text: string, status = 200): { res: LazyBodyResponse; built: () => number } {
  let n = 0;
  const res = new LazyBodyResponse(() => {
    n++;
    return new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.encode(text));
        c.close();
      },
    });
  }, { status, statusText: "Fine", headers: { "content-type": "application/json", "x-a": "1" } });
  return { res, built: () => n };
}

describe("LazyBodyResponse", () => {
  it("is a Response with status and headers, and builds no stream until the body is read", () => {
    const { res, built } = lazy("{}", 201);
    expect(res).toBeInstanceOf(Response);
    expect([res.status, res.statusText, res.ok, res.headers.get("x-a")]).toEqual([201, "Fine", true, "1"]);
    expect(res.bodyUsed).toBe(false);
    expect(built()).toBe(0);
  });

  it("gives the body once, whichever way it is read, and says it is used", async () => {
    for (const read of [(r: Response) => r.text(), (r: Response) => r.json().then((j) => JSON.stringify(j)),
      async (r: Response) => new TextDecoder().decode(await r.arrayBuffer()), async (r: Response) => new TextDecoder().decode(await r.bytes()),
      async (r: Response) => (await r.blob()).text(), async (r: Response) => new Response(r.body).text()]) {
      const { res, built } = lazy('{"a":1}');
      expect(await read(res)).toBe('{"a":1}');
      expect(built()).toBe(1);
      expect(res.bodyUsed).toBe(true);
      await expect(res.text()).rejects.toThrow(TypeError);
      expect(built()).toBe(1);
    }
  });

  it("clones with the body, and the same stream answers every read of body", async () => {
    const { res, built } = lazy("hello");
    expect(res.body).toBe(res.body);
    const copy = res.clone();
    expect(await copy.text()).toBe("hello");
    expect(await res.text()).toBe("hello");
    expect(built()).toBe(1);
  });
});
