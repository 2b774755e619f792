// view_state.mjs -- the load states of a live view, and the moves between them (pure: no DOM).
//
// A view's models are "idle" (nothing fetched yet), "loading", "loaded" or "failed". The reader's first action
// takes idle to loading; the models arrive (loaded) or a file fails (failed); a browser that cannot run the view
// at all fails from idle, when the view asks what the first action would fetch. "Try again" takes failed back to
// idle, so the next action loads again. Because the download note is asked for while a load may already run,
// a load may fail after it finished (loaded -> failed) and a load still in flight may finish after a failure
// was shown (failed -> loaded). What is not a load state stays beside it in View: `spoke` (a run()'s message is
// on the status line) and `running` (how many updates are in flight).

/** The load states, and the states each one may move to. */
export const LOAD_MOVES = Object.freeze({
  idle: Object.freeze(["loading", "failed"]),
  loading: Object.freeze(["loaded", "failed"]),
  loaded: Object.freeze(["failed"]),
  failed: Object.freeze(["idle", "loaded"]),
});

/**
 * The state after moving from `from` to `to` (staying put is allowed).
 * @param {string} from  a key of LOAD_MOVES
 * @param {string} to    a key of LOAD_MOVES
 * @returns {string} to
 * @throws {Error} a state that is not one of LOAD_MOVES, or a move it does not list (naming both)
 */
export function nextLoadState(from, to) {
  if (!Object.hasOwn(LOAD_MOVES, from) || !Object.hasOwn(LOAD_MOVES, to)) {
    throw new Error(`a view's load state is one of ${Object.keys(LOAD_MOVES).join(", ")}, got "${from}" -> "${to}"`);
  }
  if (from !== to && !LOAD_MOVES[from].includes(to)) {
    throw new Error(`a view cannot move from "${from}" to "${to}" (from "${from}": ${LOAD_MOVES[from].join(", ")})`);
  }
  return to;
}
