/**
 * @module Seeded operation scripts for the C and Python hosts, with the result lines the TypeScript reference
 * (src/reference/) predicts; ops-driver.c and ops-driver.py print the same line format.
 */
import { ReferenceIndex, chainStep, type RefStoreOutcome } from "../../src/reference/index-reference.ts";
import { hashPromptReference } from "../../src/reference/block-hash-reference.ts";
import { EventBatchWriter } from "../../src/core/event-encoder.ts";
import { seededRandom, type Random } from "../../src/core/seeded-random.ts";
import type { ScoreCandidate, ScoreRequest } from "../../src/core/score-kernel.ts";

export interface Script {
  ops: string[];
  expected: string[];
}

const OUTCOME: Record<RefStoreOutcome, number> = { applied: 0, bad_slot: -4, capacity: -5, parent_not_found: -6, invalid_sequence: -7 };
const hexOf = (b: Uint8Array): string => Buffer.from(b).toString("hex");
const textArg = (s: string | undefined): string => (s ? hexOf(new TextEncoder().encode(s)) : "-");

/** A hash-prompt op and the line the reference predicts. */
export function hashOp(tokens: readonly number[], blockSize: number, lora?: string, namespace?: string): [string, string] {
  const { local, seq } = hashPromptReference(tokens, { blockSize, lora, namespace });
  return [
    `H ${blockSize} ${textArg(lora)} ${textArg(namespace)} ${tokens.length} ${tokens.join(" ")}`,
    ["H", 0, seq.length, ...local, ...seq].join(" "),
  ];
}

const LORAS = [undefined, undefined, "adapter-a", "sql-lora", "ünï-lora"];
const SPACES = [undefined, undefined, "tenant-a", "tenant-b"];

/** `count` random prompts: block sizes 16/32/64, random lengths (partial blocks included), LoRA and namespace. */
export function randomPrompts(seed: number, count: number): Script {
  const rnd = seededRandom(seed);
  const script: Script = { ops: [], expected: [] };
  for (let i = 0; i < count; i++) {
    const bs = [16, 32, 64][rnd.int(3)]!;
    const tokens = Array.from({ length: rnd.int(bs * 8 + 5) }, () => (rnd.next() < 0.1 ? rnd.u32() : rnd.int(152_000)));
    const [op, want] = hashOp(tokens, bs, LORAS[rnd.int(LORAS.length)], SPACES[rnd.int(SPACES.length)]);
    script.ops.push(op);
    script.expected.push(want);
  }
  return script;
}

interface Node { local: bigint; seq: bigint; parent: Node | null }

/** A prefix forest: most prompts extend an earlier one, so stores and matches share branches like real traffic. */
function forest(rnd: Random, size: number): Node[] {
  const nodes: Node[] = [];
  for (let i = 0; i < size; i++) {
    const parent = nodes.length > 0 && rnd.next() < 0.85 ? nodes[rnd.int(nodes.length)]! : null;
    const local = rnd.u64();
    nodes.push({ local, seq: parent ? chainStep(parent.seq, local) : local, parent });
  }
  return nodes;
}

const path = (n: Node): Node[] => (n.parent ? [...path(n.parent), n] : [n]);

export interface IndexScriptOptions {
  seed: number;
  ops: number;
  slots: number;
  capacity: number;
  approxMax: number;
  universe: number;
}

/**
 * `ops` random index operations (Stored, Removed, binary batches, clears, workers leaving, approximate-mode records
 * and slot capacities, expiry, matches) with the reference model's result after each one; ends with the counters.
 */
export function indexOps(o: IndexScriptOptions): { script: Script; ref: ReferenceIndex; jumpDiffers: number } {
  const rnd = seededRandom(o.seed);
  // Capacity ops come from their own stream, so the other operations are drawn as they were before capacities existed.
  const capRnd = seededRandom(o.seed + 1000);
  // So do match jumps (a few invalid): matches from then on follow the reference's rule for that jump.
  const jumpRnd = seededRandom(o.seed + 2000);
  let jump = 1, jumpDiffers = 0;
  const nodes = forest(rnd, o.universe);
  const ref = new ReferenceIndex(o.capacity, o.approxMax, 0.8);
  const s: Script = { ops: [`I ${o.slots} ${o.capacity} ${o.approxMax} ${o.seed}`], expected: ["I 0"] };
  const emit = (op: string, want: string): void => {
    s.ops.push(op);
    s.expected.push(want);
  };
  const size = (): string => `=${ref.size}`;
  // Engine hashes: one per (slot parity, prefix, variant); variant 1 is an engine naming a prefix twice.
  const engine = (slot: number, n: Node, variant = 0): bigint => BigInt.asUintN(64, n.seq * 0x9e3779b97f4a7c15n + BigInt((slot % 2) * 7 + variant * 131));
  const batch = new EventBatchWriter();
  let now = 1000;
  const open = (slot: number): void => {
    if (ref.open.has(slot)) return;
    ref.openSlot(slot);
    emit(`O ${slot}`, `O 0 ${size()}`);
  };
  while (s.ops.length < o.ops) {
    if (jumpRnd.next() < 0.01) {
      const j = [1, 2, 3, 5, 16, 1024, 0, 1025][jumpRnd.int(8)]!;
      const ok = j >= 1 && j <= 1024;
      if (ok) jump = j;
      emit(`J ${j}`, `J ${ok ? 0 : -3}`);
    }
    const slot = rnd.int(o.slots);
    const roll = rnd.next();
    if (roll < 0.4) {
      open(slot);
      const p = path(nodes[rnd.int(nodes.length)]!);
      let held = 0;
      while (held < p.length - 1 && ref.entries.get(slot)!.has(engine(slot, p[held]!))) held++;
      const start = rnd.next() < 0.7 ? held : rnd.int(p.length);
      const variant = rnd.next() < 0.05 ? 1 : 0;
      const blocks = p.slice(start, start + 1 + rnd.int(6)).map((n) => ({ hash: engine(slot, n, variant), local: n.local }));
      if (rnd.next() < 0.02 && blocks.length > 1) blocks[1] = { ...blocks[1]!, hash: blocks[0]!.hash };
      const parent = start === 0 ? null : rnd.next() < 0.03 ? rnd.u64() : engine(slot, p[start - 1]!);
      if (rnd.next() < 0.3) {
        batch.reset();
        batch.stored(slot, parent, blocks.map((b) => b.hash), blocks.map((b) => b.local));
        ref.store(slot, parent, blocks);
        emit(`B ${hexOf(batch.bytes())}`, `B 0 1 ${size()}`);
      } else {
        const out = OUTCOME[ref.store(slot, parent, blocks)];
        emit(`S ${slot} ${parent === null ? 0 : 1} ${parent ?? 0n} ${blocks.length} ${blocks.map((b) => `${b.hash} ${b.local}`).join(" ")}`, `S ${out} ${size()}`);
      }
    } else if (roll < 0.55) {
      open(slot);
      const held = [...ref.entries.get(slot)!.keys()];
      const hashes = [...new Set(Array.from({ length: 1 + rnd.int(5) }, () =>
        held.length > 0 && rnd.next() < 0.8 ? held[rnd.int(held.length)]! : rnd.next() < 0.5 ? rnd.u64() : engine(slot + 1, nodes[rnd.int(nodes.length)]!)))];
      if (rnd.next() < 0.3) {
        batch.reset();
        batch.removed(slot, hashes);
        ref.remove(slot, hashes);
        // Sometimes a second record in the batch: another open worker cleared.
        const other = (slot + 1) % o.slots;
        if (rnd.next() < 0.3 && ref.open.has(other)) {
          batch.cleared(other);
          ref.clear(other);
        }
        emit(`B ${hexOf(batch.bytes())}`, `B 0 ${batch.records} ${size()}`);
      } else {
        const unknown = ref.remove(slot, hashes);
        emit(`R ${slot} ${hashes.length} ${hashes.join(" ")}`, `R 0 ${unknown} ${size()}`);
      }
    } else if (roll < 0.72) {
      now += rnd.next() < 0.1 ? 60_000 + rnd.int(120_000) : rnd.int(2_000);
      open(slot);
      const seqs = path(nodes[rnd.int(nodes.length)]!).map((n) => n.seq);
      const ttl = 5_000 + rnd.int(200_000);
      const done = ref.record(slot, seqs, now, ttl);
      emit(`T ${slot} ${now} ${ttl} ${seqs.length} ${seqs.join(" ")}`, `T 0 ${done} ${size()}`);
      if (capRnd.next() < 0.02) {
        // Often lifted again (0), so the approximate blocks still outgrow approxMax and pruning runs too.
        const cap = capRnd.next() < 0.7 ? 0 : 1 + capRnd.int(60);
        emit(`L ${slot} ${cap}`, `L 0 ${ref.setCapacity(slot, cap)} ${size()}`);
      }
    } else if (roll < 0.92) {
      const seqs = path(nodes[rnd.int(nodes.length)]!).map((n) => n.seq);
      const m = [...ref.findMatches(seqs, jump)].sort((a, b) => a[0] - b[0]);
      if (m.some(([sl, d]) => ref.findMatches(seqs).get(sl) !== d)) jumpDiffers++;
      emit(`M ${seqs.length} ${seqs.join(" ")}`, ["M", 0, m.length, ...m.map(([sl, d]) => `${sl}:${d}:${ref.treeSize(sl)}`)].join(" "));
    } else if (roll < 0.96) {
      now += rnd.int(30_000);
      const n = ref.expire(now);
      emit(`E ${now}`, `E 0 ${n} ${size()}`);
    } else if (roll < 0.98) {
      open(slot);
      ref.clear(slot);
      emit(`C ${slot}`, `C 0 ${size()}`);
    } else if (ref.open.has(slot)) {
      ref.closeSlot(slot);
      emit(`W ${slot}`, `W 0 ${size()}`);
    }
  }
  const c = ref.counters;
  emit("Q", ["Q", 0, ref.size, ref.ttlCount, c.applied, c.parentMissing, c.invalid, c.capacity, c.unknownRemoved, c.evicted, c.expired, c.pruned, c.capped].join(" "));
  return { script: s, ref, jumpDiffers };
}

export interface ScoreCase {
  candidates: ScoreCandidate[];
  req: Required<ScoreRequest>;
}

/** `count` random scoring requests (2–16 candidates; weights, temperatures and draws exact in binary). */
export function randomScores(seed: number, count: number): ScoreCase[] {
  const rnd = seededRandom(seed);
  return Array.from({ length: count }, () => {
    const bs = [16, 32, 64][rnd.int(3)]!;
    const isl = 1 + rnd.int(8192);
    const candidates = Array.from({ length: 2 + rnd.int(15) }, () => ({
      overlapBlocks: rnd.int(Math.floor(isl / bs) + 1), activePrefillTokens: rnd.next() < 0.3 ? 0 : rnd.int(20_000),
      activeDecodeBlocks: rnd.int(4000), activeOverlapBlocks: rnd.int(8), blockSize: bs, treeSize: rnd.int(3) * 1000,
    }));
    return { candidates, req: { isl, overlapWeight: [0.5, 1, 2][rnd.int(3)]!, temperature: [0, 0, 0.5, 1][rnd.int(4)]!, rand: rnd.int(1024) / 1024 } };
  });
}

export function scoreOp({ candidates, req }: ScoreCase): string {
  const c = candidates.map((x) => `${x.overlapBlocks} ${x.activePrefillTokens} ${x.activeDecodeBlocks} ${x.activeOverlapBlocks ?? 0} ${x.blockSize} ${x.treeSize}`);
  return `K ${req.isl} ${req.overlapWeight} ${req.temperature} ${req.rand} ${candidates.length} ${c.join(" ")}`;
}

/** The drivers' K line: status, chosen index, then each cost's IEEE-754 bits in hex (bit-for-bit comparison). */
export function scoreLine(chosen: number, costs: readonly number[]): string {
  const v = new DataView(new ArrayBuffer(8));
  const bits = costs.map((c) => {
    v.setFloat64(0, c, true);
    return v.getBigUint64(0, true).toString(16).padStart(16, "0");
  });
  return ["K", 0, chosen, ...bits].join(" ");
}
