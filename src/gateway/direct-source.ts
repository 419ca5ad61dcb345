/**
 * @module Streamed bodies driven without their ReadableStream, where a runtime adapter can. Downstream, an adapter
 * that writes to its own socket (Node's) takes the SSE relay's source from the Response and pulls chunks straight
 * into the socket; upstream, a transport that reads its own socket (Node's) lets the relay read a worker's body
 * from it. Both save a web-stream enqueue and read per chunk and never make the Response build its body stream;
 * runtimes that offer neither read the streams as usual.
 */

/** Where a pulled chunk goes: the shape of a ReadableStream controller, so the producer serves both. */
export interface ChunkSink {
  enqueue(chunk: Uint8Array): void;
  close(): void;
}

/**
 * pull() resolves once it has enqueued at least one chunk or closed the sink; when it did neither the body was
 * cancelled (the client went away) and nothing more comes. cancel() stops it from the consumer's side.
 */
export interface DirectSource {
  pull(sink: ChunkSink): Promise<void>;
  cancel(): void;
}

/** What the relay reads a worker's body through: a ReadableStream reader or a transport's own. */
export type BodyReader = Pick<ReadableStreamDefaultReader<Uint8Array>, "read" | "cancel">;

const SOURCE = Symbol.for("kvgate.direct-source");
const BODY = Symbol.for("kvgate.direct-body");

type WithSource = { [SOURCE]?: () => DirectSource | undefined };
type WithBody = { [BODY]?: () => BodyReader | undefined };

/**
 * Lets an adapter drive `res`'s body through `claim()`, which hands the source over once, and only while nobody
 * reads the body stream (the producer then refuses the stream: one consumer only).
 */
export function attachDirectSource(res: Response, claim: () => DirectSource | undefined): void {
  Object.defineProperty(res, SOURCE, { value: claim, configurable: true });
}

/** The source behind `res`'s body, if it has one and its stream is not read; undefined otherwise. */
export function takeDirectSource(res: Response): DirectSource | undefined {
  return (res as WithSource)[SOURCE]?.();
}

/** A body stream over `source`, for a consumer that cannot take the source itself. */
export function sourceStream(source: DirectSource): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({ pull: (c) => source.pull(c), cancel: () => source.cancel() }, { highWaterMark: 0 });
}

/** A transport lets the gateway read `res`'s body through `open()` (undefined once its stream is read). */
export function attachDirectBody(res: Response, open: () => BodyReader | undefined): void {
  Object.defineProperty(res, BODY, { value: open, configurable: true });
}

/** A reader of `res`'s body: the transport's own when it offers one, else its stream's; undefined without a body. */
export function openBody(res: Response): BodyReader | undefined {
  return (res as WithBody)[BODY]?.() ?? res.body?.getReader();
}

/** Whether `res` has a body, asked without making a lazily built Response (as @hono/node-server's) build it. */
export function hasBody(res: Response): boolean {
  return (res as WithBody)[BODY] !== undefined || res.body !== null;
}
