/**
 * @module Polls GET /v1/stats from the page: incremental (`?since=`), with the admin token as a bearer header when
 * the page has one, reporting each answer or failure (401 → ask for the token) to the page.
 */
import type { StatsBody } from "../../gateway/stats-snapshot.ts";

export type PollResult =
  | { kind: "ok"; stats: StatsBody }
  | { kind: "unauthorized"; message: string }
  | { kind: "error"; message: string };

export async function fetchStats(base: string, token: string | undefined, since: number | undefined): Promise<PollResult> {
  const url = new URL("/v1/stats", base);
  if (since !== undefined) url.searchParams.set("since", String(since));
  const headers: Record<string, string> = { accept: "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  let res: Response;
  try {
    res = await fetch(url, { headers, cache: "no-store" });
  } catch (e) {
    return { kind: "error", message: `kvgate did not answer: ${(e as Error).message}` };
  }
  const body = (await res.json().catch(() => undefined)) as (StatsBody & { error?: { message?: string } }) | undefined;
  if (res.status === 401 || res.status === 403) return { kind: "unauthorized", message: body?.error?.message ?? `HTTP ${res.status}` };
  if (!res.ok || !body || body.object !== "kvgate.stats") return { kind: "error", message: body?.error?.message ?? `HTTP ${res.status}` };
  return { kind: "ok", stats: body };
}
