/**
 * @module How far router replicas' indexes disagree, from their `GET /admin/index/digest` answers: per (worker, rank)
 * the entry count and an order-independent digest. 0 means every replica holds exactly the same blocks.
 */
import { KvgateError } from "../core/errors.ts";

export interface RankDigest {
  worker: string;
  dp_rank: number;
  blocks: number;
  digest: string;
}

/** The admin endpoint's answer. */
export interface IndexDigestDoc {
  object: "index_digest";
  ranks: RankDigest[];
  total_blocks: number;
}

export interface Divergence {
  /** Share of the (worker, rank) pairs any replica knows on which the replicas do not all agree: 0 = identical, 1 = none agree. */
  divergence: number;
  /** Pairs known to any replica, and those whose digest differs somewhere. */
  ranks: number;
  differing: number;
  /** Sum over pairs of the largest minus the smallest entry count among the replicas (a rank one lacks counts 0). */
  blocksApart: number;
}

const key = (d: Pick<RankDigest, "worker" | "dp_rank">): string => `${d.dp_rank}\u0000${d.worker}`;

/**
 * Compares any number of replicas' digests. A (worker, rank) that one replica lists with no blocks and another does not
 * list at all agrees: both hold nothing there.
 */
export function indexDivergence(docs: readonly IndexDigestDoc[]): Divergence {
  if (docs.length < 2) return { divergence: 0, ranks: docs[0]?.ranks.filter((r) => r.blocks > 0).length ?? 0, differing: 0, blocksApart: 0 };
  const maps = docs.map((d) => new Map(d.ranks.filter((r) => r.blocks > 0).map((r) => [key(r), r])));
  const all = new Set<string>();
  for (const m of maps) for (const k of m.keys()) all.add(k);
  let differing = 0, blocksApart = 0;
  for (const k of all) {
    const seen = maps.map((m) => m.get(k));
    const digests = new Set(seen.map((r) => r?.digest ?? "empty"));
    if (digests.size > 1) differing++;
    const counts = seen.map((r) => r?.blocks ?? 0);
    blocksApart += Math.max(...counts) - Math.min(...counts);
  }
  return { divergence: all.size === 0 ? 0 : differing / all.size, ranks: all.size, differing, blocksApart };
}

/** Validates a digest answer read off the wire (a replica of another version, a proxy's error page). */
export function parseIndexDigest(body: unknown): IndexDigestDoc {
  const b = body as Partial<IndexDigestDoc> | null;
  const okRank = (r: Partial<RankDigest>): boolean => typeof r?.worker === "string" && Number.isInteger(r.dp_rank) && Number.isInteger(r.blocks) &&
    typeof r.digest === "string" && /^[0-9a-f]{16}$/.test(r.digest);
  if (!b || b.object !== "index_digest" || !Array.isArray(b.ranks) || !b.ranks.every(okRank)) {
    throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", "not an index digest (expected the answer of GET /admin/index/digest)");
  }
  return { object: "index_digest", ranks: b.ranks, total_blocks: b.ranks.reduce((n, r) => n + r.blocks, 0) };
}
