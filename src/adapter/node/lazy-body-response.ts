/**
 * @module A Response whose body stream is built the first time something reads it. On Node 20 a ReadableStream costs
 * 12–18 µs to construct and undici's Response another ~8 µs to take it, per worker answer; the gateway reads most
 * answers through the transport's direct reader (direct-source.ts) and never touches the stream.
 */

export class LazyBodyResponse extends Response {
  #make: () => ReadableStream<Uint8Array>;
  #built: Response | undefined;

  /** `make` is called at most once, by the first read of the body in any form. */
  constructor(make: () => ReadableStream<Uint8Array>, init: ResponseInit) {
    super(null, init);
    this.#make = make;
  }

  /** The same answer with its body stream; every body read goes through it, so bodyUsed and locking stay exact. */
  #response(): Response {
    return (this.#built ??= new Response(this.#make(), { status: this.status, statusText: this.statusText, headers: this.headers }));
  }

  override get body(): ReadableStream<Uint8Array<ArrayBuffer>> {
    return this.#response().body as ReadableStream<Uint8Array<ArrayBuffer>>;
  }

  override get bodyUsed(): boolean {
    return this.#built?.bodyUsed ?? false;
  }

  override arrayBuffer(): Promise<ArrayBuffer> {
    return this.#response().arrayBuffer();
  }

  override blob(): Promise<Blob> {
    return this.#response().blob();
  }

  override formData(): Promise<FormData> {
    return this.#response().formData();
  }

  override json(): Promise<unknown> {
    return this.#response().json();
  }

  override text(): Promise<string> {
    return this.#response().text();
  }

  override bytes(): Promise<Uint8Array<ArrayBuffer>> {
    const r = this.#response() as Response & { bytes?: () => Promise<Uint8Array<ArrayBuffer>> };
    return r.bytes ? r.bytes() : r.arrayBuffer().then((b) => new Uint8Array(b));
  }

  override clone(): Response {
    return this.#response().clone();
  }
}
