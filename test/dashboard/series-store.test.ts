/** The page's series merge: an incremental answer replaces the still-open interval, appends new ones, and the window trims. */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/routing/index.ts";
import { StatsTimeline } from "../../src/gateway/stats-timeline.ts";
import { SeriesStore } from "../../src/dashboard/client/series-store.ts";

describe("SeriesStore", () => {
  it("follows the gateway's timeline through incremental polls exactly", () => {
    const clock = new ManualClock(0);
    const tl = new StatsTimeline(clock.now, { intervalMs: 1_000, buckets: 4 });
    const store = new SeriesStore();
    const poll = (): void => store.merge(tl.series(store.since), clock.now(), tl.windowMs);
    tl.routed(10, 5, 0);
    poll();
    expect(store.series.t).toEqual([0]);
    // The open interval grows after the poll: the next poll (since = its start) replaces it.
    tl.routed(10, 10, 0);
    clock.advance(2_500);
    tl.routed(10, 0, 1);
    poll();
    expect(store.series).toEqual(tl.series());
    expect(store.series.requests).toEqual([2, 0, 1]);
    expect(store.points("predicted_hit_rate")).toBe(2);
    // Past the window: the page drops what the gateway dropped.
    clock.advance(3_000);
    tl.routed(4, 4, 0);
    poll();
    expect(store.series).toEqual(tl.series());
    expect(store.series.t).toEqual([2_000, 3_000, 4_000, 5_000]);
  });

  it("empties when everything held is older than the window", () => {
    const store = new SeriesStore();
    const tl = new StatsTimeline(() => 0, { intervalMs: 1_000, buckets: 2 });
    store.merge(tl.series(), 0, 2_000);
    store.merge({ ...tl.series(), t: [], requests: [] } as never, 10_000, 2_000);
    expect(store.series.t).toEqual([]);
    expect(store.since).toBeUndefined();
  });
});
