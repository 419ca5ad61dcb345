/**
 * @module The NATS client modules, each imported once on first use (only a gateway started with --nats loads them).
 * A dynamic import() runs module resolution again every time it is evaluated, even for a module already loaded (under
 * a loader such as tsx, a round trip to the loader's thread): it must not sit on a per-message path.
 */
type Lazy<T> = () => Promise<T>;

function once<T>(load: () => Promise<T>): Lazy<T> {
  let p: Promise<T> | undefined;
  return () => (p ??= load());
}

export const natsTransport: Lazy<typeof import("@nats-io/transport-node")> = once(() => import("@nats-io/transport-node"));
export const natsJetstream: Lazy<typeof import("@nats-io/jetstream")> = once(() => import("@nats-io/jetstream"));
export const natsKvModule: Lazy<typeof import("@nats-io/kv")> = once(() => import("@nats-io/kv"));
export const natsObjModule: Lazy<typeof import("@nats-io/obj")> = once(() => import("@nats-io/obj"));
