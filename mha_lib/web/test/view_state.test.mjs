// The load states of a live view (view_state.mjs): the moves a view makes, and the ones refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import { LOAD_MOVES, nextLoadState } from "../view_state.mjs";

test("a view's loads: first action, arrival, failure, try again, a late arrival", () => {
  let state = "idle";
  for (const to of ["loading", "loaded"]) state = nextLoadState(state, to);
  assert.equal(state, "loaded");
  for (const path of [["idle", "loading", "failed", "idle", "loading", "loaded"], ["idle", "failed", "loaded"],
    ["idle", "loading", "loaded", "failed", "idle"]]) {
    path.reduce((from, to) => nextLoadState(from, to));
  }
  assert.equal(nextLoadState("loading", "loading"), "loading"); // staying put
});

test("a move the states do not list is refused, naming both", () => {
  assert.throws(() => nextLoadState("idle", "loaded"), /cannot move from "idle" to "loaded"/);
  assert.throws(() => nextLoadState("loaded", "loading"), /cannot move from "loaded" to "loading"/);
  assert.throws(() => nextLoadState("loaded", "idle"), /cannot move/);
  assert.throws(() => nextLoadState("busy", "idle"), /one of idle, loading, loaded, failed, got "busy"/);
  assert.throws(() => nextLoadState("idle", "__proto__"), /one of/);
});

test("every state's moves lead to states", () => {
  for (const moves of Object.values(LOAD_MOVES)) for (const to of moves) assert.ok(Object.hasOwn(LOAD_MOVES, to));
});
