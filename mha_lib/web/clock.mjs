// clock.mjs -- where an update's time goes (issue 49), and yielding to the page between long steps.
//
// Every update of a view (a new sentence, a head toggled, a checkpoint picked) is timed in four parts, the
// same for every view and backend: `feeds` (the inputs made: tokenizing, word vectors fetched, tensors),
// `load` (a layer's file that the run waited for: fetched and its session made), `run` (session.run, each call:
// in the browser from handing the feeds to onnxruntime-web's worker to its answer), `read` (the outputs turned into maps and readings) and `draw` (the canvases and texts). The view
// keeps the last update's parts in element.mhaLive.timings.parts; benchmarks/bench_live.py reads them, and
// the page shows them under each view when its address holds ?mha-debug=1.

/** Resolves in a later task: long work split at it leaves the page room to handle input and paint. */
export function nextTask() {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/** The parts of one update, in ms (see the top of this file). */
export class Clock {
  constructor() {
    this.started = performance.now();
    this.parts = { feeds_ms: 0, load_ms: 0, run_ms: 0, read_ms: 0, draw_ms: 0 };
    this.runs = []; // ms of each session.run, in order (one per layer for a model split by layer)
    this.calls = []; // each session.run: {file, dims: {input: dims}, ms} (benchmarks/bench_live.py replays them natively)
  }

  /**
   * `await session.run(feeds, ...rest)`, timed as a run part and listed with the session's file (session.file: the
   * browser's files) and its inputs' dims.
   */
  async run(session, feeds, ...rest) {
    const t0 = performance.now();
    const dims = Object.fromEntries(Object.entries(feeds).map(([name, x]) => [name, Array.from(x.dims, Number)]));
    try {
      return await session.run(feeds, ...rest);
    } finally {
      const ms = performance.now() - t0;
      this.add("run", ms);
      this.calls.push({ file: session.file || null, dims, ms });
    }
  }

  /** Add `ms` to a part ("feeds", "load" (a layer's file awaited), "run", "read" or "draw"); a run is also listed. */
  add(part, ms) {
    this.parts[`${part}_ms`] += ms;
    if (part === "run") this.runs.push(ms);
  }

  /** `fn()` (sync), its time added to `part`. */
  time(part, fn) {
    const t0 = performance.now();
    try {
      return fn();
    } finally {
      this.add(part, performance.now() - t0);
    }
  }

  /** `await fn()`, its time added to `part`. */
  async timeAsync(part, fn) {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      this.add(part, performance.now() - t0);
    }
  }

  /** {total_ms, feeds_ms, load_ms, run_ms, read_ms, draw_ms, other_ms, runs}: other_ms is the rest (queues, the
   * page's other tasks, the view's own texts). */
  done() {
    const total = performance.now() - this.started;
    const known = Object.values(this.parts).reduce((a, b) => a + b, 0);
    return { total_ms: total, ...this.parts, other_ms: Math.max(0, total - known), runs: this.runs.slice(),
      calls: this.calls.slice() };
  }
}

/** A clock that keeps nothing: the default where a caller does not time its parts. */
export const NO_CLOCK = { add() {}, time: (_part, fn) => fn(), timeAsync: (_part, fn) => fn(),
  run: (session, feeds, ...rest) => session.run(feeds, ...rest) };

/** Whether the page's address asks for the timing readout under each view (?mha-debug=1). */
export function debugAsked() {
  try {
    return new URLSearchParams(globalThis.location ? globalThis.location.search : "").get("mha-debug") === "1";
  } catch {
    return false;
  }
}
