/** The warm-restart snapshot bytes: round trip, and every kind of damage refused with its reason (nothing half-read). */
import { describe, expect, it } from "vitest";
import { decodeSnapshot, encodeSnapshot, SNAPSHOT_FORMAT, snapshotFormat, SnapshotError, type ReplicaSnapshot } from "../../src/replicas/snapshot-format.ts";

function sample(): ReplicaSnapshot {
  const records = new Uint8Array(3 * 32);
  for (let i = 0; i < records.length; i++) records[i] = (i * 37) & 0xff;
  return {
    replica: "r1", streamSeq: 1234, takenAt: 1_700_000_000_000,
    index: { slots: [{ slot: 0, worker: "w1", dpRank: 0 }, { slot: 3, worker: "w2", dpRank: 1 }], records },
    sessions: [["conversation-ä", "w1", 0]], streams: [["w1", 0, 41]],
  };
}

async function refusal(bytes: Uint8Array): Promise<string> {
  try {
    await decodeSnapshot(bytes);
  } catch (e) {
    expect(e).toBeInstanceOf(SnapshotError);
    expect((e as SnapshotError).code).toBe("KVGATE_ERR_SNAPSHOT");
    return (e as SnapshotError).reason;
  }
  throw new Error("decoded");
}

describe("snapshot format", () => {
  it("should round-trip every table and the records byte for byte", async () => {
    const s = sample();
    const bytes = await encodeSnapshot(s);
    expect(snapshotFormat(bytes)).toBe(SNAPSHOT_FORMAT);
    expect(await decodeSnapshot(bytes)).toEqual(s);
  });

  it("should refuse another format version as format, and damage of any part as corrupt", async () => {
    const bytes = await encodeSnapshot(sample());
    const other = bytes.slice();
    new DataView(other.buffer).setUint32(4, SNAPSHOT_FORMAT + 1, true);
    expect(await refusal(other)).toBe("format");
    expect(await refusal(new TextEncoder().encode("hello, not a snapshot"))).toBe("corrupt");
    expect(await refusal(bytes.subarray(0, bytes.length - 1))).toBe("corrupt");
    // One flipped bit anywhere after the magic and version (header, tables, records, digest) is caught.
    for (const at of [9, 30, 40, bytes.length - 50, bytes.length - 1]) {
      const bad = bytes.slice();
      bad[at]! ^= 1;
      expect(await refusal(bad), `byte ${at}`).toBe("corrupt");
    }
  });
});
