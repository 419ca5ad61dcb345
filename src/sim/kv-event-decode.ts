/**
 * @module Moved to src/events/kv-event-decode.ts (one decoder for the sim and the router); kept so existing imports
 * keep working.
 */
export { decodeKvEventBatch, type DecodedKvEventBatch } from "../events/kv-event-decode.ts";
