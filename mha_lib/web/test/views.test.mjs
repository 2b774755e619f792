// The one list of views: view_contract.json's keys. mha_live.mjs's VIEWS (the classes that draw them) must name the
// same views (mha_lib.live.VIEWS is read from the contract itself). Run: node --test mha_lib/web/test/
import { test } from "node:test";
import assert from "node:assert/strict";
import { VIEW_CONTRACT } from "../contract.mjs";
import { VIEWS } from "../mha_live.mjs";

test("mha_live.mjs draws exactly the views of view_contract.json", () => {
  const contract = Object.keys(VIEW_CONTRACT.views).sort();
  assert.ok(contract.length >= 10, `only ${contract.length} views in the contract`);
  assert.deepEqual(Object.keys(VIEWS).sort(), contract);
  for (const [name, View] of Object.entries(VIEWS)) assert.equal(typeof View, "function", `${name} has no class`);
});
