/**
 * @module Reads tokenizer files from a URL (Web `fetch`, every runtime) or a local path (a reader the runtime
 * adapter injects: Node/Bun/Deno pass a file reader, workerd passes none), so this code stays runtime-neutral.
 */
import { KvgateError } from "../core/errors.ts";

export type ReadText = (pathOrUrl: string) => Promise<string>;

export interface TextLoaderOptions {
  /** Local file reader (absolute or process-relative path); without it only http(s) URLs load. */
  readFile?: (path: string) => Promise<string>;
  /** Defaults to the global `fetch`; tests and custom transports may pass their own. */
  fetch?: typeof fetch;
  /** Extra request headers for URLs, e.g. `authorization` for a private model hub. */
  headers?: Record<string, string>;
}

export function isUrl(s: string): boolean {
  return /^https?:\/\//i.test(s);
}

/** `file:` URLs become paths for the file reader (Deno and Node both accept decoded absolute paths). */
function filePath(s: string): string {
  return s.startsWith("file:") ? decodeURIComponent(new URL(s).pathname) : s;
}

export function createTextLoader(opts: TextLoaderOptions = {}): ReadText {
  return async function readText(pathOrUrl: string): Promise<string> {
    if (isUrl(pathOrUrl)) {
      const f = opts.fetch ?? globalThis.fetch;
      let res: Response;
      try {
        res = await f(pathOrUrl, { headers: opts.headers, redirect: "follow" });
      } catch (e) {
        throw new KvgateError("KVGATE_ERR_TOKENIZER", `fetching ${pathOrUrl} failed: ${(e as Error).message}`, { source: pathOrUrl }, { cause: e });
      }
      if (!res.ok) {
        await res.body?.cancel();
        throw new KvgateError("KVGATE_ERR_TOKENIZER", `fetching ${pathOrUrl} answered HTTP ${res.status}`, { source: pathOrUrl, status: res.status });
      }
      return res.text();
    }
    if (!opts.readFile) {
      throw new KvgateError("KVGATE_ERR_TOKENIZER", `cannot read local file ${pathOrUrl} on this runtime (no file reader); use an http(s) URL`, { source: pathOrUrl });
    }
    try {
      return await opts.readFile(filePath(pathOrUrl));
    } catch (e) {
      throw new KvgateError("KVGATE_ERR_TOKENIZER", `reading ${pathOrUrl} failed: ${(e as Error).message}`, { source: pathOrUrl }, { cause: e });
    }
  };
}

/** `name` inside directory or URL prefix `dir`. */
export function joinSource(dir: string, name: string): string {
  if (isUrl(dir) || dir.startsWith("file:")) return new URL(name, dir.endsWith("/") ? dir : `${dir}/`).href;
  return dir.endsWith("/") ? dir + name : `${dir}/${name}`;
}
