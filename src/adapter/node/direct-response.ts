/**
 * @module Node's response path for the gateway's streamed answers: the relay's chunks go from its source straight
 * into the ServerResponse (see gateway/direct-source.ts) instead of through a ReadableStream that @hono/node-server
 * then reads, one promise round and web-stream enqueue less per chunk. Every other answer, and any stream without
 * a source, takes @hono/node-server's usual path; the Hono app is the same on every runtime.
 */
import type { ServerResponse } from "node:http";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import { sourceStream, takeDirectSource, type DirectSource } from "../../gateway/direct-source.ts";

type FetchFn = (req: Request, env?: unknown) => Response | Promise<Response>;

/** Wraps the app's fetch: a streamed answer with a direct source is written here, the rest returned as is. */
export function directStreams(fetch: FetchFn): FetchFn {
  return async (req, env) => {
    const res = await fetch(req, env);
    // Asked of the Response itself: reading res.body would make @hono/node-server's lazy Response build its stream.
    const source = takeDirectSource(res);
    if (!source) return res;
    const outgoing = (env as { outgoing?: ServerResponse } | undefined)?.outgoing;
    // The relay built no body stream for this answer (GatewayHost.takesDirectSources): one over the source stands in.
    if (!outgoing || outgoing.headersSent) return new Response(sourceStream(source), { status: res.status, headers: res.headers });
    outgoing.writeHead(res.status, outgoingHeaders(res.headers));
    // Sent with the first chunk, or after a short hold (server-response.ts), as @hono/node-server does.
    outgoing.flushHeaders();
    void pump(source, outgoing);
    return RESPONSE_ALREADY_SENT;
  };
}

function outgoingHeaders(headers: Headers): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  headers.forEach((v, k) => {
    if (k !== "set-cookie") out[k] = v;
  });
  const cookies = headers.getSetCookie();
  if (cookies.length > 0) out["set-cookie"] = cookies;
  return out;
}

/** Pulls chunks into `out` while it takes them (waiting for drain when it does not) until the source ends. */
async function pump(source: DirectSource, out: ServerResponse): Promise<void> {
  let ended = false;
  let wrote = false;
  let full = false;
  const sink = {
    enqueue(chunk: Uint8Array): void {
      wrote = true;
      if (!out.destroyed && !out.write(chunk)) full = true;
    },
    close(): void {
      ended = true;
    },
  };
  try {
    while (!ended) {
      wrote = false;
      await source.pull(sink);
      if (out.destroyed) {
        source.cancel();
        return;
      }
      // Neither a chunk nor the end: the body was cancelled, so the answer is cut rather than completed.
      if (!wrote && !ended) {
        out.destroy();
        return;
      }
      if (full && !ended) {
        full = false;
        await new Promise<void>((resolve) => {
          const done = (): void => {
            out.off("drain", done);
            out.off("close", done);
            resolve();
          };
          out.on("drain", done);
          out.on("close", done);
        });
      }
    }
    out.end();
  } catch (e) {
    source.cancel();
    out.destroy(e as Error);
  }
}
