// Worker cost (overlap-weighted prefill blocks + decode blocks) and the choice among candidates: argmin or softmax.
// Inputs and outputs are f64 columns of `maxCandidates` each in one region; see the COL_* indices.

export const COL_OVERLAP: i32 = 0; // cached prefix blocks on the candidate
export const COL_PREFILL: i32 = 1; // active prefill tokens booked on it
export const COL_DECODE: i32 = 2; // active decode blocks booked on it
export const COL_ACTIVE_OVERLAP: i32 = 3; // blocks of this prompt already counted in its active blocks
export const COL_BLOCK_SIZE: i32 = 4;
export const COL_TREE: i32 = 5; // blocks it holds in the index (tie-breaker: fewer wins)
export const COL_COST: i32 = 6; // out
export const COL_POT_PREFILL: i32 = 7; // out: prefill tokens if this request lands there
export const COL_POT_DECODE: i32 = 8; // out: decode blocks if this request lands there
export const COLUMNS: i32 = 9;

let base: usize = 0;
let colBytes: usize = 0;

export function scoreInit(region: usize, maxCandidates: i32): void {
  base = region;
  colBytes = <usize>maxCandidates << 3;
}

export function scoreBytes(maxCandidates: i32): usize {
  return <usize>COLUMNS * (<usize>maxCandidates << 3);
}

// @ts-ignore: decorator
@inline function at(col: i32, i: i32): usize {
  return base + <usize>col * colBytes + (<usize>i << 3);
}

/**
 * Fills COST / POT_* for `n` candidates of a request of `isl` tokens and returns the chosen index.
 * Temperature 0: lowest cost, ties to the smallest tree, remaining ties by `rand` in [0, 1).
 * Temperature > 0: samples p ∝ exp(-(c - cmin) / ((cmax - cmin) · t)) with `rand`.
 */
export function score(n: i32, isl: f64, weight: f64, temperature: f64, rand: f64): i32 {
  if (n <= 0) return -1;
  let cmin = Infinity, cmax = -Infinity;
  for (let i = 0; i < n; i++) {
    const bs = max(load<f64>(at(COL_BLOCK_SIZE, i)), 1);
    const overlap = load<f64>(at(COL_OVERLAP, i));
    const prefill = load<f64>(at(COL_PREFILL, i)) + max(0, isl - overlap * bs);
    const queryBlocks = Math.floor(isl / bs);
    const decode = load<f64>(at(COL_DECODE, i)) + max(0, queryBlocks - load<f64>(at(COL_ACTIVE_OVERLAP, i)));
    const cost = weight * (prefill / bs) + decode;
    store<f64>(at(COL_POT_PREFILL, i), prefill);
    store<f64>(at(COL_POT_DECODE, i), decode);
    store<f64>(at(COL_COST, i), cost);
    if (cost < cmin) cmin = cost;
    if (cost > cmax) cmax = cost;
  }
  const r = min(max(rand, 0), 0.9999999999999999);
  if (temperature <= 0) return argmin(n, cmin, r);
  if (cmax == cmin) return <i32>Math.floor(r * <f64>n);
  const scale = (cmax - cmin) * temperature;
  let sum: f64 = 0;
  for (let i = 0; i < n; i++) sum += Math.exp(-(load<f64>(at(COL_COST, i)) - cmin) / scale);
  const target = r * sum;
  let acc: f64 = 0;
  for (let i = 0; i < n; i++) {
    acc += Math.exp(-(load<f64>(at(COL_COST, i)) - cmin) / scale);
    if (target < acc) return i;
  }
  return n - 1;
}

function argmin(n: i32, cmin: f64, r: f64): i32 {
  let tmin = Infinity;
  let ties = 0;
  for (let i = 0; i < n; i++) {
    if (load<f64>(at(COL_COST, i)) != cmin) continue;
    const t = load<f64>(at(COL_TREE, i));
    if (t < tmin) { tmin = t; ties = 1; } else if (t == tmin) ties++;
  }
  let pick = <i32>Math.floor(r * <f64>ties);
  for (let i = 0; i < n; i++) {
    if (load<f64>(at(COL_COST, i)) != cmin || load<f64>(at(COL_TREE, i)) != tmin) continue;
    if (pick-- == 0) return i;
  }
  return -1;
}
