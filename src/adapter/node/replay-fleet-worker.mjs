/**
 * @module Worker-thread entry of the replay's engine fleet: TypeScript needs tsx's loader in this thread too,
 * whichever way the parent was started (kvgate bin, tsx, vitest), so it is registered before the fleet module loads.
 */
const { register } = await import("tsx/esm/api");
register();
await import("./replay-fleet-worker.ts");
