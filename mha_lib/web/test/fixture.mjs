// What mha_lib computes, for the tests that compare the browser code with it (the cases marked "mha_lib").
//
// pytest (tests/test_web.py) writes the fixture and points MHA_WEB_FIXTURE at it. Run alone
// (`node --test mha_lib/web/test/`), these tests make it themselves: tools/web_fixture.py, run once with the
// project's Python (MHA_PYTHON, else .venv/bin/python, else python3), writes it under _build/web-fixture/,
// named by a digest of the files that decide it (mha_lib's Python sources and data, the shipped weights and
// the script), so a change to any of them makes a new one. Nothing here is committed.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** Every file under `dir` (recursively) whose name ends with one of `endings`, sorted. */
function filesUnder(dir, endings) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(full, endings));
    else if (endings.some((e) => entry.name.endsWith(e))) out.push(full);
  }
  return out.sort();
}

/** A digest of what decides the fixture's content. */
function sourceKey() {
  const h = createHash("sha256");
  const lib = path.join(ROOT, "mha_lib");
  const files = [path.join(ROOT, "tools", "web_fixture.py"),
    ...filesUnder(lib, [".py", ".json", ".txt", ".safetensors"]).filter((f) => !f.includes(`${path.sep}web${path.sep}`))];
  for (const f of files) {
    h.update(path.relative(ROOT, f));
    h.update(fs.readFileSync(f));
  }
  return h.digest("hex").slice(0, 16);
}

function python() {
  if (process.env.MHA_PYTHON) return process.env.MHA_PYTHON;
  const venv = path.join(ROOT, ".venv", "bin", "python");
  return fs.existsSync(venv) ? venv : "python3";
}

/** The fixture's path: MHA_WEB_FIXTURE, or one made now by tools/web_fixture.py (kept for the next run). */
function fixturePath() {
  if (process.env.MHA_WEB_FIXTURE) return process.env.MHA_WEB_FIXTURE;
  const out = path.join(ROOT, "_build", "web-fixture", `${sourceKey()}.json`);
  if (fs.existsSync(out)) return out;
  const run = spawnSync(python(), [path.join(ROOT, "tools", "web_fixture.py"), out], {
    cwd: ROOT, encoding: "utf8", env: { ...process.env, HF_HUB_OFFLINE: "1", TRANSFORMERS_OFFLINE: "1" },
  });
  if (run.status !== 0) {
    throw new Error(`tools/web_fixture.py failed (${python()}, exit ${run.status}): ${run.error ?? ""}\n` +
                    `${(run.stderr ?? "").slice(-3000)}\nSet MHA_PYTHON to a Python with mha_lib's requirements ` +
                    "(make venv), or MHA_WEB_FIXTURE to a fixture that tests/test_web.py wrote.");
  }
  return out;
}

/** The fixture object: {vocab, max_length, cases, sweep, prev_marked, scores, digits, induction, translation, onnx}. */
export const fixture = JSON.parse(fs.readFileSync(fixturePath(), "utf8"));
