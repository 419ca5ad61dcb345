/** @module Public surface of engine KV-event ingestion (runtime-neutral; the ZeroMQ sockets are in src/zmq). */
export { KvEventHub, type IngestTotals, type StreamStatus } from "./kv-event-hub.ts";
export { KvEventStream, type KvEventStreamOptions, type ReplaySource, type StreamNotice, type StreamPhase } from "./kv-event-stream.ts";
export { emptyCounters, type IngestCounters } from "./ingest-counters.ts";
export { DEFAULT_TIER_WEIGHTS, tierOf, type IngestPolicyOptions, type StorageTier, type TierWeights } from "./ingest-policy.ts";
export { BatchPreparer, type PreparedBatch } from "./batch-preparer.ts";
export { decodeKvEventBatch, type DecodedKvEventBatch } from "./kv-event-decode.ts";
export { MEDIUM_GPU, type KvCacheEvent, type KvEventBatch, type BlockStoredEvent, type BlockRemovedEvent, type AllBlocksClearedEvent } from "./kv-event-types.ts";
export { encodeSeq, parseLiveMessage, parseReplayReply, readSeq, replayRequest, END_SEQ, type SeqFrame } from "./zmq-frames.ts";
export { endpointForRank } from "./dp-endpoint.ts";
export type { KvEventTransport, KvEventTransportFactory, ZmqAttachment, ZmqConnectionCounters } from "./kv-event-transport.ts";
export { decodeKvFrames, encodeKvFrames, frameSize, KV_FRAMES_CONTENT_TYPE, type KvFrame } from "./kv-frames.ts";
