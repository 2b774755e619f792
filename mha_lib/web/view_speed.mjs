// view_speed.mjs -- the "speed" view ("How to use the interactive figures"): how fast each live view answers on
// the reader's own device, next to the book's machine, timed by the same code as benchmarks/bench_live.py
// (speed.mjs's measureView) on the same views (mha_lib.live.speed_views, mounted below the table when asked).

import { measureView } from "./speed.mjs";
import { el, setText } from "./dom.mjs";
import { fileName } from "./figure.mjs";
import { errorText } from "./text.mjs";
import { t } from "./i18n.mjs";
import { View } from "./view.mjs";

const WARM = 3; // warm updates timed per view (the median is shown)
const STORE = "mha-live-speed"; // localStorage: this device's last times, per execution provider

/** The times kept from earlier measurements on this device: {wasm?: rows, webgpu?: rows}; {} where none or unreadable. */
function keptTimes() {
  try {
    const kept = JSON.parse(globalThis.localStorage ? globalThis.localStorage.getItem(STORE) || "{}" : "{}");
    return kept && typeof kept === "object" && !Array.isArray(kept) ? kept : {};
  } catch {
    return {};
  }
}

/** A time in words: "85 ms", "1.9 s"; "–" when there is none. */
function timeText(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms)) return "–";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** "speed": each view's first and later updates, timed on this device, beside the book's machine. */
export class SpeedView extends View {
  constructor(element, config, backend, mountChild = null) {
    super(element, config, config.models.slice(0, 1), backend);
    this.mountChild = mountChild;
    this.firstActionText = this.backend.timesHere ? t("Press the button to time every live view on this device; the " +
      "views being timed show below the table.") : "";
    this.root.setAttribute("aria-label", t("How fast the live views answer on this device and on the book's machine"));
    this.kept = keptTimes();
    this.button = el("button", { type: "button", class: "mha-live-button" }, t("Time the views on this device"));
    this.button.addEventListener("click", () => this.run().catch(() => {}));
    this.providerNote = el("p", { class: "mha-live-note" });
    const controls = this.backend.timesHere ? [el("p", { class: "mha-live-note" }, t("Each view is timed as " +
      "benchmarks/bench_live.py times it on the book's machine: its first update (the runtime and its models downloaded, " +
      "or read from your browser's cache, compiled and run) and the median of {warm} more, with new inputs as a reader " +
      "gives them. Times vary with what else the device does.", { warm: WARM })),
    el("div", { class: "mha-live-controls" }, this.button), this.providerNote]
      : [el("p", { class: "mha-live-note" }, t("In a notebook the kernel computes the views: this table times them in " +
        "the book's pages. The book's machine's times are shown."))];
    this.table = el("table", { class: "mha-live-table" });
    this.children = el("details", { class: "mha-live-speed-views" }, el("summary", {}, t("The views being timed")));
    // a phone's column is narrower than the table with two devices' columns: it scrolls in its own box
    this.attach(controls, [el("div", { class: "mha-live-scroll" }, this.table), this.children]);
    this.bar.hidden = true; // no colour scale, no cell readout: a table
    this.result = { rows: null, provider: null, source: "config" };
    this.show();
    this.describeProviders();
  }

  get exportWhat() {
    return t("the table of times");
  }

  /** The export bar: the table's numbers as CSV or JSON (it has no figure). */
  exportBar() {
    const bar = super.exportBar();
    for (const button of [...bar.querySelectorAll("button")]) if (!/CSV|JSON/.test(button.textContent)) button.remove();
    return bar;
  }

  /** Which provider times the views here, and a link to time them with the other one where this browser has it. */
  async describeProviders() {
    if (!this.backend.providers) return;
    try {
      const { chosen, gpu } = await this.backend.providers();
      this.provider = chosen.ep;
      const other = chosen.ep === "wasm" ? "webgpu" : "wasm";
      const link = el("a", { href: `?mha-ep=${other}` }, other === "webgpu" ? t("time them with WebGPU") : t("time them with WebAssembly"));
      const software = gpu.software ? t(" (a software adapter: a CPU emulating a GPU, so its times say nothing of a GPU)") : "";
      const parts = [chosen.ep === "webgpu" ? t("Here the views run on WebGPU{software}.", { software })
        : t("Here the views run on WebAssembly.")];
      if (gpu.ok || chosen.ep === "webgpu") parts.push(" ", t("This browser also has WebGPU{software}: ", { software }), link, ".");
      this.providerNote.replaceChildren(...parts);
    } catch (err) {
      setText(this.providerNote, errorText(err));
    }
  }

  /** The table: one row per view, the book's machine's first and later updates, then this device's (per provider). */
  show() {
    const book = new Map(this.config.book.rows.map((r) => [r.view, r]));
    const mine = { ...this.kept };
    if (this.result.rows) mine[this.result.provider] = this.result.rows;
    const providers = ["wasm", "webgpu"].filter((p) => mine[p]);
    const names = { wasm: "WebAssembly", webgpu: "WebGPU" };
    const head = el("tr", {}, el("th", { scope: "col" }, t("view")), el("th", { scope: "col" }, t("book's machine: first")),
      el("th", { scope: "col" }, t("then")),
      ...providers.flatMap((p) => [el("th", { scope: "col" }, t("this device ({provider}): first", { provider: names[p] })),
        el("th", { scope: "col" }, t("then"))]));
    const rows = this.config.views.map(({ view }) => {
      const b = book.get(view) || {};
      const cells = providers.flatMap((p) => {
        const r = (mine[p] || []).find((x) => x.view === view) || {};
        return [el("td", {}, timeText(r.cold_ms)), el("td", {}, timeText(r.warm_ms))];
      });
      return el("tr", {}, el("td", {}, view), el("td", {}, timeText(b.cold_ms)), el("td", {}, timeText(b.warm_ms)), ...cells);
    });
    const load = this.config.book.load_average.map((x) => x.toFixed(1)).join(", ");
    this.table.replaceChildren(el("caption", {}, t("Time to the maps of a first update and (then) the median of later " +
      "ones. The book's machine: {machine}, load average {load} while timed.", { machine: this.config.book.machine, load })),
    head, ...rows);
  }

  redraw() {}

  /** Downloads: the table as CSV (one row per view and machine) or everything as JSON. */
  async download(kind) {
    const mine = { ...this.kept, ...(this.result.rows ? { [this.result.provider]: this.result.rows } : {}) };
    let blob;
    if (kind === "json") {
      blob = new Blob([JSON.stringify({ view: "speed", book: this.config.book, device: mine })], { type: "application/json" });
    } else {
      const lines = ["view,machine,provider,first_ms,then_ms", ...this.config.book.rows.map((r) => [r.view, "book", "WebAssembly",
        r.cold_ms, r.warm_ms].join(","))];
      for (const [p, rows] of Object.entries(mine)) for (const r of rows) lines.push([r.view, "this device", p, r.cold_ms, r.warm_ms].join(","));
      blob = new Blob([`${lines.join("\n")}\n`], { type: "text/csv" });
    }
    const url = URL.createObjectURL(blob);
    const link = el("a", { href: url, download: fileName(["live-speed", this.result.provider || "book"], kind), hidden: "" });
    this.root.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    return link.download;
  }

  /** The views, mounted once (hidden in the details below the table), as elements with their mhaLive. */
  mountViews() {
    if (!this.views) {
      this.views = this.config.views.map(({ view, model, config }) => {
        const node = el("div", { class: "mha-live-view", "data-view": view, "data-model": model,
          "data-config": JSON.stringify(config) });
        this.children.append(node);
        this.mountChild(node);
        return node;
      });
    }
    return this.views;
  }

  /**
   * Time every view on this device (run() takes no input): each view's first update and the median of WARM more,
   * the table filled as each ends; kept on this device per execution provider. Resolves to lastResult:
   * {rows: [{view, cold_ms, warm_ms, parts}], provider, source}.
   */
  async run() {
    if (!this.backend.timesHere || !this.mountChild) throw this.refuse(new Error("this view times the views of the book's pages"));
    if (this.timing) return this.timing;
    this.button.disabled = true;
    this.timing = (async () => {
      try {
        const views = this.mountViews();
        const rows = [];
        this.result = { rows, provider: this.provider || "wasm", source: this.backend.kind };
        for (const [i, node] of views.entries()) {
          this.busy(t("Timing the {view} view ({n} of {count})…", { view: node.dataset.view, n: i + 1, count: views.length }));
          const r = await measureView(node, { warm: node.dataset.view === "timing" ? 1 : WARM });
          rows.push({ view: r.view, cold_ms: r.cold.total_ms, warm_ms: r.median.total_ms, parts: r.median });
          this.show();
        }
        this.kept[this.result.provider] = rows.map(({ view, cold_ms, warm_ms }) => ({ view, cold_ms, warm_ms }));
        try {
          globalThis.localStorage.setItem(STORE, JSON.stringify(this.kept));
        } catch {
          // a browser that keeps nothing: the table shows this visit's times only
        }
        this.show();
        this.note(t("Timed every view on this device."));
        return this.result;
      } catch (err) {
        this.note(t("The timing stopped ({error}).", { error: errorText(err) }));
        throw err;
      } finally {
        this.button.disabled = false;
        this.timing = null;
      }
    })();
    return this.timing;
  }
}
