// speed.mjs -- how fast each live view answers, measured the same way for benchmarks/bench_live.py and for the
// reader's own device (the "speed" view of "How to use the interactive figures").
//
// measureView(element) drives one mounted view through its contract (element.mhaLive.run): a cold update (the
// first: the runtime and the models downloaded, compiled and run) and `warm` updates with inputs that change as
// a reader's would (a new sentence, a head toggled, a checkpoint picked, ...), and keeps each update's parts
// (clock.mjs: feeds, load, run, read, draw, other) and its session.run calls.

import { median } from "./compute.mjs";
import { filesKept } from "./fetch_files.mjs";

// A new sentence at every update, 14 to 18 tokens with [CLS] and [SEP], as a reader typing gives.
export const SPEED_SENTENCES = [
  "The animal didn't cross the street because it was too tired.",
  "A small dog barked at the mailman until he finally walked away.",
  "She read the letter twice before she put it back in the drawer.",
  "The committee approved the plan after a long and heated debate.",
  "My brother fixed the old bicycle that we found in the garage.",
  "The storm knocked out the power for most of the town last night.",
  "He forgot his umbrella, so he waited for the rain to stop.",
  "The children built a castle of sand near the edge of the water.",
  "Our teacher explained the problem again because nobody understood it.",
  "The museum opens early on Sundays and closes late on Fridays.",
  "They painted the kitchen yellow and the hallway a pale blue.",
  "The pilot told the passengers that the flight would land soon.",
];

const rotate = (xs, k) => xs.slice(k % xs.length).concat(xs.slice(0, k % xs.length));
const flipped = (mask, i) => mask.map((row, l) => row.map((on, h) => (l === i % mask.length && h === (5 * i) % row.length
  ? 1 - on : on)));

/**
 * The input of update `i` (0: the cold one) of a view, made from what it shows (`result`: mhaLive.lastResult) so
 * that it is valid for the view's own model and task; null for the timing view (its run() takes no input).
 */
export function speedInput(view, i, result) {
  switch (view) {
    case "sentence":
      return SPEED_SENTENCES[i % SPEED_SENTENCES.length] + " ".repeat(Math.floor(i / SPEED_SENTENCES.length));
    case "prune":
      return { mask: flipped(result.mask, i) };
    case "toy-compare":
      return { ids: rotate(result.ids, i + 1), types: rotate(result.types, i + 1) };
    case "induction":
      return { checkpoint: i % result.steps, mask: flipped(result.mask, i) };
    case "translate":
      return { words: rotate(result.words, i + 1) };
    case "digit":
      return result.pixels.map((x, k) => ((k * 7 + i) % 11 === 0 ? 1 - x : x));
    case "patterns":
      return [{ pattern: { kind: "full" } }, { pattern: { kind: "window", window: 4, sinks: 1 } },
        { pattern: { kind: "window", window: 8, sinks: 0 } }][i % 3];
    default:
      return null;
  }
}

/** Resolves once `done()` is true (checked every 10 ms); rejects after `ms`. */
function until(done, ms = 600_000) {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const check = () => {
      if (done()) resolve();
      else if (performance.now() - t0 > ms) reject(new Error(`no result after ${ms / 1000} s`));
      else setTimeout(check, 10);
    };
    check();
  });
}

/** What a view needs of its last result to make the next input (the induction view: its number of checkpoints). */
function resultOf(element) {
  const r = element.mhaLive.lastResult;
  return element.dataset.view === "induction" ? { ...r, steps: element.mhaLive.models.length } : r;
}

/**
 * Time one view: a cold update, then `warm` more. Each update: {total_ms (run() to its end), load_ms (cold only:
 * the view's models downloaded and made), the parts of clock.mjs, calls}. `onProgress(done, total)` after each.
 * @param {HTMLElement & {mhaLive?: object}} element  a mounted .mha-live-view
 * @param {{warm?: number, onProgress?: (done: number, total: number) => void}} [options]
 * @returns {Promise<{view, model, where, cold, warm: object[], median: Object<string, number|null>}>}  median: of the
 *   warm updates, per part (total_ms, feeds_ms, load_ms, run_ms, read_ms, draw_ms, other_ms); null: no warm update
 */
export async function measureView(element, { warm = 5, onProgress = () => {} } = {}) {
  const api = element.mhaLive;
  const view = element.dataset.view;
  const updates = [];
  for (let i = 0; i <= warm; i++) {
    const input = speedInput(view, i, resultOf(element));
    const t0 = performance.now();
    const box = view === "sentence" ? element.querySelector("textarea") : null;
    if (box) { // typed, as a reader does: the view runs after its typing delay
      const before = api.lastResult;
      box.value = input;
      box.dispatchEvent(new Event("input"));
      await until(() => api.lastResult !== before && api.lastResult.text === input);
    } else {
      await api.run(input);
    }
    const timings = api.timings;
    // warm: the update itself (a typed sentence: from the end of the typing delay); cold: from the action
    const total = i === 0 || !box ? performance.now() - t0 : timings.parts.total_ms;
    updates.push({ ...(timings.parts || {}), total_ms: total, ...(i === 0 ? { load_ms_first: timings.load_ms || 0 } : {}) });
    onProgress(i + 1, warm + 1);
    if (i === 0) await filesKept(); // the first update's files stored (a reader reads the maps meanwhile)
  }
  const [cold, ...rest] = updates;
  const keys = ["total_ms", "feeds_ms", "load_ms", "run_ms", "read_ms", "draw_ms", "other_ms"];
  return { view, model: api.model, where: element.querySelector(".mha-live-status")?.textContent || "",
    cold, warm: rest, median: Object.fromEntries(keys.map((k) => [k, rest.length ? median(rest.map((u) => u[k] || 0)) : null])) };
}
