/**
 * @module Runs a parsed Jinja chat template with the globals transformers gives chat templates, and tells a
 * template's own `raise_exception` (a request the engine would reject too) apart from a failure of ours.
 */
import { Environment, Interpreter, Template } from "@huggingface/jinja";

/** The template called `raise_exception(msg)`: the engine rejects this conversation the same way. */
export class TemplateRaised extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TemplateRaised";
  }
}

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

function pad(n: number, w = 2, c = "0"): string {
  return String(n).padStart(w, c);
}

/**
 * Python's `datetime.now().strftime(fmt)` in the C locale (English names), local time — what transformers'
 * `strftime_now` gives templates such as Llama 3.1's "Today Date". The engine's clock and time zone decide the
 * real value, so prompts that embed dates only match when both agree.
 */
export function strftime(d: Date, fmt: string): string {
  return fmt.replace(/%([a-zA-Z%])/g, (all, c: string) => {
    switch (c) {
      case "Y": return String(d.getFullYear());
      case "y": return pad(d.getFullYear() % 100);
      case "m": return pad(d.getMonth() + 1);
      case "d": return pad(d.getDate());
      case "e": return pad(d.getDate(), 2, " ");
      case "B": return MONTHS[d.getMonth()]!;
      case "b": return MONTHS[d.getMonth()]!.slice(0, 3);
      case "A": return DAYS[d.getDay()]!;
      case "a": return DAYS[d.getDay()]!.slice(0, 3);
      case "H": return pad(d.getHours());
      case "I": return pad(d.getHours() % 12 || 12);
      case "p": return d.getHours() < 12 ? "AM" : "PM";
      case "M": return pad(d.getMinutes());
      case "S": return pad(d.getSeconds());
      case "j": return pad(Math.floor((d.getTime() - new Date(d.getFullYear(), 0, 1).getTime()) / 86_400_000) + 1, 3);
      case "%": return "%";
      default: return all;
    }
  });
}

/** Python's `range`, which some templates call to index messages. */
function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) [start, stop] = [0, start];
  if (step === 0) throw new TemplateRaised("range() arg 3 must not be zero");
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

const GLOBALS: Record<string, unknown> = {
  true: true, false: false, none: null, True: true, False: false, None: null,
  range,
  raise_exception: (msg: unknown) => {
    throw new TemplateRaised(String(msg));
  },
};

/** Names the render context may not redefine (the library refuses a second declaration of a name). */
export const RESERVED_GLOBALS: ReadonlySet<string> = new Set([...Object.keys(GLOBALS), "strftime_now"]);

/**
 * transformers' `{% generation %}…{% endgeneration %}` (assistant-token masks) renders its body unchanged; the
 * JS Jinja has no such tag, so it becomes an `if true` block with the same whitespace control.
 */
function dropGenerationTags(src: string): string {
  return src
    .replace(/(\{%-?\s*)endgeneration(\s*-?%\})/g, "$1endif$2")
    .replace(/(\{%-?\s*)generation(\s*-?%\})/g, "$1if true$2");
}

export interface CompiledTemplate {
  readonly source: string;
  render(context: Record<string, unknown>): string;
}

/** Parses once (a few ms for a large template); rendering is then per request. */
export function compileTemplate(source: string, now: () => Date = () => new Date()): CompiledTemplate {
  const parsed = new Template(dropGenerationTags(source)).parsed;
  return {
    source,
    render(context) {
      const env = new Environment();
      for (const [k, v] of Object.entries(GLOBALS)) env.set(k, v);
      env.set("strftime_now", (fmt: unknown) => strftime(now(), String(fmt)));
      for (const [k, v] of Object.entries(context)) if (!RESERVED_GLOBALS.has(k)) env.set(k, v);
      const out = new Interpreter(env).run(parsed) as { value: unknown };
      return String(out.value);
    },
  };
}
