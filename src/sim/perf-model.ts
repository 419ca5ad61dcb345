/**
 * @module Step timing of the simulated engine: the Dynamo mocker's default polynomials (times in ms), divided by
 * the speed-up factors. A step that mixes prefill chunks and decodes costs the sum of both parts.
 */

/** Prefill of `tokens` new (uncached) tokens in one step: 4.209989e-7·T² + 1.518344e-2·T + 16.50142 ms. */
export function prefillMs(tokens: number): number {
  if (tokens <= 0) return 0;
  return 4.209989e-7 * tokens * tokens + 1.518344e-2 * tokens + 16.50142;
}

/** One decode step at KV occupancy `p` (active blocks / all blocks): −25.74·p² + 54.01·p + 5.74 ms, at least 1 ms. */
export function decodeMs(p: number): number {
  return Math.max(1, -25.74 * p * p + 54.01 * p + 5.74);
}

export interface StepShape {
  /** New tokens computed by prefill chunks in the step. */
  prefillTokens: number;
  /** Sequences decoding one token in the step. */
  decodes: number;
  /** Active KV blocks / all blocks when the step runs. */
  occupancy: number;
}

export interface SpeedUp {
  speedupRatio: number;
  decodeSpeedupRatio: number;
}

/** Duration of one engine step in ms. */
export function stepMs(s: StepShape, speed: SpeedUp): number {
  const prefill = s.prefillTokens > 0 ? prefillMs(s.prefillTokens) / speed.speedupRatio : 0;
  const decode = s.decodes > 0 ? decodeMs(s.occupancy) / (speed.speedupRatio * speed.decodeSpeedupRatio) : 0;
  return prefill + decode;
}
