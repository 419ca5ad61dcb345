/**
 * @module Splits a byte stream (a file, a fetch body) into text lines without holding the whole input, so trace
 * readers work the same on any runtime that has ReadableStream and TextDecoder.
 */

export interface Line {
  /** 1-based, for error messages. */
  number: number;
  /** Without the line ending (LF or CRLF). */
  text: string;
}

export type TextSource = ReadableStream<Uint8Array> | string;

/** Lines of the input; a last line without a terminating newline is still yielded. */
export async function* readLines(source: TextSource): AsyncGenerator<Line> {
  let number = 0;
  if (typeof source === "string") {
    const parts = source.split("\n");
    if (parts[parts.length - 1] === "") parts.pop();
    for (const p of parts) yield { number: ++number, text: stripCr(p) };
    return;
  }
  const decoder = new TextDecoder();
  const reader = source.getReader();
  let rest = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += decoder.decode(value, { stream: true });
      let nl = rest.indexOf("\n");
      let from = 0;
      while (nl >= 0) {
        yield { number: ++number, text: stripCr(rest.slice(from, nl)) };
        from = nl + 1;
        nl = rest.indexOf("\n", from);
      }
      rest = rest.slice(from);
    }
    rest += decoder.decode();
    if (rest.length > 0) yield { number: ++number, text: stripCr(rest) };
  } finally {
    reader.releaseLock();
  }
}

function stripCr(s: string): string {
  return s.endsWith("\r") ? s.slice(0, -1) : s;
}
