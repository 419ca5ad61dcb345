/**
 * @module The SyncBus's key-value buckets and object store on Node (@nats-io/kv, @nats-io/obj 3.4.0): what replicas keep
 * beside the event stream (sessions, the worker registry, index snapshots). Apart from nats-bus.ts, which owns the connection.
 */
import type { SyncKv, SyncKvOptions, SyncObjectInfo, SyncObjects } from "../../replicas/sync-bus.ts";
import { natsJetstream, natsKvModule, natsObjModule } from "./nats-modules.ts";

type Conn = Awaited<ReturnType<typeof import("@nats-io/transport-node")["connect"]>>;
type Kv = Awaited<ReturnType<InstanceType<typeof import("@nats-io/kv")["Kvm"]>["create"]>>;
type Store = Awaited<ReturnType<InstanceType<typeof import("@nats-io/obj")["Objm"]>["create"]>>;

/** What the buckets need of the bus: its connection once it is up, and whether it was closed. */
export interface ConnSource {
  /** Resolves with the connection once connected; rejects once the bus is closed. */
  up(): Promise<Conn>;
  /** The connection while connected, else undefined. */
  current(): Conn | undefined;
  readonly closed: boolean;
  log(line: string): void;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One handle per connection: a reconnect keeps the connection object, a new one (never here) would reopen. */
function perConn<T>(open: (nc: Conn) => Promise<T>): (nc: Conn) => Promise<T> {
  let at: Conn | undefined;
  let p: Promise<T> | undefined;
  return (nc) => {
    if (at !== nc || !p) {
      at = nc;
      p = open(nc);
      p.catch(() => {
        p = undefined;
      });
    }
    return p;
  };
}

export function natsKv(src: ConnSource, bucket: string, o: SyncKvOptions): SyncKv {
  const open = perConn(async (nc): Promise<Kv> => {
    const { Kvm } = await natsKvModule();
    const { StorageType } = await natsJetstream();
    return new Kvm(nc).create(bucket, { ttl: o.ttlMs, history: 1, maxValueSize: o.maxValueBytes, storage: StorageType.File });
  });
  return {
    async put(key, value) {
      // Not held while NATS is down: callers keep what must get through (the registry) and drop the rest (sessions).
      const nc = src.closed ? undefined : src.current();
      if (!nc) return false;
      try {
        await (await open(nc)).put(key, value);
        return true;
      } catch {
        return false;
      }
    },
    async entries() {
      const kv = await open(await src.up());
      const out: [string, Uint8Array][] = [];
      for await (const k of await kv.keys()) {
        const e = await kv.get(k);
        if (e && e.operation === "PUT") out.push([k, e.value]);
      }
      return out;
    },
    watch(onEntry) {
      void (async () => {
        let last = 0;
        while (!src.closed) {
          try {
            const kv = await open(await src.up());
            const it = await kv.watch(last > 0 ? { resumeFromRevision: last + 1 } : {});
            for await (const e of it) {
              last = e.revision;
              onEntry(e.key, e.operation === "PUT" ? e.value : undefined);
            }
          } catch (e) {
            if (!src.closed) src.log(`NATS bucket ${bucket}: ${(e as Error).message}`);
          }
          await pause(250);
        }
      })();
    },
  };
}

export function natsObjects(src: ConnSource, bucket: string, o: { maxBytes: number }): SyncObjects {
  const open = perConn(async (nc): Promise<Store> => {
    const { Objm } = await natsObjModule();
    const { StorageType } = await natsJetstream();
    // A day's age limit: a replica that left for good takes its snapshot with it.
    return new Objm(nc).create(bucket, { storage: StorageType.File, max_bytes: o.maxBytes, ttl: 86_400_000_000_000 });
  });
  const store = async () => open(await src.up());
  return {
    async put(name, data, metadata) {
      await (await store()).putBlob({ name, metadata: { ...metadata } }, data);
    },
    async list(): Promise<SyncObjectInfo[]> {
      const infos = await (await store()).list();
      return infos.filter((i) => !i.deleted).map((i) => ({ name: i.name, size: i.size, metadata: i.metadata ?? {} }));
    },
    async get(name) {
      return (await (await store()).getBlob(name)) ?? undefined;
    },
  };
}
