/**
 * @module The LoRA adapters the fleet knows (configured `adapters=` or discovered in /v1/models with a `parent`),
 * each with its base model: bounded by configuration, so requests naming adapters cannot grow it.
 */
import { KvgateError } from "../core/errors.ts";

export class AdapterCatalog {
  readonly #parents = new Map<string, string>();

  constructor(readonly max: number) {}

  /** Records `name` as an adapter of `parent`; a known adapter keeps its first parent. Throws past `max`. */
  add(name: string, parent: string): void {
    const known = this.#parents.get(name);
    if (known !== undefined) {
      if (known !== parent) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `adapter ${name} is already an adapter of ${known}, not ${parent}`, { adapter: name });
      return;
    }
    if (this.#parents.size >= this.max) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `more than --max-adapters ${this.max} LoRA adapters in the fleet (adding ${name})`, { adapter: name });
    }
    this.#parents.set(name, parent);
  }

  /** Whether every name can be added (checked before a worker is registered, so a refused one leaves nothing). */
  check(adapters: readonly (readonly [string, string])[]): void {
    let fresh = 0;
    for (const [name, parent] of adapters) {
      const known = this.#parents.get(name);
      if (known === undefined) fresh++;
      else if (known !== parent) throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `adapter ${name} is already an adapter of ${known}, not ${parent}`, { adapter: name });
    }
    if (this.#parents.size + fresh > this.max) {
      throw new KvgateError("KVGATE_ERR_BAD_ARGUMENT", `more than --max-adapters ${this.max} LoRA adapters in the fleet`);
    }
  }

  parentOf(name: string): string | undefined {
    return this.#parents.get(name);
  }

  /** (adapter, parent) pairs, sorted by adapter name. */
  list(): [string, string][] {
    return [...this.#parents].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  }
}
