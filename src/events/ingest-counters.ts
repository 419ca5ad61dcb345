/**
 * @module What KV-event ingestion counts, per stream and in total: a flat object of numbers that the gateway's
 * /metrics renders as-is, so a router that drops events, falls behind or reads a foreign dialect is visible.
 */

export interface IngestCounters {
  /** Messages received on the live socket (valid or not). */
  messages: number;
  /** Engine batches applied to the index (live or replayed). */
  batches: number;
  storedEvents: number;
  removedEvents: number;
  clearedEvents: number;
  blocksStored: number;
  blocksRemoved: number;
  /** Events with a tag this decoder does not know (newer engine kinds), skipped. */
  unknownEvents: number;
  /** Stored events whose block size differs from the worker's: dropped, never indexed. */
  droppedBlockSize: number;
  /** Stored events whose token count is not blocks × block size. */
  droppedTokenCount: number;
  /** Events on a storage tier that is not indexed (host / disk / external). */
  droppedTier: number;
  /** Events of a KV-cache group that is not the main full-attention one. */
  droppedGroup: number;
  /** Stored events whose extra_keys carry multimodal hashes, cache_salt or prompt embeds (not hashed by kvgate yet). */
  droppedExtraKeys: number;
  /** Stored events with a legacy lora_id but no lora_name (the adapter, hence the hash seed, is unknown). */
  droppedLora: number;
  /** Events seen per storage tier. */
  deviceEvents: number;
  hostEvents: number;
  diskEvents: number;
  externalEvents: number;
  /** Messages rejected before any state changed: bad frame count, bad seq frame, undecodable payload. */
  corruptFrames: number;
  /** Batches at or below the last applied sequence number (replay overlap), dropped. */
  staleBatches: number;
  /** Sequence gaps seen on the live socket. */
  gaps: number;
  replayRequests: number;
  replayedBatches: number;
  /** Replays that failed: no replay socket, timeout, refused, or ended before the gap was filled. */
  replayFailures: number;
  /** Replays whose first batch came after the one asked for (the engine's buffer no longer held it). */
  replayTooOld: number;
  /** Engine restarts detected from the sequence number going back. */
  restarts: number;
  /** Times a stream's entries were cleared and the worker marked cold (lost events could not be recovered). */
  coldMarks: number;
  /** Times a cold stream became trustworthy again. */
  rebuilt: number;
  /** Live messages dropped while a replay ran because the hold buffer was full (recovered by the next replay). */
  overflowed: number;
  /** Valid batches the index refused with an error (slots exhausted, core trap). */
  applyErrors: number;
}

export type CounterKey = keyof IngestCounters;

export function emptyCounters(): IngestCounters {
  return {
    messages: 0, batches: 0, storedEvents: 0, removedEvents: 0, clearedEvents: 0, blocksStored: 0, blocksRemoved: 0,
    unknownEvents: 0, droppedBlockSize: 0, droppedTokenCount: 0, droppedTier: 0, droppedGroup: 0, droppedExtraKeys: 0,
    droppedLora: 0, deviceEvents: 0, hostEvents: 0, diskEvents: 0, externalEvents: 0, corruptFrames: 0, staleBatches: 0,
    gaps: 0, replayRequests: 0, replayedBatches: 0, replayFailures: 0, replayTooOld: 0, restarts: 0, coldMarks: 0,
    rebuilt: 0, overflowed: 0, applyErrors: 0,
  };
}

/** Adds every counter of `from` into `into`. */
export function addCounters(into: IngestCounters, from: Readonly<Partial<IngestCounters>>): IngestCounters {
  for (const k in from) {
    const v = from[k as CounterKey];
    if (v) into[k as CounterKey] += v;
  }
  return into;
}

/** Per-batch event statistics, added to a stream's counters only when the batch is applied. */
export type BatchDelta = Pick<IngestCounters, "storedEvents" | "removedEvents" | "clearedEvents" | "blocksStored" |
  "blocksRemoved" | "unknownEvents" | "droppedBlockSize" | "droppedTokenCount" | "droppedTier" | "droppedGroup" |
  "droppedExtraKeys" | "droppedLora" | "deviceEvents" | "hostEvents" | "diskEvents" | "externalEvents">;

export function emptyDelta(): BatchDelta {
  return {
    storedEvents: 0, removedEvents: 0, clearedEvents: 0, blocksStored: 0, blocksRemoved: 0, unknownEvents: 0,
    droppedBlockSize: 0, droppedTokenCount: 0, droppedTier: 0, droppedGroup: 0, droppedExtraKeys: 0, droppedLora: 0,
    deviceEvents: 0, hostEvents: 0, diskEvents: 0, externalEvents: 0,
  };
}

/**
 * Adds a batch's delta into `into`, once per applied batch. Spelled out: a loop over the key names costs keyed
 * (megamorphic) loads and stores, about half a microsecond per batch.
 */
export function addDelta(into: IngestCounters, d: Readonly<BatchDelta>): void {
  into.storedEvents += d.storedEvents;
  into.removedEvents += d.removedEvents;
  into.clearedEvents += d.clearedEvents;
  into.blocksStored += d.blocksStored;
  into.blocksRemoved += d.blocksRemoved;
  into.unknownEvents += d.unknownEvents;
  into.droppedBlockSize += d.droppedBlockSize;
  into.droppedTokenCount += d.droppedTokenCount;
  into.droppedTier += d.droppedTier;
  into.droppedGroup += d.droppedGroup;
  into.droppedExtraKeys += d.droppedExtraKeys;
  into.droppedLora += d.droppedLora;
  into.deviceEvents += d.deviceEvents;
  into.hostEvents += d.hostEvents;
  into.diskEvents += d.diskEvents;
  into.externalEvents += d.externalEvents;
}

/** Sets `into` from the core's per-batch counters: 16 words at `words[at]`, in BatchDelta's key order (ENGINE_DELTA_KEYS). */
export function deltaFromWords(into: BatchDelta, words: Uint32Array, at: number): BatchDelta {
  into.storedEvents = words[at]!;
  into.removedEvents = words[at + 1]!;
  into.clearedEvents = words[at + 2]!;
  into.blocksStored = words[at + 3]!;
  into.blocksRemoved = words[at + 4]!;
  into.unknownEvents = words[at + 5]!;
  into.droppedBlockSize = words[at + 6]!;
  into.droppedTokenCount = words[at + 7]!;
  into.droppedTier = words[at + 8]!;
  into.droppedGroup = words[at + 9]!;
  into.droppedExtraKeys = words[at + 10]!;
  into.droppedLora = words[at + 11]!;
  into.deviceEvents = words[at + 12]!;
  into.hostEvents = words[at + 13]!;
  into.diskEvents = words[at + 14]!;
  into.externalEvents = words[at + 15]!;
  return into;
}
