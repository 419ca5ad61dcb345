/** @module Reads a request body as a JSON object, the one shape every OpenAI-style endpoint accepts (gateway and sim alike). */
import { KvgateError } from "./errors.ts";

/** The body as a JSON object, or a 400 saying what is wrong with it. */
export async function readJsonObject(req: Request): Promise<Record<string, unknown>> {
  return parseJsonObject(await req.text());
}

/** The body as a JSON object with the text it came as (so it can be passed on unchanged), or a 400. */
export async function readJsonObjectText(req: Request): Promise<{ value: Record<string, unknown>; text: string }> {
  const text = await req.text();
  return { value: parseJsonObject(text), text };
}

/** `text` as a JSON object, or a 400 saying what is wrong with it. */
export function parseJsonObject(text: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `malformed JSON body: ${(e as Error).message}`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "the request body must be a JSON object");
  return v as Record<string, unknown>;
}
