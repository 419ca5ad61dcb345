/** @module Public surface of the simulated engine: what the default fleet, the replay bench and the CLI import. */
export { SimEngine, createSimEngine, type SimEngineDeps, type SimHandle, type SimListener, type SimRequest, type SimResult, type FinishReason } from "./sim-engine.ts";
export { SIM_DEFAULTS, resolveSimOptions, type SimEngineOptions, type ResolvedSimOptions } from "./sim-options.ts";
export { createSimApp } from "./sim-app.ts";
export { VirtualClock, realClock, unixSeconds, type SimClock, type CancelTimer } from "./sim-clock.ts";
export { wasmBlockHasher, referenceBlockHasher, type BlockHasher, type BlockHashes } from "./block-hasher.ts";
export { KvCache } from "./kv-cache.ts";
export { callbackSink, KvBatchSequencer, type KvEventSink, type EncodedKvBatch, type BatchIdentity } from "./kv-event-sink.ts";
export { HttpPushSink, type HttpPushSinkOptions, type HttpPushStats } from "./http-push-sink.ts";
export { encodeKvEventBatch, type KvEventEncoding } from "./kv-event-codec.ts";
export { decodeKvEventBatch, type DecodedKvEventBatch } from "../events/kv-event-decode.ts";
export { type KvCacheEvent, type KvEventBatch, type BlockStoredEvent, type BlockRemovedEvent, type AllBlocksClearedEvent, MEDIUM_GPU } from "./kv-events.ts";
export { simEncode, simDecode, simChatTokens, simCompletionTokens, renderSimChat, fillerToken, FILLER_TEXT } from "./sim-tokenizer.ts";
export { prefillMs, decodeMs, stepMs } from "./perf-model.ts";
export { runSimCommand, parseSimArgs, SIM_USAGE, type SimHost, type SimCommandConfig, type RunningSim } from "./sim-command.ts";
