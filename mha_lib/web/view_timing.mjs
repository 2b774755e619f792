// view_timing.mjs -- the "timing" view: chapter 3's question asked of the reader's own device. mha_lib's
// attention function (the explicit path: the (B, H, L, L) weights are made) at the same FLOPs for H = 1 ... 64,
// timed in the browser, beside the times the book's machine measured when the chapter ran.

import { median, timeAttention } from "./compute.mjs";
import { el } from "./dom.mjs";
import { escapeXml, fileName } from "./figure.mjs";
import { errorText } from "./text.mjs";
import { t } from "./i18n.mjs";
import { View } from "./view.mjs";

const WIDTH = 560; // the chart's widest drawn size, px (narrower in a narrow column: its text stays 12 px)
const HEIGHT = 300;

/** A later head count slower than an earlier one by at least this share is "beyond its spread" only past it. */
export const BUSY_MARGIN = 0.1;

/**
 * Did the device measure what the view asks? At equal FLOPs a call cannot get cheaper with more heads (more, smaller
 * matrix products and a larger map of weights), so a later head count that came out faster than an earlier one in
 * every repeat -- their spreads apart, by more than BUSY_MARGIN of the earlier median -- says that something else
 * ran on the device meanwhile (another tab, a busy machine, a laptop saving power), not that heads are free.
 * @param {number[]} heads
 * @param {number[][]} samples  seconds, [head index][repeat]
 * @returns {{busy: boolean, earlier?: number, later?: number}}  the first such pair of head counts
 */
export function timingVerdict(heads, samples) {
  for (let i = 0; i < heads.length; i++) {
    for (let j = i + 1; j < heads.length; j++) {
      const [a, b] = [samples[i], samples[j]];
      if (a.length && b.length && Math.max(...b) < Math.min(...a) && median(b) < (1 - BUSY_MARGIN) * median(a)) {
        return { busy: true, earlier: heads[i], later: heads[j] };
      }
    }
  }
  return { busy: false };
}

/**
 * The chart as an SVG text (shown as an image, and the SVG download): each series' time against H, as a
 * multiple of its own H = 1 time, the head counts evenly spaced (powers of two: a log2 axis); a series with a
 * `spread` ([lowest, highest] seconds per H) shows it as a bar at each point, and a `busy` one is dashed. A series
 * not timed, or whose first time is not above 0 (a clock too coarse), is not drawn.
 * @param {number[]} heads
 * @param {{label: string, seconds: number[]|null, colour: string, spread?: number[][], busy?: boolean}[]} series
 */
export function timingSvg(heads, series, title, W = WIDTH) {
  const pad = { left: 44, right: 12, top: 24 + 16 * series.length, bottom: 44 };
  series = series.map((s) => (s.seconds && s.seconds[0] > 0 ? s : { ...s, seconds: null }));
  const ratios = series.filter((s) => s.seconds).map((s) => [...s.seconds, ...(s.spread || []).map((r) => r[1])]
    .map((x) => x / s.seconds[0]));
  const top = Math.max(2, ...ratios.flat()) * 1.1;
  const x = (i) => pad.left + (i / (heads.length - 1)) * (W - pad.left - pad.right);
  const y = (r) => HEIGHT - pad.bottom - ((r - 0) / top) * (HEIGHT - pad.top - pad.bottom);
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${HEIGHT}" viewBox="0 0 ${W} ${HEIGHT}" ` +
    'font-family="sans-serif" font-size="12">', `<rect width="${W}" height="${HEIGHT}" fill="#fff"/>`,
  `<text x="${pad.left}" y="18" font-size="13" fill="#222">${escapeXml(title)}</text>`];
  const step = top > 10 ? 5 : top > 5 ? 2 : 1;
  for (let r = 0; r <= top; r += step) {
    out.push(`<line x1="${pad.left}" x2="${W - pad.right}" y1="${y(r).toFixed(1)}" y2="${y(r).toFixed(1)}" stroke="#ddd"/>`,
      `<text x="${pad.left - 6}" y="${(y(r) + 4).toFixed(1)}" text-anchor="end" fill="#444">${r}×</text>`);
  }
  heads.forEach((H, i) => out.push(`<text x="${x(i).toFixed(1)}" y="${HEIGHT - pad.bottom + 16}" text-anchor="middle" ` +
    `fill="#444">${H}</text>`));
  out.push(`<text x="${(W + pad.left) / 2}" y="${HEIGHT - 8}" text-anchor="middle" fill="#222">` +
    "heads H (the same FLOPs)</text>");
  series.forEach((s, k) => {
    if (!s.seconds) return;
    const pts = s.seconds.map((sec, i) => `${x(i).toFixed(1)},${y(sec / s.seconds[0]).toFixed(1)}`).join(" ");
    out.push(`<polyline points="${pts}" fill="none" stroke="${s.colour}" stroke-width="2.5"${s.busy ? ' stroke-dasharray="6 4"' : ""}/>`);
    (s.spread || []).forEach(([lo, hi], i) => out.push(`<line x1="${x(i).toFixed(1)}" x2="${x(i).toFixed(1)}" ` +
      `y1="${y(lo / s.seconds[0]).toFixed(1)}" y2="${y(hi / s.seconds[0]).toFixed(1)}" stroke="${s.colour}" stroke-width="1.5"/>`));
    s.seconds.forEach((sec, i) => out.push(`<circle cx="${x(i).toFixed(1)}" cy="${y(sec / s.seconds[0]).toFixed(1)}" r="3.5" ` +
      `fill="${s.colour}"/>`));
    out.push(`<text x="${pad.left}" y="${36 + 16 * k}" fill="${s.colour}">— ${escapeXml(s.label)}</text>`);
  });
  out.push("</svg>");
  return out.join("\n");
}

/** "timing": the attention function's time at equal FLOPs for each H, the book's machine and the reader's. */
export class TimingView extends View {
  constructor(element, config, backend) {
    super(element, config, [config.models[0]], backend);
    this.firstActionText = t("Press the button to time the same attention function on this device: a second curve appears.");
    this.root.setAttribute("aria-label", t("Time of attention for 1 to 64 heads at equal FLOPs, on this device"));
    const { batch: B, seq_len: L, d_model: d, heads, repeats } = config;
    const note = el("p", { class: "mha-live-note" }, t("mha_lib's attention function on q, k and v of shape (B, H, L, d_k) " +
      "= ({B}, H, {L}, {d}/H) for H = {heads}: {flops} million matmul FLOPs every time, and a (B, H, L, L) map of weights " +
      "that grows with H ({map} at H = {most}). Each head count is timed {repeats} times, round-robin, after a warm-up.",
    { B, L, d, heads: heads.join(", "), flops: (config.flops / 1e6).toFixed(0), map: this.mapText(heads[heads.length - 1]),
      most: heads[heads.length - 1], repeats }));
    this.button = el("button", { type: "button", class: "mha-live-button" }, t("Time it on this device"));
    this.button.addEventListener("click", () => this.run().catch(() => {}));
    this.controls = [note];
    if (this.backend.timesHere) this.controls.push(el("div", { class: "mha-live-controls" }, this.button));
    else this.controls.push(el("p", { class: "mha-live-note" }, t("In a notebook the kernel's machine is the one section 2 " +
      "times: run its cells. The book's numbers are shown below.")));
    this.chart = el("img", { class: "mha-live-chart" });
    this.table = el("table", { class: "mha-live-table" });
    this.attach(this.controls, [this.chart, this.table]);
    this.bar.hidden = true; // no colour scale, no cell readout: a chart
    // the book's times come in milliseconds (a config keeps 4 decimals); the view works in seconds
    this.result = { heads: heads.slice(), book_seconds: config.book_ms.map((ms) => ms / 1e3), seconds: null, source: "config" };
    this.show();
  }

  get exportWhat() {
    return t("the chart and its numbers");
  }

  mapText(H) {
    const mib = (4 * this.config.batch * H * this.config.seq_len ** 2) / 2 ** 20;
    return `${mib.toFixed(mib < 10 ? 1 : 0)} MiB`;
  }

  /** The chart (an SVG image) and the table of both machines' times. */
  show() {
    const r = this.result;
    const mine = r.seconds;
    // The chart's own labels stay English in both editions, like every figure's: an SVG shown as an image
    // can use only the reader's system fonts, and a system without a Chinese font would draw boxes.
    const device = `this device (onnxruntime-web${r.provider ? `, ${r.provider}` : ""}${r.rounds ? `, median of ${r.rounds}` : ""})`;
    const series = [{ label: "the book's machine (PyTorch)", seconds: r.book_seconds, colour: "#3b528b" },
      { label: r.busy ? `${device}: too busy to mean anything` : device, seconds: mine, colour: "#e66100",
        spread: r.spread || undefined, busy: Boolean(r.busy) }];
    const title = "Time of one call, as a multiple of one head's";
    this.svg = timingSvg(r.heads, series, title, Math.max(300, Math.min(560, this.root.clientWidth || 560)));
    this.chart.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(this.svg)}`;
    const at = (xs, i) => (xs ? `${(xs[i] * 1e3).toFixed(xs[i] < 0.01 ? 2 : 1)} ms (${(xs[i] / xs[0]).toFixed(2)}×)` : "–");
    const spread = (i) => (r.spread?.[i] ? ` ${(r.spread[i][0] * 1e3).toFixed(1)}–${(r.spread[i][1] * 1e3).toFixed(1)}` : "");
    const alt = { book: (r.book_seconds.at(-1) / r.book_seconds[0]).toFixed(1), most: r.heads.at(-1),
      mine: mine ? (mine.at(-1) / mine[0]).toFixed(1) : null };
    this.chart.alt = !mine ? t("Line chart: time of one call against the number of heads, as a multiple of one head's; the " +
      "book's machine reaches {book}× at H = {most}; this device not timed yet.", alt)
      : r.busy ? t("Line chart: time of one call against the number of heads, as a multiple of one head's; the book's " +
        "machine reaches {book}× at H = {most}; this device was too busy for its curve to mean anything.", alt)
        : t("Line chart: time of one call against the number of heads, as a multiple of one head's; the " +
          "book's machine reaches {book}× at H = {most}, this device {mine}×.", alt);
    const columns = ["H", "d_k", t("attention map"), t("book's machine"), t("this device")];
    const head = el("tr", {}, ...columns.map((text) => el("th", { scope: "col" }, text)));
    this.table.replaceChildren(el("caption", {}, t("Median time of one call (and as a multiple of H = 1; on this " +
      "device, the fastest and slowest call). The book's machine: {machine}.", { machine: this.config.book_machine })), head,
      ...r.heads.map((H, i) => el("tr", {}, el("td", {}, String(H)), el("td", {}, String(this.config.d_model / H)),
        el("td", {}, this.mapText(H)), el("td", {}, at(r.book_seconds, i)), el("td", {}, at(mine, i) + spread(i)))));
  }

  redraw() {
    this.show(); // the chart is laid out for the column's width
  }

  /** Downloads: the chart as SVG or PNG, the table as CSV, everything as JSON. */
  async download(kind) {
    const r = this.result;
    let blob;
    if (kind === "svg") blob = new Blob([this.svg], { type: "image/svg+xml" });
    else if (kind === "json") blob = new Blob([JSON.stringify({ view: "timing", ...this.config, ...r })], { type: "application/json" });
    else if (kind === "csv") {
      const rows = ["heads,head_dim,book_seconds,device_seconds,device_fastest_seconds,device_slowest_seconds",
        ...r.heads.map((H, i) => [H, this.config.d_model / H, r.book_seconds[i], r.seconds ? r.seconds[i] : "",
          ...(r.spread ? r.spread[i] : ["", ""])].join(","))];
      blob = new Blob([`${rows.join("\n")}\n`], { type: "text/csv" });
    } else {
      const w = this.chart.naturalWidth || WIDTH;
      const canvas = el("canvas", { width: String(2 * w), height: String(2 * HEIGHT) });
      await new Promise((resolve, reject) => {
        this.chart.decode().then(resolve, reject);
      });
      const ctx = canvas.getContext("2d");
      ctx.scale(2, 2);
      ctx.drawImage(this.chart, 0, 0, w, HEIGHT);
      blob = await new Promise((resolve, reject) => canvas.toBlob((b) => (b ? resolve(b) : reject(new Error("no PNG"))), "image/png"));
    }
    const url = URL.createObjectURL(blob);
    const link = el("a", { href: url, download: fileName(["attention-timing", r.source], kind), hidden: "" });
    this.root.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    return link.download;
  }

  /** The samples so far ([H][repeat] seconds) as the result shown: medians, spreads, the verdict (timingVerdict). */
  showSamples(samples, provider) {
    const seconds = samples.map(median);
    const verdict = timingVerdict(this.result.heads, samples);
    this.result = { ...this.result, seconds, spread: samples.map((x) => [Math.min(...x), Math.max(...x)]),
      rounds: samples[0].length, busy: verdict.busy, samples, source: this.backend.kind, provider };
    this.show();
    return verdict;
  }

  /**
   * Time every head count on this device, round after round (run() takes no input; anything given is ignored): the
   * curve is drawn after the first round and redrawn after each, with the spread of the calls so far; a curve that
   * falls where it cannot (timingVerdict) is said to mean nothing. Resolves to lastResult.
   */
  async run() {
    if (!this.backend.timesHere) throw this.refuse(new Error("this view times the browser's runtime, not a kernel"));
    if (this.timing) return this.timing;
    this.button.disabled = true;
    this.timing = (async () => {
      try {
        const started = performance.now();
        const on = () => (this.backend.providerName ? this.backend.providerName(this.models || []) : null); // WebAssembly or WebGPU
        const samples = await this.compute((clock) => timeAttention(this.models[0], this.config, { clock,
          onProgress: (done, total, H) => this.busy(t("Timing H = {H} on this device: call {done} of {total}…", { H, done, total })),
          onRound: (s) => clock.time("draw", () => {
            this.showSamples(s, on());
            if (s[0].length === 1) this.timings.first_curve_ms = performance.now() - started; // the first curve shows
          }) }));
        const verdict = this.showSamples(samples, on());
        const seconds = this.result.seconds;
        const words = { provider: this.result.provider, heads: this.result.heads.at(-1), ratio: (seconds.at(-1) / seconds[0]).toFixed(1),
          repeats: this.config.repeats, book: (this.result.book_seconds.at(-1) / this.result.book_seconds[0]).toFixed(1),
          earlier: verdict.earlier, later: verdict.later };
        if (verdict.busy) {
          this.note(t("This device was too busy to time the heads: {later} heads came out faster than {earlier} in every " +
            "one of {repeats} rounds, which the same FLOPs and a larger map of weights cannot explain. The curve means " +
            "nothing; close other tabs or windows and time it again.", words));
        } else {
          this.note(words.provider ? t("Timed on this device ({provider}): {heads} heads took {ratio}× one head's time " +
            "(median of {repeats}, the bars the fastest and slowest call; the book's machine: {book}×). A laptop on " +
            "battery, a busy tab or another window can slow single calls: time it again to see the spread.", words)
            : t("Timed on this device: {heads} heads took {ratio}× one head's time (median of {repeats}, the bars the " +
              "fastest and slowest call; the book's machine: {book}×). A laptop on battery, a busy tab or another " +
              "window can slow single calls: time it again to see the spread.", words));
        }
        return { ...this.result, ratios: seconds.map((sec) => sec / seconds[0]), median_of: this.config.repeats };
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
