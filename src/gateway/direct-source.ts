/**
 * @module A streamed body the gateway makes (the SSE relay's) can also be driven without its ReadableStream: a
 * runtime adapter that writes to its own socket (Node's) asks the stream for its source and pulls chunks straight
 * into the socket, saving a web-stream read and enqueue per chunk. Runtimes that do not ask read the stream as usual.
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

const SOURCE = Symbol.for("kvgate.direct-source");

type WithSource = ReadableStream<Uint8Array> & { [SOURCE]?: DirectSource };

/** Lets an adapter drive `stream` through `source` (both read the same producer; only one may be used). */
export function attachDirectSource(stream: ReadableStream<Uint8Array>, source: DirectSource): void {
  Object.defineProperty(stream, SOURCE, { value: source, configurable: true });
}

/**
 * The source behind `stream`, if it has one and nobody reads the stream yet; the stream is locked then, so the
 * producer has one consumer only.
 */
export function takeDirectSource(stream: ReadableStream<Uint8Array> | null | undefined): DirectSource | undefined {
  const source = (stream as WithSource | null | undefined)?.[SOURCE];
  if (!stream || !source || stream.locked) return undefined;
  stream.getReader();
  return source;
}
